"""No row of a data file can exhaust the machine (issue 55): `grpo-kit train` refuses a row longer than the bound
(datasets_prep.files.max_row_bytes) in one line naming the row and the setting, before any model loads or any run
folder is written."""

from __future__ import annotations

import json

import pytest

from grpo_kit.cli import main

RECIPE = """\
name: bounded
model: tiny
dataset: {source: rows.jsonl, prompt: question}
rewards:
  - {name: length_reward, kwargs: {ideal_length: 8}}
training: {max_steps: 1, per_device_train_batch_size: 2, num_generations: 2, max_completion_length: 4}
"""


@pytest.mark.parametrize(
    ("bound", "row_bytes"), [("200", 300), (None, 3 << 20)], ids=["set-bound", "3-MiB-row"]
)
def test_train_refuses_a_row_longer_than_the_bound_before_anything_loads(
    tmp_path, monkeypatch, capsys, bound, row_bytes
):
    monkeypatch.chdir(tmp_path)
    if bound is None:
        monkeypatch.delenv("GRPO_KIT_MAX_ROW_BYTES", raising=False)
    else:
        monkeypatch.setenv("GRPO_KIT_MAX_ROW_BYTES", bound)
    rows = [json.dumps({"question": f"q{i}"}) for i in range(8)]
    rows.insert(2, json.dumps({"question": "x" * row_bytes}))
    (tmp_path / "rows.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "bounded.yaml").write_text(RECIPE)
    code = main(["train", "--config", "bounded.yaml", "--output-dir", "run"])
    said = capsys.readouterr()
    text = said.out + said.err
    assert code == 2 and "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    assert "rows.jsonl, line 3: a row longer than" in text and "GRPO_KIT_MAX_ROW_BYTES" in text
    assert not (tmp_path / "run").exists()


def test_a_prompt_the_context_cannot_hold_is_refused_before_anything_generates(tmp_path, monkeypatch, capsys):
    """Within the byte bound, a row can still be longer in tokens than the model reads: refused at the start,
    naming the row and max_completion_length, not when a step draws it (a cache that size can fill the memory)."""
    from grpo_kit.models import load_model

    context = load_model("tiny")[0].config.max_position_embeddings
    monkeypatch.chdir(tmp_path)
    rows = [json.dumps({"question": f"q{i}"}) for i in range(8)]
    rows.insert(3, json.dumps({"question": "word " * (2 * context)}))
    (tmp_path / "rows.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "bounded.yaml").write_text(RECIPE + "eval_prompts: 2\n")  # 9 rows: room for a small carve
    code = main(["train", "--config", "bounded.yaml", "--output-dir", "run", "--no-preflight"])
    said = capsys.readouterr()
    text = said.out + said.err
    assert code != 0 and "Traceback" not in text, text
    (line,) = [line for line in text.splitlines() if "the prompt is" in line]  # one line, naming the fix
    assert "word word" in line and "row 3 (it starts" in line and "max_completion_length=4" in line, text
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
