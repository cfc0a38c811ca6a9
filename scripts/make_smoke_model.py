"""Create the carried smoke model: a small random Llama with the SmolLM2 tokenizer, as safetensors.

    python scripts/make_smoke_model.py --out smoke-model        # ~13 MB, bf16, seeded

For an offline GPU box that cannot reach a model hub: it checks the plumbing of the GPU paths (4-bit load,
LoRA, GRPO steps, save, merge, reload), not learning. The tokenizer (vocabulary, special tokens, chat template)
is the embedded SmolLM2-135M-Instruct's (``grpo_kit.models.smollm2_tokenizer``); nothing is downloaded.

Dimensions are the ones Unsloth's Triton kernels and 4-bit bitsandbytes layers take without special cases:
head_dim 64 (even, a multiple of 8, <= 256: RoPE and SDPA/flash attention), hidden size and MLP width multiples
of 128, grouped-query attention with a whole number of query heads per key/value head (as SmolLM2 has).
Size is dominated by the tied embedding: vocab 49,152 x hidden 128 x 2 bytes = 12.6 MB.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@dataclass(frozen=True)
class SmokeDims:
    hidden_size: int = 128
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    max_position_embeddings: int = 2048

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


def check_dims(dims: SmokeDims) -> None:
    """Raise ValueError (naming the fix) for dimensions Unsloth's kernels or 4-bit layers would not take."""
    problems = []
    if dims.hidden_size % dims.num_attention_heads:
        problems.append("hidden_size must be a multiple of num_attention_heads")
    elif dims.head_dim % 8 or dims.head_dim > 256:
        problems.append(
            f"head_dim {dims.head_dim} must be a multiple of 8 and <= 256 (64 is the common choice)"
        )
    if dims.num_attention_heads % dims.num_key_value_heads:
        problems.append("num_attention_heads must be a multiple of num_key_value_heads")
    if dims.hidden_size % 128 or dims.intermediate_size % 128:
        problems.append("hidden_size and intermediate_size must be multiples of 128")
    if dims.num_hidden_layers < 1:
        problems.append("num_hidden_layers must be >= 1")
    if problems:
        raise ValueError("smoke model dimensions: " + "; ".join(problems) + f" (got {asdict(dims)}).")


def make_smoke_model(
    out: str | Path, *, dims: SmokeDims = SmokeDims(), seed: int = 0, dtype: str = "bfloat16"
):
    """Write a seeded random Llama of ``dims`` + the SmolLM2 tokenizer to ``out`` (safetensors). Returns ``out``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from grpo_kit.models import smollm2_tokenizer

    check_dims(dims)
    if dtype not in ("bfloat16", "float16", "float32"):
        raise ValueError(f"dtype={dtype!r}: use bfloat16 (default), float16 or float32.")
    tokenizer = smollm2_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        **{k: v for k, v in asdict(dims).items()},
        head_dim=dims.head_dim,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype=dtype,
    )
    with torch.random.fork_rng(devices=[]):  # the caller's RNG stream stays untouched
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model = model.to(getattr(torch, dtype))
    for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
        setattr(model.generation_config, key, getattr(tokenizer, key))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "SMOKE_MODEL.json").write_text(
        json.dumps(
            {
                "what": "random Llama for GPU plumbing checks (not a trained model)",
                "seed": seed,
                "dtype": dtype,
                "tokenizer": "SmolLM2-135M-Instruct (embedded GGUF)",
                **asdict(dims),
            },
            indent=2,
        )
        + "\n"
    )
    return out


def folder_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--hidden-size", type=int, default=SmokeDims.hidden_size)
    parser.add_argument("--layers", type=int, default=SmokeDims.num_hidden_layers)
    args = parser.parse_args(argv)
    dims = SmokeDims(
        hidden_size=args.hidden_size,
        num_hidden_layers=args.layers,
        intermediate_size=4 * args.hidden_size,
        num_attention_heads=args.hidden_size // 64,
    )
    try:
        out = make_smoke_model(args.out, dims=dims, seed=args.seed, dtype=args.dtype)
    except ValueError as err:
        print(f"make_smoke_model: {err}", file=sys.stderr)
        return 2
    print(
        f"smoke model in {out}: {folder_mib(out):.1f} MiB ({', '.join(sorted(p.name for p in out.iterdir()))})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
