"""The lessons' display helpers: code shown where code is the lesson, long text wrapped and shown as text."""

from __future__ import annotations

import types

import pytest

from grpo_kit.evaluation.preflight import Finding, PreflightReport
from grpo_kit.teaching.lesson_helpers import (
    LessonSize,
    lesson_size,
    preflight_verdict,
    source_code,
    wrapped_text,
)
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


# --- the practicum lessons' Measure / Train / compare cells (grpo_kit.teaching.lesson_runs) -----------------------------
def test_measure_train_measure_compare_on_the_tiny_model(tmp_path):
    """The practicum's sequence, end to end on the tiny model: pre-flight and held-out evaluation of the base
    model, a fresh copy trained one step with the live curve, the trained model measured on the same rows and
    compared with the base model."""
    from shared import RecordingLoader, tiny_recipe

    from grpo_kit.models import tiny_model
    from grpo_kit.runs.held_out import held_out_rows
    from grpo_kit.teaching.lesson_runs import (
        compare_metrics,
        comparison_table,
        evaluate_trained,
        evaluate_with_spinner,
        last_logged,
        preflight_with_spinner,
        train_fresh,
    )

    recipe = tiny_recipe()
    base, tokenizer = tiny_model(seed=0)
    train_dataset = recipe.load_dataset()
    preflight = preflight_with_spinner(recipe, base, tokenizer, train_dataset, num_prompts=2)
    assert preflight.num_prompts == 2 and preflight.num_generations == recipe.training["num_generations"]
    rows = held_out_rows(recipe, 3, training=train_dataset)
    before = evaluate_with_spinner(recipe, base, tokenizer, rows)
    assert before.num_prompts == 3 and before.reward_names == [
        f.__name__ for f in recipe.build_reward_funcs(tokenizer)
    ]

    loader = RecordingLoader()
    run, run_tokenizer = train_fresh(recipe, load=loader, output_dir=tmp_path, max_steps=1, device="cpu")
    assert loader.names == [recipe.model]  # a fresh copy of the recipe's base model, not `base`
    assert run.model is not base and run.global_step == 1 and run.reward_curve_path.exists()
    assert last_logged(run)["step"] == 1 and "reward" in last_logged(run)
    assert not (tmp_path / "adapter_config.json").exists()  # the lessons' default: no final save
    after = evaluate_trained(recipe, run, run_tokenizer, rows)
    assert after.num_prompts == 3 and after.settings == before.settings  # the same rows and decoding

    metric = f"reward/{before.reward_names[0]}"
    comparisons = compare_metrics(before, after, [metric, "reward"])
    assert list(comparisons) == [metric, "reward"] and comparisons["reward"].n == 3
    table = comparison_table(((m, c) for m, c in comparisons.items()), n=True, verdict=True).splitlines()
    assert table[0] == "| metric | rows | before | after | change [95 % CI] | verdict |"
    assert table[2].startswith(f"| {metric} | 3 | ") and table[2].endswith(
        f" | {comparisons[metric].verdict} |"
    )


def test_comparison_table_rounds_to_the_digits_asked():
    from grpo_kit.evaluation.comparison import Comparison
    from grpo_kit.teaching.lesson_runs import comparison_table

    c = Comparison("accuracy", 8, 0.25, 0.75, 0.5, 0.25, 0.875, 0.95, 1000, 0, True, "improved")
    assert comparison_table([("acc", c)]).splitlines() == [
        "| metric | before | after | change [95 % CI] |",
        "|:---|:---|:---|:---|",
        "| acc | 0.25 | 0.75 | +0.50 [+0.25, +0.88] |",
    ]
    assert (
        comparison_table([("acc", c)], digits=3).splitlines()[2]
        == "| acc | 0.250 | 0.750 | +0.500 [+0.250, +0.875] |"
    )


def test_metric_tables_show_what_was_logged():
    from grpo_kit.teaching.lesson_runs import metrics_table, step_metrics_table

    record = {"step": 3, "reward": 0.5, "loss": None, "note": "text", "entropy": 1.23456}
    assert metrics_table(record, ["loss", "reward"]).splitlines()[2:] == ["| `reward` | 0.5 |"]  # no None
    assert metrics_table(record).splitlines()[2:] == [
        "| `step` | 3 |",
        "| `reward` | 0.5 |",
        "| `entropy` | 1.235 |",
    ]
    table = step_metrics_table([{"step": 1, "a": 0.5}, {"b": 1.0}], [("a", "A"), ("b", "B")]).splitlines()
    assert table == ["| step | A | B |", "|:---|:---|:---|", "| 1 | 0.50 | — |", "| 2 | — | 1.00 |"]


