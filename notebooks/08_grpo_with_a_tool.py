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
    # Lesson 8 · GRPO with a tool

    TRL's `GRPOTrainer(tools=[...])` lets the model **call Python functions while it generates**: it writes a
    call, TRL runs the function, appends the result, and the model writes on. GRPO then rewards the whole
    exchange. Here the embedded **SmolLM2-135M** learns to answer "What is 964 × 60?" by calling
    `multiply(a, b)` — arithmetic a 135M model cannot do in its head — on a CPU, with the recipe
    `calculator-tool-cpu`.

    SmolLM2's own chat template has no tool support (TRL refuses it); `grpo_kit.rollout.tool_template` adds one: the
    tools go into the system prompt, a call is one line `CALL multiply(a=964, b=60)`, a result is a
    `RESULT 57840` turn.
    """)
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 1 · One multi-turn rollout

    ```
     prompt (not trained)          completion = what the reward sees
    ┌──────────────────────┐ ┌──────────────────────────┬────────────────┬──────────────────────────┐
    │ system: tools + rule │ │ assistant: CALL          │ tool: RESULT   │ assistant: The answer is │
    │ worked example       │ │ multiply(a=964, b=60)    │ 57840          │ 57840.                   │
    │ user: What is 964*60?│ │ MODEL tokens → in loss   │ TOOL tokens →  │ MODEL tokens → in loss   │
    └──────────────────────┘ │                          │ masked out     │                          │
                             └──────────────────────────┴────────────────┴──────────────────────────┘
                                 TRL parses the call ──► runs multiply(964, 60) ──► appends the result
                                                                        reward = tool_success_reward:
                                                     1 if the call is well-formed AND the answer is right
    ```

    * The model's tokens (the call, the final answer) get the GRPO advantage; the tool's tokens are written by
      Python, so TRL keeps them out of the loss (`tool_mask`).
    * A malformed call (wrong argument names, positional arguments, an unknown tool) does not crash: the tool
      turn says `{'error': ...}` and TRL counts it in `tools/failure_frequency`.
    * `max_tool_calling_iterations=1`: at most one tool turn, then the model must answer.
    """)
    return


@app.cell
def _(mo):
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.teaching.lesson_helpers import lesson_size

    size = lesson_size()
    if size.gpu:
        # A larger model with a native tool template (TRL parses Qwen2.5's JSON calls itself): no tool_template.
        recipe = get_recipe("calculator-tool-cpu", model="Qwen/Qwen2.5-0.5B-Instruct", tool_template=None)
    elif size.small:
        # The project's CI (or -- --small): 1 prompt × 4 short completions per step, 6 held-out questions.
        recipe = get_recipe("calculator-tool-smoke")
    else:
        # The recipe as docs/results.md measures it: 8 steps of 2 prompts × 4 completions.
        recipe = get_recipe("calculator-tool-cpu")
    train_steps = size.steps(gpu=30, cpu=recipe.training["max_steps"], small=recipe.training["max_steps"])
    num_eval, eval_k = size.pick(gpu=(32, 4), cpu=(32, 2), small=(6, 2))
    output_root = size.output_dir("lesson8")
    mo.callout(
        mo.md(
            f"**{size.name.upper()} settings** — recipe `{recipe.name}`, model `{recipe.model}`, {train_steps} steps, "
            f"{recipe.training['num_generations']} completions of ≤ {recipe.training['max_completion_length']} "
            f"tokens, {num_eval} held-out questions × {eval_k} samples at T = 1.0."
            + (
                "\n\n**Too small to learn:** every part runs, but a few steps of one prompt cannot move the "
                "model; expect the held-out change to read about 0. Without `--small` the lesson runs the recipe "
                "as docs/results.md measures it (`python notebooks/08_grpo_with_a_tool.py`, or "
                "`grpo-kit train --recipe calculator-tool-cpu --loop trl`)."
                if size.small
                else ""
            )
        ),
        kind="warn" if size.small else "info",
    )
    return eval_k, num_eval, output_root, recipe, size, train_steps


