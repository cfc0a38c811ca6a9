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
    # Lesson 5 · The loop without the black box

    `trainer.train()` hides one GRPO step behind a single call. Here it is taken apart, one cell per
    arrow of

    ```
    prompts ─▶ sample G completions ─▶ score ─▶ advantages ─▶ per-token log-probs ─▶ loss ─▶ update
    ```

    first on a **tiny random model** (2 layers, the real SmolLM2 tokenizer — every cell runs in
    milliseconds, so you can re-run and watch the numbers change), then on the **embedded
    SmolLM2-135M** with `grpo_kit.loop.training.train`, the standalone loop that strings the same functions
    together and logs the same metrics, under the same names, as TRL's `GRPOTrainer`.
    The building blocks are the library's: `grpo_kit.core.advantages` and `grpo_kit.core.losses` are proven
    equal to TRL's code by the project's parity tests.
    """)
    return


@app.cell(hide_code=True)
def _():
    import torch

    return (torch,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 0 · Model, prompts, settings

    Two GSM8K-style problems (offline: `synthetic_gsm8k`), $G = 4$ completions each, at most 16 new
    tokens. The tiny model's weights are random, so its "answers" are noise — which is all the step
    needs: completions that differ, so their rewards differ.
    """)
    return


@app.cell
def _(torch):
    import tempfile

    from datasets_prep import load_gsm8k, synthetic_gsm8k
    from grpo_kit.config.loop import GRPOLoopConfig
    from grpo_kit.loop import training as loop
    from grpo_kit.models import tiny_model

    torch.manual_seed(0)
    tiny, tiny_tokenizer = tiny_model(seed=0)
    tiny.train()  # TRL samples and trains in training mode (dropout is 0 here anyway)
    step_config = GRPOLoopConfig(
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=16,
        learning_rate=3e-3,
        temperature=1.0,
        output_dir=tempfile.mkdtemp(prefix="grpo-kit-lesson5-"),
    )
    problems = load_gsm8k("train", source=synthetic_gsm8k(2, seed=0))
    # Each prompt repeated G times, its completions side by side: the order TRL's RepeatSampler produces.
    rows = [dict(row) for row in problems for _ in range(step_config.num_generations)]
    return GRPOLoopConfig, loop, problems, rows, step_config, tempfile, tiny, tiny_model, tiny_tokenizer


@app.cell
def _(mo, problems):
    from grpo_kit.support.markdown_text import text_block

    mo.md(
        "The first prompt, as the model receives it (system prompt + question, conversational):\n\n"
        + "\n\n".join(f"**{m['role']}**:  \n{text_block(m['content'])}" for m in problems[0]["prompt"])
        + f"\n\nGold answer (`answer` column): **{problems[0]['answer']}**"
    )
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 1 · Sample

    Render each prompt with the chat template (`datasets_prep.prompt_to_text`, as TRL does), pad on
    the **left** so every completion starts in the same column, and sample $G$ completions per prompt
    (`grpo_kit.core.sampling.sample_completions`: what `model.generate` does, with the prompt run through the
    model once per group instead of once per completion).
    The **completion mask** keeps every token up to and including the first EOS; a completion that
    never reached EOS is *truncated* (TRL logs the share as `completions/clipped_ratio`).
    """)
    return


@app.cell
def _(mo, problems, step_config, tiny, tiny_tokenizer, torch):
    from datasets_prep import prompt_to_text
    from grpo_kit.core.sampling import mask_after_eos, sample_completions, stop_token_ids

    G = step_config.num_generations
    _texts = [prompt_to_text(row["prompt"], tiny_tokenizer) for row in problems]
    # The chat template already wrote the special tokens, hence add_special_tokens=False.
    _encoded = tiny_tokenizer(
        _texts, padding=True, padding_side="left", return_tensors="pt", add_special_tokens=False
    )
    _eos_ids = stop_token_ids(tiny, tiny_tokenizer)  # the tokenizer's EOS plus the model's end-of-turn ids
    torch.manual_seed(1)
    # G completions per prompt, rows b*G … b*G+G-1 for prompt b; the prompt is prefilled once (grpo_kit.core.sampling).
    _sampled = sample_completions(
        tiny,
        _encoded["input_ids"],
        _encoded["attention_mask"],
        num_generations=G,
        max_new_tokens=step_config.max_completion_length,
        eos_token_ids=_eos_ids,
        pad_token_id=tiny_tokenizer.pad_token_id,
        temperature=step_config.temperature,
    )  # (N, T)
    completion_ids, completion_mask, is_truncated = mask_after_eos(
        _sampled, _eos_ids, tiny_tokenizer.pad_token_id
    )  # (N, T), (N, T), (N,)
    prompt_ids = _encoded["input_ids"].repeat_interleave(G, dim=0)  # (N, P)
    prompt_mask = _encoded["attention_mask"].repeat_interleave(G, dim=0)  # (N, P)
    completion_lengths = completion_mask.sum(1)  # (N,)
    completion_texts = tiny_tokenizer.batch_decode(
        [ids[: int(n)] for ids, n in zip(completion_ids, completion_lengths)], skip_special_tokens=True
    )
    # Conversational prompts get conversational completions (what reward functions receive from TRL).
    completions = [[{"role": "assistant", "content": text}] for text in completion_texts]
    mo.show_code()  # `marimo run` shows no code: this cell's is the lesson
    return (
        completion_ids,
        completion_lengths,
        completion_mask,
        completion_texts,
        completions,
        is_truncated,
        prompt_ids,
        prompt_mask,
    )


@app.cell
def _(completion_lengths, completion_texts, is_truncated, mo, prompt_ids, step_config):
    mo.md(
        f"`prompt_ids` {tuple(prompt_ids.shape)} · completions: {len(completion_texts)} = 2 prompts × "
        f"G = {step_config.num_generations}\n\n| # | completion (random model) | tokens | truncated |\n|:---|:---|:---|:---|\n"
        + "\n".join(
            f"| {i} | {text[:70]!r} | {int(n)} | {bool(t)} |"
            for i, (text, n, t) in enumerate(zip(completion_texts, completion_lengths, is_truncated))
        )
    )
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 2 · Score

    Every reward function gets the completions plus, as keyword arguments, the prompts, the
    `completion_ids` and every dataset column (`answer` here) — TRL's calling convention. `None`
    becomes NaN in the `(N, F)` reward matrix. A random model never gets a GSM8K answer right, so
    to have something to learn we add a toy reward that random text already varies on: the share of
    the letter "e".
    """)
    return


