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
    # Lesson 9 · GRPO in an environment

    Lesson 8's tool had no memory: `multiply(964, 60)` answers the same whatever came before. An **environment**
    has state. TRL's `GRPOTrainer(environment_factory=...)` makes

    * **one instance per rollout**, so the G rollouts of a group never see each other's moves;
    * `reset(**row)` with the dataset row's columns: the episode's start state (here the row's `target`);
    * the instance's **public methods as the tools**, answered from its state;
    * `get_reward()`: the episode's score, read from the **state** after the rollout, not from the text.

    Here the embedded **SmolLM2-135M** plays two environments on a CPU, with the recipe `counter-lock-env-cpu`:
    a counter (`increment(step)` until it reads the target) and a lock (`enter_code(code)`). One dataset
    holds both; its `environment` column routes each row to its own environment and tools.
    """)
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 1 · One episode, and where the reward comes from

    ```
     row: {"environment": "counter", "target": 42, "prompt": [...]}
       │
       ▼  TRL: env = CounterEnv(); env.reset(**row)        state: counter=0  target=42
     assistant: CALL increment(step=42)     ── MODEL tokens → in the loss
     tool:      RESULT 42                   ── env.increment(42) ran;  state: counter=42
     assistant: The counter is at 42.       ── MODEL tokens → in the loss
       │
       ▼  reward = 1 × env.get_reward()       (counter == target → 1.0; read from the state)
               + 0.5 × tool_call_reward     (a trainer-owned format reward: a call, none failed)
    ```

    * The state keeps every call: a second `increment` adds again and overshoots, however the final sentence
      reads. On the lock, a wrong code first and the right one second still opens it.
    * A call the environment rejects (a wrong argument name, an unknown tool) does not crash the run: the tool
      turn says `{'error': ...}`, TRL counts it in `tools/failure_frequency`, and the state is unchanged.
    * `max_tool_calling_iterations=2`: at most two tool turns, then the model must answer.
    """)
    return