def test_reward_weights_note_names_each_weight_and_warns_of_weight_zero():
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.teaching.lesson_runs import reward_weights_note

    note = reward_weights_note(get_recipe("calculator-tool-cpu"))
    recipe = get_recipe("calculator-tool-cpu")
    for spec in recipe.rewards:
        assert f"`{spec.name}` × {spec.weight:g}" in note
    assert ("does not train" in note) == any(spec.weight == 0 for spec in recipe.rewards)
    spec = types.SimpleNamespace
    note = reward_weights_note(spec(rewards=[spec(name="right", weight=2.0), spec(name="tidy", weight=0.0)]))
    assert (
        "`right` × 2, `tidy` × 0" in note
        and "weight 0 is logged and drawn but does not train: `tidy`" in note
    )


def test_train_section_labels_the_button_with_the_preflight_and_the_size():
    from grpo_kit.teaching.lesson_runs import button_panel, train_section

    no_go = Finding(
        "zero_std", "no-go", "100% of groups have zero reward variance.", "Raise num_generations."
    )
    _, section = train_section("Train 8 steps", "## 4 · Train", _report(1.0, [no_go]), small=True)
    assert "Train 8 steps (pre-flight: no-go) (too small to learn)" in section.text
    assert "Pre-flight: NO-GO" in section.text and "without" in section.text and "4 · Train" in section.text
    button, section = train_section("Train", "text", _report(0.25, []), too_small="too few steps to learn")
    assert "Train (too few steps to learn)" in section.text and "no-go" not in section.text
    assert "Train (too few steps to learn)" in button.text  # the button bound to a name is the one shown
    assert "Press me" in button_panel("## 3 · Measure", _button("Press me")).text


def _button(label: str):
    from grpo_kit.teaching.lesson_helpers import run_button

    return run_button(label)


def test_saved_curve_shows_the_png_or_says_there_is_none(tmp_path):
    from grpo_kit.artifacts.result import RunResult
    from grpo_kit.teaching.lesson_runs import saved_curve

    png = tmp_path / "curve.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 16)
    with_curve = RunResult(tmp_path, 1, [], tmp_path / "metrics.jsonl", reward_curve_path=png)
    assert "<img" in saved_curve(with_curve).text
    without = RunResult(tmp_path, 1, [], tmp_path / "metrics.jsonl")
    assert "(no curve)" in saved_curve(without).text and "<img" not in saved_curve(without, missing="").text


def test_train_with_live_curve_passes_another_training_function_its_arguments_and_the_curve():
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.teaching.lesson_helpers import train_with_live_curve

    calls = []

    def train(recipe, **kwargs):
        calls.append(kwargs)
        kwargs["callbacks"][0].on_log(None, type("S", (), {"global_step": 1})(), None, logs={"reward": 0.5})
        return "run"

    assert train_with_live_curve(get_recipe("gsm8k-cpu"), train=train, max_steps=2, title="t") == "run"
    (kwargs,) = calls
    assert set(kwargs) == {"max_steps", "callbacks"}  # no TRL-only defaults for another path
    assert len(kwargs["callbacks"]) == 1


def test_picture_png_enlarges_without_smoothing_and_draws_the_patch_grid():
    import io

    from PIL import Image

    from grpo_kit.teaching.lesson_helpers import picture_gallery, picture_png

    image = Image.new("RGB", (64, 64), (255, 255, 255))
    image.putpixel((5, 5), (220, 30, 30))
    plain = Image.open(io.BytesIO(picture_png(image, scale=3)))
    assert plain.size == (192, 192)
    assert {plain.getpixel((15 + dx, 15 + dy)) for dx in range(3) for dy in range(3)} == {(220, 30, 30)}
    gridded = Image.open(io.BytesIO(picture_png(image, scale=3, grid=16))).convert("RGB")
    lines = [x for x in range(192) if gridded.getpixel((x, 100)) == (255, 0, 255)]
    assert lines == [0, 48, 96, 144, 191]  # 4 columns of 16-px patches: 5 lines, the last on the edge
    with pytest.raises(ValueError, match="scale must be a whole number"):
        picture_png(image, scale=0)
    html = picture_gallery([(image, "**red** ✓"), (image, "blue ✗")]).text
    assert html.count("<img") == 2 and "blue" in html
