"""compute_loss equals TRL 1.15.0's GRPOTrainer._compute_loss in value, gradient and metrics.

Every case feeds the same float64 tensors to our ``compute_loss`` and to TRL's real ``_compute_loss``
(through ``trl_harness``, which swaps only the model forward for the test's leaf tensor) and compares
the loss, ``d loss / d per_token_logps`` and every metric TRL logs (except ``entropy``, which needs the
model's full distribution). The batch always holds a fully masked row and a one-token row.
"""

from __future__ import annotations

import itertools
import re
import warnings
import zlib

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trl_harness import configure, same_float, trl_loss, trl_trainer

from grpo_kit.config.rules import validate_config, validate_loss_settings
from grpo_kit.core.losses import LOSS_TYPES, compute_loss

TOLERANCE = 1e-6
LENGTHS = [7, 1, 0, 4, 7, 3]  # completion lengths: a full row, a one-token row, a fully masked row, …
EPSILON_HIGH = {"cispo": 1.25}  # cispo's ε_max is an absolute ratio cap; the clipped losses use 1 + ε_high
DEFAULT_EPSILON_HIGH = 0.28


@pytest.fixture(scope="module")
def trainer():
    return trl_trainer()


def make_batch(seed: int, lengths=LENGTHS, max_len: int = 7, off_policy: bool = True):
    """Random log-probs (B, T), advantages (B,) with a zero, right-padded mask, old/ref log-probs."""
    g = torch.Generator().manual_seed(seed)
    batch_size = len(lengths)
    per_token_logps = -3 * torch.rand(batch_size, max_len, generator=g, dtype=torch.float64)  # (B, T)
    mask = (torch.arange(max_len).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()  # (B, T)
    advantages = torch.randn(batch_size, generator=g, dtype=torch.float64)  # (B,)
    advantages[-1] = 0.0
    # Noise large enough that ratios leave [1 − ε, 1 + ε_high] and pass delta = 1.5.
    old = per_token_logps + 0.35 * torch.randn(batch_size, max_len, generator=g, dtype=torch.float64)
    ref = per_token_logps + 0.2 * torch.randn(batch_size, max_len, generator=g, dtype=torch.float64)
    return per_token_logps, advantages, mask, (old if off_policy else None), ref


def assert_parity(trainer, batch, *, num_items_in_batch=None, expect_warning=False, **settings):
    per_token_logps, advantages, mask, old, ref = batch
    settings = {"max_completion_length": 7, **settings}
    configure(trainer, **settings)
    theirs, their_grad, their_metrics = trl_loss(
        trainer,
        per_token_logps,
        advantages,
        mask,
        old_per_token_logps=old,
        ref_per_token_logps=ref if settings.get("beta", 0.0) else None,
        num_items_in_batch=num_items_in_batch,
    )
    leaf = per_token_logps.clone().requires_grad_(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours, our_metrics = compute_loss(
            leaf,
            advantages,
            mask,
            old_per_token_logps=old,
            ref_per_token_logps=ref if settings.get("beta", 0.0) else None,
            num_items_in_batch=num_items_in_batch,
            **settings,
        )
    assert any(issubclass(w.category, UserWarning) for w in caught) == expect_warning
    ours.backward()
    torch.testing.assert_close(ours.detach(), theirs, rtol=TOLERANCE, atol=TOLERANCE)
    torch.testing.assert_close(leaf.grad, their_grad, rtol=TOLERANCE, atol=TOLERANCE)
    assert set(our_metrics) == set(their_metrics)
    for name in their_metrics:
        assert same_float(our_metrics[name], their_metrics[name]), (
            name,
            our_metrics[name],
            their_metrics[name],
        )
    return ours, our_metrics


def _matrix():
    for loss_type, spec in LOSS_TYPES.items():
        for level, beta, accumulation, delta, off_policy in itertools.product(
            spec.levels, (0.0, 0.04), (1, 2), (None, 1.5), (True, False)
        ):
            yield pytest.param(
                loss_type,
                level,
                beta,
                accumulation,
                delta,
                off_policy,
                id=f"{loss_type}-{level}-beta{beta}-ga{accumulation}-delta{delta}-{'off' if off_policy else 'on'}",
            )


@pytest.mark.parametrize("loss_type, level, beta, accumulation, delta, off_policy", list(_matrix()))
def test_compute_loss_equals_trl(trainer, loss_type, level, beta, accumulation, delta, off_policy):
    seed = zlib.crc32(f"{loss_type}{level}{beta}{accumulation}{delta}".encode())
    batch = make_batch(seed, off_policy=off_policy)
    mask = batch[2]
    # With accumulation the generation batch spans other micro-batches: more tokens than this one holds.
    num_items = None if accumulation == 1 else int(mask.sum()) + 11
    loss, metrics = assert_parity(
        trainer,
        batch,
        num_items_in_batch=num_items,
        loss_type=loss_type,
        importance_sampling_level=level,
        beta=beta,
        gradient_accumulation_steps=accumulation,
        delta=delta,
        epsilon_high=EPSILON_HIGH.get(loss_type, DEFAULT_EPSILON_HIGH),
    )
    assert torch.isfinite(loss)
    assert ("kl" in metrics) == (beta != 0.0)


def test_the_matrix_really_clips(trainer):
    """The off-policy batches exercise the clip, the delta cap and cispo's cap (not only the linear region)."""
    batch = make_batch(seed=3)
    _, metrics = assert_parity(trainer, batch, loss_type="dapo", epsilon_high=0.28)
    assert metrics["clip_ratio/low_mean"] > 0 and metrics["clip_ratio/high_mean"] > 0
    _, metrics = assert_parity(trainer, batch, loss_type="cispo", epsilon_high=1.25)
    assert metrics["cispo_clip_ratio"] > 0
    # delta caps the unclipped branch, which a negative advantage with a large ratio selects.
    per_token_logps, advantages, mask, old, ref = batch
    advantages, old = advantages.clone(), old.clone()
    advantages[0], old[0, 0] = -1.0, per_token_logps[0, 0] - 1.0  # ratio e ≈ 2.7 > delta
    batch = (per_token_logps, advantages, mask, old, ref)
    with_delta, _ = assert_parity(trainer, batch, loss_type="dapo", epsilon_high=0.28, delta=1.5)
    without_delta, _ = assert_parity(trainer, batch, loss_type="dapo", epsilon_high=0.28)
    assert with_delta < without_delta


def test_trl_derives_epsilon_high_as_the_harness_does(trainer):
    epsilon, epsilon_high, epsilon_low, derived_high = trainer.harness_initial_epsilons
    assert epsilon_high is None and epsilon_low == epsilon and derived_high == epsilon


def test_cispo_epsilon_high_trap_matches_trl_and_warns(trainer):
    """Unset epsilon_high caps cispo's ratio at epsilon = 0.2: reproduced for parity, flagged by a warning."""
    _, metrics = assert_parity(
        trainer,
        make_batch(seed=5, off_policy=False),
        loss_type="cispo",
        epsilon_high=None,
        expect_warning=True,
    )
    # On-policy every ratio is 1 > 0.2: all positive-advantage tokens are "clipped".
    assert metrics["cispo_clip_ratio"] > 0


@pytest.mark.parametrize("loss_type", ["dapo", "cispo", "vespo"])
def test_steps_per_generation_rescales_the_global_token_count(trainer, loss_type):
    batch = make_batch(seed=11)
    num_items = int(batch[2].sum()) * 4
    loss, _ = assert_parity(
        trainer,
        batch,
        loss_type=loss_type,
        gradient_accumulation_steps=2,
        steps_per_generation=4,
        num_items_in_batch=num_items,
        epsilon_high=EPSILON_HIGH.get(loss_type, DEFAULT_EPSILON_HIGH),
    )
    default_spg, _ = compute_loss(
        batch[0],
        batch[1],
        batch[2],
        old_per_token_logps=batch[3],
        loss_type=loss_type,
        gradient_accumulation_steps=2,
        num_items_in_batch=num_items,
        epsilon_high=EPSILON_HIGH.get(loss_type, DEFAULT_EPSILON_HIGH),
    )
    torch.testing.assert_close(loss, 2 * default_spg)  # normaliser ∝ GA / steps_per_generation


@pytest.mark.parametrize("level", ["token", "sequence"])
def test_kl_without_bias_correction(trainer, level):
    assert_parity(
        trainer,
        make_batch(seed=13),
        loss_type="grpo",
        beta=0.04,
        use_bias_correction_kl=False,
        importance_sampling_level=level,
        epsilon_high=0.28,
    )


def test_sapo_and_vespo_shape_parameters(trainer):
    batch = make_batch(seed=17)
    assert_parity(trainer, batch, loss_type="sapo", sapo_temperature_pos=0.7, sapo_temperature_neg=2.0)
    assert_parity(
        trainer,
        batch,
        loss_type="vespo",
        vespo_k_pos=1.5,
        vespo_lambda_pos=2.5,
        vespo_k_neg=4.0,
        vespo_lambda_neg=1.0,
    )


def test_dr_grpo_uses_max_completion_length(trainer):
    batch = make_batch(seed=19)
    short, _ = assert_parity(trainer, batch, loss_type="dr_grpo", max_completion_length=7)
    long, _ = assert_parity(trainer, batch, loss_type="dr_grpo", max_completion_length=70)
    torch.testing.assert_close(short, 10 * long)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    loss_type=st.sampled_from(sorted(LOSS_TYPES)),
    lengths=st.lists(st.integers(0, 5), min_size=1, max_size=5),
    seed=st.integers(0, 2**16),
    beta=st.sampled_from([0.0, 0.1]),
    accumulation=st.sampled_from([1, 3]),
    sequence_level=st.booleans(),
)
def test_random_batches_equal_trl(trainer, loss_type, lengths, seed, beta, accumulation, sequence_level):
    """Any shape, any masking (all rows empty included), T = 1 included."""
    level = LOSS_TYPES[loss_type].levels[-1 if sequence_level else 0]
    batch = make_batch(seed, lengths=lengths, max_len=max(max(lengths), 1))
    assert_parity(
        trainer,
        batch,
        loss_type=loss_type,
        importance_sampling_level=level,
        beta=beta,
        gradient_accumulation_steps=accumulation,
        max_completion_length=5,
        epsilon_high=EPSILON_HIGH.get(loss_type, DEFAULT_EPSILON_HIGH),
    )


def test_fully_masked_batch_gives_zero_loss_and_gradient():
    per_token_logps, advantages, mask, old, ref = make_batch(seed=23)
    leaf = per_token_logps.clone().requires_grad_(True)
    for loss_type, spec in LOSS_TYPES.items():
        loss, _ = compute_loss(
            leaf,
            advantages,
            torch.zeros_like(mask),
            old_per_token_logps=old,
            ref_per_token_logps=ref,
            beta=0.04,
            loss_type=loss_type,
            importance_sampling_level=spec.levels[0],
            max_completion_length=7,
            epsilon_high=5.0,
        )
        (grad,) = torch.autograd.grad(loss, leaf)
        assert loss.item() == 0.0 and torch.count_nonzero(grad) == 0


# --- bad input: clear errors that name the fix ----------------------------------------------------


def _args():
    per_token_logps, advantages, mask, _, _ = make_batch(seed=29)
    return per_token_logps, advantages, mask


def test_unknown_loss_type_lists_the_options():
    with pytest.raises(ValueError, match=r"choose one of \['bnpo', 'cispo', 'dapo', 'dr_grpo', 'grpo'"):
        compute_loss(*_args(), loss_type="ppo")


@pytest.mark.parametrize(
    ("loss_type", "level", "advice"),
    [
        ("luspo", "token", "should be set to `'sequence'`"),
        ("vespo", "sequence", "should be set to `'token'`"),
    ],
)
@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("accumulation", [1, 2])
def test_off_paper_levels_warn_and_equal_trl(trainer, loss_type, level, advice, beta, accumulation):
    """TRL 1.15 only warns for luspo at token level and vespo at sequence level (issue 11): so do we, with
    TRL's advice, and the loss, gradient and metrics are TRL's."""
    batch = make_batch(seed=zlib.crc32(f"{loss_type}{level}{beta}{accumulation}".encode()))
    num_items = None if accumulation == 1 else int(batch[2].sum()) + 11
    with pytest.warns(UserWarning, match=re.escape(advice)):
        compute_loss(*batch[:3], loss_type=loss_type, importance_sampling_level=level)
    loss, _ = assert_parity(
        trainer,
        batch,
        num_items_in_batch=num_items,
        expect_warning=True,
        loss_type=loss_type,
        importance_sampling_level=level,
        beta=beta,
        gradient_accumulation_steps=accumulation,
        epsilon_high=DEFAULT_EPSILON_HIGH,
    )
    assert torch.isfinite(loss)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: (a[0][:, :5], a[1], a[2]), "completion_mask must have the shape"),
        (lambda a: (a[0], a[1][:3], a[2]), r"advantages must have shape \(B,\)"),
        (lambda a: (a[0], a[1].unsqueeze(1), a[2]), r"advantages must have shape \(B,\)"),
        (lambda a: (a[0][0], a[1], a[2]), r"\(B, T\) tensor"),
        (lambda a: (a[0], a[1], a[2] * 2), "only 0 and 1"),
    ],
)
def test_shape_and_mask_errors(change, message):
    with pytest.raises(ValueError, match=message):
        compute_loss(*change(_args()))