@app.cell
def _(mo):
    import rewards

    def letter_e_reward(completions, **kwargs):
        """Share of the letter 'e' in the completion: a toy reward random text already varies on."""
        texts = [rewards.completion_text(c) for c in completions]
        return [text.count("e") / max(len(text), 1) for text in texts]

    reward_funcs = [letter_e_reward, rewards.xmlcount_reward, rewards.correctness_reward]
    # the toy reward counts 10x, so that it matters next to the two GSM8K ones (section 3 shows the weights)
    reward_weights = [10.0, 1.0, 1.0]
    mo.show_code()
    return reward_funcs, reward_weights


@app.cell
def _(completion_ids, completion_lengths, completions, mo, reward_funcs, rows):
    from grpo_kit.core.advantages import stack_rewards

    _columns = {key: [row[key] for row in rows] for key in rows[0] if key != "prompt"}
    _ids = [ids[: int(n)].tolist() for ids, n in zip(completion_ids, completion_lengths)]
    rewards_per_func = stack_rewards(
        [
            fn(
                prompts=[row["prompt"] for row in rows],
                completions=completions,
                completion_ids=_ids,
                **_columns,
            )
            for fn in reward_funcs
        ]
    )  # (N, F) NaN where a function returned None
    mo.show_code()
    return (rewards_per_func,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 3 · Advantages

    Weighted sum over reward functions, minus the group mean, divided by the group std
    (`scale_rewards="group"`). The statistics beside them are exactly what TRL logs.
    """)
    return


@app.cell
def _(mo, reward_funcs, reward_weights, rewards_per_func, step_config):
    from grpo_kit.core.advantages import compute_advantages_with_metrics

    advantage_result = compute_advantages_with_metrics(
        rewards_per_func,
        step_config.num_generations,
        reward_weights=reward_weights,
        scale_rewards=step_config.scale_rewards,
        reward_func_names=[fn.__name__ for fn in reward_funcs],
    )
    advantages = advantage_result.advantages  # (N,)
    mo.show_code()
    return advantage_result, advantages


@app.cell
def _(advantage_result, advantages, mo, reward_funcs, reward_weights, rewards_per_func):
    _names = [fn.__name__ for fn in reward_funcs]
    mo.vstack(
        [
            mo.md(
                "Reward weights: "
                + ", ".join(f"`{n}` × {w:g}" for n, w in zip(_names, reward_weights))
                + " (the weighted sum is what the advantages centre).\n\n"
                "| # | "
                + " | ".join(f"`{n}`" for n in _names)
                + " | advantage |\n|"
                + ":---|" * (len(_names) + 2)
                + "\n"
                + "\n".join(
                    f"| {i} | "
                    + " | ".join(f"{v:.3f}" for v in rewards_per_func[i].tolist())
                    + f" | {advantages[i].item():+.3f} |"
                    for i in range(len(advantages))
                )
            ),
            mo.md("Logged: " + ", ".join(f"`{k}` = {v:.4g}" for k, v in advantage_result.metrics.items())),
        ]
    )
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 4 · Per-token log-probabilities and the loss

    Prompt and completion go through the model once; `grpo_kit.core.logprobs.per_token_logps` keeps only
    $\log\pi_\theta$ of each **sampled** completion token — `(N, T)`, never the whole `(N, T, V)`
    distribution. `compute_loss` turns them, the advantages and the mask into the loss. With one
    update per batch (`num_iterations = 1`) the "old" log-probs are these very values, detached.
    """)
    return


