"""Multi-turn rollouts with tools for evaluation: the loop TRL's ``GRPOTrainer(tools=...)`` runs while training.

One rollout of a prompt, per turn (at most ``max_tool_calling_iterations`` tool turns)::

    prompt ──► model writes a turn ──► parse it (TRL's parse_response, the tokenizer's response_template)
                   ▲                         │ tool_calls?  no ──► done
                   │                         ▼ yes
                   └──── tool turn appended: RESULT <value>  (or {"error": ...} for a bad call)

The completion handed to the reward functions is the list of messages after the prompt (assistant turns and
tool turns), exactly the shape TRL passes them (``rewards.tools``). :func:`tool_generate` plugs the loop into
``grpo_kit.evaluation.evaluate(..., generate_fn=...)``, so scoring, pass@k / mean@k and the paired bootstrap
``compare`` are the ones every other evaluation uses.

Differences from TRL's loop, on purpose: each turn is rendered from the messages with the chat template
(TRL appends the result tokens without re-tokenizing; with a prefix-preserving template the text is the
same), and ``max_new_tokens`` is a budget per turn (TRL's ``max_completion_length`` covers all turns).
Tool calls are dispatched by name to the given Python functions; nothing the model writes is evaluated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from grpo_kit.rollout.generation import Decoding, GeneratedCompletion, generate

__all__ = [
    "completion_text",
    "generate_with_tools",
    "recipe_generate",
    "recipe_reward_funcs",
    "run_tool_calls",
    "takes_rows",
    "tool_generate",
]


def run_tool_calls(message: dict[str, Any], tools: dict[str, Callable]) -> list[dict[str, Any]]:
    """The ``tool`` messages answering ``message["tool_calls"]``, as TRL builds them: unknown tools and
    exceptions (wrong argument names, ...) come back as ``{"error": ...}`` results instead of raising."""
    results = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", call)
        name = function.get("name")
        arguments = function.get("arguments") or {}
        try:
            if name not in tools:
                raise ValueError(f"Tool {name} not found.")
            if not isinstance(arguments, dict):
                raise TypeError(f"arguments must be keyword arguments, got {arguments!r}")
            result: Any = tools[name](**arguments)
        except Exception as error:  # noqa: BLE001 -- any failure is the model's mistake; TRL reports it too
            result = {"error": str(error)}
        results.append({"role": "tool", "name": str(name), "content": str(result)})
    return results


def completion_text(messages: Sequence[dict[str, Any]]) -> str:
    """A readable one-string view of a multi-turn completion (calls as ``CALL ...``, results as ``RESULT ...``)."""
    from grpo_kit.rollout.tool_template import render_call

    lines = []
    for message in messages:
        if message["role"] == "tool":
            lines.append(f"RESULT {message['content']}")
            continue
        if message.get("content"):
            lines.append(str(message["content"]).strip())
        for call in message.get("tool_calls") or []:
            function = call.get("function", call)
            arguments = function.get("arguments")
            lines.append(
                render_call(function.get("name", "?"), **arguments)
                if isinstance(arguments, dict)
                else f"CALL {function.get('name', '?')}({arguments or ''})"
            )
    return "\n".join(lines)


def parser_accepts_tools() -> bool:
    """TRL's ``parse_response`` takes ``tools=`` (TRL >= 1.16: tool-call arguments typed from the tool's
    schema); TRL 1.15's does not, and its trainer parses without the tools too."""
    import inspect

    from trl.chat_template_utils import parse_response

    return "tools" in inspect.signature(parse_response).parameters


def _parse_turn(tokenizer, prompt: list[dict[str, Any]], completion: GeneratedCompletion, tools_list) -> dict:
    """One turn parsed as GRPOTrainer parses it: TRL's ``parse_response`` with the prompt as ``prefix`` and,
    where TRL's trainer passes them (TRL >= 1.16), the tools the prompt was rendered with."""
    from trl.chat_template_utils import parse_response

    from datasets_prep.chat import prompt_to_text

    prefix = tokenizer(prompt_to_text(prompt, tokenizer, tools=tools_list), add_special_tokens=False)[
        "input_ids"
    ]
    extra = {"tools": list(tools_list)} if parser_accepts_tools() else {}
    message = parse_response(tokenizer, list(completion.ids), prefix=prefix, **extra)
    message.setdefault("role", "assistant")
    message.setdefault("content", "")
    return message