def test_missing_inputs_name_the_argument():
    per_token_logps, advantages, mask = _args()
    with pytest.raises(ValueError, match="pass ref_per_token_logps"):
        compute_loss(per_token_logps, advantages, mask, beta=0.04)
    with pytest.raises(ValueError, match="pass max_completion_length"):
        compute_loss(per_token_logps, advantages, mask, loss_type="dr_grpo")
    with pytest.raises(ValueError, match="old_per_token_logps must have the shape"):
        compute_loss(per_token_logps, advantages, mask, old_per_token_logps=per_token_logps[:, :3])
    with pytest.raises(ValueError, match="max_completion_length the completions were generated with"):
        compute_loss(per_token_logps, advantages, mask, loss_type="dr_grpo", max_completion_length=3)


def test_every_public_name_of_losses_resolves():
    """``grpo_kit.core.losses`` imports its names on first use; each is the defining submodule's."""
    import importlib

    from grpo_kit.core import losses

    assert sorted(losses._SOURCES) == sorted(losses.__all__)
    for name, module in losses._SOURCES.items():
        assert getattr(losses, name) is getattr(
            importlib.import_module(f"grpo_kit.core.losses.{module}"), name
        )


def test_validate_loss_settings_rules():
    validate_loss_settings()  # GRPOConfig's defaults are valid
    validate_loss_settings(loss_type="cispo", epsilon_high=5.0)
    validate_loss_settings(loss_type="luspo", importance_sampling_level="sequence")
    with pytest.raises(ValueError, match="num_generations>=2"):
        validate_loss_settings(num_generations=1)
    with pytest.raises(ValueError, match="set epsilon_high, e.g. 5.0"):
        validate_loss_settings(loss_type="cispo")
    with pytest.raises(ValueError, match="absolute cap"):
        validate_loss_settings(loss_type="cispo", epsilon_high=0.28)
    with pytest.raises(ValueError, match="multiple of num_generations"):
        validate_loss_settings(num_generations=4, generation_batch_size=6)
    with pytest.warns(UserWarning, match="should be set to `'sequence'`"):
        validate_loss_settings(loss_type="luspo")
    with pytest.warns(UserWarning, match="should be set to `'token'`"):
        validate_loss_settings(loss_type="vespo", importance_sampling_level="sequence")
    with pytest.raises(ValueError, match="scale_rewards='std'"):
        validate_loss_settings(scale_rewards="std")
    with pytest.warns(UserWarning, match="weighted by its length"):
        validate_loss_settings(loss_type="dapo", importance_sampling_level="sequence")


