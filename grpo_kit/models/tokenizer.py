"""Tokenizer settings every GRPO path relies on, and keeping the model's token ids in step."""

from __future__ import annotations

#: Used only when a model ships no chat template at all (base models): ChatML, as SmolLM2 uses.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def prepare_tokenizer(tokenizer):
    """Left padding, a pad token and a chat template, as GRPO generation needs (in place; returned).

    Left padding makes every completion in a batch start at the same column.
    """
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        # Same choice as TRL: pad with EOS. The attention mask hides it either way.
        tokenizer.pad_token = tokenizer.eos_token
    if not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def fix_token_ids(model, tokenizer) -> None:
    """Fill missing pad/eos ids in config and generation_config from the tokenizer (so generate() stops)."""
    for cfg in (model.config, getattr(model, "generation_config", None)):
        if cfg is None:
            continue
        if getattr(cfg, "pad_token_id", None) is None and tokenizer.pad_token_id is not None:
            cfg.pad_token_id = tokenizer.pad_token_id
        if getattr(cfg, "eos_token_id", None) is None and tokenizer.eos_token_id is not None:
            cfg.eos_token_id = tokenizer.eos_token_id
