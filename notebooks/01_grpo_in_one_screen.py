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
    # Lesson 1 · GRPO in one screen

    GRPO (Group Relative Policy Optimization, [DeepSeekMath](https://huggingface.co/papers/2402.03300))
    trains a language model with three ideas, all on this page:

    1. **Group-relative advantages.** For each prompt, sample a *group* of $G$ completions and score
       them. A completion's advantage is how much better its reward is than its group's:
       $\hat A_i = \dfrac{r_i - \operatorname{mean}(r_{\text{group}})}{\operatorname{std}(r) + 10^{-4}}$.
       No value network: the group is the baseline.
    2. **A KL penalty** that keeps the policy near a frozen reference, estimated per token with
       Schulman's $k_3 = e^{x} - x - 1$, $x = \log\pi_{\text{ref}} - \log\pi_\theta$.
    3. **A clipped surrogate** (from PPO): the probability ratio $\rho = \pi_\theta / \pi_{\text{old}}$
       multiplies the advantage, but outside $[1-\varepsilon_{\text{low}},\ 1+\varepsilon_{\text{high}}]$
       the gradient stops.

    $$
    \mathcal{L} = -\frac{1}{\sum_i |o_i|}\sum_{i}\sum_{t}
      \Big[\min\big(\rho_{i,t}\hat A_i,\ \operatorname{clip}(\rho_{i,t}, 1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}})\hat A_i\big)
      \;-\; \beta\, k_{3,i,t}\Big]
    $$

    Every number below is computed by `grpo_kit` — the same functions the training loop uses, proven
    equal to TRL's `GRPOTrainer` by the project's parity tests. Move the sliders.
    """)
    return


@app.cell(hide_code=True)
def _():
    import matplotlib.pyplot as plt
    import torch

    from grpo_kit.teaching.lesson_helpers import stack  # mo.vstack under marimo; figures as images in Jupyter

    return plt, stack, torch


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 1 · Group-relative advantages

    Two prompts, $G = 4$ completions each. Set each completion's reward (think: 1 = correct answer,
    0 = wrong). `scale_rewards` decides what the centred reward is divided by:
    `"group"` — the group's std (the paper); `"batch"` — the std of the whole batch
    ([PPO-Lite](https://huggingface.co/papers/2508.08221)); `"none"` — nothing
    ([Dr. GRPO](https://huggingface.co/papers/2503.20783): dividing by a small group std over-weights
    prompts that are almost always right or almost always wrong).
    """)
    return


@app.cell
def _(mo):
    group_a_sliders = mo.ui.array(
        [
            mo.ui.slider(0.0, 1.0, step=0.05, value=v, label=f"A{i + 1}", show_value=True)
            for i, v in enumerate([1.0, 0.0, 0.0, 0.0])
        ],
        label="prompt A: rewards of its 4 completions",
    )
    group_b_sliders = mo.ui.array(
        [
            mo.ui.slider(0.0, 1.0, step=0.05, value=v, label=f"B{i + 1}", show_value=True)
            for i, v in enumerate([1.0, 1.0, 0.5, 0.0])
        ],
        label="prompt B: rewards of its 4 completions",
    )
    # .vstack(): the sliders themselves (an array shown as a value renders as a collapsible JSON tree)
    mo.hstack(
        [
            mo.vstack([mo.md(f"**prompt {_name}**: rewards of its 4 completions"), _group.vstack()])
            for _name, _group in (("A", group_a_sliders), ("B", group_b_sliders))
        ],
        justify="start",
        gap=4,
    )
    return group_a_sliders, group_b_sliders


@app.cell
def _(group_a_sliders, group_b_sliders):
    from grpo_kit.core.advantages import SCALE_REWARDS_OPTIONS, compute_advantages_with_metrics, stack_rewards

    num_generations = 4
    slider_rewards = [*group_a_sliders.value, *group_b_sliders.value]
    # One reward function → rewards_per_func has shape (N, 1); N = 2 prompts × G.
    rewards_per_func = stack_rewards([slider_rewards])
    results_by_scale = {
        scale: compute_advantages_with_metrics(rewards_per_func, num_generations, scale_rewards=scale)
        for scale in SCALE_REWARDS_OPTIONS
    }
    return compute_advantages_with_metrics, num_generations, results_by_scale, slider_rewards