def test_validate_config_reads_grpo_config_fields(tmp_path):
    from trl import GRPOConfig

    validate_config(
        GRPOConfig(
            output_dir=str(tmp_path), report_to="none", use_cpu=True, loss_type="cispo", epsilon_high=5.0
        )
    )
    with pytest.raises(ValueError, match="set epsilon_high"):
        validate_config(
            GRPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, loss_type="cispo")
        )
    with pytest.warns(UserWarning, match="should be set to `'sequence'`"):
        validate_config(
            GRPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, loss_type="luspo")
        )


def test_registry_covers_exactly_trls_loss_types():
    from trl import GRPOConfig

    help_text = GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"]
    supported = help_text.split("Supported values are")[1].split(".")[0]
    assert set(re.findall(r"'(\w+)'", supported)) == set(LOSS_TYPES)
    for spec in LOSS_TYPES.values():
        assert spec.objective.__doc__ and ("papers/" in spec.paper or "TRL" in spec.paper)


def test_paper_links_name_the_paper_and_keep_its_url():
    # lesson 2's table shows each paper as a link named by the paper, not as a raw URL
    assert LOSS_TYPES["dr_grpo"].paper_link == "[Dr. GRPO](https://huggingface.co/papers/2503.20783)"
    assert LOSS_TYPES["bnpo"].paper_link == LOSS_TYPES["bnpo"].paper  # no URL: the text as written
    for spec in LOSS_TYPES.values():
        assert "https://" not in spec.paper_link.split("](")[0], spec.paper_link


