"""The TRL path on CPU with the tiny model: real GRPOTrainer steps, early errors, Ctrl-C + resume."""

from __future__ import annotations

import importlib.util
import json
import os
import signal

import pytest
import torch

from grpo_kit.models import tiny_model
from grpo_kit.recipes.catalogue import get_recipe
from grpo_kit.support import hardware
from grpo_kit.trainers import trl_path

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


from shared import RecordingLoader, tiny_recipe


@pytest.fixture
def cpu_precision():
    return hardware.choose_precision("cpu")


def test_train_two_steps_logs_trl_metrics_and_curve(tmp_path):
    loader = RecordingLoader()
    result = trl_path.train_with_trl(
        tiny_recipe(), model_loader=loader, output_dir=tmp_path, max_steps=2, device="cpu"
    )

    assert [name for name, _ in loader.calls] == ["smollm2-135m-instruct"]
    assert loader.calls[0][1]["dtype"] == "float32" and loader.calls[0][1]["quantization"] is None
    assert result.global_step == 2 and not result.interrupted
    records = [json.loads(line) for line in result.metrics_path.read_text().splitlines()]
    steps = [r for r in records if "reward" in r]
    assert [r["step"] for r in steps] == [1, 2]
    reward_name = tiny_recipe().build_reward_funcs()[0].__name__  # e.g. length_reward_16_tokens
    for name in (
        "loss",
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "completions/mean_length",
        f"rewards/{reward_name}/mean",
        "learning_rate",
        "entropy",
    ):
        assert name in steps[0], name
    assert steps == [r for r in result.log_history if "reward" in r]  # exactly TRL's log_history
    assert result.reward_curve_path.stat().st_size > 1000
    # LoRA went through peft_config: the output is an adapter with the recipe's rank, plus the tokenizer.
    adapter = json.loads((tmp_path / "adapter_config.json").read_text())
    assert adapter["r"] == 16 and (tmp_path / "tokenizer_config.json").exists()
    args = result.trainer.args
    assert (args.bf16, args.fp16, args.use_cpu) == (False, False, True)  # fp32 on CPU
    assert args.report_to in ([], ["none"], "none")  # nothing reported by default


def test_build_trainer_uses_recipe_rewards_weights_and_given_dataset(tmp_path):
    from datasets import Dataset

    model, tokenizer = tiny_model(seed=0)
    dataset = Dataset.from_dict({"prompt": ["Summarize: the cat sat on the mat."] * 4})
    recipe = get_recipe("gsm8k-cpu", per_device_train_batch_size=4, num_generations=4)
    trainer = trl_path.build_trainer(
        recipe,
        model=model,
        tokenizer=tokenizer,
        train_dataset=dataset,
        output_dir=tmp_path,
        max_steps=1,
        device="cpu",
        learning_rate=1e-4,
    )
    assert trainer.reward_func_names == recipe.reward_names
    assert trainer.reward_weights.tolist() == recipe.reward_weights
    assert trainer.args.learning_rate == 1e-4 and trainer.args.max_steps == 1
    assert trainer.train_dataset is dataset