@app.cell
def _(mo):
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.teaching.lesson_helpers import lesson_size

    size = lesson_size()
    if size.gpu:
        # A larger model with a native tool template (TRL parses Qwen2.5's JSON calls itself): no tool_template.
        recipe = get_recipe("counter-lock-env-cpu", model="Qwen/Qwen2.5-0.5B-Instruct", tool_template=None)
    elif size.small:
        # The project's CI (or -- --small): 1 prompt × 4 short completions per step, 6 held-out rows.
        recipe = get_recipe("counter-lock-env-smoke")
    else:
        # The recipe as docs/results.md measures it: 8 steps of 2 prompts × 4 completions, 4 samples per held-out row.
        recipe = get_recipe("counter-lock-env-cpu")
    train_steps = size.steps(gpu=30, cpu=recipe.training["max_steps"], small=recipe.training["max_steps"])
    num_eval, eval_k = size.pick(gpu=(32, 4), cpu=(32, recipe.eval_samples), small=(6, 2))
    output_root = size.output_dir("lesson9")
    mo.callout(
        mo.md(
            f"**{size.name.upper()} settings** — recipe `{recipe.name}`, model `{recipe.model}`, {train_steps} steps, "
            f"{recipe.training['num_generations']} rollouts of ≤ {recipe.training['max_completion_length']} "
            f"tokens a turn, {num_eval} held-out rows × {eval_k} samples at T = 1.0."
            + (
                "\n\n**Too small to learn:** every part runs, but a few steps of one prompt cannot move the "
                "model; expect the held-out change to read about 0. Without `--small` the lesson runs the recipe "
                "as docs/results.md measures it (`python notebooks/09_grpo_in_an_environment.py`, or "
                "`grpo-kit train --recipe counter-lock-env-cpu --loop trl`)."
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
    from grpo_kit.rollout.environments import check_environments, resolve_environment_factory
    from grpo_kit.rollout.tool_sets import prepare_tool_tokenizer
    from grpo_kit.runs.held_out import held_out_rows

    # ("counter", "lock") -> {"counter": CounterEnv, "lock": LockEnv}: TRL's dict of factories
    factory = resolve_environment_factory(recipe.environment)
    train_dataset = recipe.load_dataset()
    # everything TRL would find only at step 1, checked on a probe episode before any weights load
    check_environments(factory, train_dataset)
    # the recipe's held-out rows: its test split, drawn apart from the training targets
    held_out = held_out_rows(recipe, num_eval, training=train_dataset)
    tokenizer = prepare_tool_tokenizer(load_tokenizer(recipe.model), recipe.tool_template)
    return factory, held_out, tokenizer, train_dataset


@app.cell
def _(factory, mo, train_dataset):
    from grpo_kit.rollout.environments import environment_tools, factory_for_row, reset_episode

    def routing_row(row):
        """Which class a row's episode gets, what reset() receives, and the tools its prompt lists."""
        make, reset_kwargs = factory_for_row(factory, row)
        instance, _ = reset_episode(factory, row)
        tools = ", ".join(f"`{tool.__name__}`" for tool in environment_tools(instance))
        return f"| {row['environment']} | `{make.__name__}` | {', '.join(sorted(reset_kwargs))} | {tools} |"

    routed = [dict(train_dataset[i]) for i in range(4)]
    mo.md(
        "## 2 · Several environments, one dataset\n\nA dict of factories routes each row by its `environment` "
        "column; `reset` gets the other columns, and the prompt lists only that environment's tools (TRL "
        "renders each prompt with its own).\n\n"
        "| `environment` | instance | `reset(**row)` receives | tools in its prompt |\n|:---|:---|:---|:---|\n"
        + "\n".join(routing_row(row) for row in routed)
    )
    return environment_tools, reset_episode, routed


@app.cell
def _(mo):
    play = mo.ui.dropdown(
        options=["one call, the target", "one off, then the target", "a wrong argument name"],
        value="one off, then the target",
        label="what the model does",
    )
    row_index = mo.ui.slider(0, 3, value=0, label="training row", show_value=True)
    mo.vstack(
        [
            mo.md(
                "## 3 · An episode turn by turn, with its state\n\nScripted calls played against a fresh "
                "instance, as TRL's trainer plays the model's: the tool's reply and the state after each call, "
                "then every reward the run sums."
            ),
            mo.hstack([row_index, play], justify="start"),
        ]
    )
    return play, row_index


@app.cell
def _(environment_tools, factory, play, reset_episode, routed, row_index):
    import inspect

    from grpo_kit.rollout.tool_rollout import run_tool_calls

    episode_row = routed[row_index.value]
    episode_env, episode_prompt = reset_episode(factory, episode_row)
    _tool = environment_tools(episode_env)[0]  # each environment here has one tool
    _argument = next(iter(inspect.signature(_tool).parameters))
    _t = int(episode_row["target"])
    _calls = {
        "one call, the target": [(_argument, _t)],
        "one off, then the target": [(_argument, _t - 1), (_argument, _t)],
        "a wrong argument name": [("value", _t)],
    }[play.value]
    episode_messages, episode_states = [], []
    for _name, _value in _calls:
        _call = {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": _tool.__name__, "arguments": {_name: _value}}}],
        }
        _results = run_tool_calls(
            _call, {_tool.__name__: _tool}
        )  # TRL's rule: an exception becomes {'error': ...}
        episode_messages += [_call, *_results]
        episode_states.append(dict(vars(episode_env)))  # the state after this call
    episode_messages.append({"role": "assistant", "content": "Done."})
    return episode_env, episode_messages, episode_prompt, episode_row, episode_states


@app.cell
def _(episode_env, episode_messages, episode_row, episode_states, mo, recipe, tokenizer):
    from grpo_kit.rollout.tool_rollout import recipe_reward_funcs
    from grpo_kit.rollout.tool_template import render_call

    _turns = []
    _states = iter(episode_states)
    for _m in episode_messages:
        if _m.get("tool_calls"):
            _f = _m["tool_calls"][0]["function"]
            _turns.append(f"| assistant | `{render_call(_f['name'], **_f['arguments'])}` | |")
        elif _m["role"] == "tool":
            _state = ", ".join(f"{k}={v}" for k, v in next(_states).items())
            _turns.append(f"| tool | `RESULT {_m['content']}` | {_state} |")
        else:
            _turns.append(f"| assistant | {_m['content']} | |")
    # the recipe's reward functions, then each environment's get_reward with weight 1 (as TRL appends them)
    _funcs, _weights = recipe_reward_funcs(recipe, recipe.build_reward_funcs(tokenizer))
    episode_scores = {
        f.__name__: (w, f([episode_messages], environments=[episode_env])[0])
        for f, w in zip(_funcs, _weights)
    }
    _scored = {n: (w, s) for n, (w, s) in episode_scores.items() if s is not None}
    episode_total = sum(w * s for w, s in _scored.values())
    mo.md(
        f"Row: *{episode_row['question']}* (`reset(target={episode_row['target']})`)\n\n"
        "| turn | text | state after the call |\n|:---|:---|:---|\n"
        + "\n".join(_turns)
        + "\n\n| reward | weight | score |\n|:---|:---|:---|\n"
        + "\n".join(
            f"| `{n}` | {w:g} | " + ("— (another environment's column)" if s is None else f"{s:.2f}") + " |"
            for n, (w, s) in episode_scores.items()
        )
        + f"\n| **total** | | **{episode_total:.2f}** |"
    )
    return episode_scores, episode_total


@app.cell
def _(episode_prompt, environment_tools, episode_env, mo, tokenizer):
    from grpo_kit.teaching.lesson_helpers import wrapped_text

    rendered_prompt = tokenizer.apply_chat_template(
        episode_prompt, tools=environment_tools(episode_env), tokenize=False, add_generation_prompt=True
    )
    mo.vstack(
        [
            mo.md(
                "What the model reads for that row: its environment's tool in the system turn, one worked "
                "exchange (another number), then the task. The model continues after the last `assistant` line."
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
        f"Measure the base model: pre-flight on 4 training rows, then {num_eval} held-out rows",
        kind="neutral",
    )
    button_panel(
        "## 4 · Preflight: is there anything to learn?\n\nBoth measurements play the base model's "
        "episodes, several minutes on a 2-core CPU; the Train button appears with their verdict.",
        measure_button,
    )
    return measure_button, should_run


@app.cell
def _(measure_button, mo, recipe, should_run, tokenizer, train_dataset, wrapped_text):
    from grpo_kit.models import load_model
    from grpo_kit.teaching.lesson_runs import preflight_with_spinner

    mo.stop(not should_run(measure_button), mo.md("Press the button to measure the base model."))
    base_model, _ = load_model(recipe.model)  # the tool-prepared tokenizer above is the one used
    # one episode per rollout, a fresh instance each, sampled as the first training step samples
    preflight_report = preflight_with_spinner(
        recipe, base_model, tokenizer, train_dataset, what="training rows", unit="episodes"
    )
    _success = [preflight_report.reward_mean.get(n, float("nan")) for n in ("CounterEnv", "LockEnv")]
    _text = mo.md(
        f"""
    {preflight_report.num_prompts} training rows × {preflight_report.num_generations} episodes with the base
    model, at the run's settings:

    | base model | share of episodes or groups |
    |:---|:---|
    | episodes with a well-formed call (`tool_call_reward`) | **{preflight_report.reward_mean["tool_call_reward"]:.0%}** |
    | counter episodes that end at the target (`CounterEnv`) | **{_success[0]:.0%}** |
    | lock episodes that open it (`LockEnv`) | **{_success[1]:.0%}** |
    | groups whose reward has zero variance (no learning signal) | **{preflight_report.zero_std_share:.0%}** |

    GRPO learns only from groups where some episodes succeed and some fail.

    One episode:
    """
    )
    mo.vstack([_text, wrapped_text(preflight_report.examples[0] if preflight_report.examples else "")])
    return base_model, preflight_report


@app.cell
def _(base_model, eval_k, held_out, preflight_report, recipe, tokenizer):
    from grpo_kit.teaching.lesson_runs import evaluate_with_spinner

    assert preflight_report.num_prompts  # measured after the pre-flight, behind the same button
    # The library's held-out evaluation (what `grpo-kit train` reports): one episode per rollout with the
    # recipe's environments, scored by get_reward + the recipe's rewards, greedy + eval_k samples at T = 1.0.
    before_report = evaluate_with_spinner(recipe, base_model, tokenizer, held_out, k=eval_k)
    return (before_report,)


@app.cell
def _(before_report, preflight_report, size, train_steps):
    from grpo_kit.teaching.lesson_runs import train_section

    train_button, _section = train_section(
        f"Train {train_steps} steps with TRL in the environments",
        f"## 5 · Train\n\nThe base model was measured on {before_report.num_prompts} held-out rows "
        "(section 6 compares). `trl_path.train_with_trl(recipe)` passes the dict of factories as "
        "`environment_factory=` to `GRPOTrainer`; TRL appends one `get_reward` column per environment "
        "class (weight 1) to the recipe's rewards.",
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
def _(mo, run):
    from grpo_kit.teaching.lesson_runs import saved_curve, step_metrics_table

    step_metrics = [r for r in run.log_history if "tools/call_frequency" in r]
    _columns = [
        ("tools/call_frequency", "calls per episode"),
        ("tools/failure_frequency", "failed calls"),
        ("rewards/CounterEnv/mean", "counter success"),
        ("rewards/LockEnv/mean", "lock success"),
        ("rewards/tool_call_reward/mean", "well-formed call"),
        ("frac_reward_zero_std", "zero-variance groups"),
    ]
    mo.vstack(
        [
            saved_curve(run),
            mo.md(
                "The curve's total is `CounterEnv` or `LockEnv` (whichever the row is for) × 1 + "
                "`tool_call_reward` × 0.5, at most 1.5. A step logs no value (—) for an "
                "environment none of its rows played.\n\nTRL's metrics per step:\n\n"
                + step_metrics_table(step_metrics, _columns)
            ),
        ]
    )
    return (step_metrics,)


@app.cell
def _(eval_k, held_out, recipe, run, tokenizer):
    from grpo_kit.teaching.lesson_runs import evaluate_trained

    after_report = evaluate_trained(
        recipe, run, tokenizer, held_out, k=eval_k
    )  # the same rows, decoding, seeds
    return (after_report,)


@app.cell
def _(after_report, before_report, mo, wrapped_text):
    from grpo_kit.teaching.lesson_runs import compare_metrics, comparison_table

    _k = after_report.settings["k"]
    _labels = {
        f"accuracy@{_k}": f"success, {_k} samples at T = 1.0 (headline)",
        "accuracy": "success, greedy",
        "reward/CounterEnv": "counter success, greedy (counter rows)",
        "reward/LockEnv": "lock success, greedy (lock rows)",
        "tool_calls": "tool calls per episode, greedy",
        "failed_calls": "failed calls per episode, greedy",
        "turns": "assistant turns per episode, greedy",
    }
    held_out_comparisons = compare_metrics(before_report, after_report, _labels)
    mo.vstack(
        [
            mo.md(
                f"## 6 · Held-out rows, before and after\n\n{after_report.num_prompts} rows (targets) the run never "
                "saw, half counter, half lock; paired bootstrap 95 % CI of the change "
                "(`grpo_kit.evaluation.compare`).\n\n"
                + comparison_table(((_labels[m], c) for m, c in held_out_comparisons.items()), n=True)
                + "\n\nOne episode after training:"
            ),
            wrapped_text(after_report.completions[0]),
        ]
    )
    return (held_out_comparisons,)


@app.cell
def test_episode_state_decides_the_reward(episode_env, episode_row, episode_scores, episode_states, play):
    _counter = episode_row["environment"] == "counter"
    _success = episode_scores["CounterEnv" if _counter else "LockEnv"][1]
    _other = episode_scores["LockEnv" if _counter else "CounterEnv"][1]
    assert _other is None  # the other environment's column leaves this episode alone
    if play.value == "a wrong argument name":  # rejected: the state did not move, the call failed
        assert _success == 0.0 and episode_scores["tool_call_reward"][1] == 0.0
        assert episode_states[-1].get("counter", 0) == 0 and not episode_states[-1].get("is_open", False)
    elif play.value == "one off, then the target":  # the counter overshoots; the lock opens at the second try
        assert _success == (0.0 if _counter else 1.0)
        assert episode_env.get_reward() == _success
    else:
        assert _success == 1.0
    return


@app.cell
def test_routing_shows_each_row_only_its_tool(rendered_prompt, routed):
    assert {r["environment"] for r in routed} == {"counter", "lock"}
    assert rendered_prompt.rstrip().endswith("assistant")  # the model writes the next turn
    assert ("increment(" in rendered_prompt) != ("enter_code(" in rendered_prompt)
    return


@app.cell
def test_episodes_trained_and_were_measured(
    after_report, held_out_comparisons, preflight_report, step_metrics
):
    assert step_metrics and all(0.0 <= r["tools/call_frequency"] for r in step_metrics)
    assert all(0.0 <= r["tools/failure_frequency"] <= 1.0 for r in step_metrics)
    assert 0.0 <= preflight_report.zero_std_share <= 1.0
    _c = held_out_comparisons[f"accuracy@{after_report.settings['k']}"]
    assert _c.ci_low <= _c.mean_diff <= _c.ci_high and _c.n == after_report.num_prompts
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    **What the measured run showed** (docs/results.md, recipe `counter-lock-env-cpu`, 2 seeds): held-out
    success at T = 1.0 rose from 42 % of episodes (54/128) to 98 % (125/128) with seed 42, +0.55 [95 % CI +0.48,
    +0.63], and to 95 % (121/128) with seed 1, +0.52 [+0.45, +0.60], in 8 CPU steps (about 4–5 minutes of
    training). Greedy, the base model already succeeds on every row: it copies the worked example. What GRPO
    fixes is the sampled episodes, the ones training itself draws.

    Next: add an environment of your own (a class with `reset(self, **row)`, typed and documented public
    methods, and `get_reward(self)`), register it in `grpo_kit.rollout.environments.ENVIRONMENTS` (name -> `"module:Class"`), and name it in a
    recipe's `environment=`; `check_environments` tells you, before any weights load, what TRL would refuse.
    """)
    return


if __name__ == "__main__":
    app.run()