def generate_with_tools(
    model,
    tokenizer,
    prompts: Sequence[list[dict[str, Any]]],
    num_generations: int = 1,
    decoding: Decoding | None = None,
    *,
    tools: Sequence[Callable] = (),
    max_tool_calling_iterations: int | None = 1,
    environment_factory: Any = None,
    rows: Sequence[dict[str, Any]] | None = None,
) -> list[list[GeneratedCompletion]]:
    """``num_generations`` multi-turn completions per conversational prompt (the signature and return shape
    of :func:`grpo_kit.rollout.generation.generate`; each completion carries its ``messages``). ``decoding`` (default
    ``Decoding(max_new_tokens=48)``) decodes every turn; its ``max_new_tokens`` is a budget per turn.

    ``max_tool_calling_iterations``: tool turns per rollout (None: until a turn has no call, capped at 8).
    Turn ``t`` decodes with seed ``decoding.seed + t``, so the same arguments give the same rollouts.

    ``environment_factory`` (TRL's: a class, or ``{name: class}`` routed by the rows' ``environment``
    column) plays an episode per rollout as TRL's trainer does (``grpo_kit.rollout.environments``): a fresh instance,
    ``reset(**row)`` (``rows``: the dataset rows of ``prompts``, required then), the instance's public methods
    as the tools beside ``tools``; each completion carries its instance (``GeneratedCompletion.environment``)
    for ``get_reward`` and for reward functions that read ``environments``.
    """
    from grpo_kit.rollout.environments import environment_tools, reset_episode
    from grpo_kit.rollout.tool_template import check_max_tool_calling_iterations

    check_max_tool_calling_iterations(max_tool_calling_iterations)
    iterations = 8 if max_tool_calling_iterations is None else max_tool_calling_iterations
    decoding = decoding or Decoding(max_new_tokens=48)
    seed = decoding.seed
    base_kwargs = dict(decoding.chat_template_kwargs or {})

    # (N * G) rollouts, each with its own conversation, tools and (optionally) environment instance.
    conversations: list[list[dict[str, Any]]] = []
    environments: list[Any] = []
    if environment_factory is not None:
        if rows is None or len(rows) != len(prompts):
            raise ValueError("an environment rollout needs the dataset row of every prompt: pass rows=.")
        for row in rows:
            for _ in range(num_generations):
                instance, prompt = reset_episode(environment_factory, row)
                environments.append(instance)
                conversations.append(list(prompt))
    else:
        conversations = [list(p) for p in prompts for _ in range(num_generations)]
        environments = [None] * len(conversations)
    tools_of = [list(tools) + (environment_tools(e) if e is not None else []) for e in environments]
    turns: list[list[dict[str, Any]]] = [[] for _ in conversations]
    token_counts = [0] * len(conversations)
    ended = [True] * len(conversations)

    def decode(indices: list[int], turn: int) -> list[tuple[int, GeneratedCompletion]]:
        """One turn for the rollouts ``indices``, batched by tool list (every prompt of a batch is rendered
        with its own environment's tools, as TRL renders them)."""
        out = []
        by_tools: dict[tuple[str, ...], list[int]] = {}
        for i in indices:
            by_tools.setdefault(tuple(t.__name__ for t in tools_of[i]), []).append(i)
        for group in by_tools.values():
            turn_decoding = decoding.replace(
                seed=seed + turn, chat_template_kwargs={**base_kwargs, "tools": tools_of[group[0]]}
            )
            answers = generate(model, tokenizer, [conversations[i] for i in group], 1, turn_decoding)
            out += [(i, answer[0]) for i, answer in zip(group, answers)]
        return sorted(out, key=lambda pair: pair[0])

    if environment_factory is None:  # the first turn: G samples per prompt in one call, as before
        first = generate(
            model,
            tokenizer,
            list(prompts),
            num_generations,
            decoding.replace(chat_template_kwargs={**base_kwargs, "tools": list(tools)}),
        )
        pending = list(enumerate(c for group in first for c in group))
    else:
        pending = decode(list(range(len(conversations))), 0)
    for turn in range(iterations + 1):
        waiting = []
        for i, completion in pending:
            message = _parse_turn(tokenizer, conversations[i], completion, tools_of[i])
            token_counts[i] += completion.num_tokens
            ended[i] = completion.ended
            new = [message]
            if message.get("tool_calls") and turn < iterations:
                new += run_tool_calls(message, {tool.__name__: tool for tool in tools_of[i]})
                waiting.append(i)
            conversations[i].extend(new)
            turns[i].extend(new)
        if not waiting:
            break
        pending = decode(waiting, turn + 1)
    flat = [
        GeneratedCompletion(completion_text(m), n, e, [], m, environment=env)
        for m, n, e, env in zip(turns, token_counts, ended, environments)
    ]
    return [flat[j : j + num_generations] for j in range(0, len(flat), num_generations)]