@app.cell
def _(mo, num_generations, plt, results_by_scale, slider_rewards, stack):
    _labels = [f"{'AB'[i // num_generations]}{i % num_generations + 1}" for i in range(len(slider_rewards))]
    _fig, _ax = plt.subplots(figsize=(8, 3.2))
    _width = 0.27
    for _k, (_scale, _result) in enumerate(results_by_scale.items()):
        _xs = [i + (_k - 1) * _width for i in range(len(_labels))]
        _ax.bar(_xs, _result.advantages.tolist(), width=_width, label=f'scale_rewards="{_scale}"')
    _ax.axhline(0, color="black", linewidth=0.8)
    _ax.axvline(num_generations - 0.5, color="grey", linestyle=":")
    _ax.set_xticks(range(len(_labels)), _labels)
    _ax.set_ylabel("advantage")
    _ax.set_title("Advantages: above the group mean pushes up, below pushes down")
    _ax.legend(fontsize="small")
    _fig.tight_layout()

    _rows = "\n".join(
        f"| {_labels[i]} | {slider_rewards[i]:.2f} | "
        + " | ".join(f"{r.advantages[i].item():+.3f}" for r in results_by_scale.values())
        + " |"
        for i in range(len(_labels))
    )
    _metrics = results_by_scale["group"].metrics
    stack(
        [
            _fig,
            mo.md(
                "| completion | reward | " + " | ".join(f'`"{s}"`' for s in results_by_scale) + " |\n"
                "|:---|:---|:---|:---|:---|\n" + _rows
            ),
            mo.md(
                f"What TRL logs for this batch: `reward` = {_metrics['reward']:.3f}, "
                f"`reward_std` = {_metrics['reward_std']:.3f}, "
                f"`frac_reward_zero_std` = {_metrics['frac_reward_zero_std']:.2f} "
                "(the share of completions in groups whose rewards are all equal — they teach nothing)."
            ),
        ]
    )
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    Try it: set all four rewards of prompt A equal. Its advantages become exactly 0 under every
    `scale_rewards` (not NaN: the $+10^{-4}$ in the denominator), and `frac_reward_zero_std` jumps to
    0.5. A group where every completion is right — or every one wrong — gives **no learning signal**.
    That is why GRPO needs prompts of the right difficulty and $G$ large enough to see both outcomes.

    Within a group the advantages always sum to zero: GRPO only ever says *this one better than that
    one*, never *all of these are good*.
    """)
    return


@app.cell
def test_advantages_sum_to_zero_per_group(compute_advantages_with_metrics, results_by_scale, torch):
    for _scale, _result in results_by_scale.items():
        _per_group = _result.advantages.view(-1, 4).sum(dim=1)  # (num_prompts,)
        assert torch.allclose(_per_group, torch.zeros_like(_per_group), atol=1e-5), (_scale, _per_group)
    # A group of equal rewards gets advantage exactly 0 (never NaN) and counts as zero-std.
    _flat = torch.tensor([[0.7], [0.7], [0.7], [0.7], [1.0], [0.0], [0.0], [0.0]])  # (N, F)
    _result = compute_advantages_with_metrics(_flat, 4, scale_rewards="group")
    assert torch.equal(_result.advantages[:4], torch.zeros(4))
    assert not torch.isnan(_result.advantages).any()
    assert _result.metrics["frac_reward_zero_std"] == 0.5
    # "group" and "none" differ only by the division: same signs, same order.
    _group, _none = results_by_scale["group"].advantages, results_by_scale["none"].advantages
    assert torch.equal(torch.sign(_group), torch.sign(_none))
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 2 · The KL penalty: why $k_3$ and not the log-ratio

    With $\beta > 0$ GRPO subtracts $\beta\cdot\mathrm{KL}(\pi_\theta\,\|\,\pi_{\text{ref}})$ per token.
    The exact KL needs the whole vocabulary; the trainer only has the log-probabilities of the
    *sampled* tokens. Two estimators from those, with $x = \log\pi_{\text{ref}}(o_t) - \log\pi_\theta(o_t)$:

    * $k_1 = -x$ — unbiased, but **negative** on half the samples (a "KL" that rewards drift);
    * $k_3 = e^{x} - x - 1$ — unbiased too, **never negative**, and $\approx x^2/2$ near 0.

    Left: the two as functions of $x$ (`grpo_kit.core.kl.k3_kl`). Right: both averaged over sampled tokens
    of a 50-token "vocabulary", against the exact KL, as the reference drifts away.
    """)
    return


@app.cell
def _(mo):
    drift_slider = mo.ui.slider(
        0.0, 2.0, step=0.1, value=0.8, label="how far the reference is from the policy", show_value=True
    )
    drift_slider
    return (drift_slider,)


