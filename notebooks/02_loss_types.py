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
    # Lesson 2 · Eight loss types, one batch

    TRL's `GRPOTrainer` offers eight `loss_type`s. Four of them (`grpo`, `bnpo`, `dr_grpo`, `dapo`)
    share the *same* per-token clipped objective and differ only in **how the per-token losses are
    averaged** — which decides how much each token and each completion weighs in the gradient. The
    other four change the objective itself: `cispo` (a capped, gradient-free importance weight),
    `sapo` (a soft sigmoid gate instead of a hard clip), `luspo` (sequence-level, weighted by length),
    `vespo` (a Gamma-shaped weight on the sequence ratio).

    Everything below calls `grpo_kit.core.losses.compute_loss` and reads the gradient with autograd. The
    project's parity tests feed the same tensors to TRL 1.15.0's own `GRPOTrainer._compute_loss` and
    check that value **and** gradient agree to 1e-6 for every loss type, importance-sampling level,
    β, gradient-accumulation setting and `delta` — so what you see here is what TRL computes.
    """)
    return


@app.cell(hide_code=True)
def _():
    import matplotlib.pyplot as plt
    import torch

    return plt, torch


@app.cell
def _(mo):
    from grpo_kit.core.losses import LOSS_TYPES

    mo.md(
        "| loss_type | what it does | paper |\n|:---|:---|:---|\n"
        + "\n".join(f"| `{t.name}` | {t.summary} | {t.paper_link} |" for t in LOSS_TYPES.values())
    )
    return (LOSS_TYPES,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 1 · The batch

    One prompt, $G = 4$ completions: two correct (reward 1), two wrong (reward 0), of very different
    lengths. Their advantages come from `compute_advantages` (±0.87). Set the lengths:
    """)
    return


@app.cell
def _(mo):
    length_sliders = mo.ui.array(
        [
            mo.ui.slider(1, 64, value=4, label="correct, short", show_value=True),
            mo.ui.slider(1, 64, value=48, label="correct, long", show_value=True),
            mo.ui.slider(1, 64, value=8, label="wrong, short", show_value=True),
            mo.ui.slider(1, 64, value=60, label="wrong, long", show_value=True),
        ],
        label="completion lengths (tokens)",
    )
    # .vstack(): the sliders themselves (an array shown as a value renders as a collapsible JSON tree)
    mo.vstack([mo.md("**completion lengths (tokens)**"), length_sliders.vstack()])
    return (length_sliders,)