def tool_generate(
    tools: Sequence[Callable] = (),
    *,
    max_tool_calling_iterations: int | None = 1,
    environment_factory: Any = None,
) -> Callable:
    """:func:`generate_with_tools` with the tools (and environment) bound: pass it as
    ``evaluate(..., generate_fn=...)``. With an environment it takes the prompts' rows (``rows=``), which
    ``evaluate`` and pre-flight pass to a ``generate_fn`` that accepts them."""
    return functools.partial(
        generate_with_tools,
        tools=list(tools),
        max_tool_calling_iterations=max_tool_calling_iterations,
        environment_factory=environment_factory,
    )


def recipe_generate(recipe: Any, tokenizer: Any) -> Callable | None:
    """How a recipe's rollouts are generated outside training: ``None`` (plain ``generation.generate``) for a
    recipe without tools or environment; else :func:`tool_generate` bound to its tools, its environment
    (``grpo_kit.rollout.environments``) and ``max_tool_calling_iterations`` (default 1), with its tool template
    installed on ``tokenizer`` (held-out evaluation and pre-flight)."""
    if not recipe.tools and not recipe.environment:
        return None
    from grpo_kit.rollout.environments import resolve_environment_factory
    from grpo_kit.rollout.tool_sets import prepare_tool_tokenizer, resolve_tools

    prepare_tool_tokenizer(tokenizer, recipe.tool_template)
    return tool_generate(
        resolve_tools(recipe.tools) or [],
        max_tool_calling_iterations=recipe.training.get("max_tool_calling_iterations", 1),
        environment_factory=resolve_environment_factory(recipe.environment),
    )


def takes_rows(generate_fn: Callable | None) -> bool:
    """Whether ``generate_fn`` plays environments and so needs the prompts' dataset rows (``rows=``)."""
    return (
        isinstance(generate_fn, functools.partial)
        and generate_fn.keywords.get("environment_factory") is not None
    )


def recipe_reward_funcs(recipe: Any, reward_funcs: Sequence[Callable]) -> tuple[list[Callable], list[float]]:
    """The reward functions and weights a recipe's rollouts are scored with outside training: its own, then
    (for a recipe with an environment) each environment's ``get_reward`` with weight 1, as TRL's trainer
    appends them (``grpo_kit.rollout.environments.environment_reward_funcs``)."""
    from grpo_kit.rollout.environments import environment_reward_funcs, resolve_environment_factory

    funcs, weights = list(reward_funcs), list(recipe.reward_weights)
    factory = resolve_environment_factory(getattr(recipe, "environment", None))
    if factory is not None:
        extra = environment_reward_funcs(factory)
        funcs, weights = funcs + extra, weights + [1.0] * len(extra)
    return funcs, weights
