"""Each lesson opened the way a learner opens it (``marimo run``, Chromium), then its widgets driven.

What a script run cannot see and these tests do: formulas that reach the page as raw TeX, cell
errors that only happen in the app, browser console errors, and widgets that stop updating their
outputs, content wider than its box, sliders that hide their value, and a page that takes more than a minute
to become usable (everything heavy sits behind a button). Lesson 5's run button is pressed (on the tiny random
model, one step) and its reward curve must appear once; every other button stays unclicked, and lessons 4, 6,
8, 9 and 10 show "Press the button to measure the base model.".
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

# One worker runs the whole module, so its browser starts once and is closed before that worker moves on.
pytestmark = pytest.mark.xdist_group("browser")

LESSONS = {p.stem[:2]: p for p in (Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.py")}

# Texts each lesson must show once all its cells ran: its title and outputs computed by its cells.
KEY_OUTPUTS = {
    "01": (
        "Lesson 1 · GRPO in one screen",
        "What TRL logs for this batch",
        "Share of sampled tokens",
        "the share of tokens in each clipped region",
    ),
    "02": ("Lesson 2 · Eight loss types, one batch", "push per token / per completion", "logged loss"),
    "03": ("Lesson 3 · Designing rewards", "characters,", "correctness_reward (course 12.6)"),
    "04": ("Lesson 4 · Practicum: SmolLM2 + TRL + LoRA", "Press the button to measure the base model."),
    "05": ("Lesson 5 · The loop without the black box", "Press the button to train."),
    "06": (
        "Lesson 6 · Practicum: GSM8K with Unsloth QLoRA + vLLM",
        "Press the button to measure the base model.",
    ),
    "07": ("Lesson 7 · Export: adapter, merged 16-bit, GGUF",),
    "08": (
        "Lesson 8 · GRPO with a tool",
        "The raw rendered conversation",
        "Press the button to measure the base model.",
    ),
    "09": (
        "Lesson 9 · GRPO in an environment",
        "Several environments, one dataset",
        "state after the call",
        "Press the button to measure the base model.",
    ),
    "10": (
        "Lesson 10 · GRPO that sees",
        "16 image tokens, one per patch",
        "language model (SmolLM2-135M, pretrained)",
        "Press the button to measure the base model.",
    ),
}

# A learner waits at most this long, on 2 cores, for a lesson to be usable.
CLICKABLE_WITHIN_S = 60.0


def table_row(text: str, first_cell: str, *, after: str = "") -> list[str]:
    """The cells of the first rendered table row (innerText: tab-separated) whose first cell is
    ``first_cell``, looking only below the text ``after``."""
    for line in text[text.index(after) :].splitlines():
        cells = [c.strip() for c in line.split("\t")]
        if cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table row {first_cell!r} on the page")


def expects_formulas(number: str) -> bool:
    return "$" in LESSONS[number].read_text()


# Lessons 1, 2, 3 and 5 are checked the same way by their interaction tests below.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("number", ["04", "06", "07", "08", "09", "10"])
def test_lesson_renders_cleanly(open_lesson, number):
    lesson = open_lesson(number)
    lesson.settle(KEY_OUTPUTS[number])
    lesson.save_first_screen()
    lesson.assert_clean()
    assert lesson.page.locator(".katex").count() > 0 or not expects_formulas(number)
    if number == "06":  # the system prompt's tags reach the page as text (grpo_kit.support.markdown_text)
        assert "<reasoning>" in lesson.text() and "</answer>" in lesson.text()
        # and the page says which branch this machine trains through (no GPU here: Unsloth's CPU backend or TRL)
        from grpo_kit.teaching.lesson_helpers import on_gpu

        if not on_gpu():
            unsloth = importlib.util.find_spec("unsloth") is not None
            shown = lesson.page.locator("strong", has_text="This run:").first.inner_text()  # in a callout
            assert shown.replace("\u2019", "'") == (
                "This run: Unsloth's CPU backend" if unsloth else "This run: TRL on CPU"
            ), shown
    assert lesson.clickable_after < CLICKABLE_WITHIN_S, f"usable after {lesson.clickable_after:.0f} s"


def test_lesson1_objective_is_typeset(open_lesson):
    lesson = open_lesson("01")
    lesson.settle(KEY_OUTPUTS["01"])
    # The GRPO objective: one display formula (KaTeX), not a paragraph of TeX and a list item.
    assert lesson.page.locator(".katex-display").count() >= 1
    assert "k_{3,i,t}" not in lesson.text()
    lesson.assert_clean()


def test_lesson1_reward_sliders_drive_the_advantage_table(open_lesson):
    lesson = open_lesson("01")
    text = lesson.settle(KEY_OUTPUTS["01"])
    lesson.save_first_screen()
    assert lesson.clickable_after < CLICKABLE_WITHIN_S, f"usable after {lesson.clickable_after:.0f} s"
    assert table_row(text, "A1")[1:] == ["1.00", "+1.500", "+1.513", "+0.750"]
    assert "frac_reward_zero_std = 0.00" in text

    # Prompt A's rewards are 1, 0, 0, 0: moving A1 to 0 makes the whole group equal.
    slider = lesson.page.get_by_role("slider").first
    slider.focus()
    slider.press("Home")
    text = lesson.settle(("frac_reward_zero_std = 0.50",))
    for name in ("A1", "A2", "A3", "A4"):
        row = table_row(text, name)
        assert row[1] == "0.00" and all(float(v) == 0.0 for v in row[2:]), row
    # Prompt B is untouched, and its advantages under "group" did not move either.
    assert table_row(text, "B1")[2] == "+0.783"
    lesson.assert_clean()


WEIGHTS_TABLE = "push per token / per completion"


def test_lesson2_length_slider_moves_the_per_token_weights(open_lesson):
    lesson = open_lesson("02")
    text = lesson.settle(KEY_OUTPUTS["02"])
    lesson.save_first_screen()
    assert lesson.clickable_after < CLICKABLE_WITHIN_S, f"usable after {lesson.clickable_after:.0f} s"
    before = table_row(text, "grpo", after=WEIGHTS_TABLE)
    assert "correct, short (L=4)" in text

    slider = lesson.page.get_by_role("slider").first  # "correct, short", 4 tokens
    slider.focus()
    slider.press("End")  # 64 tokens
    text = lesson.settle(("correct, short (L=64)",))
    after = table_row(text, "grpo", after=WEIGHTS_TABLE)
    per_token_before, per_token_after = (float(row[1].split("/")[0]) for row in (before, after))
    # grpo weighs a sequence as a whole: 16x the tokens, 1/16 the push per token.
    assert per_token_after == pytest.approx(per_token_before * 4 / 64, abs=1e-4)
    assert after[2:] == before[2:]  # the other completions did not change length
    lesson.assert_clean()


def test_lesson3_typed_answer_is_scored_by_correctness_reward(open_lesson):
    lesson = open_lesson("03")
    lesson.settle(KEY_OUTPUTS["03"])
    lesson.save_first_screen()
    assert lesson.clickable_after < CLICKABLE_WITHIN_S, f"usable after {lesson.clickable_after:.0f} s"
    completion, gold = lesson.page.get_by_role("textbox").nth(0), lesson.page.get_by_role("textbox").nth(1)

    gold.fill("-3")
    gold.press("Enter")
    text = lesson.settle(())
    assert table_row(text, "correctness_reward (course 12.6)")[1:] == ["+0.000", "+0.000"]  # 72 is not -3

    completion.fill("<reasoning>\n5 - 8 = -3\n</reasoning>\n<answer>\n-3\n</answer>\n")
    completion.press("Tab")
    text = lesson.settle(())
    assert table_row(text, "correctness_reward (course 12.6)")[1:] == ["+2.000", "+2.000"]
    assert table_row(text, "int_reward (course 12.6)")[1:] == ["+0.500", "+0.500"]  # -3 is an integer
    lesson.assert_clean()


@pytest.mark.timeout(900)
def test_lesson5_run_button_trains_the_tiny_model(open_lesson):
    lesson = open_lesson("05", "--max-steps", "1", "--model", "tiny")
    text = lesson.settle(KEY_OUTPUTS["05"])
    lesson.save_first_screen()
    # The system prompt's tags reach the page as text (grpo_kit.support.markdown_text), not as swallowed HTML.
    assert "<reasoning>" in text and "</answer>" in text
    assert lesson.clickable_after < CLICKABLE_WITHIN_S, f"usable after {lesson.clickable_after:.0f} s"
    lesson.page.get_by_role("button", name=re.compile("Train the tiny model for 1 steps")).click()
    text = lesson.settle(("last record — the keys are TRL's",), timeout=400)
    assert "Press the button to train." not in text
    assert table_row(text, "reward")[1]  # the metrics table of the finished run
    # One reward curve: the live one gives way to a line (lesson_helpers.LiveRewardCurve.finish) and the run's
    # saved PNG is shown by the next cell. Counted per cell: images elsewhere on the page may still be loading.
    from playwright.sync_api import expect

    cells = lesson.page.locator(".marimo-cell")
    expect(cells.filter(has_text="The run's saved reward curve is below.")).to_have_count(1)
    expect(cells.filter(has_text="The run's saved reward curve is below.").locator("img")).to_have_count(0)
    expect(cells.filter(has_text="last record — the keys are TRL's").locator("img")).to_have_count(1)
    lesson.assert_clean()


def test_lesson9_episode_controls_replay_the_state(open_lesson):
    """Lesson 9's row slider and play dropdown replay a scripted episode against a fresh environment: the
    state, not the text, decides get_reward, and the reward table follows the controls."""
    lesson = open_lesson("09")
    text = lesson.settle(KEY_OUTPUTS["09"])
    assert lesson.clickable_after < CLICKABLE_WITHIN_S, f"usable after {lesson.clickable_after:.0f} s"
    # Row 0 is a counter row; "one off, then the target" adds twice: the counter overshoots.
    assert table_row(text, "CounterEnv")[1:] == ["1", "0.00"]
    assert table_row(text, "LockEnv")[2].startswith("—")  # the lock's column leaves a counter episode alone
    assert table_row(text, "total")[-1] == "0.50"  # only tool_call_reward × 0.5: both calls were well-formed

    slider = lesson.page.get_by_role("slider").first  # row 1 is a lock row: a wrong code, then the right one
    slider.focus()
    slider.press("ArrowRight")
    text = lesson.settle(("The lock's code is",))
    assert table_row(text, "LockEnv")[1:] == ["1", "1.00"] and table_row(text, "total")[-1] == "1.50"

    lesson.page.get_by_role("combobox").first.select_option("a wrong argument name")
    text = lesson.settle(("error",))
    assert table_row(text, "LockEnv")[1:] == ["1", "0.00"] and table_row(text, "total")[-1] == "0.00"
    lesson.assert_clean()
