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

    grpo-kit packages it as the recipe `gsm8k-unsloth` (`grpo_kit.trainers.unsloth_path`, vLLM on a GPU) and
    two CPU twins with the same five rewards on the embedded SmolLM2-135M and offline synthetic GSM8K problems:
    `gsm8k-unsloth-cpu`, trained through Unsloth's CPU backend in 4-bit where `unsloth` is installed
    (`make unsloth-cpu`), and `gsm8k-cpu`, trained by TRL (`grpo_kit.trainers.trl_path`) where it is not.
    The callout below says which one this run takes, and why.
    """)
    return


@app.cell
def choose_branch(mo):
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.teaching.lesson_helpers import lesson_size
    from grpo_kit.trainers.unsloth_path import check_machine

    size = lesson_size()
    # GPU: gsm8k-unsloth (Gemma-3-1B-it, 4-bit QLoRA r=32, vLLM, 250 steps, lr 5e-6). CPU: gsm8k-unsloth-cpu
    # through Unsloth's CPU backend where unsloth is installed (check_machine finds it without importing it),
    # else gsm8k-cpu through TRL; both 40 steps, 40 held-out problems. The project's CI (or --small) runs 2 steps
    # on 3 problems (Unsloth: gsm8k-unsloth-cpu-smoke), which shows every part run but not the result.
    if size.gpu:
        branch = "unsloth-gpu"
    else:
        try:
            check_machine(get_recipe("gsm8k-unsloth-cpu"))
            branch = "unsloth-cpu"
        except ImportError:
            branch = "trl"
    use_unsloth = branch != "trl"
    use_vllm = branch == "unsloth-gpu"  # on a CPU, Unsloth runs with fast_inference off: no vLLM engine
    if branch == "unsloth-cpu":  # CI size: 16-token answers (4-bit CPU decoding costs seconds a token)
        recipe = get_recipe("gsm8k-unsloth-cpu-smoke" if size.small else "gsm8k-unsloth-cpu")
    else:
        recipe = get_recipe("gsm8k-unsloth" if use_vllm else "gsm8k-cpu")
    train_steps = size.steps(gpu=recipe.training["max_steps"], cpu=recipe.training["max_steps"], small=2)
    eval_size = size.pick(gpu=50, cpu=40, small=3)
    output_root = size.output_dir("lesson6")
    if branch == "unsloth-cpu":
        _which = (
            "**This run: Unsloth's CPU backend** (no GPU; `unsloth` is installed). `FastLanguageModel` loads the "
            "model in 4-bit NF4 (bitsandbytes' CPU kernels) and adds the LoRA adapter; TRL's trainer, as Unsloth "
            "patches it, trains. `fast_inference` is off (vLLM inside Unsloth needs a CUDA GPU), so generation is "
            "the model's own `generate`, not vLLM. What is said below of the full run was measured on `gsm8k-cpu` "
            "(TRL, float32); this 4-bit run's own result has not been measured yet."
        )
        _weights = f"4-bit NF4 weights with a LoRA adapter (r = {recipe.lora.r}, QLoRA) loaded by Unsloth"
    else:
        _which = (
            "**This run: TRL on CPU** (no GPU, and `unsloth` is not installed here; `make unsloth-cpu` installs "
            "its CPU backend, and the lesson then trains through Unsloth)."
        )
        _weights = (
            "plain LoRA in float32 (4-bit QLoRA runs on CPU too, through bitsandbytes' CPU backend: "
            '`--set quantization=4bit`; docs/cpu.md\'s "QLoRA on CPU" table says what it costs)'
        )
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
        if use_vllm
        else mo.callout(
            mo.md(
                f"""
    {_which}

    **CPU version — the same pipeline, scaled down.** Recipe `{recipe.name}`: the embedded
    SmolLM2-135M (not Gemma-3-1B), {_weights},
    generation by `transformers` (vLLM's CPU build has a venv of its own), offline synthetic GSM8K problems,
    {train_steps} steps of {recipe.training["num_generations"]} completions of
    ≤ {recipe.training["max_completion_length"]} tokens, {eval_size} held-out problems.

    **What differs from the course, and why** (the recipe's description says it too): the first
    prompts show a worked exchange in the course's format before the question (one of six, in turn) — from the system
    prompt alone the 135M model writes the tags for none of 40 held-out problems, so every group of
    completions scores the same and GRPO has nothing to learn from (`grpo-kit preflight` says NO-GO) —
    and then fewer and fewer do, until the last steps train on the course's own prompt
    (`worked_example_fade`, the problems in order: `shuffle_dataset=False`): with the example on every
    row, the format learned held only with the example there. The held-out problems below carry an
    example; `grpo-kit train` also asks 40 problems written by hand without one (`gsm8k-handwritten`):
    there, measured on two seeds, the layout is not learned: once the example is gone, GRPO reinforces the
    partial credit that is left (tags around any word, a bare number in `<answer>`). An earlier run seemed to
    learn it, but wrote the system prompt's own template (`...` for the reasoning and the answer) for every
    problem; the format rewards no longer pay for a section with no letter or digit.
    And the learning rate is 5e-4 (constant), because 40 steps must move the adapter, not 250.
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
    return branch, eval_size, output_root, recipe, size, train_steps, use_unsloth, use_vllm


@app.cell
def _(mo, recipe):
    from datasets_prep import SYSTEM_PROMPT

    train_dataset = recipe.load_dataset()
    _fade = recipe.dataset_kwargs.get("worked_example_fade")
    _example = ""
    if recipe.dataset_kwargs.get("worked_example") and _fade is None:
        _example = "a worked exchange (a problem and its answer in the format, one of six in turn), "
    elif recipe.dataset_kwargs.get("worked_example"):  # faded out over the first rows: a curriculum, in order
        _shown = sum(len(_prompt) == 4 for _prompt in train_dataset["prompt"])
        _example = (
            f"on the first problems a worked exchange (a problem and its answer in the format, one of six in "
            f"turn), on fewer and "
            f"fewer up to problem {_fade} and on none after ({_shown} of the {len(train_dataset)} show it; the "
            "problems are trained in this order), "
        )
    mo.md(
        f"""
    ## 1 · Data: GSM8K in a reasoning format

    {len(train_dataset)} training problems (`{recipe.dataset_source or "openai/gsm8k"}`). Each prompt is a
    conversation: the course's system prompt, {_example}then the question. The `answer` column keeps the
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
def _(eval_size):
    from grpo_kit.teaching.lesson_helpers import run_button, should_run
    from grpo_kit.teaching.lesson_runs import button_panel

    measure_button = run_button(
        f"Measure the base model: pre-flight on 4 training problems, then greedy answers to {eval_size} "
        "held-out problems",
        kind="neutral",
    )
    button_panel(
        "### Before training: the base model\n\nA pre-flight (`grpo-kit preflight`: is there anything "
        "to learn at the run's settings?) and the held-out answers every later number is compared with. "
        "The Train button appears with the pre-flight's verdict.",
        measure_button,
    )
    return measure_button, should_run


@app.cell
def _(held_out, measure_button, mo, recipe, should_run, train_dataset, use_unsloth, use_vllm):
    from grpo_kit.models import load_model
    from grpo_kit.teaching.lesson_runs import evaluate_with_spinner, preflight_with_spinner
    from grpo_kit.trainers import unsloth_path

    mo.stop(not should_run(measure_button), mo.md("Press the button to measure the base model."))
    if use_unsloth:
        # The 4-bit model with a fresh (zero) LoRA adapter (on a GPU with its vLLM engine, which training continues
        # from: a second copy would not fit beside the first engine's memory share).
        base_model, base_tokenizer = unsloth_path.load_unsloth_model(recipe)
    else:
        base_model, base_tokenizer = load_model(recipe.model)
    preflight_report = preflight_with_spinner(
        recipe,
        base_model,
        base_tokenizer,
        train_dataset,
        what="training problems",
        unit="sampled completions",
    )
    # What `grpo-kit train` reports: the recipe's rewards, weights and completion budget, greedy.
    before_report = evaluate_with_spinner(
        recipe,
        base_model,
        base_tokenizer,
        held_out,
        generate_fn=unsloth_path.vllm_generate() if use_vllm else None,  # GPU: the model's vLLM engine
        what="held-out problems",
    )
    return (
        base_model,
        base_tokenizer,
        before_report,
        preflight_report,
        unsloth_path,
    )


@app.cell
def _(branch, preflight_report, recipe, size, train_steps):
    from grpo_kit.teaching.lesson_runs import train_section

    _too_few = train_steps < recipe.training["max_steps"] or size.small
    _how = {"unsloth-gpu": "Unsloth + vLLM", "unsloth-cpu": "Unsloth, CPU", "trl": "TRL, CPU"}[branch]
    train_button, _section = train_section(
        f"Train {train_steps} steps ({_how})",
        "## 3 · Train"
        + (
            f"\n\n**{train_steps} steps are too few to learn:** every part runs, but the format is "
            "learned in the full recipe's 40 (run the lesson without `--small` or `--max-steps`)."
            if _too_few
            else ""
        ),
        preflight_report,
        too_small="too few steps to learn" if _too_few else "",
    )
    _section
    return (train_button,)


@app.cell
def _(
    base_model,
    base_tokenizer,
    before_report,
    mo,
    output_root,
    recipe,
    should_run,
    train_button,
    train_steps,
    unsloth_path,
    use_unsloth,
    use_vllm,
):
    from grpo_kit.teaching.lesson_helpers import train_with_live_curve
    from grpo_kit.teaching.lesson_runs import train_fresh

    mo.stop(not should_run(train_button), mo.md("Press the button to train."))
    assert before_report.num_prompts  # the base model is evaluated before any adapter exists
    _title = f"{recipe.name}: total reward per step"
    _settings = {"output_dir": output_root / "run", "max_steps": train_steps, "title": _title}
    if use_unsloth:
        # GPU: the measured model and its vLLM engine train on. CPU: train_with_unsloth loads a fresh copy, so
        # pressing the button again starts over (the base model keeps its zero adapter).
        _loaded = {"model": base_model, "tokenizer": base_tokenizer} if use_vllm else {}
        run = train_with_live_curve(recipe, train=unsloth_path.train_with_unsloth, **_loaded, **_settings)
        trained_tokenizer = run.tokenizer
    else:
        # A fresh copy: TRL adds the LoRA layers in place, and pressing the button again starts over.
        run, trained_tokenizer = train_fresh(recipe, save_final=True, **_settings)
    return run, trained_tokenizer


@app.cell
def _(mo, recipe, run):
    from grpo_kit.teaching.lesson_runs import last_logged, saved_curve

    _last = last_logged(run)
    mo.vstack(
        [
            saved_curve(run, missing=""),
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
    return (last_logged,)


@app.cell
def _(branch, mo, run, unsloth_path):
    # What trained, read off the trained model: Unsloth's load facts (backend, 4-bit layers, vLLM engine or not).
    if branch == "trl":
        trained_with = {"backend": "trl"}
        _text = (
            "**Trained by TRL** (`grpo_kit.trainers.trl_path`, generation by `transformers`): no GPU, and "
            "`unsloth` is not installed here."
        )
    else:
        trained_with = unsloth_path.load_facts(run.model)
        _text = (
            f"**Trained through Unsloth {trained_with['version']}, {trained_with['backend']} backend** "
            f"(`{trained_with['fast_language_model']}`): {trained_with['linear4bit_layers']} of "
            f"{trained_with['linear_layers']} linear layers in 4-bit, weights in {trained_with['dtype']}, "
            + (
                "generation by vLLM (`fast_inference`)."
                if trained_with["fast_inference"]
                else "`fast_inference` off (no GPU): generation is the model's own `generate`, not vLLM."
            )
        )
    mo.callout(mo.md(_text), kind="info")
    return (trained_with,)


@app.cell
def _(held_out, recipe, run, trained_tokenizer, use_vllm):
    from grpo_kit.teaching.lesson_runs import evaluate_trained
    from grpo_kit.trainers.unsloth_path import vllm_generate as _vllm_generate

    # the same problems, rewards and decoding as before training: only the weights differ (on a GPU, vLLM
    # with the saved adapter as its lora_request; on a CPU, the trained model's own generate)
    after_report = evaluate_trained(
        recipe,
        run,
        trained_tokenizer,
        held_out,
        generate_fn=_vllm_generate(run.adapter_dir) if use_vllm else None,
        what="held-out problems",
    )
    return (after_report,)


@app.cell
def _(after_report, before_report, held_out, mo, recipe):
    from grpo_kit.evaluation import compare_all
    from grpo_kit.support.markdown_text import table_cell as _cell
    from grpo_kit.teaching.lesson_runs import comparison_table

    # Paired per problem (after − before), with a seeded bootstrap 95 % CI and its verdict, for every metric.
    held_out_comparisons = compare_all(before_report, after_report)
    _metrics = [
        *(f"reward/{_name}" for _name in recipe.reward_names),
        "reward",
        "accuracy",
    ]
    _labels = {"reward": "**total** (weighted sum)", "accuracy": "accuracy (correct answers)"}
    _rows = [
        (_labels.get(_m, f"`{_m.removeprefix('reward/')}`"), held_out_comparisons[_m])
        for _m in _metrics
        if _m in held_out_comparisons  # a metric undefined on every problem has no comparison
    ]
    mo.vstack(
        [
            mo.md(
                f"## 4 · Before and after, on {after_report.num_prompts} held-out problems (greedy)\n\n"
                "Both measurements are the library's held-out evaluation "
                "(`grpo_kit.runs.held_out.evaluate_held_out`, what `grpo-kit train` reports): the recipe's rewards "
                "and completion budget, greedy decoding, so the two differ only because the weights did. The "
                "change is paired per problem, with a bootstrap 95 % confidence interval "
                "(`grpo_kit.evaluation.compare`).\n\n" + comparison_table(_rows, digits=3, verdict=True)
            ),
            mo.md(
                "| question | gold | before | after |\n|:---|:---|:---|:---|\n"
                + "\n".join(
                    f"| {_cell(row['prompt'][-1]['content'])} | {row['answer']} | {_cell(b.strip())} "
                    f"| {_cell(a.strip())} |"
                    for row, b, a in zip(held_out, before_report.completions, after_report.completions)
                )
            ),
        ]
    )
    return (held_out_comparisons,)


@app.cell
def _(held_out_comparisons, mo):
    # strict_format_reward is one of the recipe's rewards: the evaluation already says, per problem, whether
    # each answer reached its maximum (the system prompt's exact layout).
    strict_format = held_out_comparisons["at_max/strict_format_reward"]
    mo.md(
        f"**Strict-format rate** (greedy, {strict_format.n} held-out problems): {strict_format.before:.0%} "
        f"before → {strict_format.after:.0%} after; change {strict_format.mean_diff:+.0%}, paired bootstrap "
        f"{strict_format.level:.0%} CI [{strict_format.ci_low:+.0%}, {strict_format.ci_high:+.0%}]"
        + (
            " — it excludes 0: the format was learned."
            if strict_format.verdict == "improved"
            else f" — {strict_format.verdict}."
        )
    )
    return (strict_format,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 5 · The format on the course's prompt alone: three ways

    This lesson's CPU recipe shows the model a worked example in its first prompts. Asked with the
    course's system prompt alone, what did it learn? Three recipes, measured (`grpo-kit recipes NAME`
    describes each; docs/results.md shows the same table):
    Measured on `gsm8k-handwritten` (40 grade-school problems written by hand, never trained on) asked with the course's
    system prompt alone: `grpo-kit train --recipe R --eval-prompts 40 --set seed=S [--loop trl]`, greedy, the same
    decoding before and after, 95 % paired bootstrap CI; two runs at once with `OMP_NUM_THREADS=1` on 2-core machines
    (guided: AMD EPYC, 2026-12-03; plain and SFT: Intel Xeon, 2026-12-03 and 2026-12-05).

    | way (recipe) | what changes from the course's practicum | paths | strict format, seed 42 | strict format, seed 7 | training (2 cores, one thread each) |
    |:---|:---|:---|:---|:---|:---|
    | plain (`gsm8k-cpu`) | a worked example in the first prompts, faded out by step 30 | loop | 0 % → 0 % | 0 % → 0 % | 19–20 min |
    | guided sampling (`gsm8k-cpu-guided`) | completions drawn with a worked example, trained under the prompt alone (off-policy, no importance weight), plus `calculation_reward` | loop only | 0 % → **95 %** (+95 % [+87.5, +100]) | 0 % → **82.5 %** (+82.5 % [+70, +92.5]) | 13 min |
    | SFT warm-up (`gsm8k-cpu-sft`), loop | 40 SFT steps on 300 worked solutions, then GRPO on the prompt alone, plus `calculation_reward` | loop | 0 % → 80 % → **90 %** (GRPO: +10 % [0, +22.5]) | 0 % → 82.5 % → **97.5 %** (GRPO: +15 % [+2.5, +27.5]) | 15 min, SFT 7–8 min of it |
    | SFT warm-up (`gsm8k-cpu-sft`), TRL | the same, SFT by TRL's `SFTTrainer` | TRL | 0 % → 80 % → **100 %** (GRPO: +20 % [+7.5, +32.5]) | 0 % → 92.5 % → **97.5 %** (GRPO: +5 % [−5, +15]) | 22 min, SFT 6–7 min of it |

    The SFT rows read base → SFT only → SFT + GRPO: the middle figure is what supervised
    fine-tuning on 300 worked solutions taught, and "GRPO" is what reinforcement learning added.
    Guided sampling reaches the format without SFT, but only on the standalone loop and off-policy;
    the SFT warm-up (the Unsloth notebooks' "pre fine-tuning for formatting") works on both paths.
    Try it: `grpo-kit train --recipe gsm8k-cpu-sft --loop trl`.
    """)
    return


@app.cell
def test_gsm8k_pipeline_end_to_end(
    after_report,
    before_report,
    branch,
    held_out,
    held_out_comparisons,
    last_logged,
    leaked,
    recipe,
    run,
    strict_format,
    train_steps,
    trained_with,
    use_vllm,
):
    assert not leaked, leaked  # held-out problems never seen in training
    assert all(answer.lstrip("-").isdigit() for answer in held_out["answer"])
    _last = last_logged(run)
    for _name in recipe.reward_names:  # each of the five rewards logged under TRL's name
        assert f"rewards/{_name}/mean" in _last, _name
    for _report in (before_report, after_report):
        assert _report.num_prompts == len(held_out) and _report.reward_names == recipe.reward_names
        assert 0.0 <= _report.metrics["accuracy"] <= 1.0
    for _c in held_out_comparisons.values():  # paired over the same problems, the CI around the change
        assert _c.n <= len(held_out) and _c.ci_low <= _c.mean_diff <= _c.ci_high
    if branch == "unsloth-cpu":  # what trained is Unsloth's CPU backend: 4-bit weights, no vLLM engine
        assert trained_with["backend"] == "cpu" and trained_with["load_in_4bit"], trained_with
        assert not trained_with["fast_inference"], trained_with
    if use_vllm:  # the course's claim, on the GPU run: training improves the total reward
        assert held_out_comparisons["reward"].after > held_out_comparisons["reward"].before
    elif (
        branch == "trl" and train_steps >= recipe.training["max_steps"]
    ):  # gsm8k-cpu's claim, measured on its full run
        assert strict_format.ci_low > 0, strict_format.summary()
    return


@app.cell
def _(mo, run, use_vllm):
    from grpo_kit.teaching.lesson_helpers import wrapped_text

    if use_vllm:
        from datasets_prep import SYSTEM_PROMPT as _SYSTEM_PROMPT
        from grpo_kit.trainers import unsloth_path as _up

        # vLLM generation (unsloth_path.vllm_generate) without and with the adapter, the course's sampling
        _rows = _up.compare_with_and_without_adapter(
            run.model, run.tokenizer, run.adapter_dir, ["Calculate pi."], system_prompt=_SYSTEM_PROMPT
        )
        _out = mo.vstack(
            [
                mo.md("**Calculate pi.** — without the adapter:"),
                wrapped_text(_rows[0]["without_adapter"]),
                mo.md("with the adapter:"),
                wrapped_text(_rows[0]["with_adapter"]),
            ]
        )
    else:
        _out = mo.md(
            "On a GPU this cell asks the course's question *Calculate pi.* with and without the adapter "
            "(`unsloth_path.compare_with_and_without_adapter`: vLLM's `fast_generate` through "
            "`unsloth_path.vllm_generate`, with a `lora_request` for the adapter)."
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
