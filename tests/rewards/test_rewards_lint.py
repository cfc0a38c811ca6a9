"""rewards.lint and the grpo-kit-reward-lint entry point."""

from __future__ import annotations

import asyncio
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rewards
from rewards import course_original as course
from rewards import open_r1
from rewards.lint import Finding, LintReport, main

HERE = Path(__file__).resolve().parent


def ours():
    return [
        rewards.accuracy_reward,
        rewards.reasoning_accuracy_reward,
        rewards.think_format_reward,
        rewards.get_soft_overlong_punishment(256, 64),
        rewards.get_repetition_penalty_reward(),
        rewards.get_cosine_scaled_reward(256),
        rewards.length_reward(),
        rewards.length_reward(20, unit="chars"),
        rewards.format_reward,
        rewards.xmlcount_reward,
        rewards.soft_format_reward,
        rewards.strict_format_reward,
        rewards.int_reward,
        rewards.correctness_reward,
        rewards.combine(rewards.correctness_reward, rewards.int_reward, rewards.xmlcount_reward),
        # open-r1's family (rewards.open_r1): clean, its documented quirks acknowledged (see below)
        open_r1.accuracy_reward,
        open_r1.format_reward,
        open_r1.tag_count_reward,
        open_r1.reasoning_steps_reward,
        open_r1.len_reward,
        open_r1.get_cosine_scaled_reward(length_unit="tokens", clamp=True, plain_gold=True),
        open_r1.get_repetition_penalty_reward(3, -1.0),
        open_r1.code_format_reward,
        open_r1.get_soft_overlong_punishment(256, 64),
        open_r1.create_weighted_reward(open_r1.reasoning_steps_reward, 0.5),
    ]


@pytest.mark.parametrize("fn", ours(), ids=lambda f: getattr(f, "__name__", repr(f)))
def test_lint_of_our_functions_is_clean(fn):
    report = rewards.lint(fn, verbose=False)
    assert isinstance(report, LintReport) and all(isinstance(f, Finding) for f in report)
    assert report.ok, str(report)


def test_think_format_reward_empty_tags_are_acknowledged_not_hidden():
    report = rewards.lint(rewards.think_format_reward, verbose=False)
    assert report.ok
    assert [f.check for f, _ in report.acknowledged] == ["empty-tags"]
    assert "acknowledged" in str(report)


def test_lint_knows_open_r1s_layout_and_names_its_quirks():
    """open-r1's think/answer-on-lines layout is probed: its format and tag-count rewards score it, and the
    empty-tag hack they share is reported, acknowledged as open-r1's behaviour, not hidden."""
    for fn in (open_r1.format_reward, open_r1.tag_count_reward):
        report = rewards.lint(fn, verbose=False)
        assert report.ok and [f.check for f, _ in report.acknowledged] == ["empty-tags"]
        assert "empty think/answer lines" in report.acknowledged[0][0].probes
    assert [f.check for f, _ in rewards.lint(open_r1.len_reward, verbose=False).acknowledged] == ["constant"]
    # open-r1's cosine reward as written: a plain gold (lint's "72") never parses, every completion scores 1.0
    assert rewards.lint(open_r1.get_cosine_scaled_reward(), verbose=False).checks() == {"constant"}
    # ... and, with a gold it parses, it counts characters: shown as acknowledged, not silenced
    report = rewards.lint(open_r1.get_cosine_scaled_reward(clamp=True, plain_gold=True), verbose=False)
    assert "chars-vs-tokens" in [f.check for f, _ in report.acknowledged]


def test_lint_route_needs_its_column_and_is_clean_with_it():
    fn = rewards.route("task", {"math": rewards.accuracy_reward, "gsm8k": rewards.correctness_reward})
    assert rewards.lint(fn, verbose=False).checks() == {"missing-column"}
    assert rewards.lint(fn, columns={"task": "gsm8k"}, verbose=False).ok


def test_lint_reports_exceptions_nan_types_lengths_and_prints_it(capsys):
    def broken(completions, **kwargs):
        out = []
        for c in completions:
            text = c if isinstance(c, str) else c[-1]["content"]
            if not text:
                raise ValueError("empty")
            out.append(math.nan if "\n" in text else "1" if "72" in text else 0.0)
            if "\\boxed" in text:
                out.append(0.0)  # one value too many
        return out

    report = rewards.lint(broken)
    assert {"exception", "nan", "wrong-type", "wrong-length"} <= report.checks()
    printed = capsys.readouterr().out
    assert "reward lint: broken" in printed and "ValueError: empty" in printed


