"""Exports (adapter, merged 16-bit, GGUF) on real models, each checked by reloading it.

The tiny model's LoRA is perturbed (B ≠ 0) so that merging really changes the weights, and its
embedding is scaled up so that its greedy choices are decisive (a random 64-wide Llama otherwise has
near-equal logits, and every comparison would pass as a "near-tie").

GGUF conversion needs llama.cpp's converter, fetched once from PyPI (the llama-cpp-python sdist) and
cached. CI reaches PyPI (it installs from it), so a failed download fails the test; it is skipped only
where the environment declares itself offline with GRPO_KIT_OFFLINE=1 and no converter is cached.
"""

from __future__ import annotations

import json
import os

import pytest
import torch

from grpo_kit.export import (
    compare_greedy,
    find_converter,
    gguf_vocabulary_type,
    prompt_ids,
    resolve_16bit,
    save_adapter,
    save_gguf,
    save_merged,
)
from grpo_kit.export.gguf import stage_for_conversion
from grpo_kit.models import tiny_model

pytestmark = pytest.mark.xdist_group("export")


def _decisive_tiny(seed: int = 0):
    """Tiny LoRA model whose adapter changes the output and whose logits are far from ties."""
    model, tokenizer = tiny_model(seed=seed, lora={"r": 8, "lora_alpha": 16, "lora_dropout": 0.0})
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.5)
            if "embed_tokens" in name:
                param.mul_(25.0)  # tied with lm_head: logits spread out, greedy choices become decisive
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def tiny():
    return _decisive_tiny()


@pytest.fixture(scope="module")
def converter():
    try:
        return find_converter()
    except Exception as error:  # decide below whether this may skip
        if os.environ.get("GRPO_KIT_OFFLINE") == "1":
            pytest.skip(f"GRPO_KIT_OFFLINE=1 and llama.cpp's converter is not cached: {error}")
        raise


def _base_weight(model):
    return model.get_base_model().model.layers[0].self_attn.q_proj.base_layer.weight


def test_adapter_roundtrip_gives_same_greedy_tokens(tiny, tmp_path):
    model, tokenizer = tiny
    report = save_adapter(model, tokenizer, tmp_path / "adapter")
    assert report.verified
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    assert (tmp_path / "adapter" / "tokenizer.json").is_file()
    greedy = report.details["greedy"]
    assert greedy["first_mismatch"] is None and greedy["max_abs_logit_diff"] < 1e-4


def test_merged_16bit_keeps_training_model_and_ships_tokenizer(tiny, tmp_path):
    model, tokenizer = tiny
    ids = prompt_ids(tokenizer)
    with torch.no_grad():
        logits_before = model(input_ids=ids).logits  # (1, T, V)
    base_before = _base_weight(model).clone()

    report = save_merged(model, tokenizer, tmp_path / "merged")  # "16bit" -> bf16 on CPU

    assert report.verified, report.details
    assert report.details["dtype"] == "bfloat16" == resolve_16bit()
    out = tmp_path / "merged"
    config = json.loads((out / "config.json").read_text())
    assert config["dtype"] == "bfloat16" and "quantization_config" not in config
    assert (out / "tokenizer.json").is_file()
    chat_template = (
        (out / "chat_template.jinja").read_text()
        if (out / "chat_template.jinja").is_file()
        else json.loads((out / "tokenizer_config.json").read_text()).get("chat_template", "")
    )
    assert "<|im_start|>" in chat_template

    # the model in memory is untouched: still a LoRA model with the same base weights and outputs
    assert hasattr(model, "peft_config")
    assert torch.equal(_base_weight(model), base_before)
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, logits_before)

    # merging really folded the adapter in: the merged q_proj differs from the base one
    from safetensors.torch import load_file

    merged_q = load_file(out / "model.safetensors")["model.layers.0.self_attn.q_proj.weight"].float()
    assert (merged_q - base_before).abs().max() > 1e-2
    # bf16 rounding may flip a near-tie of this random model (verified allows that, within tie_tolerance);
    # the same merge in fp32 must give exactly the adapter model's greedy tokens.
    greedy = report.details["greedy"]
    assert greedy["first_mismatch"] is None or greedy["margin_at_mismatch"] <= greedy["tie_tolerance"], greedy
    exact = save_merged(model, tokenizer, tmp_path / "merged-fp32", dtype="fp32")
    assert exact.verified and exact.details["greedy"]["first_mismatch"] is None, exact.details


