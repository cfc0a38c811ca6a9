"""``grpo-kit new NAME``: a task folder that trains as it is, on the embedded model, on CPU.

    NAME/NAME.yaml              the recipe file (grpo_kit.recipes.files): model, data, reward, training
    NAME/NAME_rewards.py        one documented reward function, TRL's contract fn(completions, **kwargs)
    NAME/test_NAME_rewards.py   its test (pytest)
    NAME/NAME.jsonl             20 rows: a question and its answer
    NAME/README.md              three commands: preflight, train, eval (a test runs them as written)

The task: name a country's capital in a short answer. The reward is 1.0 when the answer names the capital
and has at most 8 words, 0.5 when it names it in more words, else 0.0, so the embedded model's samples differ
in reward from the start (an arithmetic task scored 0 on every sample: the model explains instead of
answering). The recipe is small on purpose (2 steps, 4 completions of <= 16 tokens, 4 held-out rows carved by
a seeded fraction), so the first run checks that everything is wired; raise ``max_steps`` and the rows next.
The README's train command names its run folder, ``outputs/NAME``, so its eval command finds the run (without
``--output-dir`` a run goes to ``outputs/NAME-<timestamp>``); ``--no-merge`` keeps that first run to what the
README lists (report card, samples, adapter).
"""

from __future__ import annotations

from pathlib import Path

from grpo_kit.recipes.files import check_recipe_name

__all__ = ["scaffold_task"]

_RECIPE = """\
# {name}: a recipe file (grpo-kit train --config {name}.yaml). Every key is a field of a grpo-kit recipe.
name: {name}
description: >-
  Name a country's capital in a few words (a task folder written by grpo-kit new).
model: smollm2-135m-instruct   # the embedded SmolLM2-135M; or a Hub id, a local folder or a .gguf
dataset:
  source: {name}.jsonl         # a .jsonl/.json/.csv/.parquet file, a folder or a Hub id
  prompt: question             # the column holding the prompt
  columns: {{answer: answer}}    # {{argument your reward reads: column}}
  system_prompt: Answer in a few words.
  held_out: {{fraction: 0.2, seed: 0}}   # 4 of the 20 rows, never trained on
rewards:
  - {name}_rewards.py:capital_reward   # file.py:function, module.function or a name from rewards
lora: {{r: 8, lora_alpha: 16}}
eval_prompts: 4
training:                      # TRL GRPOConfig names
  learning_rate: 1.0e-4
  per_device_train_batch_size: 4
  num_generations: 4
  max_completion_length: 16
  max_steps: 2
  logging_steps: 1
"""

_REWARDS = '''\
"""The reward of {name}: TRL's contract, ``fn(completions, **kwargs) -> list[float | None]``.

``completions`` holds one completion per sampled answer (a list of messages for a chat prompt, else text);
every dataset column arrives as a keyword argument with one value per completion (here ``answer``, mapped in
{name}.yaml by ``columns``). Return a float per completion, or None where the function has nothing to score.
"""

import re


def capital_reward(completions, answer, **kwargs):
    """1.0 when the completion names the row's answer in at most 8 words, 0.5 in more words, else 0.0.

    The answer counts as a whole word, in any case ("Paris." and "paris" do, "Parisian" does not).
    """
    scores = []
    for completion, expected in zip(completions, answer):
        text = completion[-1]["content"] if isinstance(completion, list) else completion
        named = re.search(rf"\\b{{re.escape(expected)}}\\b", text, flags=re.IGNORECASE)
        scores.append(0.0 if not named else 1.0 if len(text.split()) <= 8 else 0.5)
    return scores
'''

_TEST = '''\
"""The reward of {name}, tested as grpo-kit calls it: python -m pytest test_{module}_rewards.py"""

from pathlib import Path
import importlib.util

_spec = importlib.util.spec_from_file_location("{module}_rewards", Path(__file__).with_name("{module}_rewards.py"))
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
capital_reward = _module.capital_reward


def test_a_short_answer_naming_the_capital_scores_most():
    completions = [
        [{{"role": "assistant", "content": "Paris."}}],
        [{{"role": "assistant", "content": "The capital of France is paris"}}],
        [{{"role": "assistant", "content": "France is a country in Europe; its capital city is Paris, by the Seine."}}],
        [{{"role": "assistant", "content": "Parisian food is good"}}],
    ]
    assert capital_reward(completions, answer=["Paris"] * 4) == [1.0, 1.0, 0.5, 0.0]


def test_plain_text_completions_score_too():
    assert capital_reward(["Rome", "Milan"], answer=["Rome", "Rome"], prompts=["", ""]) == [1.0, 0.0]
'''

_README = """\
# {name}

A GRPO task of your own, written by `grpo-kit new {name}`: `{name}.yaml` (the recipe), `{name}_rewards.py`
(the reward, tested by `test_{module}_rewards.py`) and `{name}.jsonl` (20 rows). Run from this folder:

```bash
grpo-kit preflight --config {name}.yaml    # will GRPO learn? go / no-go, no training
grpo-kit train --config {name}.yaml --output-dir outputs/{name} --no-merge   # pre-flight, 2 steps on CPU: report card, adapter
grpo-kit eval outputs/{name} --trust-reward-code    # the held-out report card again
```

`grpo-kit train --config` runs pre-flight first and refuses a no-go (`--no-preflight` skips it, `--force`
trains anyway). The run goes to `outputs/{name}`, where `eval` finds it; train again with `--overwrite` (the old
run is moved aside) or another `--output-dir`. `--no-merge` writes the LoRA adapter alone; without it the merged
model is written too. `--trust-reward-code`: the run folder's recipe names `{name}_rewards.py`, and grpo-kit
imports a run folder's code only when you say it is yours (a run folder may come from someone else).

Then make it yours: your rows in `{name}.jsonl` (or `dataset: org/name` from the Hub), your reward in
`{name}_rewards.py`, and more `max_steps` in `{name}.yaml`. `grpo-kit recipes --show NAME --as-yaml` writes any
shipped recipe as such a file, with every field.
"""


_CAPITALS = (
    ("France", "Paris"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Germany", "Berlin"), ("Japan", "Tokyo"),
    ("Egypt", "Cairo"), ("Russia", "Moscow"), ("Greece", "Athens"), ("Portugal", "Lisbon"), ("Austria", "Vienna"),
    ("Norway", "Oslo"), ("Ireland", "Dublin"), ("Poland", "Warsaw"), ("Kenya", "Nairobi"), ("Peru", "Lima"),
    ("Cuba", "Havana"), ("Canada", "Ottawa"), ("China", "Beijing"), ("Sweden", "Stockholm"), ("Thailand", "Bangkok"),
)  # fmt: skip


def _rows() -> list[dict[str, str]]:
    return [{"question": f"What is the capital of {country}?", "answer": city} for country, city in _CAPITALS]


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
