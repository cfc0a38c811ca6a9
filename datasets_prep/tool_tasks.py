"""Calculator tool tasks for GRPO with ``tools=``: arithmetic a 135M model cannot do in its head.

    from datasets_prep.tool_tasks import CALCULATOR_TOOLS, load_tool_tasks
    splits = load_tool_tasks(n_train=64, n_test=32, seed=0)        # DatasetDict: train, test
    trainer = GRPOTrainer(..., train_dataset=splits["train"], tools=CALCULATOR_TOOLS)

Each row has ``prompt`` (conversational: worked example(s), then the question), ``answer`` (the exact
integer, as a string, as GSM8K's column), ``task`` (the kind) and ``question``.

Why these tasks: with ``37 * 48`` and two worked examples the embedded model is right 15/16 times,
so every group scores the same and GRPO has nothing to learn from (issue 15). Headroom comes from:

* one worked example in the prompt (``n_examples=1``; the base rate of well-formed calls is lower);
* ``multiply``: 3-digit × 2-digit products (no way to guess them);
* ``choose``: addition, subtraction or multiplication of 3-digit numbers, asked in words ("the sum
  of", "minus", "times"), so the right tool must be picked; the worked example shows only one of them;
* ``two_step``: ``a * b + c`` -- two calls in sequence (needs ``max_tool_calling_iterations >= 2``).

Deterministic for a seed. Train and test questions are disjoint; the test questions depend only on
``seed``, ``n_test`` and ``kinds`` (not on ``n_train``), so runs of any length share one held-out set.
The worked examples come from a separate stream and never equal a train or test question.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CALCULATOR_TOOLS",
    "TASK_KINDS",
    "add",
    "load_tool_task_split",
    "load_tool_tasks",
    "multiply",
    "subtract",
    "tool_task_rows",
]


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def subtract(a: int, b: int) -> int:
    """Subtract the second integer from the first.

    Args:
        a: The number to subtract from.
        b: The number to subtract.
    """
    return a - b


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


#: The tools every task here can be solved with (pass as ``GRPOTrainer(tools=CALCULATOR_TOOLS)``).
CALCULATOR_TOOLS: list[Callable[..., int]] = [add, subtract, multiply]

_OPS = {"add": add, "subtract": subtract, "multiply": multiply}
_OP_WORDS = {  # how a question asks for each operation
    "add": ["What is {a} + {b}?", "What is the sum of {a} and {b}?", "What is {a} plus {b}?"],
    "subtract": ["What is {a} - {b}?", "What is {a} minus {b}?", "What is the difference {a} - {b}?"],
    "multiply": ["What is {a} * {b}?", "What is {a} times {b}?", "What is the product of {a} and {b}?"],
}


@dataclass(frozen=True)
class _Task:
    """One question and the calls that solve it (``steps``: (tool name, arguments) in order)."""

    kind: str
    question: str
    steps: tuple[tuple[str, dict[str, int]], ...]
    answer: int


def _multiply_task(rng: random.Random) -> _Task:
    a, b = rng.randint(100, 999), rng.randint(11, 99)
    return _Task(
        "multiply",
        rng.choice(_OP_WORDS["multiply"]).format(a=a, b=b),
        (("multiply", {"a": a, "b": b}),),
        a * b,
    )


def _choose_task(rng: random.Random) -> _Task:
    op = rng.choice(sorted(_OPS))
    a, b = rng.randint(100, 999), rng.randint(100, 999) if op != "multiply" else rng.randint(11, 99)
    if op == "subtract" and b > a:
        a, b = b, a
    question = rng.choice(_OP_WORDS[op]).format(a=a, b=b)
    return _Task("choose", question, ((op, {"a": a, "b": b}),), _OPS[op](a, b))


def _two_step_task(rng: random.Random) -> _Task:
    a, b, c = rng.randint(11, 99), rng.randint(11, 99), rng.randint(100, 999)
    product = a * b
    steps = (("multiply", {"a": a, "b": b}), ("add", {"a": product, "b": c}))
    return _Task("two_step", f"What is {a} * {b} + {c}?", steps, product + c)


#: Task kinds: name -> a generator of one task from a ``random.Random``.
TASK_KINDS: dict[str, Callable[[random.Random], _Task]] = {
    "multiply": _multiply_task,
    "choose": _choose_task,
    "two_step": _two_step_task,
}


def _worked_example(task: _Task) -> list[dict[str, Any]]:
    """The messages of one solved exchange: question, call(s) with results, final answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task.question}]
    for name, arguments in task.steps:
        call = {"type": "function", "function": {"name": name, "arguments": dict(arguments)}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "name": name, "content": str(_OPS[name](**arguments))})
    messages.append({"role": "assistant", "content": f"The answer is {task.answer}."})
    return messages


