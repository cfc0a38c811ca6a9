"""Environment tasks for GRPO with ``environment_factory=``: a counter and a lock, with state the reward reads.

    from datasets_prep.environment_tasks import CounterEnv, load_environment_task_split
    train = load_environment_task_split("train", environments=["counter"])
    trainer = GRPOTrainer(..., train_dataset=train, environment_factory=CounterEnv)

TRL's trainer makes one environment instance per rollout, calls ``reset(**row)`` with the row's columns,
exposes the public methods as tools and, after the rollout, scores it with ``get_reward()`` from the
instance's own state (TRL docs, "Training an agent" -> "Environments"). The two environments here:

* :class:`CounterEnv` (the docs' counter): the counter starts at 0; ``increment(step)`` adds ``step`` and
  returns the new value. Success: the counter ends at ``target``. State matters: a second call adds
  again, so a model that calls twice overshoots and fails.
* :class:`LockEnv`: a lock with a code; ``enter_code(code)`` opens it when the code is right. Success:
  the lock is open at the end. A wrong code counts as a failed attempt the state keeps.

Each row has ``prompt`` (one worked exchange, then the task), ``environment`` (which environment the row
is for, the column TRL's dict of factories routes by), ``target`` (the number ``reset`` reads) and
``question``. ``reset`` is deterministic in the row, so the G members of a group share a start state.

Train and test rows are disjoint; the test rows depend only on ``seed``, ``n_test`` and ``environments``
(they are drawn first), so runs of any length share one held-out set. The worked examples come from their
own stream and never equal a train or test target.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

__all__ = [
    "ENVIRONMENT_CLASSES",
    "CounterEnv",
    "LockEnv",
    "environment_task_rows",
    "load_environment_task_split",
]


class CounterEnv:
    """A counter that starts at 0; the episode succeeds when it ends exactly at the row's ``target``."""

    #: The most ``get_reward`` returns (the evaluation reports "at its maximum" as success).
    max_reward = 1.0

    def reset(self, target: int = 0, **row: Any) -> None:
        """Start an episode: the counter at 0, the goal from the row (TRL passes every column)."""
        self.counter = 0
        self.target = int(target)
        self.calls = 0

    def get_reward(self) -> float:
        """1.0 when the counter is at the target, else 0.0 (read from the state, not from the text)."""
        return float(self.counter == self.target)

    def increment(self, step: int) -> int:
        """Add a number to the counter.

        Args:
            step: The amount to add.

        Returns:
            The counter's new value.
        """
        self.calls += 1
        self.counter += int(step)
        return self.counter


class LockEnv:
    """A locked lock; the episode succeeds when the lock is open at the end."""

    max_reward = 1.0

    def reset(self, target: int = 0, **row: Any) -> None:
        """Start an episode: locked, the code from the row's ``target``."""
        self.code = int(target)
        self.is_open = False
        self.wrong_codes = 0

    def get_reward(self) -> float:
        """1.0 when the lock is open, else 0.0."""
        return float(self.is_open)

    def enter_code(self, code: int) -> str:
        """Type a code on the lock's keypad.

        Args:
            code: The code to try.

        Returns:
            Whether the lock opened.
        """
        if int(code) == self.code:
            self.is_open = True
            return "The lock is open."
        self.wrong_codes += 1
        return "Wrong code. The lock stays closed."


#: Environment name (the ``environment`` column) -> its class.
ENVIRONMENT_CLASSES: dict[str, type] = {"counter": CounterEnv, "lock": LockEnv}

_TASKS = {  # name -> (question template, tool name, argument name, final answer template)
    "counter": (
        "The counter is at 0. Bring it to exactly {t}.",
        "increment",
        "step",
        "The counter is at {t}.",
    ),
    "lock": ("The lock's code is {t}. Open the lock.", "enter_code", "code", "The lock is open."),
}


_EXAMPLE_POOL = 100  # 3-digit numbers kept for the worked examples; the other 800 are the targets


def _result(name: str, target: int) -> str:
    return str(target) if name == "counter" else "The lock is open."


def _prompt(name: str, target: int, example: int) -> list[dict[str, Any]]:
    """One worked exchange (the same environment, another number), then the task."""
    question, tool, argument, answer = _TASKS[name]
    call = {"type": "function", "function": {"name": tool, "arguments": {argument: example}}}
    return [
        {"role": "user", "content": question.format(t=example)},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": tool, "content": _result(name, example)},
        {"role": "assistant", "content": answer.format(t=example)},
        {"role": "user", "content": question.format(t=target)},
    ]


def environment_task_rows(
    n_train: int, n_test: int, *, seed: int = 0, environments: Sequence[str] = ("counter",)
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(train_rows, test_rows)`` as plain dicts; see :func:`load_environment_task_split`."""
    for label, value in (("n_train", n_train), ("n_test", n_test)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{label} must be a whole number >= 0, got {value!r}.")
    if isinstance(environments, str):
        raise TypeError(f"environments must be a list, e.g. environments=[{environments!r}].")
    unknown = [e for e in environments if e not in ENVIRONMENT_CLASSES]
    if unknown or not environments:
        raise ValueError(
            f"Unknown environment(s) {unknown or list(environments)}; choose from {sorted(ENVIRONMENT_CLASSES)}."
        )
    pool = list(range(100, 1000))
    random.Random(seed).shuffle(pool)
    examples, targets = pool[:_EXAMPLE_POOL], pool[_EXAMPLE_POOL:]  # worked examples never give a task away
    if n_train + n_test > len(targets):
        raise ValueError(f"at most {len(targets)} rows (3-digit targets); asked for {n_train + n_test}.")
    example_rng = random.Random(f"{seed}-examples")
    rows = []
    for i, target in enumerate(targets[: n_test + n_train]):  # test rows first: they never depend on n_train
        name = environments[i % len(environments)]
        rows.append(
            {
                "prompt": _prompt(name, target, example_rng.choice(examples)),
                "environment": name,
                "target": target,
                "question": _TASKS[name][0].format(t=target),
            }
        )
    return rows[n_test:], rows[:n_test]


def load_environment_task_split(
    split: str = "train",
    source: Any = None,
    *,
    n_train: int = 64,
    n_test: int = 32,
    seed: int = 0,
    environments: Sequence[str] = ("counter",),
):
    """One split (``"train"`` or ``"test"``, the held-out rows) of the environment tasks, as a
    ``datasets.Dataset`` with the loader signature recipes use (``Recipe(dataset="environment_tasks")``).

    Args:
        split: "train" or "test".
        source: Must be None: the rows are generated.
        n_train: Training rows.
        n_test: Held-out rows, disjoint from the training ones.
        seed: Same seed, same rows.
        environments: Environment names from :data:`ENVIRONMENT_CLASSES`, cycled row by row.
    """
    from datasets import Dataset

    if source is not None:
        raise ValueError(
            f"environment tasks are generated, not read from a source; drop dataset_source={source!r}."
        )
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test' (the held-out rows), not {split!r}.")
    train, test = environment_task_rows(n_train, n_test, seed=seed, environments=environments)
    return Dataset.from_list(train if split == "train" else test)