@app.cell
def _(
    advantages,
    completion_ids,
    completion_mask,
    mo,
    prompt_ids,
    prompt_mask,
    step_config,
    tiny,
    torch,
):
    from grpo_kit.core.logprobs import per_token_logps
    from grpo_kit.core.losses import compute_loss

    full_ids = torch.cat([prompt_ids, completion_ids], dim=1)  # (N, P+T)
    full_mask = torch.cat([prompt_mask, completion_mask], dim=1)  # (N, P+T)
    logps_before, _ = per_token_logps(
        tiny, full_ids, full_mask, completion_ids.size(1)
    )  # (N, T) with gradient
    loss, loss_metrics = compute_loss(
        logps_before,
        advantages,
        completion_mask,
        loss_type=step_config.loss_type,  # "dapo", TRL's default
        beta=step_config.beta,
        epsilon=step_config.epsilon,
        max_completion_length=step_config.max_completion_length,
    )
    mo.show_code()
    return full_ids, full_mask, logps_before, loss, loss_metrics, per_token_logps


@app.cell
def _(logps_before, loss, loss_metrics, mo):
    mo.md(
        f"`per_token_logps` {tuple(logps_before.shape)} · loss = **{loss.item():+.5f}** "
        f"(near 0 by construction: ratio 1 and advantages that sum to 0 per group — lesson 2) · "
        + ", ".join(f"`{k}` = {v:.3g}" for k, v in loss_metrics.items())
    )
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 5 · Update

    Backward, clip the gradient norm (TRL: `max_grad_norm = 1.0`), one AdamW step. Then ask the model
    again: the completions with a **positive advantage became more likely** and those with a negative
    one less likely. That is the whole of GRPO; the rest is doing it many times.
    """)
    return


@app.cell
def _(
    completion_ids, completion_mask, full_ids, full_mask, loss, mo, per_token_logps, step_config, tiny, torch
):
    _optimizer = torch.optim.AdamW(
        [p for p in tiny.parameters() if p.requires_grad], lr=step_config.learning_rate
    )
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(tiny.parameters(), step_config.max_grad_norm).item()
    _optimizer.step()
    _optimizer.zero_grad(set_to_none=True)
    with torch.no_grad():
        logps_after, _ = per_token_logps(tiny, full_ids, full_mask, completion_ids.size(1))  # (N, T)
    mo.show_code()
    return grad_norm, logps_after


@app.cell
def _(advantages, completion_mask, grad_norm, logps_after, logps_before, mo):
    # Change in each completion's log-probability: Σ_t Δ log π over its tokens.
    sequence_logp_change = ((logps_after - logps_before.detach()) * completion_mask).sum(1)  # (N,)
    mo.md(
        f"Gradient norm {grad_norm:.3f}.\n\n| # | advantage | Δ log π(completion) |\n|:---|:---|:---|\n"
        + "\n".join(
            f"| {i} | {a:+.3f} | {d:+.4f} |"
            for i, (a, d) in enumerate(zip(advantages.tolist(), sequence_logp_change.tolist()))
        )
    )
    return (sequence_logp_change,)


@app.cell
def test_one_step_moves_probability_towards_positive_advantages(advantages, sequence_logp_change, torch):
    _up = sequence_logp_change[advantages > 0]
    _down = sequence_logp_change[advantages < 0]
    assert len(_up) and len(_down)
    assert _up.mean() > _down.mean()
    # Advantages and the change in log-probability are positively correlated.
    _corr = torch.corrcoef(torch.stack([advantages, sequence_logp_change]))[0, 1]
    assert _corr > 0.3, _corr
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 6 · The same, many times: `grpo_kit.loop.training.train` on SmolLM2-135M

    `grpo_kit.loop.training.train` is the steps above in a loop (read `grpo_kit/loop/training.py` top to bottom: its
    docstring lists what it simplifies compared with TRL). Here it trains the embedded SmolLM2-135M
    with LoRA on the `smoltldr-length` recipe's reward, writing `metrics.jsonl` with TRL's metric
    names, a reward curve and checkpoints that resume exactly.
    """)
    return