@app.cell
def _(length_sliders):
    from grpo_kit.teaching.loss_demo import all_loss_weights, demo_batch

    completion_names = ["correct, short", "correct, long", "wrong, short", "wrong, long"]
    batch_rewards = [1.0, 1.0, 0.0, 0.0]
    # grpo_kit.teaching.loss_demo: for every loss type, compute_loss on this batch, then w = −∂loss/∂log π by autograd
    # (the push each token gets: up if > 0). On-policy, so the ratio is 1 whatever the log-probs are.
    weight_results, advantages, completion_mask = all_loss_weights(length_sliders.value, batch_rewards)
    pushes = {result.loss_type: result for result in weight_results}
    lengths = completion_mask.sum(-1)  # (B,)
    demo_logps, _, _ = demo_batch(length_sliders.value, batch_rewards)  # (B, T) the log-probs used above
    return (
        advantages,
        completion_mask,
        completion_names,
        demo_logps,
        lengths,
        pushes,
        weight_results,
    )


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 2 · How much each completion and each token weighs

    Left: the total push on each completion (sum over its tokens). Right: the push on **one token**
    of each completion. Under `grpo` every completion gets the same total, so (with the default
    lengths) a token of the short correct answer is pushed up 12× harder than a token of the long
    one — and a token of the long *wrong* answer is pushed down 7.5× more gently than one of the
    short wrong answer. Repeated over
    training, that rewards rambling when wrong: the **length bias** [Dr. GRPO](https://huggingface.co/papers/2503.20783)
    points out. `dr_grpo` and `dapo` (TRL's default) give every token the same weight.
    """)
    return


@app.cell
def _(
    advantages,
    completion_mask,
    completion_names,
    lengths,
    mo,
    pushes,
    weight_results,
):
    import tempfile

    from grpo_kit.teaching.loss_demo import plot_weights

    _png = plot_weights(weight_results, advantages, completion_mask, tempfile.mkdtemp() + "/loss_weights.png")
    _header = (
        "| loss_type | " + " | ".join(f"{c} (L={int(n)})" for c, n in zip(completion_names, lengths)) + " |"
    )
    _rows = "\n".join(
        f"| `{name}` | "
        + " | ".join(
            f"{r.per_token[k].item():+.4f} / {r.per_sequence[k].item():+.3f}" for k in range(len(lengths))
        )
        + " |"
        for name, r in pushes.items()
    )
    mo.vstack(
        [
            mo.image(src=_png.read_bytes()),
            mo.md("push per token / per completion\n\n" + _header + "\n|:---|:---|:---|:---|:---|\n" + _rows),
        ]
    )
    return


@app.cell
def test_grpo_is_length_biased_and_dapo_is_not(completion_mask, lengths, pushes, torch):
    _grpo = pushes["grpo"]
    # grpo: every completion of the same advantage gets the same total push, whatever its length …
    _totals = _grpo.per_sequence  # (B,)
    assert torch.allclose(_totals[0], _totals[1]) and torch.allclose(_totals[2], _totals[3])
    # … so per token it is inversely proportional to the length.
    assert torch.allclose(_grpo.per_token[0] * lengths[0], _grpo.per_token[1] * lengths[1])
    # dapo and dr_grpo: every token of a given advantage sign weighs the same, whatever its completion's length.
    for _name in ("dapo", "dr_grpo"):
        _values = pushes[_name].token_weights[completion_mask.bool()].abs()
        assert torch.allclose(_values, _values[0].expand_as(_values)), _name
        assert abs(pushes[_name].short_to_long_token_ratio - 1.0) < 1e-9
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 3 · SAPO's soft gate vs the hard clip

    Off-policy (ratio $\rho \neq 1$), `grpo`'s clip cuts the gradient to exactly zero once $\rho$
    leaves $[1-\varepsilon, 1+\varepsilon]$ in the advantage's direction. [SAPO](https://huggingface.co/papers/2511.20347)
    replaces the cliff with a sigmoid gate: the gradient fades smoothly, with a temperature per
    advantage sign (negative advantages decay faster by default, 1.05 vs 1.0).
    """)
    return


@app.cell
def _(mo):
    sapo_pos_slider = mo.ui.slider(
        0.2, 4.0, step=0.05, value=1.0, label="sapo_temperature_pos", show_value=True
    )
    sapo_neg_slider = mo.ui.slider(
        0.2, 4.0, step=0.05, value=1.05, label="sapo_temperature_neg", show_value=True
    )
    mo.hstack([sapo_pos_slider, sapo_neg_slider], justify="start")
    return sapo_neg_slider, sapo_pos_slider


@app.cell
def _(torch):
    from grpo_kit.teaching.loss_demo import ratio_sweep

    ratios = torch.linspace(0.2, 3.0, 141)  # (R,) π_θ / π_old, one token each

    def push_vs_ratio(advantage: float, **settings) -> torch.Tensor:
        """−∂loss/∂log π of a one-token completion, for every ratio in `ratios` (each row on its own):
        grpo_kit.teaching.loss_demo.ratio_sweep, compute_loss on one token per ratio and autograd."""
        return ratio_sweep(ratios, advantage, **settings)[0]  # (R,)

    return push_vs_ratio, ratios


@app.cell
def _(plt, push_vs_ratio, ratios, sapo_neg_slider, sapo_pos_slider):
    sapo_curves = {}
    _fig, _axes = plt.subplots(1, 2, figsize=(11, 3.4), sharex=True)
    for _ax, _adv in zip(_axes, (1.0, -1.0)):
        _hard = push_vs_ratio(_adv, loss_type="grpo", epsilon=0.2)
        _soft = push_vs_ratio(
            _adv,
            loss_type="sapo",
            sapo_temperature_pos=sapo_pos_slider.value,
            sapo_temperature_neg=sapo_neg_slider.value,
        )
        # ∂objective/∂ρ = push on log π ÷ ρ: the slope of the (clipped or gated) objective.
        _hard, _soft = _hard / ratios, _soft / ratios
        sapo_curves[_adv] = (_hard, _soft)
        _ax.plot(ratios, _hard, label="grpo: hard clip (ε = 0.2)")
        _ax.plot(ratios, _soft, label="sapo: soft gate")
        _ax.axhline(0, color="black", linewidth=0.8)
        _ax.set_title(f"advantage {_adv:+.0f}")
        _ax.set_xlabel(r"$\rho = \pi_\theta \,/\, \pi_{\mathrm{old}}$")
        _ax.set_ylabel("∂objective / ∂ρ")
        _ax.legend(fontsize="small")
    _fig.tight_layout()
    _fig
    return (sapo_curves,)


@app.cell
def test_sapo_fades_where_grpo_cuts(ratios, sapo_curves):
    _hard, _soft = sapo_curves[1.0]
    _far = ratios > 1.5
    assert (_hard[_far] == 0).all()  # hard clip: no gradient at all
    assert abs(_soft[(ratios - 1).abs().argmin()].item() - 1.0) < 0.02  # on-policy: the plain policy gradient
    assert (_soft[_far] > 0).all()  # soft gate: smaller, but still there
    assert _soft[_far][-1] < _soft[(ratios - 1).abs().argmin()]  # and fading with distance
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 4 · CISPO: clip the weight, keep the gradient

    [CISPO](https://huggingface.co/papers/2506.13585) (MiniMax-M1) treats the ratio as a *weight*,
    $\operatorname{sg}(\min(\rho, \varepsilon_{\text{high}}))\cdot\hat A\cdot\log\pi_\theta$: the
    weight is capped and gradient-free, so every token keeps a gradient — rare, important tokens whose
    ratio shoots up are not silenced as they are by PPO's clip. Note $\varepsilon_{\text{high}}$ is the
    cap itself (ScaleRL recommends 5.0), not "1 + ε"; leaving it unset in TRL silently caps at 0.2,
    which is why grpo-kit's config check refuses `cispo` without `epsilon_high`.
    """)
    return


@app.cell
def _(mo):
    cispo_cap_slider = mo.ui.slider(
        1.0, 6.0, step=0.1, value=2.0, label="epsilon_high (cispo's cap)", show_value=True
    )
    cispo_cap_slider
    return (cispo_cap_slider,)


@app.cell
def _(cispo_cap_slider, plt, push_vs_ratio, ratios):
    cispo_push = push_vs_ratio(1.0, loss_type="cispo", epsilon_high=cispo_cap_slider.value)
    dapo_push = push_vs_ratio(1.0, loss_type="dapo", epsilon=0.2, epsilon_high=0.28)
    _fig, _ax = plt.subplots(figsize=(7, 3.4))
    _ax.plot(
        ratios,
        cispo_push,
        label=f"cispo: min(ρ, {cispo_cap_slider.value:.1f}) (no gradient through the weight)",
    )
    _ax.plot(ratios, dapo_push, label="dapo: ρ inside [0.8, 1.28], 0 above")
    _ax.set_xlabel(r"$\rho = \pi_\theta \,/\, \pi_{\mathrm{old}}$")
    _ax.set_ylabel("push on log π (advantage +1)")
    _ax.legend(fontsize="small")
    _fig.tight_layout()
    _fig
    return cispo_push, dapo_push


@app.cell
def test_cispo_weight_is_the_capped_ratio(cispo_cap_slider, cispo_push, dapo_push, ratios, torch):
    _expected = torch.clamp(ratios, max=cispo_cap_slider.value)  # (R,)
    assert torch.allclose(cispo_push, _expected, atol=1e-5)
    assert (dapo_push[ratios > 1.3] == 0).all() and (cispo_push > 0).all()
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 5 · Why the logged loss can sit at 0 while the model learns

    With the defaults of modern TRL — $\beta = 0$ (no KL term) and `num_iterations = 1` (each batch is
    used for one update) — the policy that is trained *is* the one that sampled: $\rho = 1$ exactly.
    The loss is then $-\sum_i w_i \hat A_i$, and the advantages of a group sum to zero. For `grpo`
    (every completion weighted alike) the loss is **exactly 0**; for the token-weighted types it is a
    small length-dependent number. Yet the **gradient** is not zero: $\partial\rho/\partial\theta \neq 0$
    even where $\rho = 1$. Watch the reward curve, not the loss. (In the course, TRL 0.14's default
    $\beta = 0.04$ made the loss grow with the KL as the model moved away from the reference.)
    """)
    return


@app.cell
def _(advantages, completion_mask, demo_logps, mo, pushes):
    from grpo_kit.teaching.loss_demo import on_policy_loss

    # the loss each type logs on the demo batch: the one grpo_kit.teaching.loss_demo differentiated above
    def _logged_loss(name: str) -> float:
        return on_policy_loss(name, demo_logps, advantages, completion_mask).item()

    zero_loss_table = {
        name: (_logged_loss(name), r.token_weights.norm().item()) for name, r in pushes.items()
    }
    mo.md(
        "| loss_type | logged loss | gradient norm |\n|:---|:---|:---|\n"
        + "\n".join(f"| `{n}` | {loss:+.6f} | {g:.4f} |" for n, (loss, g) in zero_loss_table.items())
    )
    return (zero_loss_table,)


@app.cell
def test_zero_loss_but_nonzero_gradient(zero_loss_table):
    _loss, _grad_norm = zero_loss_table["grpo"]
    assert abs(_loss) < 1e-6
    assert _grad_norm > 1e-3
    for _name, (_, _g) in zero_loss_table.items():
        assert _g > 0, _name
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Which one?

    * **`dapo`** (TRL's default): token-level, no length bias, normalised over the whole generation batch.
    * **`dr_grpo`**: the same weights with a fixed constant; use it with `scale_rewards="none"` as the paper does.
    * **`grpo`**: the paper's formula — know its length bias before you use it.
    * **`cispo`** / **`sapo`** / **`vespo`**: when updates go off-policy (`num_iterations > 1`, async
      generation) and the hard clip throws away too much signal.
    * **`luspo`**: sequence-level ratios (GSPO-style) without GSPO's length bias.

    Next: **Lesson 3** — the other half of GRPO, the reward functions.
    """)
    return


if __name__ == "__main__":
    app.run()
