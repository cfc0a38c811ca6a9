"""A tool-calling chat template for SmolLM2 (ChatML), and the checks TRL's ``tools=`` path needs up front.

SmolLM2-135M-Instruct's own chat template has no tool support: ``apply_chat_template(..., tools=[f])``
drops the tool list silently, and TRL's GRPOTrainer refuses with "The provided chat template does not
support tool calling". :func:`enable_tool_calling` installs a project-owned template and the matching
response format, so TRL's ``supports_tool_calling``, ``is_chat_template_prefix_preserving`` and
``parse_response`` accept the tokenizer. A rendered exchange::

    <|im_start|>system
    You can call these tools:
    multiply(a: integer, b: integer) - Multiply two integers.
    To call a tool, reply with one line: CALL name(argument=value, ...). ...<|im_end|>
    <|im_start|>user
    What is 37 * 48?<|im_end|>
    <|im_start|>assistant
    CALL multiply(a=37, b=48)<|im_end|>
    <|im_start|>tool
    RESULT 1776<|im_end|>
    <|im_start|>assistant
    The answer is 1776.<|im_end|>

Why this format: a 135M model copies a short, Python-like line from one worked example far more
reliably than nested JSON (the issue's measurement: 9/16 well-formed calls with one example, 1/16 with
Qwen2.5's JSON format). Conversations without tools render exactly as SmolLM2's own template does.

How TRL uses it (TRL 1.15, ``GRPOTrainer(tools=...)``): each completion is parsed with
``tokenizer.parse_response`` (driven by :data:`RESPONSE_TEMPLATE`); every ``CALL`` line becomes a
``tool_calls`` entry, the tool runs, and its result is appended as a ``tool`` turn whose tokens are kept
out of the loss. A malformed call does not crash anything: positional arguments parse to no arguments
and wrong names reach the tool as unexpected keywords; TRL reports either (and unknown tools) as
``{"error": ...}`` results, counted in ``tools/failure_frequency``.

The checks (:func:`check_tools`, :func:`check_tool_tokenizer`, :func:`check_max_tool_calling_iterations`)
raise before any model loads, with a message that names the fix.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "RESPONSE_TEMPLATE",
    "TOOL_CHAT_TEMPLATE",
    "TOOL_INSTRUCTIONS",
    "check_max_tool_calling_iterations",
    "check_tool_tokenizer",
    "check_tools",
    "enable_tool_calling",
    "render_call",
]

#: The instruction appended to the system prompt when tools are given (after the tool list).
TOOL_INSTRUCTIONS = (
    "To call a tool, reply with one line: CALL name(argument=value, ...). "
    "The result comes back as RESULT value. Then reply with the final answer."
)

# SmolLM2's own template (ChatML, default system prompt when none is given), extended with:
# - a tool list in the system turn when ``tools`` is passed (a system message is added if there is none);
# - assistant ``tool_calls`` rendered as ``CALL name(k=v, ...)`` lines, values as JSON (37, "Paris");
# - ``tool`` messages rendered as a ``tool`` turn ``RESULT <content>``.
# Every message renders independently of the ones after it, so the template is prefix-preserving.
TOOL_CHAT_TEMPLATE = (
    "{%- macro render_tools() -%}"
    "{{ 'You can call these tools:' }}"
    "{%- for tool in tools -%}"
    "{%- set fn = tool.function if tool.function is defined else tool -%}"
    "{{ '\\n' + fn.name + '(' }}"
    "{%- for pname, pspec in (fn.parameters.properties | default({})).items() -%}"
    "{{ pname + ': ' + (pspec.type | default('any')) }}{{ ', ' if not loop.last }}"
    "{%- endfor -%}"
    "{{ ') - ' + (fn.description | default('')) }}"
    "{%- endfor -%}"
    "{{ '\\n" + TOOL_INSTRUCTIONS + "' }}"
    "{%- endmacro -%}"
    "{%- for message in messages -%}"
    "{%- if loop.first and message.role != 'system' -%}"
    "{{ '<|im_start|>system\n' }}"
    "{%- if tools -%}{{ render_tools() }}"
    "{%- else -%}{{ 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' }}{%- endif -%}"
    "{{ '<|im_end|>\n' }}"
    "{%- endif -%}"
    "{%- if message.role == 'system' -%}"
    "{{ '<|im_start|>system\n' + message.content }}"
    "{%- if tools -%}{{ '\n\n' if message.content }}{{ render_tools() }}{%- endif -%}"
    "{{ '<|im_end|>\n' }}"
    "{%- elif message.role == 'tool' -%}"
    "{{ '<|im_start|>tool\nRESULT ' + (message.content | string) + '<|im_end|>\n' }}"
    "{%- elif message.role == 'assistant' and message.tool_calls -%}"
    "{{ '<|im_start|>assistant\n' }}"
    "{%- if message.content -%}{{ message.content + '\n' }}{%- endif -%}"
    "{%- for call in message.tool_calls -%}"
    "{%- set fn = call.function if call.function is defined else call -%}"
    "{{ 'CALL ' + fn.name + '(' }}"
    "{%- if fn.arguments is mapping -%}"
    # None arguments are left out: a datasets column of calls to different tools is one Arrow struct, so
    # each call comes back with the other tools' argument names set to None.
    "{%- for key, value in fn.arguments.items() if value is not none -%}"
    "{{ key }}={{ value | tojson }}{{ ', ' if not loop.last }}"
    "{%- endfor -%}"
    "{%- else -%}{{ fn.arguments | default('') }}{%- endif -%}"
    "{{ ')' }}{{ '\n' if not loop.last }}"
    "{%- endfor -%}"
    "{{ '<|im_end|>\n' }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + message.role + '\n' + (message.content | default('', true)) + '<|im_end|>\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)

# One argument value: a JSON string, a bracketed list/mapping (one nesting level), or a bare literal up to
# the next ``,`` or ``)``. Bare values that are not JSON stay strings (``allow_non_json``).
_ARG_VALUE = r"\"(?:[^\"\\]|\\.)*\"|'[^']*'|\[[^\]]*\]|\{[^}]*\}|[^,)\n]*"

#: transformers' new-style response template (>= 5.13) for :data:`TOOL_CHAT_TEMPLATE`: text before the
#: first ``CALL`` is ``content``; each ``CALL name(k=v, ...)`` line is one ``tool_calls`` entry.
RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"(?:^|\n)[ \t]*CALL[ \t]+(?P<name>\w+)\(",
            "close_pattern": r"\)[ \t]*",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {
                "tag_pattern": rf"(?P<key>\w+)\s*=\s*(?P<value>{_ARG_VALUE})",
                "value_parser": {
                    "name": "json",
                    "args": {"string_delims": [["'", "'"]], "allow_non_json": True},
                },
            },
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {
            "close_pattern": r"<\|im_end\|>\s*",
            "content": "text",
        },
    },
}


def render_call(name: str, /, **arguments: Any) -> str:
    """The one line the template renders for a call: ``render_call("multiply", a=37, b=48)`` ->
    ``'CALL multiply(a=37, b=48)'`` (values as JSON, as in the template). ``name`` is positional only, so a
    call the model writes with an argument called "name" renders too."""
    import json

    args = ", ".join(f"{key}={json.dumps(value)}" for key, value in arguments.items())
    return f"CALL {name}({args})"


def enable_tool_calling(tokenizer):
    """Install the tool-calling chat template and response template on ``tokenizer`` (in place; returned).

    Made for ChatML tokenizers (SmolLM2, the embedded default): the template uses ``<|im_start|>`` /
    ``<|im_end|>``, so the tokenizer's EOS must be ``<|im_end|>`` for TRL to cut turns where the template
    does. After this, ``GRPOTrainer(..., tools=[...], processing_class=tokenizer)`` accepts it, and
    :func:`check_tool_tokenizer` passes.
    """
    if getattr(tokenizer, "eos_token", None) != "<|im_end|>":
        raise ValueError(
            "enable_tool_calling() installs a ChatML template (SmolLM2's format), which needs the tokenizer's "
            f"eos_token to be '<|im_end|>'; this tokenizer's is {getattr(tokenizer, 'eos_token', None)!r}. "
            "Use a model with a native tool template instead (e.g. Qwen2.5-Instruct, which TRL supports)."
        )
    tokenizer.chat_template = TOOL_CHAT_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    return tokenizer


def check_tool_tokenizer(tokenizer) -> None:
    """Raise ``ValueError`` unless TRL can run a tool loop with ``tokenizer``: its chat template renders a
    whole tool exchange (TRL's ``supports_tool_calling``), is prefix-preserving (or TRL has a training
    template to swap in), and it can parse calls (a ``response_template``, or a template TRL knows)."""
    from trl.chat_template_utils import (
        add_response_schema,
        get_training_chat_template,
        is_chat_template_prefix_preserving,
        supports_tool_calling,
    )

    fix = (
        "Call grpo_kit.rollout.tool_template.enable_tool_calling(tokenizer) first (SmolLM2 / ChatML models)."
    )
    if not supports_tool_calling(tokenizer):
        raise ValueError(
            "This tokenizer's chat template cannot render a tool-calling conversation (it drops the tool "
            f"calls or the tool results), so TRL's GRPOTrainer would refuse tools=. {fix}"
        )
    if not is_chat_template_prefix_preserving(tokenizer):
        try:  # TRL swaps in its own prefix-preserving training template for the templates it knows (Qwen3, ...)
            get_training_chat_template(tokenizer)
        except ValueError:
            raise ValueError(
                "This tokenizer's chat template is not prefix-preserving, as TRL's tool loop needs, and TRL has "
                f"no training template for it. {fix}"
            ) from None
    has_parser = getattr(tokenizer, "response_template", None) is not None or (
        getattr(tokenizer, "response_schema", None) is not None
    )
    if not has_parser:
        try:  # a copy: only asks whether TRL knows the template, without setting anything on the caller's object
            add_response_schema(copy.copy(tokenizer))
        except ValueError:
            raise ValueError(
                "This tokenizer has no response_template, so TRL cannot parse the model's tool calls. " + fix
            ) from None


def check_tools(tools: Sequence[Callable] | None) -> list[Callable]:
    """Raise ``ValueError`` naming the tool and the fix for anything TRL would reject late; returns the list.

    TRL turns each tool into a JSON schema (``transformers.utils.get_json_schema``), which needs a type
    hint on every argument and a docstring with an ``Args:`` line for each; names must be unique because
    calls are dispatched by name.
    """
    from transformers.utils import get_json_schema

    if tools is None:
        return []
    if callable(tools) or isinstance(tools, (str, bytes)):
        raise TypeError("tools must be a list of functions, e.g. tools=[multiply]; got a single object.")
    tools = list(tools)
    seen: set[str] = set()
    for tool in tools:
        if not callable(tool):
            raise TypeError(f"Every tool must be a function; got {type(tool).__name__} {tool!r}.")
        name = getattr(tool, "__name__", repr(tool))
        if name in seen:
            raise ValueError(f"Two tools are named {name!r}; TRL dispatches calls by name, so rename one.")
        seen.add(name)
        missing_hints = [
            param.name
            for param in inspect.signature(tool).parameters.values()
            if param.annotation is inspect.Parameter.empty
            and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
        ]
        if missing_hints:
            raise ValueError(
                f"Tool {name!r} has no type hint for {', '.join(missing_hints)}; TRL builds the tool's schema "
                f"from the signature, so write e.g. def {name}({missing_hints[0]}: int, ...) -> int."
            )
        if not inspect.getdoc(tool):
            raise ValueError(
                f"Tool {name!r} has no docstring; TRL needs one that describes the tool and has an 'Args:' "
                "section with one line per argument (Google style)."
            )
        try:
            get_json_schema(tool)
        # transformers raises its own DocstringParsingException / TypeHintParsingException here.
        except Exception as error:
            raise ValueError(
                f"Tool {name!r} cannot be turned into a tool schema ({error}). Give it a docstring with a "
                "description and an 'Args:' section describing every argument, and a type hint on each argument."
            ) from error
    return tools


def check_max_tool_calling_iterations(value: int | None) -> int | None:
    """``max_tool_calling_iterations`` as TRL's ``GRPOConfig`` takes it: ``None`` (no limit) or an int >= 1.

    0 or less would silently train without ever running a tool, so it is an error here.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"max_tool_calling_iterations must be a whole number >= 1 (or None for no limit); got {value!r}."
        )
    if value < 1:
        raise ValueError(
            f"max_tool_calling_iterations={value} would never run a tool; use 1 (one call, then the answer) "
            "or more, or None for no limit."
        )
    return value