@app.cell
def _(num_eval, recipe):
    from grpo_kit.models import load_tokenizer
    from grpo_kit.rollout.tool_sets import prepare_tool_tokenizer, resolve_tools
    from grpo_kit.runs.held_out import held_out_rows

    tools = resolve_tools(recipe.tools)
    train_dataset = recipe.load_dataset()
    # the recipe's held-out questions: its test split, generated apart from the training ones
    held_out = held_out_rows(recipe, num_eval, training=train_dataset)
    # installs the CALL/RESULT template and checks it the way TRL will (the weights load behind the button)
    tokenizer = prepare_tool_tokenizer(load_tokenizer(recipe.model), recipe.tool_template)
    return held_out, tokenizer, tools, train_dataset


@app.cell
def _(mo, tokenizer, tools, train_dataset):
    from grpo_kit.teaching.lesson_helpers import wrapped_text

    _exchange = list(train_dataset[0]["prompt"])
    rendered_prompt = tokenizer.apply_chat_template(
        _exchange, tools=tools, tokenize=False, add_generation_prompt=True
    )
    mo.vstack(
        [
            mo.md(
                "## 2 · The raw rendered conversation\n\nWhat the model reads for one training question: the "
                "tool list in the system turn, one worked tool exchange, then the question. The model continues "
                "after the last `assistant` line."
            ),
            wrapped_text(rendered_prompt),
        ]
    )
    return rendered_prompt, wrapped_text


@app.cell
def _(num_eval):
    from grpo_kit.teaching.lesson_helpers import run_button, should_run
    from grpo_kit.teaching.lesson_runs import button_panel

    measure_button = run_button(
        f"Measure the base model: pre-flight on 4 training questions, then {num_eval} held-out questions",
        kind="neutral",
    )
    button_panel(
        "## 3 · Preflight: is there anything to learn?\n\nBoth measurements roll the base model out with "
        "its tools, several minutes on a 2-core CPU; the Train button appears with their verdict.",
        measure_button,
    )
    return measure_button, should_run


@app.cell
def _(measure_button, mo, recipe, should_run, tokenizer, train_dataset, wrapped_text):
    from grpo_kit.models import load_model
    from grpo_kit.teaching.lesson_runs import preflight_with_spinner

    mo.stop(not should_run(measure_button), mo.md("Press the button to measure the base model."))
    base_model, _ = load_model(recipe.model)  # the tool-prepared tokenizer above is the one used
    # multi-turn rollouts with the recipe's tools, sampled as its first training step samples
    preflight_report = preflight_with_spinner(
        recipe,
        base_model,
        tokenizer,
        train_dataset,
        what="training questions",
        unit="rollouts with the tools",
    )
    _call = preflight_report.reward_mean["tool_call_reward"]
    _text = mo.md(
        f"""
    {preflight_report.num_prompts} training questions × {preflight_report.num_generations} rollouts with the
    base model, at the run's settings:

    | base model | share of rollouts or groups |
    |:---|:---|
    | rollouts with a well-formed call | **{_call:.0%}** |
    | rollouts that succeed (call + right answer) | **{preflight_report.reward_mean["tool_success_reward"]:.0%}** |
    | groups whose reward has zero variance (no learning signal) | **{preflight_report.zero_std_share:.0%}** |

    GRPO learns only from groups where some rollouts succeed and some fail. With **two** worked examples the base
    model already calls well almost every time (no headroom); with none it never does; one example leaves room.

    One rollout:
    """
    )
    mo.vstack([_text, wrapped_text(preflight_report.examples[0] if preflight_report.examples else "")])
    return base_model, preflight_report


@app.cell
def _(base_model, eval_k, held_out, preflight_report, recipe, tokenizer):
    from grpo_kit.teaching.lesson_runs import evaluate_with_spinner

    assert preflight_report.num_prompts  # measured after the pre-flight, behind the same button
    # The library's held-out evaluation (what `grpo-kit train` reports): a recipe with tools is rolled out with
    # them (grpo_kit.rollout.tool_rollout), greedy + eval_k samples at the recipe's temperature.
    before_report = evaluate_with_spinner(
        recipe, base_model, tokenizer, held_out, k=eval_k, what="held-out questions"
    )
    return (before_report,)


@app.cell
def _(before_report, preflight_report, size, train_steps):
    from grpo_kit.teaching.lesson_runs import train_section

    train_button, _section = train_section(
        f"Train {train_steps} steps with TRL and tools",
        f"## 4 · Train\n\nThe base model was measured on {before_report.num_prompts} held-out questions "
        "(section 5 compares). `trl_path.train_with_trl(recipe)` passes `tools=` to `GRPOTrainer`; the "
        "tools, `max_tool_calling_iterations` and the tokenizer's template are checked before the model loads.",
        preflight_report,
        small=size.small,
    )
    _section
    return (train_button,)