def test_lint_reports_slow_and_hanging_functions_without_hanging_itself():
    def slow(completions, **kwargs):
        time.sleep(0.05)
        return [0.0] * len(completions)

    assert "slow" in rewards.lint(slow, slow_s=0.01, verbose=False).checks()

    def hangs(completions, **kwargs):
        text = completions[0] if completions and isinstance(completions[0], str) else ""
        if text == "":
            time.sleep(5)
        return [float(len(text) % 3) for _ in completions]

    start = time.monotonic()
    report = rewards.lint(hangs, hang_s=0.3, verbose=False)
    assert "hang" in report.checks()
    assert time.monotonic() - start < 30


def test_lint_accepts_async_functions():
    async def async_format(completions, **kwargs):
        await asyncio.sleep(0)
        return rewards.format_reward(completions)

    assert rewards.lint(async_format, verbose=False).ok


def test_lint_chars_vs_tokens_is_silenced_by_declaring_the_unit():
    def by_chars(completions, **kwargs):
        return [-abs(50.0 - len(rewards.completion_text(c))) for c in completions]

    assert "chars-vs-tokens" in rewards.lint(by_chars, verbose=False).checks()
    by_chars.length_unit = "chars"
    assert "chars-vs-tokens" not in rewards.lint(by_chars, verbose=False).checks()


def test_cli_main_exit_status(capsys):
    assert main(["rewards:format_reward", "rewards:length_reward"]) == 0
    assert "reward lint: format_reward — clean" in capsys.readouterr().out
    assert main(["rewards.course_original:reward_format"]) == 1
    assert "dotall" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["no_colon_here"])
    with pytest.raises(SystemExit, match="required arguments.*get_soft_overlong_punishment\\(100, 20\\)"):
        main(["rewards:get_soft_overlong_punishment"])  # a shell cannot call it: the message says how


def test_console_script_runs():
    script = shutil.which("grpo-kit-reward-lint") or str(Path(sys.executable).parent / "grpo-kit-reward-lint")
    if not Path(script).exists():
        pytest.skip("grpo-kit-reward-lint is not installed (pip install -e .)")
    result = subprocess.run(
        [script, "rewards.course_original:reward_len", "rewards:int_reward"],
        capture_output=True,
        text=True,
        check=False,
        cwd=HERE,
        timeout=300,
    )
    assert result.returncode == 1
    assert "chars-vs-tokens" in result.stdout and "reward lint: int_reward — clean" in result.stdout


@pytest.mark.parametrize("target", ["os:system", "rewards.lint:lint"])
def test_cli_names_a_target_that_is_not_a_reward_function_in_one_line(target):
    """Not a reward function at all (wrong signature): the one line that names the fix, exit 1, no traceback."""
    result = subprocess.run(
        [sys.executable, "-m", "grpo_kit.cli", "rewards", "lint", target],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "takes no `completions` argument" in lines[0], result.stderr
    assert "give it the signature def" in lines[0]


def _text(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]


def xml_tags_wanting_a_final_newline(completions, **kwargs):
    """Not the course's count_xml: 0.25 per tag line, the closing one only with the newline after it."""
    scores = []
    for completion in completions:
        text = _text(completion)
        score = 0.25 * sum(tag in text for tag in ("<reasoning>\n", "\n</reasoning>\n", "\n<answer>\n"))
        scores.append(score + (0.25 if "\n</answer>\n" in text else 0.0))
    return scores


def think_answer_wanting_a_final_newline(completions, **kwargs):
    """A <think>/<answer> format reward whose pattern ends with a newline."""
    return [
        1.0 if _text(c).startswith("<think>") and _text(c).endswith("</answer>\n") else 0.0
        for c in completions
    ]


_XML_AT_EOS = "<reasoning>\nr\n</reasoning>\n<answer>\n72\n</answer>"


@pytest.mark.parametrize(
    "fn,at_eos",
    [
        (xml_tags_wanting_a_final_newline, _XML_AT_EOS),
        (think_answer_wanting_a_final_newline, "<think>r</think><answer>72</answer>"),
    ],
)
def test_eos_probe_flags_any_reward_that_pays_for_the_final_newline(fn, at_eos):
    assert fn([at_eos])[0] < fn([at_eos + "\n"])[0]  # the pitfall is real in this variant
    report = rewards.lint(fn, verbose=False)
    assert not report.ok and "eos-penalty" in report.checks(), str(report)
    finding = next(f for f in report if f.check == "eos-penalty")
    assert "grows with the reasoning" not in finding.message  # a constant gap, unlike the course's


def test_eos_probe_still_names_the_course_count_xml_growing_with_reasoning():
    report = rewards.lint(course.xmlcount_reward_func, verbose=False)
    finding = next(f for f in report if f.check == "eos-penalty")
    assert "grows with the reasoning" in finding.message


def test_eos_probe_keeps_length_rewards_clean():
    """Both probe texts have the same length in characters and tokens: a length reward is not flagged."""
    for fn in (rewards.length_reward(50, unit="chars"), rewards.length_reward(50), rewards.xmlcount_reward):
        assert "eos-penalty" not in rewards.lint(fn, verbose=False).checks()
