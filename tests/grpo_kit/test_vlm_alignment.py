"""The alignment stage of a vision-language recipe (issue 59): picture captions that share no picture with the task
rows, the plain masked step that teaches the vision tower and projector to describe them (the language model left as
it is), the recipe rules, and a run through the CLI that records the "aligned only" column in run.json, eval.json and
report.md. Tiny VLM, seconds each."""

from __future__ import annotations

import json

import pytest
import torch

from datasets_prep.images import CAPTION_PROMPT, caption_rows, shapes_rows
from grpo_kit.recipes.recipe import WarmupSFT

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.xdist_group("cli")]


def _key(image) -> bytes:
    return image.tobytes()


def test_captions_share_no_picture_with_the_task_rows_and_describe_their_picture():
    from datasets_prep.images import _COLOURS

    captions = caption_rows(1024)
    assert len(captions) == 1024 and caption_rows(3)[0]["completion"] == captions[0]["completion"]
    task_pictures = {
        _key(row["image"])
        for seed in (0, 1)
        for style in ("train", "transfer")
        for tasks in (("colour",), ("colour_side",), ("side",))
        for row in shapes_rows(512, seed=seed, tasks=tasks, style=style)
    }
    assert not task_pictures & {_key(row["image"]) for row in captions}
    for row in captions[:64]:
        question = row["prompt"][0]["content"][-1]["text"]
        assert question == CAPTION_PROMPT and not any(
            word in question for word in (*_COLOURS, "left", "right")
        )
        text = row["completion"][0]["content"]
        colour = next(name for name in _COLOURS if f" {name} " in text)
        side = "left" if text.endswith("on the left.") else "right"
        pixels = row["image"].load()
        coloured = [x for x in range(64) for y in range(64) if pixels[x, y] == _COLOURS[colour]]
        assert coloured and all((x < 32) == (side == "left") for x in coloured), text


def test_a_two_part_answer_scores_only_when_both_parts_are_right():
    from rewards import visual_answer_reward, visual_choice_reward

    row = shapes_rows(1, tasks=("colour_side",))[0]
    colour, side = row["answer"].split(", ")
    other = "right" if side == "left" else "left"
    answers = [f" {colour}, {side}", f" {colour}, {other}", f" {side}", f" A {colour} square on the {side}."]
    n = len(answers)
    assert visual_answer_reward(answers, answer=[row["answer"]] * n, choices=[row["choices"]] * n) == [
        1.0,
        0.0,
        0.0,
        1.0,
    ]
    assert visual_choice_reward([" purple", f" {side}"], choices=[row["choices"]] * 2) == [0.0, 1.0]


def test_the_alignment_loss_reads_the_caption_tokens_only_with_the_picture_in():
    from grpo_kit.models import load_model
    from grpo_kit.models.vlm import IMAGE_TOKEN, TINY_VLM_VISION, image_token_count
    from grpo_kit.trainers.sft_warmup import tokenize_image_row

    _, processor = load_model("tiny-vlm")
    row = caption_rows(1)[0]
    ids, mask, pixels = tokenize_image_row(row, processor, 512)
    image_id = processor.tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    assert ids.count(image_id) == image_token_count(TINY_VLM_VISION)  # the picture's tokens, expanded
    assert image_id not in [t for t, m in zip(ids, mask) if m]  # never a target
    target = processor.tokenizer.decode([t for t, m in zip(ids, mask) if m])
    assert target.startswith(row["completion"][0]["content"]) and target.endswith("<|im_end|>\n")
    assert pixels.shape == (3, TINY_VLM_VISION.image_size, TINY_VLM_VISION.image_size)
    with pytest.raises(ValueError, match="over max_length=16; raise warmup_sft.max_length"):
        tokenize_image_row(row, processor, 16)


