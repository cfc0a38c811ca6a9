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
    shape, and is it on the left or the right?"), and the reward checks the answer against the picture:
    GRPO's loop does not change, only what a prompt is made of.

    * The model is `smolvlm-cpu`, a vision-language model assembled offline: transformers' Llava around the
      embedded **SmolLM2-135M** (unchanged) with a small **CLIP vision tower** and a **projector**
      (`grpo_kit.models.vlm`; no VLM weights can be downloaded here).
    * The pictures are drawn with Pillow (`datasets_prep.images`): one filled shape in red, green, blue or
      yellow, in the left or the right half.
    * The reward is `rewards.visual_answer_reward`: 1 when the answer names both the colour and the side
      ("red, left"), else 0. Four colours × two sides: guessing scores 12.5 %.
    """)
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Why the model starts blind

    The vision tower and the projector of a freshly assembled VLM are **random**: the language model receives
    16 vectors that say nothing about the picture. GRPO cannot fix that alone: when every answer in a group is
    a guess, the groups whose answers all score the same carry no signal.

    One thing in the tower is not random: its **position embeddings** start as a sine-cosine code of each
    patch's row and column (as in MAE's ViT), large enough to outweigh what a patch shows. With CLIP's own
    random start, a tiny one, the tower's 16 vectors said where *nothing* was: the side of a shape could not
    be read from them, and no amount of alignment taught "left" from "right" (docs/results.md).

    Real VLMs are never trained that way. LLaVA first runs a **feature-alignment** stage: image-caption pairs,
    the language model frozen, only the projector learning to turn picture features into words the model
    already knows. Task tuning comes after. (The Unsloth vision GRPO notebook starts from a VLM that already
    sees, a released Qwen2.5-VL: that alignment was done before it.)

    This lesson takes the same three steps: **blind → aligned → GRPO**.
    """)
    return