def _check_args(n_train: int, n_test: int, kinds: Sequence[str], n_examples: int) -> None:
    for name, value in (("n_train", n_train), ("n_test", n_test), ("n_examples", n_examples)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0, got {value!r}.")
    if isinstance(kinds, str):
        raise TypeError(
            f"kinds must be a list of task kinds, e.g. kinds=[{kinds!r}]; got the string {kinds!r}."
        )
    unknown = [k for k in kinds if k not in TASK_KINDS]
    if unknown or not kinds:
        raise ValueError(f"Unknown task kind(s) {unknown or list(kinds)}; choose from {sorted(TASK_KINDS)}.")


def tool_task_rows(
    n_train: int,
    n_test: int,
    *,
    seed: int = 0,
    kinds: Sequence[str] = ("multiply",),
    n_examples: int = 1,
    system_prompt: str | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(train_rows, test_rows)`` as plain dicts; see :func:`load_tool_tasks`."""
    _check_args(n_train, n_test, kinds, n_examples)
    question_rng = random.Random(seed)
    example_rng = random.Random(f"{seed}-examples")  # its own stream: more rows never shift the examples
    tasks: list[_Task] = []
    seen: set[str] = set()
    attempts = 0
    while len(tasks) < n_train + n_test:
        attempts += 1
        if attempts > 100 * (n_train + n_test) + 1000:
            raise ValueError(f"Could not draw {n_train + n_test} distinct questions of kinds {list(kinds)}.")
        task = TASK_KINDS[kinds[len(tasks) % len(kinds)]](question_rng)  # test rows first, then train
        if task.question not in seen:
            seen.add(task.question)
            tasks.append(task)
    rows = []
    for task in tasks:
        examples: list[_Task] = []
        while len(examples) < n_examples:
            example = TASK_KINDS[task.kind](example_rng)
            if example.question not in seen:
                examples.append(example)
        prompt: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}] if system_prompt else []
        for example in examples:
            prompt.extend(_worked_example(example))
        prompt.append({"role": "user", "content": task.question})
        rows.append(
            {"prompt": prompt, "answer": str(task.answer), "task": task.kind, "question": task.question}
        )
    # The held-out questions are drawn first, so they depend only on (seed, n_test, kinds): a run with
    # more training rows is still evaluated on the same questions, and never trains on them.
    return rows[n_test:], rows[:n_test]


def load_tool_tasks(
    n_train: int = 64,
    n_test: int = 32,
    *,
    seed: int = 0,
    kinds: Sequence[str] = ("multiply",),
    n_examples: int = 1,
    system_prompt: str | None = None,
):
    """A ``datasets.DatasetDict`` with ``train`` and ``test`` splits of calculator tool tasks.

    Args:
        n_train: Training questions.
        n_test: Held-out questions, disjoint from the training ones.
        seed: Same seed, same rows.
        kinds: Task kinds from :data:`TASK_KINDS`, cycled row by row.
        n_examples: Worked tool exchanges before the question (1 leaves headroom; 2 nearly saturates).
        system_prompt: Optional system message; the tool-calling template appends the tool list to it.
    """
    from datasets import Dataset, DatasetDict

    train, test = tool_task_rows(
        n_train, n_test, seed=seed, kinds=kinds, n_examples=n_examples, system_prompt=system_prompt
    )
    return DatasetDict({"train": Dataset.from_list(train), "test": Dataset.from_list(test)})


def load_tool_task_split(
    split: str = "train",
    source: Any = None,
    *,
    n_train: int = 64,
    n_test: int = 32,
    seed: int = 0,
    kinds: Sequence[str] = ("multiply",),
    n_examples: int = 1,
    system_prompt: str | None = None,
):
    """One split of :func:`load_tool_tasks` as a ``datasets.Dataset``, with the loader signature recipes use
    (``Recipe(dataset="tool_tasks", dataset_kwargs={...})``). The rows are generated, so ``source`` must be None.
    """
    if source is not None:
        raise ValueError(f"tool tasks are generated, not read from a source; drop dataset_source={source!r}.")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test' (the held-out questions), not {split!r}.")
    return load_tool_tasks(
        n_train, n_test, seed=seed, kinds=kinds, n_examples=n_examples, system_prompt=system_prompt
    )[split]
