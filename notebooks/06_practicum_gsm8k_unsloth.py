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
    # Lesson 6 · Practicum: GSM8K with Unsloth QLoRA + vLLM

    The course's second practicum (LLM course 12.6): teach a model to **reason in a fixed format and
    answer grade-school math**, with five reward functions, a 4-bit quantized model with a LoRA
    adapter (QLoRA) trained by [Unsloth](https://github.com/unslothai/unsloth), and
    [vLLM](https://github.com/vllm-project/vllm) generating the completions inside the training
    process.

    grpo-kit packages it as the recipe `gsm8k-unsloth` (`grpo_kit.unsloth_path`, GPU only) and a
    CPU twin, `gsm8k-cpu`: the same five rewards on the embedded SmolLM2-135M and offline synthetic
    GSM8K problems, trained by TRL (`grpo_kit.trl_path`): 40 steps, about 12 minutes on two cores.
    """)
    return


@app.cell
def _(mo):
    from grpo_kit.lesson_helpers import lesson_size
    from grpo_kit.recipes import get_recipe

    _size = lesson_size()
    use_unsloth = _size.gpu
    # GPU: gsm8k-unsloth (Gemma-3-1B-it, 4-bit QLoRA r=32, vLLM, 250 steps, lr 5e-6). CPU: gsm8k-cpu as measured
    # (40 steps, 40 held-out problems); the project's CI (or --small) runs 2 steps on 3 problems, which shows
    # every part run but not the result.
    recipe = get_recipe("gsm8k-unsloth", small=not use_unsloth)
    train_steps = _size.steps(gpu=recipe.training["max_steps"], cpu=recipe.training["max_steps"], small=2)
    eval_size = _size.pick(gpu=50, cpu=40, small=3)
    output_root = _size.output_dir("lesson6")
    _banner = (
        mo.callout(
            mo.md(
                f"**GPU: the course's settings** — `{recipe.name}`: `{recipe.model}` in 4-bit with a LoRA "
                f"adapter (r = {recipe.lora.r}), vLLM generation, {train_steps} steps, "
                f"{recipe.training['num_generations']} completions of ≤ {recipe.training['max_completion_length']} "
                f"tokens, evaluated on {eval_size} GSM8K test problems."
            ),
            kind="success",
        )
        if use_unsloth
        else mo.callout(
            mo.md(
                f"""
    **CPU version — the same pipeline, scaled down.** Recipe `{recipe.name}`: the embedded
    SmolLM2-135M (not Gemma-3-1B), plain LoRA in float32 (no 4-bit: bitsandbytes needs CUDA),
    generation by `transformers` (no vLLM: it needs CUDA), offline synthetic GSM8K problems,
    {train_steps} steps of {recipe.training["num_generations"]} completions of
    ≤ {recipe.training["max_completion_length"]} tokens, {eval_size} held-out problems.

    **What differs from the course, and why** (the recipe's description says it too): each prompt
    shows one worked exchange in the course's format before the question — from the system prompt
    alone the 135M model writes the tags for none of 40 held-out problems, so every group of
    completions scores the same and GRPO has nothing to learn from (`grpo-kit preflight` says NO-GO);
    and the learning rate is 5e-4 (constant), because 40 steps must move the adapter, not 250.
    What to expect: the format is learned (strict-format rate on held-out problems, greedy, measured
    before and after with a 95 % confidence interval below); a 135M model rarely gets the answers right.

    **What the GPU version adds:** Unsloth's 4-bit QLoRA of a 1B model (≈ 4 GB of GPU memory),
    vLLM sampling many times faster than `generate`, 250 steps of 6 completions of up to 768 tokens —
    enough for the model to adopt the format and start getting answers right.
    Open this notebook on a GPU runtime (Colab: Runtime → Change runtime type → T4) to train for real.
    """
            ),
            kind="warn",
        )
    )
    _banner
    return eval_size, output_root, recipe, train_steps, use_unsloth


@app.cell
def _(mo, recipe):
    from datasets_prep import SYSTEM_PROMPT

    train_dataset = recipe.load_dataset()
    mo.md(
        f"""
    ## 1 · Data: GSM8K in a reasoning format

    {len(train_dataset)} training problems (`{recipe.dataset_source or "openai/gsm8k"}`). Each prompt is a
    conversation: the course's system prompt, {
            "one worked exchange (a problem and its answer in the format), "
            if recipe.dataset_kwargs.get("worked_example")
            else ""
        }then the question. The `answer` column keeps the
    number after `####` in GSM8K's solution.

    **system:**
    ```
    {SYSTEM_PROMPT.strip()}
    ```
    **user:** {train_dataset[0]["prompt"][-1]["content"]}

    **answer:** `{train_dataset[0]["answer"]}`
    """
    )
    return (train_dataset,)


@app.cell
def _(eval_size, recipe, train_dataset):
    from datasets import Dataset

    from grpo_kit.runs.held_out import held_out_rows

    # Held-out problems, owned by the recipe (what `grpo-kit train` evaluates on): GSM8K's test split on a GPU
    # (Hub), synthetic problems from a seed of their own on CPU; never a problem the run trains on.
    held_out = Dataset.from_list(held_out_rows(recipe, eval_size, training=train_dataset))
    _train_questions = {row["prompt"][-1]["content"] for row in train_dataset}
    leaked = [
        row["prompt"][-1]["content"] for row in held_out if row["prompt"][-1]["content"] in _train_questions
    ]
    return held_out, leaked


@app.cell
def _(mo, recipe):
    mo.md(
        "## 2 · Five rewards\n\n"
        "| reward function | weight | what it pays for |\n|:---|:---|:---|\n"
        + "\n".join(
            f"| `{spec.name}` | {spec.weight:g} | {purpose} |"
            for spec, purpose in zip(
                recipe.rewards,
                [
                    "0.125 per XML tag, minus 0.001 per character after `</answer>`",
                    "0.5 for `<reasoning>…</reasoning> <answer>…</answer>` (loose)",
                    "0.5 for the exact line layout of the system prompt",
                    "0.5 when the answer is an integer (negatives included)",
                    "2.0 when the answer equals the gold number (numerically: 72.0 = 72, 1,000 = 1000)",
                ],
            )
        )
        + "\n\nMaximum 4.0; correctness alone (2.0) weighs as much as the four format rewards "
        "together (0.5 each). Lesson 3 shows "
        "each one and the pitfalls of the course's originals."
    )
    return


@app.cell
def _(held_out, recipe):
    def evaluate(answers: list[str], tokenizer) -> dict[str, float]:
        """Per reward function: the mean over the held-out problems; plus accuracy (correctness > 0)."""
        import math

        from grpo_kit.scoring import score_completions

        _funcs = recipe.build_reward_funcs(tokenizer)
        _table, _ = score_completions(
            _funcs, list(held_out), answers
        )  # the library's scorer (grpo_kit.scoring)
        _scores = {}
        for _i, _fn in enumerate(_funcs):  # None (NaN) means "not scored": average the scored answers only
            _values = [row[_i] for row in _table if not math.isnan(row[_i])]
            _scores[_fn.__name__] = sum(_values) / len(_values) if _values else float("nan")
        _scores["accuracy"] = _scores["correctness_reward"] / 2.0
        return _scores

    return (evaluate,)


@app.cell
def _(eval_size, mo):
    from grpo_kit.lesson_helpers import run_button, should_run

    measure_button = run_button(
        f"Measure the base model: pre-flight on 4 training problems, then greedy answers to {eval_size} "
        "held-out problems",
        kind="neutral",
    )
    mo.vstack(
        [
            mo.md(
                "### Before training: the base model\n\nA pre-flight (`grpo-kit preflight`: is there anything "
                "to learn at the run's settings?) and the held-out answers every later number is compared with. "
                "The Train button appears with the pre-flight's verdict."
            ),
            measure_button,
        ]
    )
    return measure_button, run_button, should_run


@app.cell
def _(evaluate, held_out, measure_button, mo, recipe, should_run, train_dataset, use_unsloth):
    from grpo_kit import unsloth_path
    from grpo_kit.evaluation.preflight import check_recipe
    from grpo_kit.evaluation.samples import generate_answers
    from grpo_kit.models import load_model

    mo.stop(not should_run(measure_button), mo.md("Press the button to measure the base model."))
    if use_unsloth:
        # The 4-bit model with a fresh (zero) LoRA adapter and its vLLM engine; training continues from it
        # (a second copy would not fit beside the first engine's memory share).
        base_model, base_tokenizer = unsloth_path.load_model(recipe)
    else:
        base_model, base_tokenizer = load_model(recipe.model)
    _g = recipe.training["num_generations"]
    with mo.status.spinner(title="Pre-flight", subtitle=f"4 training problems × {_g} sampled completions"):
        preflight_report = check_recipe(recipe, base_model, base_tokenizer, train_dataset, num_prompts=4)
    with mo.status.spinner(
        title="Evaluating the base model", subtitle=f"{len(held_out)} held-out problems, greedy"
    ):
        before_answers = generate_answers(
            base_model,
            base_tokenizer,
            list(held_out["prompt"]),
            max_new_tokens=recipe.training["max_completion_length"],
        )
    before_scores = evaluate(before_answers, base_tokenizer)
    return (
        base_model,
        base_tokenizer,
        before_answers,
        before_scores,
        generate_answers,
        load_model,
        preflight_report,
        unsloth_path,
    )


@app.cell
def _(mo, preflight_report, recipe, run_button, train_steps, use_unsloth):
    from grpo_kit.lesson_helpers import preflight_verdict

    _too_few = train_steps < recipe.training["max_steps"]
    train_button = run_button(
        f"Train {train_steps} steps ({'Unsloth + vLLM' if use_unsloth else 'TRL, CPU'})"
        + ("" if preflight_report.go else " (pre-flight: no-go)")
        + (" (too few steps to learn)" if _too_few else "")
    )
    mo.vstack(
        [
            mo.md(
                "## 3 · Train"
                + (
                    f"\n\n**{train_steps} steps are too few to learn:** every part runs, but the format is "
                    f"learned in the recipe's {recipe.training['max_steps']} (run the lesson without `--small` "
                    "or `--max-steps`)."
                    if _too_few
                    else ""
                )
            ),
            preflight_verdict(preflight_report, if_no_go="Training at these settings would not learn."),
            train_button,
        ]
    )
    return (train_button,)


@app.cell
def _(
    base_model,
    base_tokenizer,
    before_scores,
    load_model,
    mo,
    output_root,
    recipe,
    should_run,
    train_button,
    train_steps,
    unsloth_path,
    use_unsloth,
):
    from grpo_kit import trl_path
    from grpo_kit.lesson_helpers import LiveRewardCurve

    mo.stop(not should_run(train_button), mo.md("Press the button to train."))
    assert before_scores  # the base model is evaluated before any adapter exists
    _curve = LiveRewardCurve(f"{recipe.name}: total reward per step")
    if use_unsloth:
        run = unsloth_path.train(
            recipe,
            model=base_model,
            tokenizer=base_tokenizer,
            output_dir=output_root / "run",
            max_steps=train_steps,
            callbacks=[_curve.trainer_callback()],
        )
        trained_model, trained_tokenizer = run.model, run.tokenizer
    else:
        # A fresh copy: TRL adds the LoRA layers in place, and pressing the button again starts over.
        _model, trained_tokenizer = load_model(recipe.model)
        run = trl_path.train(
            recipe,
            model=_model,
            tokenizer=trained_tokenizer,
            output_dir=output_root / "run",
            max_steps=train_steps,
            callbacks=[_curve.trainer_callback()],
            disable_tqdm=True,
        )
        trained_model = run.trainer.model
    _curve.finish()  # the saved curve below is the one left on the page
    return run, trained_model, trained_tokenizer


@app.cell
def _(mo, recipe, run):
    _last = [r for r in run.log_history if r.get("reward") is not None][-1]
    mo.vstack(
        [
            mo.image(src=run.reward_curve_path.read_bytes()) if run.reward_curve_path else mo.md(""),
            mo.md(
                "Each reward function is logged on its own (TRL: `rewards/<name>/mean`), last step:\n\n"
                + "| reward | mean |\n|:---|:---|\n"
                + "\n".join(
                    f"| `{n}` | {_last.get(f'rewards/{n}/mean', float('nan')):.3f} |"
                    for n in recipe.reward_names
                )
                + f"\n| **total** (`reward`) | **{_last['reward']:.3f}** |"
            ),
        ]
    )
    return


@app.cell
def _(
    evaluate,
    generate_answers,
    held_out,
    recipe,
    run,
    trained_model,
    trained_tokenizer,
    use_unsloth,
):
    if use_unsloth:
        from vllm import SamplingParams as _SamplingParams

        from grpo_kit.unsloth_path import sampling_params_kwargs as _sampling_params_kwargs

        _texts = [
            trained_tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
            for p in held_out["prompt"]
        ]
        _outputs = trained_model.fast_generate(
            _texts,
            sampling_params=_SamplingParams(**_sampling_params_kwargs(recipe, temperature=0.0)),
            lora_request=trained_model.load_lora(str(run.adapter_dir)),
        )
        after_answers = [o.outputs[0].text for o in _outputs]
    else:
        after_answers = generate_answers(
            trained_model,
            trained_tokenizer,
            list(held_out["prompt"]),
            max_new_tokens=recipe.training["max_completion_length"],
        )
    after_scores = evaluate(after_answers, trained_tokenizer)
    return after_answers, after_scores


@app.cell
def _(after_answers, after_scores, before_answers, before_scores, held_out, mo):
    from grpo_kit.markdown_text import table_cell as _cell

    mo.vstack(
        [
            mo.md(
                "## 4 · Before and after, on held-out problems (greedy)\n\n"
                "| metric | before | after |\n|:---|:---|:---|\n"
                + "\n".join(
                    f"| `{k}` | {before_scores[k]:.3f} | {after_scores[k]:.3f} |" for k in before_scores
                )
            ),
            mo.md(
                "| question | gold | before | after |\n|:---|:---|:---|:---|\n"
                + "\n".join(
                    f"| {_cell(row['prompt'][-1]['content'])} | {row['answer']} | {_cell(b)} | {_cell(a)} |"
                    for row, b, a in zip(held_out, before_answers, after_answers)
                )
            ),
        ]
    )
    return


@app.cell
def _(after_answers, before_answers, mo):
    from grpo_kit.evaluation import bootstrap_mean_ci
    from rewards import strict_format_reward

    def _strict(answers: list[str]) -> list[float]:
        """1 when the answer has the system prompt's exact layout, else 0 (one per held-out problem)."""
        scores = strict_format_reward([[{"role": "assistant", "content": a}] for a in answers])
        return [1.0 if s else 0.0 for s in scores]

    strict_before, strict_after = _strict(before_answers), _strict(after_answers)
    _diffs = [a - b for a, b in zip(strict_after, strict_before)]  # paired: the same problem before and after
    strict_ci = bootstrap_mean_ci(_diffs, seed=0)
    _rate = lambda xs: sum(xs) / len(xs)
    mo.md(
        f"**Strict-format rate** (greedy, {len(_diffs)} held-out problems): {_rate(strict_before):.0%} before → "
        f"{_rate(strict_after):.0%} after; change {_rate(_diffs):+.0%}, paired bootstrap 95 % CI "
        f"[{strict_ci[0]:+.0%}, {strict_ci[1]:+.0%}]"
        + (" — it excludes 0: the format was learned." if strict_ci[0] > 0 else " — it includes 0.")
    )
    return strict_after, strict_before, strict_ci


@app.cell
def test_gsm8k_pipeline_end_to_end(
    after_scores, before_scores, held_out, leaked, recipe, run, strict_ci, train_steps, use_unsloth
):
    assert not leaked, leaked  # held-out problems never seen in training
    assert all(answer.lstrip("-").isdigit() for answer in held_out["answer"])
    _last = [r for r in run.log_history if r.get("reward") is not None][-1]
    for _name in recipe.reward_names:  # each of the five rewards logged under TRL's name
        assert f"rewards/{_name}/mean" in _last, _name
    for _scores in (before_scores, after_scores):
        assert 0.0 <= _scores["accuracy"] <= 1.0
        assert set(_scores) == {*recipe.reward_names, "accuracy"}
    if use_unsloth:  # the course's claim, on the GPU run: training improves the total reward
        assert sum(after_scores[n] for n in recipe.reward_names) > sum(
            before_scores[n] for n in recipe.reward_names
        )
    elif train_steps >= recipe.training["max_steps"]:  # the CPU recipe's claim, on its full run
        assert strict_ci[0] > 0, strict_ci
    return


@app.cell
def _(mo, run, use_unsloth):
    if use_unsloth:
        from datasets_prep import SYSTEM_PROMPT as _SYSTEM_PROMPT
        from grpo_kit import unsloth_path as _up

        _rows = _up.compare_with_and_without_adapter(
            run.model, run.tokenizer, run.adapter_dir, ["Calculate pi."], system_prompt=_SYSTEM_PROMPT
        )
        _out = mo.md(
            "**Calculate pi.** — without the adapter:\n\n```\n" + _rows[0]["without_adapter"] + "\n```\n\n"
            "with the adapter:\n\n```\n" + _rows[0]["with_adapter"] + "\n```"
        )
    else:
        _out = mo.md(
            "On a GPU this cell asks the course's question *Calculate pi.* with and without the adapter "
            "(`unsloth_path.compare_with_and_without_adapter`, vLLM `fast_generate` with a `lora_request`)."
        )
    _out
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    Next: **Lesson 7** — export the trained model: the LoRA adapter, a merged 16-bit model and GGUF.
    """)
    return


if __name__ == "__main__":
    app.run()