def test_fp32_merge_matches_adapter_logits(tiny, tmp_path):
    from transformers import AutoModelForCausalLM

    model, tokenizer = tiny
    report = save_merged(model, tokenizer, tmp_path / "m32", dtype="fp32")
    assert report.verified
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "m32")
    ids = prompt_ids(tokenizer)
    with torch.no_grad():
        torch.testing.assert_close(
            reloaded(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-4, rtol=1e-4
        )


def test_a_qlora_model_is_merged_onto_its_16bit_base_not_into_the_4bit_weights(tmp_path, monkeypatch):
    bnb = pytest.importorskip("bitsandbytes")
    from safetensors.torch import load_file

    from grpo_kit.models import load_model

    monkeypatch.setenv("GRPO_KIT_CACHE", str(tmp_path / "cache"))
    model, tokenizer = load_model("tiny", quantization="4bit", lora={"r": 4}, seed=0)
    with torch.no_grad():  # a trained-looking adapter (B starts at zero)
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.05, generator=torch.Generator().manual_seed(len(name)))
    report = save_merged(model, tokenizer, tmp_path / "merged", dtype="fp32")
    assert report.verified and report.details["merged_onto"].startswith("the 16-bit base")
    assert 0.0 <= report.details["greedy_vs_quantized"]["agreement"] <= 1.0  # recorded beside, not judged
    merged = load_file(tmp_path / "merged" / "model.safetensors")
    plain, _ = load_model("tiny")  # the same seed-0 base, never quantized
    q_proj = model.get_base_model().model.layers[0].self_attn.q_proj
    expected = plain.model.layers[0].self_attn.q_proj.weight + q_proj.get_delta_weight("default")  # (64, 64)
    torch.testing.assert_close(merged["model.layers.0.self_attn.q_proj.weight"], expected)
    # the training model is left as it was: 4-bit layers, adapter unmerged
    assert isinstance(q_proj.base_layer, bnb.nn.Linear4bit) and not q_proj.merged


def test_verification_can_fail_on_a_different_model(tiny):
    model, tokenizer = tiny
    other, _ = _decisive_tiny(seed=7)
    comparison = compare_greedy(model, other, prompt_ids(tokenizer), tie_tolerance=0.25)
    assert comparison.first_mismatch is not None
    assert not comparison.passed


def test_a_model_left_in_training_mode_is_compared_in_eval_mode():
    """A model just trained is in training mode; with LoRA dropout on, each forward pass is another random
    draw, so a model compared with a copy of itself could disagree. compare_greedy compares both in eval mode
    and gives each its mode back."""
    import copy

    model, tokenizer = tiny_model(seed=0, lora={"r": 8, "lora_alpha": 16, "lora_dropout": 0.9})
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 2.0, generator=torch.Generator().manual_seed(len(name)))
    twin = copy.deepcopy(model)
    model.train(), twin.train()
    torch.manual_seed(0)
    comparison = compare_greedy(model, twin, prompt_ids(tokenizer), tie_tolerance=0.0)
    assert comparison.passed and comparison.first_mismatch is None and comparison.max_abs_logit_diff == 0.0
    assert model.training and twin.training  # each model's mode is given back


def test_bad_arguments_name_the_fix(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="16bit"):
        save_merged(model, tokenizer, tmp_path / "x", dtype="int3")
    with pytest.raises(TypeError, match="save_merged"):
        save_adapter(model.get_base_model(), tokenizer, tmp_path / "y")
    monkeypatch.delenv("LLAMA_CPP_DIR", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ValueError, match="llama-quantize"):
        save_gguf(model, tmp_path / "m.gguf", "q4_k_m", tokenizer=tokenizer)
    with pytest.raises(ValueError, match="unknown GGUF type"):
        save_gguf(model, tmp_path / "m.gguf", "q9_z", tokenizer=tokenizer)


def test_staging_declares_byte_level_bpe(tmp_path):
    # transformers' GGUF tokenizer marks byte-level BPE with byte_fallback; the converter would call it SentencePiece.
    src = tmp_path / "src"
    src.mkdir()
    tok = {
        "model": {"type": "BPE", "byte_fallback": True, "vocab": {"a": 0}, "merges": []},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
        "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]},
    }
    (src / "tokenizer.json").write_text(json.dumps(tok))
    (src / "config.json").write_text(
        json.dumps({"model_type": "llama", "quantization_config": {"quant_method": "gguf"}})
    )
    (src / "model.safetensors").write_bytes(b"x")
    staged = stage_for_conversion(src, tmp_path / "staged")
    out = json.loads((staged / "tokenizer.json").read_text())
    assert out["model"]["byte_fallback"] is False and out["decoder"]["type"] == "ByteLevel"
    assert "quantization_config" not in json.loads((staged / "config.json").read_text())
    assert (staged / "model.safetensors").resolve() == (src / "model.safetensors").resolve()


