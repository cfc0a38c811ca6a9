"""Prompt -> model input text, the way TRL does it.

TRL accepts two prompt formats (``trl.data_utils.is_conversational``):

* *standard*: a plain string, used as is (no chat template), e.g. smoltldr's ``prompt``;
* *conversational*: a list of ``{"role", "content"}`` messages, rendered with the tokenizer's
  chat template. When the last message is from the ``user`` (or a ``tool``) the generation
  prompt is appended (``add_generation_prompt=True``); when it is from the ``assistant`` the
  message is left open so the model continues it (``continue_final_message=True``).

This mirrors ``trl.data_utils.maybe_apply_chat_template({"prompt": prompt}, tokenizer)["prompt"]``
(TRL 1.15) without importing TRL, so the standalone loop sees exactly the text TRL's
``GRPOTrainer`` would tokenize.
"""

from __future__ import annotations

from typing import Any

#: A dataset column the standalone loop samples from instead of ``prompt`` when a row has it (guided sampling:
#: the completions are drawn from this prompt, e.g. with a worked example, and the update scores them under
#: ``prompt``; ``grpo_kit.loop.training``). TRL's GRPOTrainer has no such column, so the other paths refuse it.
SAMPLING_PROMPT = "sampling_prompt"


def prompt_to_sample_from(row: dict[str, Any]) -> Any:
    """The prompt a row's completions are drawn from: its :data:`SAMPLING_PROMPT` when it has one, else its
    ``prompt``."""
    return row[SAMPLING_PROMPT] if SAMPLING_PROMPT in row else row["prompt"]


#: Seconds one prompt may take to render through a chat template (real templates take milliseconds).
TEMPLATE_SECONDS = 30.0


def is_conversational_prompt(prompt: Any) -> bool:
    """True for a list of ``{"role": ..., "content": ...}`` messages (TRL's conversational format)."""
    return (
        isinstance(prompt, (list, tuple))
        and len(prompt) > 0
        and isinstance(prompt[0], dict)
        and "role" in prompt[0]
        and "content" in prompt[0]
    )


def prompt_to_text(prompt: str | list[dict[str, Any]], tokenizer, *, tools=None, **template_kwargs) -> str:
    """Model input text for one prompt: plain strings pass through, conversations get the chat template.

    ``template_kwargs`` (e.g. ``enable_thinking=False``) go to ``tokenizer.apply_chat_template``,
    as TRL's ``chat_template_kwargs`` do.
    """
    if isinstance(prompt, str):
        return prompt
    if not is_conversational_prompt(prompt):
        raise TypeError(
            "A prompt must be a string (standard format) or a non-empty list of "
            "{'role': ..., 'content': ...} messages (conversational format); "
            f"got {type(prompt).__name__}: {str(prompt)[:80]!r}."
        )
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            "This tokenizer has no chat template, so a conversational prompt cannot be rendered. "
            "Load it with grpo_kit.models.load_model (which sets one) or pass plain-string prompts."
        )
    last_role = prompt[-1]["role"]
    if last_role in ("user", "tool"):
        add_generation_prompt, continue_final_message = True, False
    elif last_role == "assistant":
        add_generation_prompt, continue_final_message = False, True
    else:
        raise ValueError(
            f"The last message of a prompt must come from 'user', 'tool' or 'assistant'; got {last_role!r}. "
            "A prompt that ends with the system message has nothing to answer: add the user turn."
        )
    from rewards._runtime import DeadlineExceeded, deadline

    try:  # a template is code from the model folder: its loops get a wall-clock bound (main thread)
        with deadline(TEMPLATE_SECONDS):
            return tokenizer.apply_chat_template(
                list(prompt),
                tools=tools or None,  # as TRL: some templates render tool boilerplate for tools=[]
                continue_final_message=continue_final_message,
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
                **template_kwargs,
            )
    except DeadlineExceeded:
        raise ValueError(
            f"the chat template did not render one prompt within {TEMPLATE_SECONDS:g} s (a loop in the template "
            "that does not end, e.g. nested range() calls). Fix or replace the template: tokenizer.chat_template, "
            "or chat_template.jinja / tokenizer_config.json in the model folder."
        ) from None
