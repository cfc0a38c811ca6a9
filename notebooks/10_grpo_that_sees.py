# /// script
# requires-python = ">=3.10"
# dependencies = [
#     "grpo-kit[notebooks] @ git+https://github.com/grpo-kit/grpo-kit@v0.1.0",
# ]
# ///
import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell(hide_code=True)
def _():
    import marimo as mo

    return (mo,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    # Lesson 10 · GRPO that sees

    Until now every prompt was text. Here the prompt is a **picture and a question** ("What colour is the
    shape?"), and the reward checks the answer against the picture: GRPO's loop does not change, only what a
    prompt is made of.

    * The model is `smolvlm-cpu`, a vision-language model assembled offline: transformers' Llava around the
      embedded **SmolLM2-135M** (unchanged) with a small **CLIP vision tower** and a **projector**, both random
      (`grpo_kit.models.vlm`; no VLM weights can be downloaded here).
    * The pictures are drawn with Pillow (`datasets_prep.images`): one filled shape in red, green, blue or yellow.
    * The reward is `rewards.visual_answer_reward`: 1 when the first colour word the answer names is the
      shape's colour, else 0. Four colours: guessing scores 25 %.
    * The recipe is `shapes-vlm-cpu`, trained on TRL's vision-language path (`GRPOTrainer` with the processor
      as `processing_class` and TRL's `image` column): the TRL path only; the standalone loop and Unsloth are
      text-only here.
    """)
    return


@app.cell
def _(mo):
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.teaching.lesson_helpers import lesson_size

    size = lesson_size()
    recipe = get_recipe("shapes-vlm-cpu")
    # the recipe's steps on CPU and GPU alike; -- --small: 2 steps
    train_steps = size.steps(gpu=recipe.training["max_steps"], cpu=recipe.training["max_steps"], small=2)
    num_eval = size.pick(gpu=recipe.eval_prompts, cpu=recipe.eval_prompts, small=8)
    output_root = size.output_dir("lesson10")
    mo.callout(
        mo.md(
            f"**{size.name.upper()} settings** — recipe `{recipe.name}`, model `{recipe.model}`, {train_steps} steps "
            f"of {recipe.training['per_device_train_batch_size'] // recipe.training['num_generations']} pictures × "
            f"{recipe.training['num_generations']} answers of ≤ {recipe.training['max_completion_length']} tokens "
            f"at T = {recipe.training['temperature']}, {num_eval} held-out pictures per set, greedy."
            + (
                "\n\n**Too small to learn:** every part runs, but 2 steps cannot move the model; expect the "
                "held-out change to read about 0. Without `--small` the lesson runs the recipe's steps "
                "(`python notebooks/10_grpo_that_sees.py`, or `grpo-kit train --recipe shapes-vlm-cpu --loop trl`)."
                if size.small
                else ""
            )
        ),
        kind="warn" if size.small else "info",
    )
    return num_eval, output_root, recipe, size, train_steps


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 1 · How an image becomes tokens

    ```
     64×64 picture ──► CLIP vision tower ──► 16 patch vectors ──► projector ──► 16 vectors the LM reads
      (4×4 patches        (one vector per        (128 numbers       (MLP: 128 → 576,   (in place of the 16
       of 16×16 px)        patch, CLS dropped)     each)              LM's width)        <image> tokens)
    ```

    The chat prompt holds one `<image>` placeholder where the picture goes. The **processor** expands it into
    one `<image>` token per patch; inside the model, Llava overwrites those token positions with the projected
    patch vectors. The language model then reads them like any other token embeddings, and answers in text,
    which the reward scores as it would any completion.

    The prompt also **opens the answer**: it ends with an assistant turn, "The shape is", which the chat
    template leaves open, so the next word generated is the colour. Asked without it, the untrained model
    mostly begins "The …" and wanders, and a group of answers that name no colour all score 0: nothing to
    learn from. With it, a few tokens suffice and every group is a choice among colours.
    """)
    return


@app.cell
def _(mo):
    from datasets_prep.images import IMAGE_TASKS

    picture_task = mo.ui.dropdown(options=list(IMAGE_TASKS), value="colour", label="task")
    picture_seed = mo.ui.slider(0, 20, value=3, label="picture", show_value=True)
    mo.hstack([picture_task, picture_seed], justify="start")  # the lesson trains on "colour" only
    return picture_seed, picture_task


@app.cell
def _(picture_seed, picture_task):
    from datasets_prep.images import shapes_rows

    # one row as the dataset draws them: the picture, the question (answers listed in a drawn order), the gold
    shown_row = shapes_rows(1, seed=picture_seed.value, tasks=(picture_task.value,))[0]
    shown_image, shown_answer, shown_prompt = shown_row["image"], shown_row["answer"], shown_row["prompt"]
    return shown_answer, shown_image, shown_prompt


@app.cell
def _(recipe):
    from grpo_kit.runs.models import load_recipe_model

    # the recipe's model as it trains: smolvlm-cpu with only its trainable_parts requiring gradients
    base_model, processor = load_recipe_model(recipe)
    return base_model, load_recipe_model, processor


@app.cell
def _(base_model, mo, processor, shown_answer, shown_image, shown_prompt):
    from grpo_kit.models.vlm import IMAGE_TOKEN, SMOLVLM_CPU_VISION, image_token_count
    from grpo_kit.teaching.lesson_helpers import picture, wrapped_text

    template_text = processor.apply_chat_template(shown_prompt, tokenize=False, add_generation_prompt=True)
    shown_inputs = processor(images=[shown_image], text=[template_text], return_tensors="pt")
    shown_ids = shown_inputs["input_ids"][0]
    image_tokens = int((shown_ids == base_model.config.image_token_index).sum())
    patch = SMOLVLM_CPU_VISION.patch_size
    side = SMOLVLM_CPU_VISION.image_size
    mo.vstack(
        [
            mo.hstack(
                [
                    picture(
                        shown_image,
                        scale=3,
                        caption=f"the picture ({shown_image.width}×{shown_image.height})",
                    ),
                    picture(shown_image, scale=3, grid=patch, caption=f"its {patch}×{patch}-px patches"),
                ],
                justify="start",
                gap=2,
            ),
            mo.md(
                f"Gold answer: **{shown_answer}**. The processor turns the picture into `pixel_values` of shape "
                f"{tuple(shown_inputs['pixel_values'].shape)} and the single `{IMAGE_TOKEN}` into "
                f"**{image_tokens} image tokens, one per patch**: ({side} / {patch})² = "
                f"{image_token_count(SMOLVLM_CPU_VISION)}.\n\nThe chat template's text, one placeholder:"
            ),
            wrapped_text(template_text),
            mo.md(
                f"What the model reads ({len(shown_ids)} token ids, decoded), the placeholder expanded into "
                f"{image_tokens} `{IMAGE_TOKEN}` tokens:"
            ),
            wrapped_text(processor.tokenizer.decode(shown_ids)),
        ]
    )
    return image_tokens, patch, picture, shown_ids, side, wrapped_text


@app.cell
def _(base_model, mo, recipe):
    _llava = (
        base_model.get_base_model() if hasattr(base_model, "get_base_model") else base_model
    )  # under a LoRA
    _parts = {
        "vision tower (CLIP, random)": _llava.model.vision_tower,
        "projector (Llava's MLP, random)": _llava.model.multi_modal_projector,
        "language model (SmolLM2-135M, pretrained)": _llava.model.language_model,
    }
    part_counts = {
        name: (
            sum(p.numel() for p in module.parameters()),
            sum(p.numel() for p in module.parameters() if p.requires_grad),
        )
        for name, module in _parts.items()
    }
    trainable_total = sum(p.numel() for p in base_model.parameters() if p.requires_grad)
    all_total = sum(p.numel() for p in base_model.parameters())
    mo.md(
        f"What trains (the recipe's `trainable_parts = {recipe.trainable_parts}`): the vision tower and the "
        "projector learn to hand the language model vectors it can name a colour from"
        + (
            f"; a LoRA (r = {recipe.lora.r}) on the language model's linear layers learns to read them, while its "
            "own weights stay frozen, so it keeps its English"
            if "lm_lora" in recipe.trainable_parts
            else "; the language model stays frozen, so it keeps its English"
        )
        + ".\n\n"
        "| part | parameters | trained |\n|:---|---:|:---|\n"
        + "\n".join(
            f"| {name} | {total:,} | "
            + ("yes" if trained == total else "no (frozen)" if not trained else "part")
            + " |"
            for name, (total, trained) in part_counts.items()
        )
        + f"\n| **whole model** | {all_total:,} | {trainable_total:,} trained ({trainable_total / all_total:.2%}) |"
    )
    return all_total, part_counts, trainable_total


@app.cell
def _(num_eval, recipe):
    from grpo_kit.runs.held_out import held_out_rows, transfer_rows

    train_dataset = recipe.load_dataset()
    # pictures drawn from another seed than the training pictures (and none equal to one of them)
    held_out = held_out_rows(recipe, num_eval, training=train_dataset)
    # the recipe's second set (shapes-transfer): small shapes in the corners, on grey
    transfer = transfer_rows(recipe, num_eval, training=train_dataset)
    return held_out, train_dataset, transfer


@app.cell
def _(num_eval):
    from grpo_kit.teaching.lesson_helpers import run_button, should_run
    from grpo_kit.teaching.lesson_runs import button_panel

    measure_button = run_button(
        f"Measure the base model: {num_eval} held-out pictures + {num_eval} drawn differently", kind="neutral"
    )
    button_panel(
        "## 2 · What the model sees before training\n\nGreedy answers of the base model on pictures it never "
        "trains on, scored by the recipe's reward (`runs.held_out.evaluate_held_out`, what `grpo-kit train` "
        "reports). The vision tower is random: expect chance, 25 %.",
        measure_button,
    )
    return button_panel, measure_button, run_button, should_run


@app.cell
def _(base_model, held_out, measure_button, mo, processor, recipe, should_run, transfer):
    from grpo_kit.teaching.lesson_runs import evaluate_with_spinner

    mo.stop(not should_run(measure_button), mo.md("Press the button to measure the base model."))
    before_report = evaluate_with_spinner(recipe, base_model, processor, held_out, what="held-out pictures")
    before_transfer = evaluate_with_spinner(
        recipe, base_model, processor, transfer, what="pictures drawn differently"
    )
    return before_report, before_transfer


@app.cell
def _(before_report, before_transfer, held_out, mo):
    from grpo_kit.teaching.lesson_helpers import picture_gallery

    _shown = 6
    mo.vstack(
        [
            mo.md(
                f"Held-out accuracy of the base model: **{before_report.metrics['accuracy']:.0%}** of "
                f"{before_report.num_prompts} pictures (chance: 25 %); on the pictures drawn differently "
                f"**{before_transfer.metrics['accuracy']:.0%}** of {before_transfer.num_prompts}.\n\n"
                "A few held-out pictures, the gold colour and the base model's greedy answer:"
            ),
            picture_gallery(
                (
                    row["image"],
                    f"gold **{row['answer']}**<br>{'✓' if right else '✗'} {answer.strip() or '(nothing)'}",
                )
                for row, answer, right in list(
                    zip(held_out, before_report.completions, before_report.per_prompt["accuracy"])
                )[:_shown]
            ),
        ]
    )
    return (picture_gallery,)


@app.cell
def _(before_report, button_panel, mo, recipe, run_button, size, train_steps):
    train_button = run_button(
        f"Train {train_steps} steps with TRL on the pictures"
        + (" (too small to learn)" if size.small else "")
    )
    _group = recipe.training["num_generations"]
    _pictures = recipe.training["per_device_train_batch_size"] // _group
    _panel = button_panel(
        f"## 3 · Press Train\n\nThe base model was measured on {before_report.num_prompts} held-out pictures "
        "(section 4 compares). `trl_path.train_with_trl(recipe)` hands `GRPOTrainer` the processor as "
        f"`processing_class` and the dataset's `image` column; each step samples {_group} answers for each of {_pictures} pictures, "
        f"scores them with `visual_answer_reward` and updates only `{', '.join(recipe.trainable_parts)}`. A group "
        f"whose {_group} answers all score the same (all wrong, or all right) has no advantage and teaches nothing.",
        train_button,
    )
    _too_small = mo.callout(
        mo.md("At this size the run only shows every part working: run the lesson without `--small`."),
        kind="warn",
    )
    mo.vstack([_too_small, _panel]) if size.small else _panel
    return (train_button,)


@app.cell
def _(
    before_report,
    load_recipe_model,
    mo,
    output_root,
    recipe,
    should_run,
    train_button,
    train_dataset,
    train_steps,
):
    from grpo_kit.teaching.lesson_runs import train_fresh

    mo.stop(not should_run(train_button), mo.md("Press the button to train."))
    assert before_report.num_prompts  # the base model is measured first
    # a fresh copy of the base model with only its trainable_parts trainable: pressing again starts over
    run, _ = train_fresh(
        recipe,
        load=lambda _name: load_recipe_model(recipe),
        train_dataset=train_dataset,
        output_dir=output_root / "trl-run",
        max_steps=train_steps,
    )
    return (run,)


@app.cell
def _(mo, run):
    from grpo_kit.teaching.lesson_runs import saved_curve, step_metrics_table

    step_metrics = [r for r in run.log_history if r.get("reward") is not None]
    mo.vstack(
        [
            saved_curve(run),
            mo.md(
                "The curve's total is `visual_answer_reward` (weight 1): the share of the step's 8 answers that "
                "named the right colour.\n\nTRL's metrics per step:\n\n"
                + step_metrics_table(
                    step_metrics,
                    [
                        ("reward", "reward (share right)"),
                        ("reward_std", "reward std"),
                        ("frac_reward_zero_std", "zero-variance groups"),
                        ("completions/mean_length", "answer length (tokens)"),
                    ],
                )
            ),
        ]
    )
    return (step_metrics,)


@app.cell
def _(held_out, processor, recipe, run, transfer):
    from grpo_kit.teaching.lesson_runs import evaluate_trained

    # the same pictures, the same greedy decoding: before and after differ only by the weights
    after_report = evaluate_trained(recipe, run, processor, held_out, what="held-out pictures")
    after_transfer = evaluate_trained(recipe, run, processor, transfer, what="pictures drawn differently")
    return after_report, after_transfer


@app.cell
def _(after_report, after_transfer, before_report, before_transfer, mo):
    from grpo_kit.evaluation import compare
    from grpo_kit.teaching.lesson_runs import comparison_table

    accuracy_change = compare(before_report, after_report, metric="accuracy")
    transfer_change = compare(before_transfer, after_transfer, metric="accuracy")
    mo.md(
        "## 4 · After: the same pictures, before and after\n\nGreedy accuracy on pictures the run never saw; "
        "paired bootstrap 95 % CI of the change (`grpo_kit.evaluation.compare`: the same picture before and "
        "after).\n\n"
        + comparison_table(
            [
                ("held-out pictures (large shapes, anywhere, white)", accuracy_change),
                ("`shapes-transfer` (small shapes in the corners, grey)", transfer_change),
            ],
            n=True,
            verdict=True,
        )
    )
    return accuracy_change, transfer_change


@app.cell
def _(after_report, before_report, held_out, mo, picture_gallery):
    _rows = list(
        zip(
            held_out,
            before_report.completions,
            after_report.completions,
            before_report.per_prompt["accuracy"],
            after_report.per_prompt["accuracy"],
        )
    )
    # the pictures it now gets right first, then the rest
    _rows.sort(key=lambda r: (-(r[4] - r[3]), -r[4]))
    now_right = sum(1 for r in _rows if r[4] > r[3])
    now_wrong = sum(1 for r in _rows if r[4] < r[3])

    def _answer(text, right):
        return f"{'✓' if right else '✗'} {text.strip() or '(nothing)'}"

    mo.vstack(
        [
            mo.md(
                f"Of {len(_rows)} held-out pictures, **{now_right}** went from wrong to right and **{now_wrong}** "
                "from right to wrong. The gallery shows those it now gets right first:"
            ),
            picture_gallery(
                (
                    image_row["image"],
                    f"gold **{image_row['answer']}**<br>before: {_answer(b, rb)}<br>after: {_answer(a, ra)}",
                )
                for image_row, b, a, rb, ra in _rows[:8]
            ),
        ]
    )
    return now_right, now_wrong


@app.cell
def test_an_image_becomes_one_token_per_patch(
    all_total, image_tokens, part_counts, patch, shown_ids, side, trainable_total
):
    from grpo_kit.models.vlm import SMOLVLM_CPU_VISION as _VISION
    from grpo_kit.models.vlm import image_token_count as _count

    assert image_tokens == _count(_VISION) == (side // patch) ** 2 == 16
    assert len(shown_ids) > image_tokens  # the question's text tokens are there too
    _vision, _projector, _lm = part_counts.values()
    assert _vision[0] == _vision[1] > 0 and _projector[0] == _projector[1] > 0  # trained whole
    assert _lm[1] == 0  # the language model is frozen
    assert trainable_total == _vision[0] + _projector[0] < all_total / 100
    return


@app.cell
def test_the_run_trained_and_was_measured_on_the_same_pictures(
    accuracy_change,
    after_report,
    before_report,
    held_out,
    now_right,
    now_wrong,
    step_metrics,
    train_steps,
    transfer_change,
):
    assert len(step_metrics) == train_steps and all(0.0 <= r["reward"] <= 1.0 for r in step_metrics)
    assert before_report.num_prompts == after_report.num_prompts == len(held_out) == accuracy_change.n
    for _c in (accuracy_change, transfer_change):
        assert 0.0 <= _c.before <= 1.0 and 0.0 <= _c.after <= 1.0
        assert _c.ci_low <= _c.mean_diff <= _c.ci_high
    assert now_right - now_wrong == round((accuracy_change.after - accuracy_change.before) * len(held_out))
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    **What the recipe's measured run showed** lives in docs/results.md, section "GRPO that sees": the recipe
    `shapes-vlm-cpu` trained with `grpo-kit train --recipe shapes-vlm-cpu --loop trl`, its held-out accuracy
    before and after with the paired CI, on both sets. This lesson quotes none of it: the tables above are
    what this run measured.

    Try next: the other tasks (`get_recipe("shapes-vlm-cpu", dataset_kwargs={"tasks": ["count"]})`: how many
    dots; `["side"]`: left or right), a LoRA on the language model too (`trainable_parts=("vision_tower",
    "projector", "lm_lora")`), or your own pictures: a JSONL of `{"image", "prompt", "answer"}` lines
    (`datasets_prep.images.load_image_tasks`; `<image>` marks where the picture goes in the prompt).
    """)
    return


if __name__ == "__main__":
    app.run()