@app.cell
def _(before_report, mo, output_root, recipe, should_run, train_button, train_dataset, train_steps):
    from grpo_kit.teaching.lesson_runs import train_fresh

    mo.stop(not should_run(train_button), mo.md("Press the button to train."))
    assert before_report.num_prompts  # the base model is evaluated first
    # a fresh copy of the base model, trained with the live reward curve: pressing again starts over
    run, _ = train_fresh(
        recipe, train_dataset=train_dataset, output_dir=output_root / "trl-run", max_steps=train_steps
    )
    return (run,)


@app.cell
def _(mo, recipe, run):
    from grpo_kit.teaching.lesson_runs import reward_weights_note, saved_curve, step_metrics_table

    step_metrics = [r for r in run.log_history if "tools/call_frequency" in r]
    _columns = [
        ("tools/call_frequency", "calls per rollout"),
        ("tools/failure_frequency", "failed calls"),
        ("rewards/tool_success_reward/mean", "success (call + right answer)"),
        ("frac_reward_zero_std", "zero-variance groups"),
    ]
    mo.vstack(
        [
            saved_curve(run),
            mo.md(
                reward_weights_note(recipe)
                + "\n\nTRL's tool metrics per step:\n\n"
                + step_metrics_table(step_metrics, _columns)
            ),
        ]
    )
    return (step_metrics,)


@app.cell
def _(eval_k, held_out, recipe, run, tokenizer):
    from grpo_kit.teaching.lesson_runs import evaluate_trained

    # the same questions, decoding and seeds as before
    after_report = evaluate_trained(recipe, run, tokenizer, held_out, k=eval_k, what="held-out questions")
    return (after_report,)


@app.cell
def _(after_report, before_report, mo, wrapped_text):
    from grpo_kit.teaching.lesson_runs import compare_metrics, comparison_table

    _k = after_report.settings["k"]
    _labels = {
        f"mean@{_k}": f"success, {_k} samples at T=1.0 (headline)",
        "reward/tool_success_reward": "success, greedy",
        "reward/tool_call_reward": "well-formed call, greedy",
    }
    held_out_comparisons = compare_metrics(before_report, after_report, _labels)
    mo.vstack(
        [
            mo.md(
                f"## 5 · Held-out questions, before and after\n\n{after_report.num_prompts} questions the run never saw; "
                "paired bootstrap 95 % CI of the change (`grpo_kit.evaluation.compare`).\n\n"
                + comparison_table((_labels[m], c) for m, c in held_out_comparisons.items())
                + "\n\nOne rollout after training:"
            ),
            wrapped_text(after_report.completions[0]),
        ]
    )
    return (held_out_comparisons,)


@app.cell
def test_tool_loop_ran_and_was_measured(after_report, held_out_comparisons, preflight_report, step_metrics):
    assert step_metrics and all(0.0 <= r["tools/call_frequency"] for r in step_metrics)
    assert all(0.0 <= r["tools/failure_frequency"] <= 1.0 for r in step_metrics)
    assert 0.0 <= preflight_report.zero_std_share <= 1.0
    _k = after_report.settings["k"]
    _c = held_out_comparisons[f"mean@{_k}"]
    assert _c.ci_low <= _c.mean_diff <= _c.ci_high and _c.n == after_report.num_prompts
    return


@app.cell
def test_rendered_prompt_lists_the_tools_and_a_worked_call(rendered_prompt):
    assert "multiply(a: integer, b: integer)" in rendered_prompt
    assert "CALL multiply(" in rendered_prompt and "RESULT " in rendered_prompt
    assert rendered_prompt.endswith("<|im_start|>assistant\n")
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    **What the measured run showed** (docs/results.md, recipe `calculator-tool-cpu`): the held-out success rate at
    T = 1.0 rose from 11 % of rollouts (7/64) to 94 % (60/64) in 8 CPU steps, +0.83 [95 % CI +0.72, +0.92].
    The base model *greedy* is already good (it copies the worked example); what GRPO fixes is the sampled rollouts — the ones
    the training itself draws.

    Next: try `kinds=["choose"]` in `dataset_kwargs` (the question names the operation in words, so the model
    must pick the right tool), or `["two_step"]` with `max_tool_calling_iterations=2`.
    """)
    return


if __name__ == "__main__":
    app.run()
