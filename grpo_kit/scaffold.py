"""``grpo-kit new NAME``: a task folder that trains as it is, on the embedded model, on CPU.

    NAME/NAME.yaml              the recipe file (grpo_kit.recipe_files): model, data, reward, training
    NAME/NAME_rewards.py        one documented reward function, TRL's contract fn(completions, **kwargs)
    NAME/test_NAME_rewards.py   its test (pytest)
    NAME/NAME.jsonl             20 rows: a question and its answer
    NAME/README.md              three commands: preflight, train, eval

The task: answer a sum of two small numbers with the number alone. The reward is 1.0 for the right number as
the answer's first number, else 0.0 (``None`` for nothing to score is not needed: every row has an answer). The
recipe is small on purpose (2 steps, 4 completions of <= 16 tokens, 4 held-out rows carved by a seeded
fraction), so the first run is a check that everything is wired, in about a minute on a CPU; raise
``max_steps`` and the rows when it is.
"""

from __future__ import annotations

import random
from pathlib import Path

from grpo_kit.recipe_files import check_recipe_name

__all__ = ["scaffold_task"]

_RECIPE = """\
# {name}: a recipe file (grpo-kit train --config {name}.yaml). Every key is a field of a grpo-kit recipe.
name: {name}
description: >-
  Answer the sum of two small numbers with the number alone (a task folder written by grpo-kit new).
model: smollm2-135m-instruct   # the embedded SmolLM2-135M; or a Hub id, a local folder or a .gguf
dataset:
  source: {name}.jsonl         # a .jsonl/.json/.csv/.parquet file, a folder or a Hub id
  prompt: question             # the column holding the prompt
  columns: {{answer: answer}}    # {{argument your reward reads: column}}
  system_prompt: Answer with the number only.
  held_out: {{fraction: 0.2, seed: 0}}   # 4 of the 20 rows, never trained on
rewards:
  - {name}_rewards.py:exact_answer_reward   # file.py:function, module.function or a name from rewards
lora: {{r: 8, lora_alpha: 16}}
eval_prompts: 4
training:                      # TRL GRPOConfig names
  learning_rate: 1.0e-4
  per_device_train_batch_size: 4
  num_generations: 4
  max_completion_length: 16
  max_steps: 2
  logging_steps: 1
  save_steps: 1
"""

_REWARDS = '''\
"""The reward of {name}: TRL's contract, ``fn(completions, **kwargs) -> list[float | None]``.

``completions`` holds one completion per sampled answer (a list of messages for a chat prompt, else text);
every dataset column arrives as a keyword argument with one value per completion (here ``answer``, mapped in
{name}.yaml by ``columns``). Return a float per completion, or None where the function has nothing to score.
"""

import re

_NUMBER = re.compile(r"-?\\d+")


def exact_answer_reward(completions, answer, **kwargs):
    """1.0 when the completion's first number is the row's answer, else 0.0.

    Only the first number counts, so an answer that lists every number it can think of scores 0.0.
    """
    scores = []
    for completion, expected in zip(completions, answer):
        text = completion[-1]["content"] if isinstance(completion, list) else completion
        found = _NUMBER.search(text)
        scores.append(1.0 if found and found.group() == str(expected).strip() else 0.0)
    return scores
'''

_TEST = '''\
"""The reward of {name}, tested as grpo-kit calls it: python -m pytest test_{module}_rewards.py"""

from pathlib import Path
import importlib.util

_spec = importlib.util.spec_from_file_location("{module}_rewards", Path(__file__).with_name("{module}_rewards.py"))
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
exact_answer_reward = _module.exact_answer_reward


def test_the_first_number_must_be_the_answer():
    completions = [
        [{{"role": "assistant", "content": "7"}}],
        [{{"role": "assistant", "content": "It is 7."}}],
        [{{"role": "assistant", "content": "3 + 4 = 7"}}],
        [{{"role": "assistant", "content": "no idea"}}],
    ]
    assert exact_answer_reward(completions, answer=["7"] * 4) == [1.0, 1.0, 0.0, 0.0]


def test_plain_text_completions_score_too():
    assert exact_answer_reward(["12", "13"], answer=["12", "12"], prompts=["", ""]) == [1.0, 0.0]
'''

_README = """\
# {name}

A GRPO task of your own, written by `grpo-kit new {name}`: `{name}.yaml` (the recipe), `{name}_rewards.py`
(the reward, tested by `test_{module}_rewards.py`) and `{name}.jsonl` (20 rows). Run from this folder:

```bash
grpo-kit preflight --config {name}.yaml                        # will GRPO learn? go / no-go, no training
grpo-kit train --config {name}.yaml --output-dir outputs/{name}   # 2 steps on CPU: report card, samples.md, adapter
grpo-kit eval outputs/{name}                                   # the held-out report card again
```

Then make it yours: your rows in `{name}.jsonl` (or `dataset: org/name` from the Hub), your reward in
`{name}_rewards.py`, and more `max_steps` in `{name}.yaml`. `grpo-kit recipes --show NAME --as-yaml` writes any
shipped recipe as such a file, with every field.
"""


def _rows(seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    pairs = set()
    while len(pairs) < 20:
        pairs.add((rng.randint(2, 19), rng.randint(2, 19)))
    return [{"question": f"What is {a} + {b}?", "answer": str(a + b)} for a, b in sorted(pairs)]


def scaffold_task(name: str, parent: str | Path = ".") -> Path:
    """Write the task folder ``parent/name`` (module docstring); ``FileExistsError`` when it exists,
    ``ValueError`` for a name that is not a plain folder name."""
    import json

    check_recipe_name(name, what="task name")
    if name.startswith(".") or "." in name:
        raise ValueError(f"task name {name!r}: no '.' (it names a Python module too); use '-' or '_'.")
    folder = Path(parent) / name
    if folder.exists():
        raise FileExistsError(f"{folder} already exists; choose another NAME or move it away.")
    module = name.replace("-", "_")
    values = {"name": name, "module": module}
    folder.mkdir(parents=True)
    (folder / f"{name}.yaml").write_text(
        _RECIPE.format(**values).replace(f"{name}_rewards.py", f"{module}_rewards.py")
    )
    (folder / f"{module}_rewards.py").write_text(_REWARDS.format(**values))
    (folder / f"test_{module}_rewards.py").write_text(_TEST.format(**values))
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _rows()))
    (folder / "README.md").write_text(
        _README.format(**values).replace(f"`{name}_rewards.py`", f"`{module}_rewards.py`")
    )
    return folder