def test_a_curriculum_recipe_is_trained_in_dataset_order(tmp_path):
    """gsm8k-cpu fades its worked example out over its first rows, so TRL must take them in order: with the
    recipe's own settings (shuffle_dataset=False, TRL's RepeatSampler) step s trains rows 2(s-1) and 2s-1,
    read back from the rows the reward functions are called with, and the sampler's whole pass is in order."""
    from shared import numbered_curriculum_rows

    recipe = get_recipe("gsm8k-cpu")
    dataset, trained, record = numbered_curriculum_rows(recipe)
    G = recipe.training["num_generations"]

    model, tokenizer = tiny_model(seed=0)
    trainer = trl_path.build_trainer(
        recipe,
        model=model,
        tokenizer=tokenizer,
        train_dataset=dataset,
        reward_funcs=[record],
        output_dir=tmp_path,
        max_steps=3,
        device="cpu",
        max_completion_length=4,
        save_strategy="no",
        report_to="none",
    )
    assert trainer.args.shuffle_dataset is False and trainer.args.generation_batch_size // G == 2
    trainer.train()
    assert trained == [[0, 1], [2, 3], [4, 5]]
    # the sampler's whole pass: 40 steps of 2 prompts, each G times, in dataset order
    order = list(trainer._get_train_sampler(dataset))[::G]
    assert order == list(range(recipe.training["max_steps"] * 2)) == list(range(len(dataset)))


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"max_prompt_length": 256}, ValueError, "max_prompt_length.*(removed|no longer)"),
        ({"warmup_ratio": 0.1}, ValueError, "warmup_steps"),
        (
            {"per_device_train_batch_size": 3},
            ValueError,
            r"divisible by num_generations \(4\).*per_device_train_batch_size",
        ),
        ({"generation_batch_size": 6, "steps_per_generation": 2}, ValueError, "either generation_batch_size"),
        ({"num_generations": 1, "per_device_train_batch_size": 1}, ValueError, "at least 2"),
        ({"loss_type": "cispo"}, ValueError, "epsilon_high"),
        ({"loss_type": "ppo"}, ValueError, "loss_type"),
        ({"fp16": True}, ValueError, "fp32"),
        ({"vllm_mode": "server"}, RuntimeError, "server.*NCCL.*vllm_mode='colocate'"),
        ({"vllm_mode": "remote"}, ValueError, "'colocate'.*'server'"),
        ({"report_to": "wandb"}, ImportError, "grpo-kit\\[logging\\]"),
        ({"report_to": "comet"}, ValueError, "trackio"),
        ({"auto_find_batch_size": True}, ValueError, "auto_find_batch_size"),  # TRL's own GRPOConfig check
    ],
)
def test_bad_settings_fail_before_the_model_loads(tmp_path, overrides, error, message):
    if overrides.get("report_to") == "wandb" and importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    loader = RecordingLoader()
    with pytest.raises(error, match=message):
        trl_path.build_trainer(
            tiny_recipe(), model_loader=loader, output_dir=tmp_path, device="cpu", **overrides
        )
    assert loader.calls == []


def test_the_course_qlora_recipe_passes_its_checks_on_cpu_and_asks_for_nf4(tmp_path):
    """bitsandbytes runs 4-bit loading and its paged 8-bit AdamW on CPU (test_models.py, test_qlora_cli.py):
    the course's QLoRA recipe is no longer refused here; the loader is asked for NF4 with fp32 compute."""
    pytest.importorskip("bitsandbytes")

    class Loaded(Exception):
        pass

    asked = []

    def loader(name, **kwargs):
        asked.append((name, kwargs))
        raise Loaded  # every check passed: stop before reading Gemma's weights

    with pytest.raises(Loaded):
        trl_path.build_trainer("gsm8k-unsloth", model_loader=loader, output_dir=tmp_path, device="cpu")
    ((name, kwargs),) = asked
    config = kwargs["quantization"]
    assert name == "unsloth/gemma-3-1b-it" and kwargs["dtype"] == "float32"
    assert config.load_in_4bit and config.bnb_4bit_quant_type == "nf4"
    assert config.bnb_4bit_compute_dtype == torch.float32


def test_batch_rule_counts_the_world_size(cpu_precision):
    recipe = get_recipe("smoltldr-length-small", per_device_train_batch_size=2, num_generations=4)
    training = trl_path.resolve_training(recipe, output_dir="x", precision=cpu_precision)
    trl_path.check_settings(recipe, training, world_size=2, precision=cpu_precision)  # 2 × 2 × 1 = 4: fine
    with pytest.raises(ValueError, match=r"world size \(3\).*= 6"):
        trl_path.check_settings(recipe, training, world_size=3, precision=cpu_precision)


def test_vllm_settings_pass_through_to_grpo_config(cpu_precision):
    training = trl_path.resolve_training(
        tiny_recipe(),
        output_dir="x",
        vllm_mode="server",
        vllm_server_host="10.0.0.2",
        vllm_server_port=8001,
        vllm_gpu_memory_utilization=0.4,
        report_to=["tensorboard"],
        precision=cpu_precision,
    )
    config = trl_path.build_grpo_config(training)
    assert (
        config.use_vllm,
        config.vllm_mode,
        config.vllm_server_host,
        config.vllm_server_port,
        config.vllm_gpu_memory_utilization,
    ) == (True, "server", "10.0.0.2", 8001, 0.4)
    assert config.report_to == ["tensorboard"]