def test_gguf_f16_tiny_roundtrip(tiny, converter, tmp_path):
    model, tokenizer = tiny
    report = save_gguf(model, tmp_path / "tiny-f16.gguf", "f16", tokenizer=tokenizer)
    assert report.verified, report.details
    assert gguf_vocabulary_type(report.path) == "gpt2"
    assert report.details["checks"] == {"vocabulary_type": True, "tokenizer_ids": True, "greedy": True}
    assert report.details["greedy"]["first_mismatch"] is None  # f16: the same greedy tokens


@pytest.mark.slow
def test_gguf_f16_embedded_model_roundtrip(converter, tmp_path):
    from grpo_kit.models import embedded_model_dir

    report = save_gguf(embedded_model_dir(), tmp_path / "smollm2-f16.gguf", "f16")
    assert report.verified, report.details
    assert report.details["vocabulary_type"] == "gpt2"
    assert report.details["greedy"]["first_mismatch"] is None
    assert 2.5e8 < report.size_bytes < 3.0e8  # 135M parameters x 2 bytes


# --------------------------------------------------------------------------- the export folder


def test_foreign_folder_is_refused_and_overwrite_empties_it(tiny, tmp_path):
    from grpo_kit.export.folder import MANIFEST

    model, tokenizer = tiny
    out = tmp_path / "merged"
    out.mkdir()
    # Someone else's sharded model: from_pretrained would follow this index instead of our model.safetensors.
    stale = {"metadata": {}, "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}
    (out / "model.safetensors.index.json").write_text(json.dumps(stale))
    with pytest.raises(
        FileExistsError, match=r"did not export .*model\.safetensors\.index\.json.*overwrite=True"
    ):
        save_merged(model, tokenizer, out, dtype="fp32")
    assert (out / "model.safetensors.index.json").exists()  # refused: nothing touched

    report = save_merged(model, tokenizer, out, dtype="fp32", overwrite=True)
    assert not (out / "model.safetensors.index.json").exists()
    assert report.verified and report.details["file_problems"] == []
    manifest = json.loads((out / MANIFEST).read_text())
    assert set(manifest["files"]) == set(report.details["files"]) and "model.safetensors" in manifest["files"]


def test_previous_export_is_replaced_but_added_files_are_not(tiny, tmp_path):
    model, tokenizer = tiny
    out = tmp_path / "adapter"
    assert save_adapter(model, tokenizer, out).verified
    assert save_adapter(model, tokenizer, out).verified  # our own export: replaced without overwrite
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.txt"):
        save_adapter(model, tokenizer, out)


def test_check_export_files_finds_missing_changed_and_extra_files(tiny, tmp_path):
    from grpo_kit.export.folder import check_export_files

    model, tokenizer = tiny
    out = save_adapter(model, tokenizer, tmp_path / "adapter", verify=False).path
    assert check_export_files(out) == []
    (out / "model.safetensors.index.json").write_text("{}")
    (out / "tokenizer_config.json").write_text("{}")
    (out / "adapter_config.json").unlink()
    assert check_export_files(out) == [
        "adapter_config.json: missing",
        "tokenizer_config.json: changed since the export",
        "model.safetensors.index.json: not written by this export",
    ]


def test_overwrite_never_empties_the_current_folder(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "code.py").write_text("precious")
    monkeypatch.chdir(project / "src")
    with pytest.raises(ValueError, match="refusing to empty"):
        save_adapter(model, tokenizer, project, overwrite=True)
    assert (project / "src" / "code.py").read_text() == "precious"


def test_export_into_a_file_is_refused(tiny, tmp_path):
    model, tokenizer = tiny
    (tmp_path / "taken").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"):
        save_adapter(model, tokenizer, tmp_path / "taken")


# --------------------------------------------------------------------------- GGUF types, checked before training


def _fake_llama_cpp(tmp_path, with_quantize: bool):
    root = tmp_path / "llama.cpp"
    root.mkdir(parents=True)
    (root / "convert_hf_to_gguf.py").write_text(
        "# stands in for the converter: only its presence is checked\n"
    )
    if with_quantize:
        binary = root / "build" / "bin" / "llama-quantize"
        binary.parent.mkdir(parents=True)
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
    return root


def test_gguf_quantization_availability_is_checked_before_training(tmp_path, monkeypatch):
    from grpo_kit.export import check_gguf_quantization_available

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setenv("GRPO_KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LLAMA_CPP_DIR", raising=False)
    with pytest.raises(ValueError, match=r"'q4_k_m' needs llama.cpp's compiled llama-quantize.*cmake"):
        check_gguf_quantization_available("q4_k_m")
    with pytest.raises(ValueError, match="unknown GGUF type"):
        check_gguf_quantization_available("q9_z")
    with pytest.raises(ValueError, match="only written by Unsloth on a GPU"):
        check_gguf_quantization_available("fast_quantized")
    assert check_gguf_quantization_available("fast_quantized", unsloth=True) == "fast_quantized"
    with pytest.raises(FileNotFoundError, match="converter is not cached"):
        check_gguf_quantization_available("f16", download=False)

    monkeypatch.setenv("LLAMA_CPP_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="must be a llama.cpp checkout"):
        check_gguf_quantization_available("Q8_0")
    monkeypatch.setenv("LLAMA_CPP_DIR", str(_fake_llama_cpp(tmp_path / "a", with_quantize=False)))
    assert check_gguf_quantization_available("Q8_0") == "q8_0"
    with pytest.raises(ValueError, match="llama-quantize"):
        check_gguf_quantization_available("q4_k_m")
    monkeypatch.setenv("LLAMA_CPP_DIR", str(_fake_llama_cpp(tmp_path / "b", with_quantize=True)))
    assert check_gguf_quantization_available("q4_k_m") == "q4_k_m"


# --------------------------------------------------------------------------- converter integrity


def _tar(path, entries):
    """entries: (name, bytes | ("symlink", target))."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, content in entries:
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, content[1]
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return path


PKG = "llama_cpp_python-0.3.36/vendor/llama.cpp/"


def test_genuine_layout_extracts_only_the_converter(tmp_path):
    from grpo_kit.export.gguf import _extract_converter

    archive = _tar(
        tmp_path / "ok.tar.gz",
        [
            (PKG + "convert_hf_to_gguf.py", b"print()"),
            (PKG + "gguf-py/gguf/__init__.py", b""),
            (PKG + "README.md", b"no"),
        ],
    )
    dest = tmp_path / "dest"
    _extract_converter(archive, dest)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == [
        "convert_hf_to_gguf.py",
        "gguf-py/gguf/__init__.py",
    ]


@pytest.mark.parametrize(
    "entry",
    [
        (PKG + "conversion/../../../../escaped.py", b"import os"),
        ("../escaped.py", b"import os"),
        ("/tmp/grpo-kit-test-absolute-escaped.py", b"import os"),
        (PKG + "gguf-py/evil_link", ("symlink", "../../../../../escaped.py")),
        (PKG + "conversion/abs_link", ("symlink", "/etc/passwd")),
    ],
    ids=["dotdot-inside-vendor", "dotdot-top", "absolute", "symlink-out", "symlink-absolute"],
)
def test_archive_entries_leaving_the_cache_are_refused(tmp_path, entry):
    from pathlib import Path

    from grpo_kit.export.gguf import _extract_converter

    archive = _tar(tmp_path / "evil.tar.gz", [(PKG + "convert_hf_to_gguf.py", b"print()"), entry])
    dest = tmp_path / "cache" / "a" / "b" / "dest"
    with pytest.raises(ValueError, match="refusing archive entry"):
        _extract_converter(archive, dest)
    assert not any(p.name in ("escaped.py", "evil_link", "abs_link") for p in tmp_path.rglob("*"))
    assert not Path("/tmp/grpo-kit-test-absolute-escaped.py").exists()


def test_archive_with_another_hash_is_refused_before_extraction(tmp_path):
    from grpo_kit.export.gguf import LLAMA_CPP_PYTHON_SHA256, check_sha256

    archive = _tar(tmp_path / "llama_cpp_python-0.3.36.tar.gz", [(PKG + "convert_hf_to_gguf.py", b"print()")])
    with pytest.raises(ValueError, match=r"not the pinned 832db069.*Nothing was extracted"):
        check_sha256(archive, LLAMA_CPP_PYTHON_SHA256)
    import hashlib

    check_sha256(archive, hashlib.sha256(archive.read_bytes()).hexdigest())  # the right hash passes
