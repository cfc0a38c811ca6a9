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
    `grpo_kit.trl_path`, which checks every setting *before* the model loads (batch sizes that do not
    hold whole groups, arguments TRL 1.x retired, bf16 on a GPU that cannot do it, …) and writes
    `metrics.jsonl` and a reward curve beside the adapter.
    """)
    return


@app.cell
def _(mo):
    import tempfile
    from pathlib import Path

    from grpo_kit.lesson_helpers import cli_args, on_gpu
    from grpo_kit.recipes import get_recipe

    full_settings = on_gpu()
    _args = cli_args()
    if full_settings:
        # The course: 8 completions of ≤ 96 tokens per prompt, lr 2e-5, one epoch of smoltldr.
        recipe = get_recipe("smoltldr-length")
        train_steps = int(_args.get("max-steps") or 200)
    else:
        # CPU: the embedded SmolLM2-135M, synthetic TL;DR posts, 4 completions of ≤ 48 tokens. A few steps
        # at a higher learning rate so the change is visible in a couple of minutes.
        # The course's own reward and prompts (plain-text posts, 50 characters) rather than the CPU recipe's
        # chat prompt and tokens (`grpo-kit train`): this lesson follows course 12.5.
        recipe = get_recipe(
            "smoltldr-length",
            small=True,
            dataset_kwargs={},
            rewards=get_recipe("smoltldr-length").rewards,
            learning_rate=float(_args.get("learning-rate") or 1.5e-3),
            per_device_train_batch_size=4,
            max_completion_length=48,
        )
        train_steps = int(_args.get("max-steps") or 6)
    output_root = Path(_args.get("output-dir") or tempfile.mkdtemp(prefix="grpo-kit-lesson4-"))
    mo.callout(
        mo.md(
            f"**{'GPU: the course settings' if full_settings else 'CPU: small settings'}** — recipe "
            f"`{recipe.name}`, model `{recipe.model}`, {train_steps} steps, "
            f"{recipe.training['num_generations']} completions of ≤ {recipe.training['max_completion_length']} "
            f"tokens per prompt, learning rate {recipe.training['learning_rate']:g}. Outputs go to `{output_root}`."
            + (
                ""
                if full_settings
                else "\n\nOn a GPU this notebook runs the course's settings (`smoltldr-length`: 8 × 96 tokens, "
                "the real smoltldr data, ~1 h on an A10G)."
            )
        ),
        kind="info" if full_settings else "warn",
    )
    return output_root, recipe, train_steps


@app.cell
def _(mo, recipe):
    train_dataset = recipe.load_dataset()
    mo.md(
        f"""
    ## 1 · Data

    {len(train_dataset)} prompts. Offline, `smoltldr`'s Hub copy (`mlabonne/smoltldr`) is replaced by
    `datasets_prep.synthetic_tldr` — Reddit-style posts in the same schema (`prompt`, `completion`).
    One prompt:

    > {train_dataset[0]["prompt"][:500]}
    """
    )
    return (train_dataset,)


@app.cell
def _(mo, recipe):
    mo.md(
        f"""
    ## 2 · Reward and LoRA

    The reward is the course's `reward_len`, fixed and made explicit: `rewards.length_reward(ideal_length=50,
    unit="chars")` gives $-|50 - \\text{{len}}|$. The course measured **characters** with `len` while its text
    says tokens; the recipe keeps characters on purpose so that the result matches the course — about one short
    sentence (lesson 3 shows the difference).

    LoRA: rank {recipe.lora.r}, alpha {recipe.lora.lora_alpha}, on `{recipe.lora.target_modules}` layers —
    a few million trainable parameters instead of 135 million. TRL receives it as `peft_config`.
    """
    )
    return


@app.cell
def _(recipe):
    from grpo_kit.run import held_out_rows

    # Held-out posts: the rows after the training rows, which the run never sees (what `grpo-kit train`
    # evaluates too). 32 prompts: enough to tell learning from noise with a confidence interval.
    held_out = held_out_rows(recipe, 32)
    return (held_out,)


@app.cell
def _(held_out, recipe):
    from grpo_kit.models import load_model
    from grpo_kit.run import evaluate_held_out

    def evaluate_model(model, tokenizer):
        """Greedy answers to the held-out posts, scored per prompt (grpo_kit.evaluate): the decoding is the
        same before and after, so only the weights differ."""
        return evaluate_held_out(recipe, model, tokenizer, recipe.build_reward_funcs(tokenizer), held_out)

    base_model, base_tokenizer = load_model(recipe.model)
    before_report = evaluate_model(base_model, base_tokenizer)
    return base_model, base_tokenizer, before_report, evaluate_model, load_model


@app.cell
def _(base_model, base_tokenizer, mo, recipe, train_dataset):
    from grpo_kit.generation import Decoding
    from grpo_kit.preflight import check

    # Pre-flight (what `grpo-kit train --preflight` runs): G completions for a few prompts with the run's
    # settings. GRPO learns only from reward differences within a group; no variance, no signal.
    preflight_report = check(
        base_model,
        base_tokenizer,
        train_dataset,
        recipe.build_reward_funcs(base_tokenizer),
        num_prompts=4,
        num_generations=recipe.training["num_generations"],
        decoding=Decoding.from_training(recipe.training),
    )
    mo.md(
        "### Pre-flight: is there anything to learn?\n\n"
        f"```\n{preflight_report.summary()}\n```\n\n"
        "Zero-std groups give no learning signal; clipped completions (no EOS) all score alike."
    )
    return (preflight_report,)


@app.cell
def _(mo, train_steps):
    from grpo_kit.lesson_helpers import run_button

    train_button = run_button(f"Train {train_steps} steps with TRL")
    mo.vstack(
        [
            mo.md("## 3 · Train\n\nThe reward curve updates after every step (TRL logs every step here)."),
            train_button,
        ]
    )
    return (train_button,)


@app.cell
def _(before_report, load_model, mo, output_root, recipe, train_button, train_steps):
    from grpo_kit import trl_path
    from grpo_kit.lesson_helpers import LiveRewardCurve, should_run

    mo.stop(not should_run(train_button), mo.md("Press the button to train."))
    assert before_report.num_prompts  # evaluate the untouched base model first
    live_curve = LiveRewardCurve(f"{recipe.name}: reward per step")
    # A fresh copy of the base model each time: pressing the button again starts over.
    _model, tokenizer = load_model(recipe.model)
    run = trl_path.train(
        recipe,
        model=_model,
        tokenizer=tokenizer,
        output_dir=output_root / "trl-run",
        max_steps=train_steps,
        callbacks=[live_curve.trainer_callback()],
        disable_tqdm=True,  # the live curve replaces the progress bar
    )
    trained_model = run.trainer.model
    return run, tokenizer, trained_model


@app.cell
def _(mo, run):
    _last = [r for r in run.log_history if r.get("reward") is not None][-1]
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
            mo.image(src=run.reward_curve_path.read_bytes())
            if run.reward_curve_path
            else mo.md("(no curve)"),
            mo.md(
                f"`{run.metrics_path}` holds every logged step with TRL's metric names. The last one:\n\n"
                "| metric | value |\n|---|---|\n"
                + "\n".join(f"| `{n}` | {_last[n]:.4g} |" for n in _names if _last.get(n) is not None)
                + "\n\nThe `loss` is not a progress measure: with β = 0 and one update per batch its "
                "value says how the batch's advantages and lengths came out, not how well the model does "
                "(lesson 2; here it ended at "
                + (f"{_last['loss']:.3g}" if _last.get("loss") is not None else "an unlogged value")
                + "). Watch the reward."
            ),
        ]
    )
    return


@app.cell
def _(before_report, evaluate_model, tokenizer, trained_model):
    from grpo_kit.evaluate import compare
    from grpo_kit.report_card import headline_metric
    from grpo_kit.reward_hacking import flag_reward_hacking

    after_report = evaluate_model(trained_model, tokenizer)
    # Paired per prompt (after − before), with a seeded bootstrap 95 % CI: the claim rests on this. Then the
    # answers themselves are read: "improved" becomes "reward hack suspected" when they collapsed.
    _metric = headline_metric(before_report.per_prompt)
    _flagged, hack_signs = flag_reward_hacking(
        {_metric: compare(before_report, after_report, metric=_metric)}, before_report, after_report
    )
    comparison = _flagged[_metric]
    return after_report, comparison, hack_signs


@app.cell
def _(after_report, before_report, comparison, hack_signs, mo):
    from grpo_kit.markdown_text import table_cell as _cell

    _metric = comparison.metric
    _rows = "\n".join(
        f"| {_cell(b)} ({eb:.0f}) | {_cell(a)} ({ea:.0f}) |"
        for b, a, eb, ea in list(
            zip(
                before_report.completions,
                after_report.completions,
                before_report.per_prompt[_metric],
                after_report.per_prompt[_metric],
            )
        )[:4]
    )
    mo.md(
        f"## 4 · Before and after (greedy, {comparison.n} held-out posts)\n\n"
        f"`{_metric}` (distance from the 50-character target): **{comparison.before:.1f}** before → "
        f"**{comparison.after:.1f}** after; change {comparison.mean_diff:+.1f}, "
        f"{comparison.level:.0%} CI [{comparison.ci_low:+.1f}, {comparison.ci_high:+.1f}] — "
        f"**{comparison.verdict}**. The interval comes from resampling the prompts (paired bootstrap, "
        "`grpo_kit.evaluate.compare`): when it excludes 0, the change is not noise of a few lucky prompts.\n\n"
        + (
            f"**The report card calls this a reward hack: {'; '.join(hack_signs)}.** The course's setting "
            "(a plain-text prompt, a target counted in characters) is learned by saying less and less: an "
            "empty answer is exactly 50 characters off, so the reward rises as the answers vanish. The CI "
            "measured the reward, and the reward did rise; only the answers show what was learned. "
            "`grpo-kit train` trains the chat-prompt, token-target recipe instead (README, the main job).\n\n"
            if hack_signs
            else "The answers did not collapse (no empty, shrunken or identical answers; "
            "`grpo_kit.reward_hacking`): read them below.\n\n"
        )
        + "Four of the answers (distance from the target):\n\n"
        "| before | after |\n|---|---|\n" + _rows
    )
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 5 · Merge and save — with the tokenizer

    `merge_and_unload()` folds the LoRA weights into the base model, so the result loads without
    peft. The course pushed only the model; `grpo_kit.export.save_merged` always saves the tokenizer
    and chat template beside it, then **reloads** the folder and checks that it produces the same
    greedy tokens as the adapter model in memory.
    """)
    return


@app.cell
def _(output_root, tokenizer, trained_model):
    from grpo_kit.export import save_merged

    merged_report = save_merged(trained_model, tokenizer, output_root / "merged", overwrite=True)
    return (merged_report,)


@app.cell
def _(load_model, merged_report, mo):
    from grpo_kit.samples import generate_answers

    reloaded_model, reloaded_tokenizer = load_model(str(merged_report.path))
    _cat = (
        "Summarize in one sentence: The cat (Felis catus) is a small domesticated carnivorous mammal. It is "
        "the only domesticated species of the family Felidae. It is commonly kept as a pet and farm cat."
    )
    reloaded_answer = generate_answers(reloaded_model, reloaded_tokenizer, [_cat], max_new_tokens=48)[0]
    mo.md(
        f"Saved to `{merged_report.path}` — verified by reloading: **{merged_report.verified}**.\n\n"
        f"The reloaded model on the course's cat document: {reloaded_answer!r}"
    )
    return (reloaded_answer,)


@app.cell
def test_trained_beats_untrained_and_merged_model_reloads(
    comparison, hack_signs, merged_report, preflight_report, reloaded_answer
):
    # One test cell for the whole run: pytest re-runs a test cell's ancestors, and training is the costly one.
    # The lesson's claim: the distance from the target fell, with a 95 % CI that excludes 0 — and the verdict
    # says whether the answers collapsed on the way (the course's character target invites it).
    assert comparison.metric.startswith("length_error/") and comparison.n == 32, comparison
    assert comparison.ci_high < 0, comparison.summary()
    assert comparison.verdict == ("reward hack suspected" if hack_signs else "improved"), comparison.summary()
    assert preflight_report.zero_std_share < 0.5, preflight_report.summary()  # the groups carry a signal
    assert merged_report.verified, merged_report.details
    _files = {p.name for p in merged_report.path.iterdir()}
    assert "config.json" in _files and "tokenizer_config.json" in _files, _files
    assert not any(name.startswith("adapter_") for name in _files)  # merged: no peft needed
    assert isinstance(reloaded_answer, str)
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    Next: **Lesson 5** opens the black box — the same training step without TRL, line by line.
    """)
    return


if __name__ == "__main__":
    app.run()