def test_precision_rule_does_not_trust_emulated_bf16():
    t4 = hardware.choose_precision("cuda", (7, 5))
    assert (t4.bf16, t4.fp16, t4.dtype) == (False, True, "float16") and "emulation" in t4.reason
    a100 = hardware.choose_precision("cuda", (8, 0))
    assert (a100.bf16, a100.fp16, a100.dtype) == (True, False, "bfloat16")
    cpu = hardware.choose_precision("cpu")
    assert cpu.trainer_kwargs() == {"bf16": False, "fp16": False, "use_cpu": True}
    with pytest.raises(ValueError, match="compute capability"):
        hardware.choose_precision("cuda")
    if not torch.cuda.is_available():  # the reason names this CPU's bf16 hardware (AMX here, none on others)
        assert hardware.detect_precision() == hardware.choose_precision(
            "cpu", cpu_bf16=hardware.cpu_bf16_kind()
        )
        assert hardware.detect_precision().trainer_kwargs() == cpu.trainer_kwargs()


def test_asking_for_fp16_switches_bf16_off():
    a100 = hardware.choose_precision("cuda", (8, 0))
    training = trl_path.resolve_training(
        tiny_recipe(), output_dir="x", precision=a100, overrides={"fp16": True}
    )
    assert (training["bf16"], training["fp16"]) == (False, True)


def test_bf16_on_a_t4_is_refused_with_the_fix():
    t4 = hardware.choose_precision("cuda", (7, 5))
    recipe = tiny_recipe()
    training = trl_path.resolve_training(
        recipe, output_dir="x", precision=t4, overrides={"bf16": True, "fp16": False}
    )
    with pytest.raises(ValueError, match="fp16=True"):
        trl_path.check_settings(recipe, training, world_size=1, precision=t4)


def test_torch_logprob_kernel_matches_trl_reference_functions():
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(6, 16, generator=gen, requires_grad=True)  # (N, H)
    weight = torch.randn(50, 16, generator=gen)  # (V, H)
    targets = torch.randint(0, 50, (6,), generator=gen)  # (N,)
    logp, entropy, _, _, is_top1 = trl_path.TorchChunkedLogProb.apply(
        hidden, weight, None, targets, 0.7, 4096, None, 1.0, ("entropy", "is_top1")
    )
    logits = (hidden @ weight.t()) / 0.7  # (N, V)
    torch.testing.assert_close(logp, selective_log_softmax(logits, targets))
    torch.testing.assert_close(entropy, entropy_from_logits(logits))
    assert torch.equal(is_top1, logits.argmax(-1) == targets)
    logp.sum().backward()  # differentiable like TRL's autograd.Function
    assert hidden.grad is not None and torch.isfinite(hidden.grad).all()