def _loss_and_grad(batch, device, dtype, loss_type):
    per_token_logps, advantages, mask, old, ref = (t if t is None else t.to(device) for t in batch)
    leaf = per_token_logps.to(dtype).clone().requires_grad_(True)
    loss, metrics = compute_loss(
        leaf,
        advantages.float(),
        mask,
        old_per_token_logps=old.to(dtype),
        ref_per_token_logps=ref.to(dtype),
        beta=0.04,
        loss_type=loss_type,
        importance_sampling_level=LOSS_TYPES[loss_type].levels[-1],
        max_completion_length=7,
        epsilon_high=EPSILON_HIGH.get(loss_type, DEFAULT_EPSILON_HIGH),
        num_items_in_batch=mask.sum(),
    )
    loss.backward()
    return loss.detach().cpu(), leaf.grad.cpu(), metrics


@pytest.mark.parametrize("loss_type", sorted(LOSS_TYPES))
def test_bf16_log_probs_train_without_dtype_surprises(loss_type):
    """bf16 log-probs with float32 advantages (a GPU loop's dtypes): finite, close to float64, token counts exact."""
    batch = make_batch(seed=31)
    loss, grad, _ = _loss_and_grad(batch, "cpu", torch.bfloat16, loss_type)
    reference, reference_grad, _ = _loss_and_grad(batch, "cpu", torch.float64, loss_type)
    assert grad.dtype == torch.bfloat16 and torch.isfinite(grad).all() and torch.isfinite(loss)
    torch.testing.assert_close(loss.double(), reference, rtol=0.05, atol=0.02)
    torch.testing.assert_close(grad.double(), reference_grad, rtol=0.05, atol=0.02)


@pytest.mark.gpu
@pytest.mark.parametrize("loss_type", sorted(LOSS_TYPES))
def test_cuda_equals_cpu(loss_type):
    batch = make_batch(seed=37)
    loss, grad, metrics = _loss_and_grad(batch, "cuda", torch.float64, loss_type)
    cpu_loss, cpu_grad, cpu_metrics = _loss_and_grad(batch, "cpu", torch.float64, loss_type)
    torch.testing.assert_close(loss, cpu_loss, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(grad, cpu_grad, rtol=1e-9, atol=1e-9)
    assert all(same_float(metrics[name], cpu_metrics[name], 1e-9) for name in cpu_metrics)