@app.cell
def _(drift_slider, torch):
    from grpo_kit.core.kl import k3_kl

    _generator = torch.Generator().manual_seed(0)
    _vocab = 50
    policy_logits = torch.randn(_vocab, generator=_generator)  # (V,)
    ref_logits = policy_logits + drift_slider.value * torch.randn(_vocab, generator=_generator)  # (V,)
    _policy_logp = torch.log_softmax(policy_logits, dim=0)  # (V,)
    _ref_logp = torch.log_softmax(ref_logits, dim=0)  # (V,)
    exact_kl = torch.sum(_policy_logp.exp() * (_policy_logp - _ref_logp)).item()
    # The trainer's view: tokens sampled from the policy, one log-prob each.
    _tokens = torch.multinomial(_policy_logp.exp(), 20_000, replacement=True, generator=_generator)  # (S,)
    sampled_k3 = k3_kl(_policy_logp[_tokens].unsqueeze(0), _ref_logp[_tokens].unsqueeze(0))  # (1, S)
    sampled_k1 = (_policy_logp[_tokens] - _ref_logp[_tokens]).unsqueeze(0)  # (1, S)
    return exact_kl, k3_kl, sampled_k1, sampled_k3


@app.cell
def _(exact_kl, k3_kl, mo, plt, sampled_k1, sampled_k3, stack, torch):
    _x = torch.linspace(-3, 3, 241)  # (X,) log π_ref − log π_θ
    _k3 = k3_kl(torch.zeros_like(_x), _x)  # (X,) log π_θ = 0, log π_ref = x
    _fig, (_left, _right) = plt.subplots(1, 2, figsize=(10, 3.4))
    _left.plot(_x, _k3, label=r"$k_3 = e^x - x - 1$")
    _left.plot(_x, -_x, label=r"$k_1 = -x$ (log-ratio)")
    _left.plot(_x, _x**2 / 2, linestyle=":", label=r"$x^2/2$")
    _left.axhline(0, color="black", linewidth=0.8)
    _left.set_ylim(-3, 6)
    _left.set_xlabel(r"$x = \log\pi_{ref} - \log\pi_\theta$ of one sampled token")
    _left.legend(fontsize="small")
    _left.set_title("per-token estimators")
    _names = ["exact KL", "mean k1", "mean k3"]
    _values = [exact_kl, sampled_k1.mean().item(), sampled_k3.mean().item()]
    _right.bar(_names, _values, color=["black", "tab:orange", "tab:blue"])
    _right.set_title("averaged over 20,000 sampled tokens")
    _fig.tight_layout()
    stack(
        [
            _fig,
            mo.md(
                f"Share of sampled tokens where $k_1 < 0$: **{(sampled_k1 < 0).float().mean().item():.0%}**; "
                f"where $k_3 < 0$: **{(sampled_k3 < 0).float().mean().item():.0%}**. "
                "Both averages land on the exact KL; only $k_3$ is a sensible per-token penalty."
            ),
        ]
    )
    return