def test_ctrl_c_saves_a_checkpoint_that_resume_continues(tmp_path):
    from transformers import TrainerCallback

    class CtrlCAtStep1(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 1 and not getattr(self, "sent", False):
                self.sent = True
                os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT, as from the keyboard

    recipe = tiny_recipe()
    handler_before = signal.getsignal(signal.SIGINT)
    first = trl_path.train_with_trl(
        recipe,
        model_loader=RecordingLoader(),
        output_dir=tmp_path,
        max_steps=4,
        device="cpu",
        callbacks=[CtrlCAtStep1()],
    )
    assert first.interrupted and first.global_step == 2  # the step in flight finishes
    assert first.checkpoint == tmp_path / "checkpoint-2"
    assert {"optimizer.pt", "scheduler.pt", "trainer_state.json", "adapter_model.safetensors"} <= {
        p.name for p in first.checkpoint.iterdir()
    }
    assert signal.getsignal(signal.SIGINT) is handler_before  # our handler is removed again

    resumed = trl_path.train_with_trl(
        recipe,
        model_loader=RecordingLoader(),
        output_dir=tmp_path,
        max_steps=4,
        device="cpu",
        resume_from_checkpoint=True,
    )
    assert resumed.global_step == 4 and not resumed.interrupted
    logged = [
        json.loads(line)["step"]
        for line in resumed.metrics_path.read_text().splitlines()
        if "reward" in json.loads(line)
    ]
    assert logged == [1, 2, 3, 4]


def test_resume_without_checkpoint_says_so_before_loading(tmp_path):
    loader = RecordingLoader()
    with pytest.raises(FileNotFoundError, match="checkpoint"):
        trl_path.train_with_trl(
            tiny_recipe(),
            model_loader=loader,
            output_dir=tmp_path,
            max_steps=1,
            device="cpu",
            resume_from_checkpoint=True,
        )
    assert loader.calls == []


def test_the_trl_path_prints_one_line_a_step_not_tqdm_or_dicts(tmp_path, capsys):
    """Issue 56: --loop trl prints the loop's one-line progress (TRL's logs go to metrics.jsonl), not tqdm bars
    and Python-dict lines; transformers' notebook widget (picked whenever marimo is imported: pytest collects
    the marimo lessons in this process; it crashed on_train_end of an interrupted run) is gone too."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from transformers.utils.notebook import NotebookProgressCallback

    trainer = trl_path.build_trainer(
        tiny_recipe(logging_steps=1),
        model_loader=RecordingLoader(),
        output_dir=tmp_path,
        max_steps=2,
        device="cpu",
    )
    trainer.add_callback(NotebookProgressCallback)
    trl_path.use_one_line_progress(trainer)
    kinds = {type(cb) for cb in trainer.callback_handler.callbacks}
    assert not kinds & {NotebookProgressCallback, ProgressCallback, PrinterCallback}
    capsys.readouterr()
    trainer.train()
    said = capsys.readouterr()
    lines = [line for line in said.out.splitlines() if line.strip()]
    steps = [line for line in lines if line.startswith("step ")]
    assert len(steps) == trainer.state.max_steps and steps[-1].startswith(f"step {trainer.state.max_steps}/")
    assert not any(line.startswith("{") for line in lines), said.out  # no dict lines
    assert "it/s]" not in said.err and "s/it]" not in said.err, said.err  # no tqdm bar


def test_sigterm_saves_like_ctrl_c_and_resume_skips_a_half_written_checkpoint(tmp_path):
    """Issue 24: SIGTERM (kill, docker stop) finishes the step and saves; an empty checkpoint-N left by a
    SIGKILL during a save is skipped by --resume, which names it; checkpoint files honour the umask."""
    import stat
    import warnings

    from transformers import TrainerCallback

    from grpo_kit.artifacts.checkpoint import HalfFinishedCheckpointWarning
    from grpo_kit.support.interrupts import forget_signals, received_signal

    class TermAtStep1(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 1 and not getattr(self, "sent", False):
                self.sent = True
                os.kill(os.getpid(), signal.SIGTERM)

    forget_signals()
    handler_before = signal.getsignal(signal.SIGTERM)
    previous_umask = os.umask(0o022)
    try:
        first = trl_path.train_with_trl(
            tiny_recipe(),
            model_loader=RecordingLoader(),
            output_dir=tmp_path,
            max_steps=3,
            device="cpu",
            callbacks=[TermAtStep1()],
        )
    finally:
        os.umask(previous_umask)
    assert first.interrupted and first.checkpoint == tmp_path / "checkpoint-2"
    assert received_signal() == signal.SIGTERM and signal.getsignal(signal.SIGTERM) is handler_before
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in first.checkpoint.iterdir() if p.is_file()}
    assert {name: mode for name, mode in modes.items() if mode != 0o644} == {}, modes

    (tmp_path / "checkpoint-3").mkdir()  # SIGKILL during the next save
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = trl_path.train_with_trl(
            tiny_recipe(),
            model_loader=RecordingLoader(),
            output_dir=tmp_path,
            max_steps=3,
            device="cpu",
            resume_from_checkpoint=True,
        )
    assert resumed.global_step == 3 and not resumed.interrupted
    notes = [str(w.message) for w in caught if issubclass(w.category, HalfFinishedCheckpointWarning)]
    assert notes and "checkpoint-3" in notes[0] and "using checkpoint-2" in notes[0]


def test_server_mode_prints_the_vllm_serve_command_for_the_recipes_model(tmp_path, capsys):
    """vllm_mode='server': the exact `vllm serve` command (TRL's docs; TRL deprecates its own subcommand)
    for the recipe's model, printed before the CPU refusal, with the port the trainer will use."""
    import json
    import shlex

    loader = RecordingLoader()
    with pytest.raises(RuntimeError, match="vllm serve"):
        trl_path.build_trainer(
            tiny_recipe(),
            model_loader=loader,
            output_dir=tmp_path,
            device="cpu",
            vllm_mode="server",
            vllm_server_port=8001,
        )
    assert loader.calls == []
    out = capsys.readouterr().out
    assert "trl " + "vllm-serve" not in out
    command = out.splitlines()[-1].strip()
    words = shlex.split(command)
    assert words[:5] == [
        "CUDA_VISIBLE_DEVICES=0",
        "VLLM_SERVER_DEV_MODE=1",
        "vllm",
        "serve",
        "HuggingFaceTB/SmolLM2-135M-Instruct",  # the recipe's alias smollm2-135m-instruct, as a Hub id
    ]
    flags = dict(zip(words[5::2], words[6::2], strict=True))
    assert flags == {
        "--port": "8001",
        "--weight-transfer-config": '{"backend":"nccl"}',
        "--logprobs-mode": "processed_logprobs",
        "--max-logprobs": "-1",
    }
    assert json.loads(flags["--weight-transfer-config"]) == {"backend": "nccl"}


@pytest.mark.parametrize(
    ("overrides", "replacement"),
    [
        ({"use_transformers_paged": True}, "use_transformers_continuous_batching=True"),
        ({"vllm_importance_sampling_cap": 3.0}, "vllm_importance_sampling_clip_max"),
    ],
)
def test_deprecated_trl_settings_are_warned_with_their_replacement(overrides, replacement):
    recipe = tiny_recipe()
    training = {**recipe.grpo_training(), **overrides}
    from grpo_kit.config.rules import check_training_fields

    with pytest.warns(FutureWarning, match=f"{next(iter(overrides))}.*deprecated.*{replacement}"):
        check_training_fields(training)
    # TRL itself still applies them, translated to the replacement.
    from trl import GRPOConfig

    with pytest.warns(FutureWarning):
        config = GRPOConfig(output_dir="unused", report_to="none", use_cpu=True, **overrides)
    if "vllm_importance_sampling_cap" in overrides:
        assert config.vllm_importance_sampling_clip_max == 3.0
    else:
        assert config.use_transformers_continuous_batching is True


@pytest.mark.parametrize("beta", [0.04, 0.0])
def test_a_full_fine_tune_reference_model_takes_the_policys_dtype(tmp_path, beta):
    """β > 0 without LoRA: TRL loads a reference copy. TRL 1.16 gives it the policy's dtype; on 1.15 grpo-kit
    passes it through model_init_kwargs (else a bf16 policy would get an fp32 reference)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    model, tokenizer = tiny_model(seed=0)
    model.save_pretrained(tmp_path / "policy")  # the reference is reloaded from the policy's path
    policy = AutoModelForCausalLM.from_pretrained(tmp_path / "policy", dtype=torch.bfloat16)
    trainer = trl_path.build_trainer(
        tiny_recipe(lora=None),
        model=policy,
        tokenizer=tokenizer,
        train_dataset=Dataset.from_dict({"prompt": ["Summarize: the cat sat on the mat."] * 4}),
        output_dir=tmp_path / "run",
        max_steps=1,
        device="cpu",
        beta=beta,
    )
    if beta:
        assert trainer.ref_model is not None and trainer.ref_model.dtype == torch.bfloat16
    else:
        assert trainer.ref_model is None and trainer.args.model_init_kwargs is None  # nothing changed