@app.cell
def _(mo):
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.runs import to_loop_config
    from grpo_kit.teaching.lesson_helpers import lesson_size, on_gpu, run_button

    _size = lesson_size()
    loop_recipe = get_recipe("smoltldr-length", small=not _size.gpu)
    loop_steps = _size.steps(gpu=40, cpu=3)
    # `-- --model tiny`: the random 2-layer model instead of SmolLM2-135M (the browser test presses this button).
    loop_model = _size.args.get("model") or loop_recipe.model
    _model_label = "the tiny model" if loop_model == "tiny" else "SmolLM2-135M"
    loop_button = run_button(f"Train {_model_label} for {loop_steps} steps with grpo_kit.loop.training")
    loop_config_overrides = {
        "max_steps": loop_steps,
        "logging_steps": 1,
        "save_steps": loop_steps,
        "learning_rate": 3e-4,
        "disable_tqdm": True,
        "eval_steps": None,  # the recipe's held-out evaluation during training is grpo-kit train's, not this cell's
    }
    _preview = to_loop_config(loop_recipe, output_dir="(set when training)", **loop_config_overrides)
    mo.vstack(
        [
            mo.md(
                f"Recipe `{loop_recipe.name}` as a `GRPOLoopConfig`: G = {_preview.num_generations}, "
                f"≤ {_preview.max_completion_length} tokens, loss `{_preview.loss_type}`, "
                f"lr {_preview.learning_rate:g}, {loop_steps} steps."
                + (
                    f" {loop_steps} steps show what the loop records, not learning: too few to change the "
                    f"answers (`grpo-kit train` trains this recipe for {loop_recipe.training['max_steps']} steps "
                    "and measures it on held-out posts)."
                    if loop_steps < loop_recipe.training.get("max_steps", 0)
                    else ""
                )
            ),
            loop_button,
        ]
    )
    return loop_button, loop_config_overrides, loop_model, loop_recipe, on_gpu, to_loop_config


@app.cell
def _(
    loop,
    loop_button,
    loop_config_overrides,
    loop_model,
    loop_recipe,
    mo,
    on_gpu,
    tempfile,
    tiny_model,
    to_loop_config,
):
    from pathlib import Path

    from grpo_kit.models import load_model
    from grpo_kit.teaching.lesson_helpers import LiveRewardCurve, should_run

    mo.stop(not should_run(loop_button), mo.md("Press the button to train."))
    _lora = loop_recipe.lora.to_peft_config()
    _model, _tokenizer = (
        tiny_model(lora=_lora) if loop_model == "tiny" else load_model(loop_model, lora=_lora)
    )
    _model = _model.to("cuda") if on_gpu() else _model  # the loop trains wherever the model is
    _config = to_loop_config(
        loop_recipe, output_dir=str(Path(tempfile.mkdtemp(prefix="grpo-kit-loop-"))), **loop_config_overrides
    )
    _curve = LiveRewardCurve("grpo_kit.loop.training on SmolLM2-135M")
    loop_result = loop.train(
        _model,
        _tokenizer,
        loop_recipe.load_dataset(),
        loop_recipe.build_reward_funcs(_tokenizer),
        _config,
        callbacks=[_curve],
    )
    _curve.finish()  # the saved curve below is the one left on the page
    return (loop_result,)


@app.cell
def _(loop_result, mo):
    from grpo_kit.teaching.lesson_runs import metrics_table, saved_curve

    mo.vstack(
        [
            saved_curve(loop_result, missing=""),
            mo.md(
                f"`{loop_result.metrics_path.name}`, last record — the keys are TRL's:\n\n"
                + metrics_table(loop_result.log_history[-1])
            ),
        ]
    )
    return