@app.cell
def test_k3_is_nonnegative_and_unbiased(exact_kl, k3_kl, sampled_k3, torch):
    _x = torch.linspace(-5, 5, 101)  # (X,)
    _k3 = k3_kl(torch.zeros_like(_x), _x)  # (X,)
    assert (_k3 >= 0).all()
    assert k3_kl(torch.zeros(1), torch.zeros(1)).item() == 0.0
    # The sample mean of k3 estimates the exact KL (20k samples: within a few percent).
    assert abs(sampled_k3.mean().item() - exact_kl) <= 0.05 * exact_kl + 1e-3
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 3 · The clipped surrogate

    After sampling, the policy is updated with the completions it produced. When a batch is reused
    (`num_iterations > 1`) or generation lags behind training, $\pi_\theta$ has already moved away from
    the $\pi_{\text{old}}$ that sampled the tokens. The ratio $\rho = \pi_\theta/\pi_{\text{old}}$
    corrects for that, and the clip keeps one update from moving too far: once $\rho$ leaves
    $[1-\varepsilon_{\text{low}}, 1+\varepsilon_{\text{high}}]$ **in the direction the advantage pushes**,
    the gradient is zero. DAPO's *clip-higher* ($\varepsilon_{\text{high}} = 0.28 > \varepsilon_{\text{low}}$)
    gives rare tokens with positive advantage more room to grow.

    The curves are the per-token objective $\min(\rho\hat A,\ \operatorname{clip}(\rho)\hat A)$ and its
    gradient, obtained by calling `grpo_kit.core.losses.compute_loss` (`loss_type="dapo"`) on one token
    per value of $\rho$ and backpropagating (`grpo_kit.teaching.loss_demo.ratio_sweep`).
    """)
    return


@app.cell
def _(mo):
    epsilon_low_slider = mo.ui.slider(
        0.05, 0.5, step=0.01, value=0.2, label="ε_low (epsilon)", show_value=True
    )
    epsilon_high_slider = mo.ui.slider(
        0.05, 0.5, step=0.01, value=0.28, label="ε_high (epsilon_high)", show_value=True
    )
    mo.hstack([epsilon_low_slider, epsilon_high_slider], justify="start")
    return epsilon_high_slider, epsilon_low_slider


@app.cell
def _(epsilon_high_slider, epsilon_low_slider, torch):
    from grpo_kit.teaching.loss_demo import ratio_objective, ratio_sweep

    ratios = torch.linspace(0.5, 1.6, 111)  # (R,) π_θ / π_old, one token each

    def _objective_and_gradient(advantage: float):
        # grpo_kit.teaching.loss_demo: compute_loss on one one-token completion per ratio (old log-prob 0, so
        # log π_θ = log ρ), then −∂loss/∂log ρ by autograd, each row on its own.
        _dapo = {
            "loss_type": "dapo",
            "epsilon": epsilon_low_slider.value,
            "epsilon_high": epsilon_high_slider.value,
        }
        _push, _metrics = ratio_sweep(ratios, advantage, **_dapo)
        # ∂loss/∂log ρ = −ρ·∂objective/∂ρ → report ∂objective/∂ρ.
        _grad_wrt_ratio = _push / ratios  # (R,)
        # The objective of each ratio on its own: minus the loss of a one-token batch.
        _objective = ratio_objective(ratios, advantage, **_dapo)  # (R,)
        return _objective, _grad_wrt_ratio, _metrics

    surrogate = {advantage: _objective_and_gradient(advantage) for advantage in (1.0, -1.0)}
    return ratios, surrogate


@app.cell
def _(epsilon_high_slider, epsilon_low_slider, mo, plt, ratios, stack, surrogate):
    _fig, _axes = plt.subplots(1, 2, figsize=(10, 3.4), sharex=True)
    for _ax, (_adv, (_objective, _grad, _)) in zip(_axes, surrogate.items()):
        _ax.plot(ratios, _objective, label="objective")
        _ax.plot(ratios, _grad, label="gradient (∂objective/∂ρ)", linestyle="--")
        _clipped = _grad.abs() < 1e-8
        _ax.fill_between(
            ratios, -2, 2, where=_clipped.tolist(), color="grey", alpha=0.2, label="clipped: no gradient"
        )
        _ax.axvline(1 - epsilon_low_slider.value, color="red", linewidth=0.8)
        _ax.axvline(1 + epsilon_high_slider.value, color="red", linewidth=0.8)
        _ax.set_ylim(-2, 2)
        _ax.set_title(f"advantage {_adv:+.0f}")
        _ax.set_xlabel(r"$\rho = \pi_\theta \,/\, \pi_{\mathrm{old}}$")
        _ax.legend(fontsize="small", loc="lower right" if _adv > 0 else "upper right")
    _fig.tight_layout()
    _metrics = surrogate[1.0][2]
    stack(
        [
            _fig,
            mo.md(
                "The metrics TRL logs for the $\\hat A = +1$ batch: "
                + ", ".join(f"`{k}` = {v:.3f}" for k, v in _metrics.items() if k.startswith("clip_ratio"))
                + " — the share of tokens in each clipped region."
            ),
        ]
    )
    return


@app.cell
def test_clip_stops_the_gradient_outside_the_trust_region(
    epsilon_high_slider, epsilon_low_slider, ratios, surrogate
):
    _low, _high = 1 - epsilon_low_slider.value, 1 + epsilon_high_slider.value
    _inside = (ratios > _low + 1e-3) & (ratios < _high - 1e-3)
    _, _grad_pos, _ = surrogate[1.0]
    _, _grad_neg, _ = surrogate[-1.0]
    # Positive advantage: gradient +1 inside and below the region, 0 above it (no reward for over-shooting).
    assert (_grad_pos[_inside] - 1.0).abs().max() < 1e-4
    assert _grad_pos[ratios > _high + 1e-3].abs().max() == 0
    assert (_grad_pos[ratios < _low - 1e-3] - 1.0).abs().max() < 1e-4
    # Negative advantage: gradient −1 inside and above, 0 below (no push once already well down).
    assert (_grad_neg[_inside] + 1.0).abs().max() < 1e-4
    assert _grad_neg[ratios < _low - 1e-3].abs().max() == 0
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## The whole algorithm, once more

    | step | what happens | where in grpo-kit |
    |:---|:---|:---|
    | sample | $G$ completions per prompt from $\pi_{\text{old}}$ | `grpo_kit.loop.training` (HF `generate`) |
    | score | one reward per completion per reward function | `rewards` |
    | advantages | reward minus the group mean, optionally ÷ std | `grpo_kit.core.advantages` |
    | loss | clipped ratio × advantage, minus $\beta\,k_3$, aggregated per `loss_type` | `grpo_kit.core.losses` |
    | update | backward, optimizer step | `grpo_kit.loop.training` |

    Next: **Lesson 2** puts one batch through all eight `loss_type`s and shows how they weigh long and
    short completions differently.
    """)
    return


if __name__ == "__main__":
    app.run()
