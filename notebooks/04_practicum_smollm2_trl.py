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
    # Lesson 4 · Practicum: SmolLM2 + TRL + LoRA

    The Hugging Face LLM course's first GRPO practicum (chapter 12.5): teach
    **SmolLM2-135M-Instruct** to write TL;DR summaries of a target length, with TRL's
    `GRPOTrainer`, a LoRA adapter and a single reward — the length reward.

    grpo-kit packages the course's settings as the recipe `smoltldr-length` and runs them through
    `grpo_kit.trainers.trl_path`, which checks every setting *before* the model loads (batch sizes that do not
    hold whole groups, arguments TRL 1.x retired, bf16 on a GPU that cannot do it, …) and writes
    `metrics.jsonl` and a reward curve beside the adapter.
    """)
    return


@app.cell
def _(mo):
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.teaching.lesson_helpers import lesson_size

    size = lesson_size()
    if size.gpu:
        # The course: 8 completions of ≤ 96 tokens per prompt, lr 2e-5, one epoch of smoltldr.
        recipe = get_recipe("smoltldr-length")
    else:
        # CPU: the course's own reward and prompts (plain-text posts, 50 characters), pitfall included, on the
        # embedded SmolLM2-135M and synthetic posts, sized to move in 6 steps (`grpo-kit recipes smoltldr-course-cpu`).
        _lr = size.args.get("learning-rate")
        recipe = get_recipe("smoltldr-course-cpu", **({"learning_rate": float(_lr)} if _lr else {}))
    train_steps = size.steps(gpu=200, cpu=recipe.training["max_steps"])
    # Part 2: the recipe `grpo-kit train` runs (a chat prompt, a target in tokens); on a CPU its 8-step variant,
    # measured in this lesson's default run: |length - 16| 20.1 -> 5.3 tokens on 32 held-out posts, 95 % CI of
    # the change [-20.8, -9.4]; the whole lesson took 328 s on 2 cores.
    # (its held-out curve during training, eval_steps, is grpo-kit train's: this lesson evaluates in its own cells)
    token_recipe = (
        get_recipe("smoltldr-length-small", eval_steps=None)
        if size.gpu
        else get_recipe("smoltldr-length-quick")
    )
    token_eval_prompts = size.pick(gpu=32, cpu=32, small=16)
    output_root = size.output_dir("lesson4")
    mo.callout(
        mo.md(
            f"**{'GPU: the course settings' if size.gpu else 'CPU: small settings'}** — recipe "
            f"`{recipe.name}`, model `{recipe.model}`, {train_steps} steps, "
            f"{recipe.training['num_generations']} completions of ≤ {recipe.training['max_completion_length']} "
            f"tokens per prompt, learning rate {recipe.training['learning_rate']:g}; then recipe "
            f"`{token_recipe.name}` for {token_recipe.training['max_steps']} steps. Outputs go to "
            f"`{output_root}`."
            + (
                ""
                if size.gpu
                else "\n\nOn a GPU this notebook runs the course's settings (`smoltldr-length`: 8 × 96 tokens, "
                "the real smoltldr data, ~1 h on an A10G)."
            )
        ),
        kind="info" if size.gpu else "warn",
    )
    return output_root, recipe, token_eval_prompts, token_recipe, train_steps


@app.cell
def _(mo, recipe):
    from grpo_kit.support.markdown_text import text_block

    train_dataset = recipe.load_dataset()
    mo.md(
        f"""
    ## 1 · Data

    {len(train_dataset)} prompts. Offline, `smoltldr`'s Hub copy (`mlabonne/smoltldr`) is replaced by
    `datasets_prep.synthetic_tldr` — Reddit-style posts in the same schema (`prompt`, `completion`).
    One prompt:

    > {text_block(train_dataset[0]["prompt"][:500])}
    """
    )
    return text_block, train_dataset


@app.cell
def _(mo, recipe):
    mo.md(
        f"""
    ## 2 · Reward and LoRA

    The reward is the course's `reward_len`, fixed and made explicit: `rewards.length_reward(ideal_length=50,
    unit="chars")` gives $-|50 - \\text{{len}}|$. The course measured **characters** with `len` while its text
    says tokens; this part keeps characters on purpose so that it runs what the course ran — and meets what
    the course's setting invites (section 4). Lesson 3 shows the difference.

    LoRA: rank {recipe.lora.r}, alpha {recipe.lora.lora_alpha}, on `{recipe.lora.target_modules}` layers —
    a few million trainable parameters instead of 135 million. TRL receives it as `peft_config`.
    """
    )
    return


@app.cell
def _(recipe, train_dataset):
    from grpo_kit.runs.held_out import held_out_rows
    from grpo_kit.teaching.lesson_runs import evaluate_with_spinner

    # Held-out posts: generated after the training rows, never one the run trains on (what `grpo-kit train`
    # evaluates too). 32 prompts: enough to tell learning from noise with a confidence interval.
    held_out = held_out_rows(recipe, 32, training=train_dataset)
    return evaluate_with_spinner, held_out, held_out_rows


@app.cell
def _():
    from grpo_kit.teaching.lesson_helpers import run_button, should_run
    from grpo_kit.teaching.lesson_runs import button_panel

    measure_button = run_button(
        "Measure the base model: pre-flight on 4 posts, then greedy answers to 32 held-out posts",
        kind="neutral",
    )
    button_panel(
        "### Before training: the base model\n\nA pre-flight (what `grpo-kit train --preflight` runs) "
        "and the held-out evaluation every later number is compared with; a minute or two on a CPU. "
        "The Train button appears with the pre-flight's verdict.",
        measure_button,
    )
    return measure_button, run_button, should_run


@app.cell
def _(measure_button, mo, recipe, should_run, train_dataset):
    from grpo_kit.models import load_model
    from grpo_kit.teaching.lesson_runs import preflight_with_spinner

    mo.stop(not should_run(measure_button), mo.md("Press the button to measure the base model."))
    base_model, base_tokenizer = load_model(recipe.model)
    # G completions for a few prompts at the recipe's settings. GRPO learns only from reward differences
    # within a group; no variance, no signal.
    preflight_report = preflight_with_spinner(
        recipe, base_model, base_tokenizer, train_dataset, what="posts", unit="sampled completions"
    )
    return base_model, base_tokenizer, load_model, preflight_report


@app.cell
def _(base_model, base_tokenizer, evaluate_with_spinner, held_out, preflight_report, recipe):
    assert preflight_report.num_prompts  # measured after the pre-flight, behind the same button
    # Greedy answers scored per prompt (grpo_kit.evaluation): the decoding is the same before and after,
    # so only the weights differ.
    before_report = evaluate_with_spinner(recipe, base_model, base_tokenizer, held_out, what="held-out posts")
    return (before_report,)


@app.cell
def _(before_report, preflight_report, train_steps):
    from grpo_kit.evaluation import headline_metric
    from grpo_kit.teaching.lesson_runs import train_section

    train_button, _section = train_section(
        f"Train {train_steps} steps with TRL",
        f"## 3 · Train\n\nThe base model's distance from the target on {before_report.num_prompts} "
        f"held-out posts: {before_report.metrics[headline_metric(before_report.metrics)]:.1f} on average. "
        "The reward curve updates after every step (TRL logs every step here).",
        preflight_report,
    )
    _section
    return (train_button,)


@app.cell
def _(before_report, mo, output_root, recipe, should_run, train_button, train_steps):
    from grpo_kit.teaching.lesson_runs import train_fresh

    mo.stop(not should_run(train_button), mo.md("Press the button to train."))
    assert before_report.num_prompts  # evaluate the untouched base model first
    # A fresh copy of the base model each time (pressing the button again starts over), trained with the live
    # reward curve in place of the progress bar.
    run, tokenizer = train_fresh(
        recipe, output_dir=output_root / "course-run", max_steps=train_steps, save_final=True
    )
    return run, tokenizer, train_fresh


@app.cell
def _(mo, run):
    from grpo_kit.teaching.lesson_runs import last_logged, metrics_table, saved_curve

    _last = last_logged(run)
    _names = [
        "reward",
        "reward_std",
        "completions/mean_length",
        "completions/clipped_ratio",
        "loss",
        "entropy",
        "frac_reward_zero_std",
    ]
    mo.vstack(
        [
            saved_curve(run),
            mo.md(
                f"`{run.metrics_path}` holds every logged step with TRL's metric names. The last one:\n\n"
                + metrics_table(_last, _names)
                + "\n\nThe `loss` is not a progress measure: with β = 0 and one update per batch its "
                "value says how the batch's advantages and lengths came out, not how well the model does "
                "(lesson 2; here it ended at "
                + (f"{_last['loss']:.3g}" if _last.get("loss") is not None else "an unlogged value")
                + "). Watch the reward."
            ),
        ]
    )
    return (saved_curve,)


@app.cell
def _(before_report, held_out, recipe, run, tokenizer):
    from grpo_kit.evaluation.reward_hacking import judge_headline
    from grpo_kit.teaching.lesson_runs import evaluate_trained

    after_report = evaluate_trained(recipe, run, tokenizer, held_out, what="held-out posts")
    # Paired per prompt (after − before), with a seeded bootstrap 95 % CI: the claim rests on this. Then the
    # answers themselves are read: "improved" becomes "reward hack suspected" when they collapsed.
    comparison, hack_signs = judge_headline(before_report, after_report)
    return after_report, comparison, evaluate_trained, hack_signs, judge_headline


@app.cell
def _(mo):
    from grpo_kit.support.markdown_text import table_cell

    def side_by_side(before_report, after_report, metric: str, rows: int = 4):
        """A few held-out answers before and after, each with its score on ``metric``."""
        _pairs = list(
            zip(
                before_report.completions,
                after_report.completions,
                before_report.per_prompt[metric],
                after_report.per_prompt[metric],
            )
        )[:rows]
        return mo.md(
            "| before | after |\n|:---|:---|\n"
            + "\n".join(
                f"| {table_cell(b)} ({eb:.0f}) | {table_cell(a)} ({ea:.0f}) |" for b, a, eb, ea in _pairs
            )
        )

    def change_line(comparison) -> str:
        """The comparison as the lesson states it: means, change, CI, verdict."""
        return (
            f"**{comparison.before:.1f}** before → **{comparison.after:.1f}** after; change "
            f"{comparison.mean_diff:+.1f}, {comparison.level:.0%} CI [{comparison.ci_low:+.1f}, "
            f"{comparison.ci_high:+.1f}] — **{comparison.verdict}**"
        )

    return change_line, side_by_side


@app.cell
def _(after_report, before_report, change_line, comparison, hack_signs, mo, side_by_side):
    mo.vstack(
        [
            mo.md(
                f"## 4 · Before and after (greedy, {comparison.n} held-out posts)\n\n"
                f"`{comparison.metric}` (distance from the 50-character target): {change_line(comparison)}. "
                "The interval comes from resampling the prompts (paired bootstrap, `grpo_kit.evaluation.compare`): "
                "when it excludes 0, the change is not noise of a few lucky prompts.\n\n"
                + (
                    f"**The report card calls this a reward hack: {'; '.join(hack_signs)}.** The course's "
                    "setting (a plain-text prompt, a target counted in characters) is learned by saying less and "
                    "less: an empty answer is exactly 50 characters off, so the reward rises as the answers "
                    "vanish. The CI measured the reward, and the reward did rise; only the answers show what "
                    "was learned. Section 5 trains the recipe `grpo-kit train` uses instead.\n\n"
                    if hack_signs
                    else "The answers did not collapse (none of the report card's signs: empty, shrunken or "
                    "identical answers, answers that end at their first token, reasoning without steps; "
                    "`grpo_kit.evaluation.reward_hacking`): read them below.\n\n"
                )
                + "Four of the answers (distance from the target):"
            ),
            side_by_side(before_report, after_report, comparison.metric),
        ]
    )
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 5 · The same task, set so that it learns: a chat prompt, a target in tokens

    Recipe `smoltldr-length-small` (what `grpo-kit train` runs) changes two things:

    * the post goes into a **chat prompt** ("Summarize this post in one short sentence."), so the instruct
      model answers instead of stopping at once;
    * the target is **16 tokens**, and an empty answer is 16 off while a sentence can be 0 off: saying nothing
      no longer pays best.

    Same model, same LoRA, same evaluation (its own held-out posts, greedy, paired CI).
    """)
    return


@app.cell
def _(run_button, token_recipe):
    token_button = run_button(
        f"Measure, train {token_recipe.training['max_steps']} steps of `{token_recipe.name}` and measure again"
    )
    token_button
    return (token_button,)


@app.cell
def _(
    evaluate_with_spinner,
    held_out_rows,
    load_model,
    mo,
    should_run,
    token_button,
    token_eval_prompts,
    token_recipe,
):
    mo.stop(not should_run(token_button), mo.md("Press the button to train the chat-prompt recipe."))
    token_held_out = held_out_rows(token_recipe, token_eval_prompts)
    _base, token_tokenizer = load_model(token_recipe.model)
    token_before = evaluate_with_spinner(
        token_recipe, _base, token_tokenizer, token_held_out, what="held-out posts"
    )
    return token_before, token_held_out, token_tokenizer


@app.cell
def _(output_root, saved_curve, token_before, token_recipe, train_fresh):
    assert token_before.num_prompts  # the base model first
    token_run, _ = train_fresh(token_recipe, output_dir=output_root / "trl-run", save_final=True)
    saved_curve(token_run, missing="")
    return (token_run,)


@app.cell
def _(
    change_line,
    evaluate_trained,
    judge_headline,
    mo,
    side_by_side,
    token_before,
    token_held_out,
    token_recipe,
    token_run,
    token_tokenizer,
):
    trained_model = token_run.trainer.model
    token_after = evaluate_trained(
        token_recipe, token_run, token_tokenizer, token_held_out, what="held-out posts"
    )
    token_comparison, token_hack_signs = judge_headline(token_before, token_after)
    mo.vstack(
        [
            mo.md(
                f"`{token_comparison.metric}` (distance from the 16-token target, {token_comparison.n} held-out "
                f"posts): {change_line(token_comparison)}"
                + (f" ({'; '.join(token_hack_signs)})" if token_hack_signs else "")
                + ". Four of its answers (distance from 16 tokens):"
            ),
            side_by_side(token_before, token_after, token_comparison.metric),
        ]
    )
    return token_comparison, token_hack_signs, trained_model


@app.cell
def _(comparison, mo, token_comparison, token_recipe):
    def _row(label: str, setting: str, c) -> str:
        return (
            f"| {label} | {setting} | {c.mean_diff:+.1f} [{c.ci_low:+.1f}, {c.ci_high:+.1f}] (n = {c.n}) "
            f"| {c.verdict} |"
        )

    mo.md(
        "### Side by side\n\n| recipe | prompt, target | held-out change of the distance [95 % CI] | verdict |\n"
        "|:---|:---|:---|:---|\n"
        + _row("course 12.5", "plain text, 50 characters", comparison)
        + "\n"
        + _row(f"`{token_recipe.name}`", "chat, 16 tokens", token_comparison)
    )
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 6 · Merge and save — with the tokenizer

    The model that learned (section 5). `merge_and_unload()` folds the LoRA weights into the base model, so
    the result loads without peft. The course pushed only the model; `grpo_kit.export.save_merged` always saves the tokenizer
    and chat template beside it, then **reloads** the folder and checks that it produces the same
    greedy tokens as the adapter model in memory.
    """)
    return


@app.cell
def _(output_root, token_tokenizer, trained_model):
    from grpo_kit.export import save_merged

    merged_report = save_merged(trained_model, token_tokenizer, output_root / "merged", overwrite=True)
    return (merged_report,)


@app.cell
def _(load_model, merged_report, mo, token_recipe):
    from grpo_kit.evaluation.samples import generate_answers

    reloaded_model, reloaded_tokenizer = load_model(str(merged_report.path))
    _cat = (
        "The cat (Felis catus) is a small domesticated carnivorous mammal. It is the only domesticated species "
        "of the family Felidae. It is commonly kept as a pet and farm cat."
    )
    # the course's cat document, asked the way the recipe asks (its chat prompt)
    _prompt = [{"role": "user", "content": f"{token_recipe.dataset_kwargs['instruction']}\n\n{_cat}"}]
    reloaded_answer = generate_answers(
        reloaded_model,
        reloaded_tokenizer,
        [_prompt],
        max_new_tokens=token_recipe.training["max_completion_length"],
    )[0]
    mo.md(
        f"Saved to `{merged_report.path}` — verified by reloading: **{'yes' if merged_report.verified else 'NO'}**."
        f"\n\nThe reloaded model on the course's cat document: {reloaded_answer!r}"
    )
    return (reloaded_answer,)


@app.cell
def test_course_setting_collapses_and_token_recipe_learns(
    comparison,
    hack_signs,
    merged_report,
    preflight_report,
    reloaded_answer,
    token_comparison,
    token_hack_signs,
):
    # One test cell for the whole run: pytest re-runs a test cell's ancestors, and training is the costly one.
    # The course's setting: the distance fell with a CI excluding 0, and the verdict says whether the answers
    # collapsed on the way (the character target invites it).
    assert comparison.metric.startswith("length_error/") and comparison.n == 32, comparison
    assert comparison.ci_high < 0, comparison.summary()
    assert comparison.verdict == ("reward hack suspected" if hack_signs else "improved"), comparison.summary()
    # Pre-flight says go: on its 4 × 4 draws some groups carry a signal (how many is the draw's luck: 1-3 of 4).
    assert preflight_report.go and preflight_report.zero_std_share < 1.0, preflight_report.summary()
    # The token recipe learns without collapsing: its CI excludes 0 and nothing is flagged.
    assert token_comparison.metric == "length_error/length_reward_16_tokens", token_comparison
    assert token_comparison.ci_high < 0 and not token_hack_signs, (
        token_comparison.summary(),
        token_hack_signs,
    )
    assert token_comparison.verdict == "improved", token_comparison.summary()
    assert merged_report.verified, merged_report.details
    _files = {p.name for p in merged_report.path.iterdir()}
    assert "config.json" in _files and "tokenizer_config.json" in _files, _files
    assert not any(name.startswith("adapter_") for name in _files)  # merged: no peft needed
    assert reloaded_answer.strip(), reloaded_answer  # the model that learned still answers
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    Next: **Lesson 5** opens the black box — the same training step without TRL, line by line.
    """)
    return


if __name__ == "__main__":
    app.run()