def test_alignment_trains_the_tower_and_projector_and_leaves_the_language_model():
    from grpo_kit.models import load_model
    from grpo_kit.models.vlm import select_trainable
    from grpo_kit.trainers.sft_warmup import completion_loss, tokenize_image_row, train_with_images

    model, processor = load_model("tiny-vlm")
    model = select_trainable(model, ("vision_tower", "projector"))
    warmup = WarmupSFT(dataset="shapes-captions", steps=12, batch_size=4, learning_rate=5e-3, rows=8)
    rows = caption_rows(8)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    trained = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

    def loss_on_rows() -> float:
        from grpo_kit.trainers.sft_warmup import _batch

        tokenized = [tokenize_image_row(row, processor, 512) for row in rows]
        batch = _batch([(i, m) for i, m, _ in tokenized], processor.tokenizer.pad_token_id, "cpu")
        with torch.no_grad():
            return completion_loss(model, *batch, pixel_values=torch.stack([p for *_, p in tokenized])).item()

    before = loss_on_rows()
    shown = []
    losses = train_with_images(model, processor, rows, warmup, seed=0, on_step=lambda *a: shown.append(a))
    assert len(losses) == 12 and loss_on_rows() < before
    assert shown == list(enumerate(losses, start=1))  # the progress line sees every step
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    moved = [n for n, p in model.named_parameters() if n in trained and not torch.equal(p, trained[n])]
    assert any("vision_tower" in n for n in moved) and any("multi_modal_projector" in n for n in moved)


def test_captions_align_a_vlm_recipe_only_and_a_vlm_recipe_aligns_on_pictures():
    import dataclasses

    from grpo_kit.recipes.catalogue import get_recipe

    text = get_recipe("smoltldr-length-small")
    with pytest.raises(
        ValueError, match="aligns a vision-language model's pictures; name its trainable_parts"
    ):
        dataclasses.replace(text, warmup_sft=WarmupSFT(dataset="shapes-captions"))
    vlm = get_recipe("shapes-vlm-cpu")
    with pytest.raises(ValueError, match="align it on pictures with warmup_sft.dataset 'shapes-captions'"):
        dataclasses.replace(vlm, warmup_sft=WarmupSFT(dataset="gsm8k-worked"))


def test_the_vlm_recipe_aligns_then_trains_and_records_the_aligned_column(tmp_path):
    """The shipped recipe, its command as docs/results.md writes it, through the CLI on the tiny VLM: alignment,
    then GRPO; run.json, eval.json and report.md have the "aligned only" column, for the held-out pictures and the
    ones drawn differently."""
    import shlex

    from doc_pages import first_line_starting_with

    from grpo_kit.cli import main

    run = tmp_path / "run"
    written = shlex.split(first_line_starting_with("grpo-kit train --recipe shapes-vlm-aligned-cpu"))
    assert written == [
        "grpo-kit",
        "train",
        "--recipe",
        "shapes-vlm-aligned-cpu",
        "--loop",
        "trl",
    ]  # docs/results.md
    argv = [*written[1:], "--set", "model=tiny-vlm", "--set", "warmup_sft.steps=2", "--max-steps", "1"]
    argv += ["--eval-prompts", "2", "--no-merge", "--output-dir", str(run)]
    assert main(argv) == 0
    stage = json.loads((run / "run.json").read_text())["warmup_sft"]
    assert stage["stage"] == "alignment" and stage["dataset"] == "shapes-captions" and stage["steps"] == 2
    assert {"evaluation", "grpo_added", "transfer_evaluation", "transfer_grpo_added"} <= set(stage)
    warmup = json.loads((run / "eval.json").read_text())["warmup"]
    assert warmup["column"] == "aligned only" and warmup["held_out"]["before"]["per_prompt"]["accuracy"]
    assert len(warmup["transfer"]["after"]["per_prompt"]["accuracy"]) == 2
    report = (run / "report.md").read_text()
    assert (
        "## Alignment, then GRPO" in report and "| metric | base | aligned only | aligned + GRPO |" in report
    )


def test_a_picture_column_in_a_jsonl_warm_up_set_is_refused_not_dropped(tmp_path):
    from datasets_prep.sft_rows import load_sft_rows

    row = {"prompt": "Describe it.", "completion": "A red circle.", "image": "red.png"}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="a picture column in a .jsonl warm-up set is not read; align a"):
        load_sft_rows(str(tmp_path / "rows.jsonl"))
