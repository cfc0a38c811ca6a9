"""The lessons' display helpers: code shown where code is the lesson, long text wrapped and shown as text."""

from __future__ import annotations

import pytest

from grpo_kit.evaluation.preflight import Finding, PreflightReport
from grpo_kit.lesson_helpers import LessonSize, lesson_size, preflight_verdict, source_code, wrapped_text
from rewards import course_original


def test_source_code_shows_the_functions_verbatim():
    html = source_code(course_original.int_reward_func, course_original.soft_format_reward_func).text
    assert "int_reward_func" in html and "soft_format_reward_func" in html and "isdigit" in html
    assert "<pre" in html or "<code" in html  # a code block, not prose


def test_wrapped_text_wraps_and_keeps_tags():
    html = wrapped_text("<answer>72</answer> " + "x" * 5000).text
    assert "white-space: pre-wrap" in html and "&lt;answer&gt;72&lt;/answer&gt;" in html
    assert "<answer>" not in html


def test_lesson_size_small_under_ci_or_small_and_steps_from_the_command_line(monkeypatch):
    monkeypatch.setenv("GRPO_KIT_LESSON_SIZE", "ci")
    assert lesson_size().name == "small"  # no CUDA here; the project's tests ask for the small size
    monkeypatch.delenv("GRPO_KIT_LESSON_SIZE")
    assert lesson_size().name == "cpu"
    cpu, small = LessonSize("cpu", {}), LessonSize("small", {"small": ""})
    assert cpu.steps(gpu=200, cpu=8, small=2) == 8 and small.steps(gpu=200, cpu=8, small=2) == 2
    assert small.pick(gpu=1, cpu=2) == 2  # no small value: the CPU one
    assert LessonSize("small", {"max-steps": "5"}).steps(gpu=200, cpu=8, small=2) == 5
    for bad in ("0", "abc", "-3", "2.5"):
        with pytest.raises(ValueError, match="--max-steps takes a whole number"):
            LessonSize("cpu", {"max-steps": bad}).steps(gpu=1, cpu=1)
    assert LessonSize("cpu", {"output-dir": "somewhere"}).output_dir("lesson8").name == "somewhere"
    assert LessonSize("cpu", {}).output_dir("lesson8").name.startswith("grpo-kit-lesson8-")


def _report(zero_std: float, findings: list) -> PreflightReport:
    return PreflightReport(4, 4, zero_std, 0.0, 1.0, {"r": 0.5}, {"r": 0.1}, {}, "", False, findings)


def test_preflight_verdict_names_the_verdict_the_findings_and_what_to_do():
    no_go = Finding(
        "zero_std", "no-go", "100% of groups have zero reward variance.", "Raise num_generations."
    )
    text = preflight_verdict(_report(1.0, [no_go]), if_no_go="Run the lesson without `--small`.").text
    assert "Pre-flight: NO-GO" in text and "0% of the groups carry a learning signal" in text
    assert "Raise num_generations." in text and "without" in text and "--small" in text
    go = preflight_verdict(_report(0.25, []), if_no_go="never shown on a go").text
    assert "Pre-flight: GO" in go and "75% of the groups" in go and "never shown" not in go