@app.cell
def test_loop_logs_trls_metric_names(loop_result):
    from grpo_kit.artifacts.metrics_log import TRL_METRIC_NAMES

    assert loop_result.global_step == len(loop_result.step_losses) > 0
    _record = loop_result.log_history[-1]
    _missing = set(TRL_METRIC_NAMES) - set(_record)
    assert not _missing, _missing
    assert any(k.startswith("rewards/") and k.endswith("/mean") for k in _record)
    assert loop_result.metrics_path.exists() and loop_result.checkpoint is not None
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 7 · Entropy collapse, and the entropy bonus

    GRPO only ever pushes probability towards completions that scored above their group. Step after
    step the policy gets sharper, the per-token **entropy** (logged as `entropy`, in nats) falls, and
    once it is near 0 every completion of a group is the same: equal rewards, zero advantages, no more
    learning. That is *entropy collapse*, the classic GRPO failure.

    TRL's remedy (and `grpo_kit.loop.training`'s, equal to it): subtract $c \cdot H$ from the loss, $H$ the mean
    per-token entropy — `entropy_coef = c` for a fixed bonus, or `use_adaptive_entropy=True`
    (Skywork-OR1), which raises $c$ by `entropy_coef_delta` after every step whose entropy is at or below
    `entropy_target`, lowers it otherwise, and applies it only below the target. The default target
    0.2 nats almost never fires on a language model (2–10 nats per token early on): **pick the target
    from the entropy you see in the first steps** — the level you do not want the policy to fall under.

    Below, three runs of a toy policy (one prompt, six answers; `grpo_kit.teaching.entropy_demo`, the library's
    own `compute_loss` and `EntropyControl`) from the same seed: no bonus, a fixed bonus, and the
    adaptive bonus with a target read off the first steps of the run without one.
    """)
    return


@app.cell
def _(mo, tempfile):
    from grpo_kit.core.losses.entropy import EntropyControl
    from grpo_kit.teaching.entropy_demo import plot_entropy_runs, toy_entropy_run

    entropy_plain = toy_entropy_run(EntropyControl(), label="no bonus")
    entropy_fixed = toy_entropy_run(EntropyControl(entropy_coef=0.3), label="entropy_coef = 0.3")
    # The target: a little over half of the entropy of the first five steps (ln 6 ≈ 1.79 nats here).
    entropy_target = round(0.55 * sum(entropy_plain.entropy[:5]) / 5, 2)
    entropy_adaptive = toy_entropy_run(
        EntropyControl(use_adaptive_entropy=True, entropy_target=entropy_target, entropy_coef_delta=0.05),
        label=f"adaptive, entropy_target = {entropy_target}",
    )
    _png = plot_entropy_runs(
        [entropy_plain, entropy_fixed, entropy_adaptive],
        f"{tempfile.mkdtemp(prefix='grpo-kit-entropy-')}/entropy.png",
        target=entropy_target,
    )
    _first_on = next((i + 1 for i, c in enumerate(entropy_adaptive.entropy_coef) if c > 0), None)
    mo.vstack(
        [
            mo.image(src=_png.read_bytes()),
            mo.md(
                f"After {len(entropy_plain.entropy)} steps: entropy **{entropy_plain.entropy[-1]:.2f}** nats "
                f"without a bonus, **{entropy_fixed.entropy[-1]:.2f}** with `entropy_coef = 0.3`, "
                f"**{entropy_adaptive.entropy[-1]:.2f}** adaptive (its coefficient first applied at step "
                f"{_first_on}, once the entropy had fallen to the target; "
                f"{entropy_adaptive.entropy_coef[-1]:.2f} at the end)."
            ),
        ]
    )
    return entropy_adaptive, entropy_fixed, entropy_plain, entropy_target


@app.cell
def test_entropy_bonus_slows_the_collapse(entropy_adaptive, entropy_fixed, entropy_plain, entropy_target):
    # Fixed seed: the runs share their first completions, then the bonus keeps the policy broader.
    assert entropy_plain.entropy[0] == entropy_fixed.entropy[0] == entropy_adaptive.entropy[0]
    assert entropy_plain.entropy[-1] < 0.6 * entropy_plain.entropy[0]  # it does collapse
    assert entropy_fixed.entropy[-1] > entropy_plain.entropy[-1] + 0.2
    assert entropy_adaptive.entropy[-1] > entropy_plain.entropy[-1]
    # The adaptive coefficient is applied only after the entropy has reached the target.
    _first_on = next(i for i, c in enumerate(entropy_adaptive.entropy_coef) if c > 0)
    assert entropy_adaptive.entropy[_first_on - 1] <= entropy_target
    assert all(h > entropy_target for h in entropy_adaptive.entropy[: _first_on - 1])
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    Next: **Lesson 6** — the course's GSM8K practicum with five rewards, Unsloth and vLLM on a GPU.
    """)
    return


if __name__ == "__main__":
    app.run()