@app.cell
def _(mo):
    import dataclasses

    from grpo_kit.config.rules import training_value
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.teaching.lesson_helpers import lesson_size

    size = lesson_size()
    recipe = get_recipe("shapes-vlm-aligned-cpu")
    seed = int(training_value(recipe.training, "seed"))
    # the recipe's steps on CPU and GPU alike; -- --small: 2 alignment steps, 2 GRPO steps
    train_steps = size.steps(gpu=recipe.training["max_steps"], cpu=recipe.training["max_steps"], small=2)
    alignment = dataclasses.replace(
        recipe.warmup_sft,
        steps=size.pick(gpu=recipe.warmup_sft.steps, cpu=recipe.warmup_sft.steps, small=2),
    )
    num_eval = size.pick(gpu=recipe.eval_prompts, cpu=recipe.eval_prompts, small=8)
    output_root = size.output_dir("lesson10")
    mo.callout(
        mo.md(
            f"**{size.name.upper()} settings** — recipe `{recipe.name}`, model `{recipe.model}`. Alignment: "
            f"{alignment.steps} steps of {alignment.batch_size} captions at learning rate "
            f"{alignment.learning_rate:g}. GRPO: {train_steps} steps of "
            f"{recipe.training['per_device_train_batch_size'] // recipe.training['num_generations']} pictures × "
            f"{recipe.training['num_generations']} answers of ≤ {recipe.training['max_completion_length']} tokens "
            f"at T = {recipe.training['temperature']}. {num_eval} held-out pictures per set, greedy."
            + (
                "\n\n**Too small to learn:** every part runs, but 2 steps cannot move the model; expect every "
                "change to read about 0. Without `--small` the lesson runs the recipe's steps "
                "(`python notebooks/10_grpo_that_sees.py`, or `grpo-kit train --recipe shapes-vlm-aligned-cpu --loop trl`)."
                if size.small
                else ""
            )
        ),
        kind="warn" if size.small else "info",
    )
    return alignment, num_eval, output_root, recipe, seed, size, train_steps


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

    The prompt also **opens the answer**: it ends with an assistant turn ("Answer:") that the chat template
    leaves open, so the next words generated are the answer, and a few tokens suffice.
    """)
    return


@app.cell
def _(mo):
    from datasets_prep.images import IMAGE_TASKS

    picture_task = mo.ui.dropdown(options=list(IMAGE_TASKS), value="colour_side", label="task")
    picture_seed = mo.ui.slider(0, 20, value=3, label="picture", show_value=True)
    mo.hstack([picture_task, picture_seed], justify="start")  # the lesson trains on "colour_side" only
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
    lm_module = _llava.model.language_model
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
    return all_total, lm_module, part_counts, trainable_total


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
        "## 2 · Blind: the base model\n\nGreedy answers of the base model on pictures it never trains on, "
        "scored by the recipe's reward (`runs.held_out.evaluate_held_out`, what `grpo-kit train` reports). "
        "The vision tower is random: expect chance, 12.5 %.",
        measure_button,
    )
    return button_panel, measure_button, run_button, should_run


@app.cell
def _(base_model, held_out, measure_button, mo, processor, recipe, should_run, transfer):
    from grpo_kit.teaching.lesson_runs import evaluate_with_spinner

    mo.stop(not should_run(measure_button), mo.md("Press the button to measure the base model."))
    base_report = evaluate_with_spinner(recipe, base_model, processor, held_out, what="held-out pictures")
    base_transfer = evaluate_with_spinner(
        recipe, base_model, processor, transfer, what="pictures drawn differently"
    )
    mo.md(
        f"Held-out accuracy of the base model: **{base_report.metrics['accuracy']:.0%}** of "
        f"{base_report.num_prompts} pictures (chance: 12.5 %); on the pictures drawn differently "
        f"**{base_transfer.metrics['accuracy']:.0%}** of {base_transfer.num_prompts}."
    )
    return base_report, base_transfer, evaluate_with_spinner


@app.cell
def _(alignment, button_panel, run_button, size):
    align_button = run_button(
        f"Align: {alignment.steps} caption steps" + (" (too small to learn)" if size.small else ""),
        kind="neutral",
    )
    button_panel(
        "## 3 · Align: teach the tower to describe\n\nA fresh copy of the base model learns to caption pictures "
        f"(`{alignment.dataset}`: 'A red circle on the left.'), pictures of their own that GRPO never trains "
        "or is measured on. `trainers.sft_warmup.train_with_images` takes the plain masked SFT step: "
        "cross-entropy on the caption's tokens only, the picture going in as `pixel_values`, gradients only "
        "into the recipe's `trainable_parts`.",
        align_button,
    )
    return (align_button,)


@app.cell
def _(align_button, alignment, load_recipe_model, mo, processor, recipe, seed, should_run):
    import torch

    from grpo_kit.trainers.sft_warmup import train_with_images, warmup_rows

    mo.stop(not should_run(align_button), mo.md("Press the button to align the model."))
    caption_rows = warmup_rows(alignment)
    # pressing again starts over from the base model
    aligned_model, _ = load_recipe_model(recipe)
    with mo.status.spinner(
        title="Aligning", subtitle=f"{alignment.steps} steps × {alignment.batch_size} captions"
    ):
        alignment_losses = train_with_images(aligned_model, processor, caption_rows, alignment, seed=seed)
    return aligned_model, alignment_losses, caption_rows, torch


@app.cell
def _(aligned_model, alignment, alignment_losses, base_model, mo, torch):
    import matplotlib.pyplot as plt

    def _llava(model):
        return model.get_base_model() if hasattr(model, "get_base_model") else model

    # which parts the alignment moved: each part's weights, aligned against the base model's
    _pairs = {
        "vision tower": (_llava(base_model).model.vision_tower, _llava(aligned_model).model.vision_tower),
        "projector": (
            _llava(base_model).model.multi_modal_projector,
            _llava(aligned_model).model.multi_modal_projector,
        ),
        "language model": (
            _llava(base_model).model.language_model,
            _llava(aligned_model).model.language_model,
        ),
    }

    def _weights(module, lora):  # a LoRA's own matrices, or the part's weights without them
        return [p for n, p in module.named_parameters() if ("lora_" in n) == lora]

    parts_moved = {
        name: any(not torch.equal(a, b) for a, b in zip(_weights(before, False), _weights(after, False)))
        for name, (before, after) in _pairs.items()
    }
    _lm_pair = _pairs["language model"]
    if _weights(_lm_pair[1], True):  # the recipe's LoRA on the language model (lm_lora)
        parts_moved["LoRA on the language model"] = any(
            not torch.equal(a, b) for a, b in zip(_weights(_lm_pair[0], True), _weights(_lm_pair[1], True))
        )
    _fig, _ax = plt.subplots(figsize=(5, 2.4))
    _ax.plot(range(1, len(alignment_losses) + 1), alignment_losses, marker="o")
    _ax.set_xlabel("alignment step")
    _ax.set_ylabel("caption loss")
    _ax.set_title("Alignment: cross-entropy on the caption tokens")
    _fig.tight_layout()
    plt.close(_fig)
    mo.vstack(
        [
            mo.as_html(_fig),
            mo.md(
                f"{len(alignment_losses)} steps at learning rate {alignment.learning_rate:g}: loss "
                f"{alignment_losses[0]:.3f} → {alignment_losses[-1]:.3f}. Weights changed: "
                + ", ".join(f"{name} **{'yes' if moved else 'no'}**" for name, moved in parts_moved.items())
                + "."
            ),
        ]
    )
    return (parts_moved,)


@app.cell
def _(aligned_model, base_model, held_out, mo, processor):
    from datasets_prep.images import CAPTION_PROMPT
    from grpo_kit.rollout.generation import Decoding, generate
    from grpo_kit.teaching.lesson_helpers import picture_gallery

    _shown = held_out[:4]
    _prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": CAPTION_PROMPT}]}]
    _greedy = Decoding(max_new_tokens=12, greedy=True)

    def _captions(model):
        groups = generate(
            model, processor, [_prompt] * len(_shown), 1, _greedy, images=[r["image"] for r in _shown]
        )
        return [group[0].text.strip() or "(nothing)" for group in groups]

    _base_captions, _aligned_captions = _captions(base_model), _captions(aligned_model)
    mo.vstack(
        [
            mo.md(f'"{CAPTION_PROMPT}" asked of four held-out pictures, greedy, before and after alignment:'),
            picture_gallery(
                (row["image"], f"gold **{row['answer']}**<br>base: {b}<br>aligned: {a}")
                for row, b, a in zip(_shown, _base_captions, _aligned_captions)
            ),
        ]
    )
    return (picture_gallery,)


@app.cell
def _(aligned_model, evaluate_with_spinner, held_out, mo, processor, recipe, transfer):
    # the same pictures, the same greedy decoding as the base model: they differ only by the weights
    aligned_report = evaluate_with_spinner(
        recipe,
        aligned_model,
        processor,
        held_out,
        title="Evaluating the aligned model",
        what="held-out pictures",
    )
    aligned_transfer = evaluate_with_spinner(
        recipe,
        aligned_model,
        processor,
        transfer,
        title="Evaluating the aligned model",
        what="pictures drawn differently",
    )
    mo.md(
        f"The aligned model, asked the task's question (it never trained on it): "
        f"**{aligned_report.metrics['accuracy']:.0%}** of {aligned_report.num_prompts} held-out pictures, "
        f"**{aligned_transfer.metrics['accuracy']:.0%}** of those drawn differently."
    )
    return aligned_report, aligned_transfer


@app.cell
def _(aligned_report, button_panel, mo, recipe, run_button, size, train_steps):
    train_button = run_button(
        f"Train {train_steps} GRPO steps from the aligned model"
        + (" (too small to learn)" if size.small else "")
    )
    _group = recipe.training["num_generations"]
    _pictures = recipe.training["per_device_train_batch_size"] // _group
    _panel = button_panel(
        f"## 4 · GRPO from the aligned model\n\nA copy of the aligned model (measured on "
        f"{aligned_report.num_prompts} held-out pictures) trains with TRL: `GRPOTrainer` gets the processor as "
        f"`processing_class` and the dataset's `image` column; each step samples {_group} answers for each of "
        f"{_pictures} pictures, scores them with `visual_answer_reward` and updates only "
        f"`{', '.join(recipe.trainable_parts)}`. A group whose {_group} answers all score the same has no "
        "advantage and teaches nothing. The held-out pictures are evaluated during training too "
        "(`runs.during_training`, greedy, as before and after).",
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
    aligned_model,
    aligned_report,
    base_report,
    held_out,
    mo,
    output_root,
    processor,
    recipe,
    should_run,
    train_button,
    train_dataset,
    train_steps,
):
    import copy

    from grpo_kit.runs.during_training import HeldOutDuringTraining
    from grpo_kit.teaching.lesson_runs import train_fresh

    mo.stop(not should_run(train_button), mo.md("Press the button to train."))
    assert base_report.num_prompts and aligned_report.num_prompts  # both measured first
    eval_every = max(1, train_steps // 8)  # about 8 held-out points along the run
    run, _ = train_fresh(
        recipe,
        # a deep copy: the aligned model stays as aligned, and pressing again starts over from it
        load=lambda _name: (copy.deepcopy(aligned_model), processor),
        train_dataset=train_dataset,
        output_dir=output_root / "trl-run",
        max_steps=train_steps,
        eval_steps=eval_every,
        evaluate=HeldOutDuringTraining(
            recipe=recipe,
            tokenizer=processor,
            reward_funcs=recipe.build_reward_funcs(processor),
            rows=held_out,
            before=aligned_report,
            run_dir=output_root / "trl-run",
        ),
    )
    return eval_every, run


@app.cell
def _(aligned_report, base_report, eval_every, mo, run):
    from grpo_kit.runs.during_training import eval_points
    from grpo_kit.teaching.lesson_runs import saved_curve, step_metrics_table

    step_metrics = [r for r in run.log_history if r.get("reward") is not None]
    held_out_curve = eval_points(run.log_history, "accuracy")
    mo.vstack(
        [
            saved_curve(run),
            mo.md(
                f"Held-out accuracy during training (every {eval_every} steps, greedy; step 0 is the aligned "
                f"model, the base model read {base_report.metrics['accuracy']:.2f}):\n\n"
                "| step | held-out accuracy |\n|---:|---:|\n"
                + "\n".join(
                    f"| {step} | {value:.2f} |"
                    for step, value in [(0, aligned_report.metrics["accuracy"]), *held_out_curve]
                )
                + "\n\nThe reward curve's total is `visual_answer_reward` (weight 1): the share of the step's "
                "answers that named both colour and side.\n\nTRL's metrics per step:\n\n"
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
    return held_out_curve, step_metrics


@app.cell
def _(held_out, processor, recipe, run, transfer):
    from grpo_kit.teaching.lesson_runs import evaluate_trained

    # the same pictures, the same greedy decoding: base, aligned and GRPO differ only by the weights
    grpo_report = evaluate_trained(recipe, run, processor, held_out, what="held-out pictures")
    grpo_transfer = evaluate_trained(recipe, run, processor, transfer, what="pictures drawn differently")
    return grpo_report, grpo_transfer


@app.cell
def _(aligned_report, aligned_transfer, base_report, base_transfer, grpo_report, grpo_transfer, mo):
    from grpo_kit.evaluation import compare
    from grpo_kit.teaching.lesson_runs import comparison_table

    sets = {
        "held-out pictures (large shapes, white)": (base_report, aligned_report, grpo_report),
        "`shapes-transfer` (small shapes in the corners, grey)": (
            base_transfer,
            aligned_transfer,
            grpo_transfer,
        ),
    }
    changes = {
        label: {
            "alignment (base → aligned)": compare(base, aligned, metric="accuracy"),
            "GRPO (aligned → GRPO)": compare(aligned, grpo, metric="accuracy"),
            "both (base → GRPO)": compare(base, grpo, metric="accuracy"),
        }
        for label, (base, aligned, grpo) in sets.items()
    }

    def _added(change):
        ci = f"95 % CI [{change.ci_low:+.2f}, {change.ci_high:+.2f}]"
        if change.ci_low > 0:  # the whole interval above 0: a gain beyond the pictures' noise
            return f"raised accuracy by {change.mean_diff:+.2f} ({ci})"
        if change.ci_high < 0:
            return f"lowered accuracy by {change.mean_diff:+.2f} ({ci})"
        return f"changed accuracy by {change.mean_diff:+.2f}, a {ci} that includes 0: nothing beyond noise"

    mo.md(
        "## 5 · Blind → aligned → GRPO\n\nGreedy accuracy on pictures no stage trained on:\n\n"
        "| set | pictures | base | aligned | after GRPO |\n|:---|---:|---:|---:|---:|\n"
        + "\n".join(
            f"| {label} | {base.num_prompts} | {base.metrics['accuracy']:.2f} | "
            f"{aligned.metrics['accuracy']:.2f} | {grpo.metrics['accuracy']:.2f} |"
            for label, (base, aligned, grpo) in sets.items()
        )
        + "\n\nEach step's change, paired per picture, with its bootstrap 95 % CI (`grpo_kit.evaluation.compare`):"
        + "".join(
            f"\n\n**{label}**\n\n" + comparison_table(list(rows.items()), verdict=True)
            for label, rows in changes.items()
        )
        + "\n\n**What GRPO added beyond alignment:** "
        + "; ".join(
            f"on the {label.split(' (')[0]} it {_added(rows['GRPO (aligned → GRPO)'])}"
            for label, rows in changes.items()
        )
        + "."
    )
    return (changes,)


@app.cell
def _(aligned_report, base_report, grpo_report, held_out, mo, picture_gallery):
    def _answer(text, right):
        return f"{'✓' if right else '✗'} {text.strip() or '(nothing)'}"

    _rows = list(
        zip(
            held_out,
            zip(base_report.completions, base_report.per_prompt["accuracy"]),
            zip(aligned_report.completions, aligned_report.per_prompt["accuracy"]),
            zip(grpo_report.completions, grpo_report.per_prompt["accuracy"]),
        )
    )
    mo.vstack(
        [
            mo.md(f"The first {min(8, len(_rows))} held-out pictures, each model's greedy answer:"),
            picture_gallery(
                (
                    row["image"],
                    "<br>".join(
                        [
                            f"gold **{row['answer']}**",
                            f"base: {_answer(*b)}",
                            f"aligned: {_answer(*a)}",
                            f"GRPO: {_answer(*g)}",
                        ]
                    ),
                )
                for row, b, a, g in _rows[:8]
            ),
        ]
    )
    return


@app.cell
def test_an_image_becomes_one_token_per_patch(
    all_total, image_tokens, lm_module, part_counts, patch, shown_ids, side, trainable_total
):
    from grpo_kit.models.vlm import SMOLVLM_CPU_VISION as _VISION
    from grpo_kit.models.vlm import image_token_count as _count

    assert image_tokens == _count(_VISION) == (side // patch) ** 2 == 16
    assert len(shown_ids) > image_tokens  # the question's text tokens are there too
    _vision, _projector, _lm = part_counts.values()
    # trained whole (under a LoRA, peft trains a copy of each: modules_to_save, so half the count trains)
    assert _vision[1] > 0 and _projector[1] > 0 and _vision[0] in (_vision[1], 2 * _vision[1])
    _lora = sum(p.numel() for n, p in lm_module.named_parameters() if "lora_" in n)
    assert _lm[1] == _lora  # the language model's own weights are frozen; only a LoRA on it (lm_lora) trains
    assert trainable_total == _vision[1] + _projector[1] + _lora < all_total / 10  # a few % of the model
    return


@app.cell
def test_no_stage_sees_a_measured_picture(caption_rows, held_out, train_dataset, transfer):
    _measured = {r["image"].tobytes() for r in [*held_out, *transfer]}
    assert len(_measured) == len(held_out) + len(transfer)  # pictures, not one repeated
    assert not _measured & {_image.tobytes() for _image in train_dataset["image"]}  # GRPO's training pictures
    assert not _measured & {r["image"].tobytes() for r in caption_rows}  # the alignment's captions
    return


@app.cell
def test_alignment_trained_the_tower_and_projector_only(alignment, alignment_losses, parts_moved, recipe):
    assert len(alignment_losses) == alignment.steps and all(loss > 0 for loss in alignment_losses)
    _expected = {"vision tower": True, "projector": True, "language model": False}  # its own weights frozen
    if "lm_lora" in recipe.trainable_parts:
        _expected["LoRA on the language model"] = True
    assert parts_moved == _expected
    return


@app.cell
def test_grpo_trained_from_the_aligned_model_and_was_measured_on_the_same_pictures(
    aligned_report,
    base_report,
    changes,
    grpo_report,
    held_out,
    held_out_curve,
    step_metrics,
    train_steps,
):
    assert len(step_metrics) == train_steps and all(0.0 <= r["reward"] <= 1.0 for r in step_metrics)
    assert base_report.num_prompts == aligned_report.num_prompts == grpo_report.num_prompts == len(held_out)
    # the last held-out point during training is the final model, decoded as the evaluation after
    assert held_out_curve[-1] == (train_steps, grpo_report.metrics["accuracy"])
    for _rows in changes.values():
        _align, _grpo, _both = _rows.values()
        assert _align.after == _grpo.before and _align.before == _both.before and _grpo.after == _both.after
        assert abs(_align.mean_diff + _grpo.mean_diff - _both.mean_diff) < 1e-9
        for _c in _rows.values():
            assert _c.ci_low <= _c.mean_diff <= _c.ci_high
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    **What the recipe's measured runs showed** lives in docs/results.md, section "GRPO that sees": base,
    aligned and after GRPO on both sets, with their CIs (`grpo-kit train --recipe shapes-vlm-aligned-cpu --loop trl`
    runs the same three stages and writes the same three columns to report.md). This lesson quotes none of
    it: the tables above are what this run measured.

    Try next: GRPO from the blind base model instead of the aligned one (pass `base_model` to the Train cell's
    `load`) and compare the zero-variance groups; other tasks (`get_recipe("shapes-vlm-aligned-cpu",
    dataset_kwargs={"tasks": ["count"]})`); no LoRA on the language model (`trainable_parts=("vision_tower",
    "projector")`, `lora=None`); or your own pictures: a JSONL of `{"image", "prompt", "answer"}` lines
    (`datasets_prep.images.load_image_tasks`; `<image>` marks where the picture goes in the prompt).
    """)
    return


if __name__ == "__main__":
    app.run()
