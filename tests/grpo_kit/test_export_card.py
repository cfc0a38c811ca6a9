"""The model card every export writes (README.md, huggingface_hub's ModelCard) and `--push-to-hub` up to the
network boundary: the refusal offline / without a token before any work, and the file list it would send.

The run folder is built from the real pieces: a tiny LoRA adapter saved by ``save_adapter``, the
``run_config.json`` that ``plan_run`` + ``RunFolder.write_run_config`` write, the report card that ``write_report_card``
writes from two ``EvalReport``s (its real paired bootstrap), and the reward curve ``plot_reward_curve`` draws.
``run.json`` is the one file written here by hand (its keys are those ``runs.execute`` writes).
"""

from __future__ import annotations

import json
import math

import pytest
from huggingface_hub import ModelCard

from grpo_kit.artifacts.plots import plot_reward_curve
from grpo_kit.cli import main
from grpo_kit.evaluation import EvalReport
from grpo_kit.evaluation.report_card import write_report_card
from grpo_kit.export import check_export_files, save_adapter
from grpo_kit.export.card import write_model_card
from grpo_kit.export.hub import PushError, check_can_push, upload_plan
from grpo_kit.models import tiny_model
from grpo_kit.runs import RunFolder, plan_run


def _report(rewards: list[float]) -> EvalReport:
    return EvalReport(
        per_prompt={"reward": rewards, "length_error/length_reward": [abs(r) for r in rewards]},
        prompts=[f"post {i}" for i in range(len(rewards))],
        completions=["a summary"] * len(rewards),
        reward_names=["length_reward"],
        reward_kinds={"length_reward": "dense"},
        settings={"do_sample": False, "max_new_tokens": 64},
    )


def _make_run(run, *, overrides=None):
    plan = plan_run(
        "smoltldr-length-small", overrides=overrides or {"model": "tiny"}, max_steps=2, output_dir=run
    )
    run.mkdir(parents=True)
    RunFolder(run).write_run_config(plan.run_config())
    model, tokenizer = tiny_model(seed=0, lora={"r": 8, "lora_alpha": 16, "lora_dropout": 0.0})
    save_adapter(model, tokenizer, run / "adapter")
    history = [{"step": 1, "reward": -12.0}, {"step": 2, "reward": -9.5}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in history))
    plot_reward_curve(history, run / "reward_curve.png")
    write_report_card(run, _report([-12.0, -10.0, -8.0, -9.0]), _report([-6.0, -5.0, -7.0, -4.0]), n_boot=200)
    summary = {"recipe": plan.recipe.name, "loop": plan.loop, "model": plan.recipe.model, "steps": 2}
    summary["training"] = dict(plan.recipe.training)
    (run / "run.json").write_text(json.dumps(summary))
    return plan


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("card") / "run"
    _make_run(folder)
    return folder


def test_the_card_reloads_with_its_metadata_and_the_held_out_table(run):
    path = write_model_card(run / "adapter", run_dir=run, kind="adapter")
    card = ModelCard.load(path)  # offline: a local file
    data = card.data
    assert data.library_name == "peft"
    assert {"grpo", "trl", "lora"} <= set(data.tags)
    assert data.base_model is None  # "tiny" is not a Hub id; the text names it instead
    assert data.datasets is None  # synthetic rows
    assert data.pipeline_tag == "text-generation"
    text = card.text
    assert "`smoltldr-length-small`" in text and "`model='tiny'`" in text
    assert "`length_reward(ideal_length=16, unit='tokens')` × 1.0" in text
    assert "| loop | standalone |" in text and "| steps | 2 |" in text
    eval_json = json.loads((run / "eval.json").read_text())
    reward = eval_json["comparisons"]["reward"]
    row = next(line for line in text.splitlines() if line.startswith("| reward |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == [f"{reward['before']:.3f}", f"{reward['after']:.3f}", f"{reward['mean_diff']:+.3f}"]
    assert (
        cells[4] == f"[{reward['ci_low']:+.3f}, {reward['ci_high']:+.3f}]" and cells[5] == reward["verdict"]
    )
    assert math.isclose(reward["mean_diff"], 4.25)
    assert "95% paired-bootstrap" in text and "4 prompts the run never trained on" in text
    assert "![reward curve](reward_curve.png)" in text
    assert (run / "adapter" / "reward_curve.png").read_bytes() == (run / "reward_curve.png").read_bytes()
    assert check_export_files(run / "adapter") == []  # the manifest lists the card and the curve


def test_the_card_states_the_second_held_out_sets_headline_under_its_label(run, tmp_path):
    from grpo_kit.evaluation.report_card import transfer_label

    label = transfer_label("gsm8k-handwritten")  # "held-out, written differently, without the worked example"
    assert label not in ModelCard.load(write_model_card(run / "adapter", run_dir=run, kind="adapter")).text
    held = (_report([-12.0, -10.0, -8.0, -9.0]), _report([-6.0, -5.0, -7.0, -4.0]))
    second = (
        "gsm8k-handwritten",
        _report([-20.0, -18.0, -30.0, -22.0]),
        _report([-19.0, -9.0, -25.0, -11.0]),
    )
    write_report_card(tmp_path, *held, transfer=second, n_boot=200)
    (tmp_path / "merged").mkdir()
    text = ModelCard.load(write_model_card(tmp_path / "merged", run_dir=tmp_path, kind="merged")).text
    lines = text.splitlines()
    heading = lines.index(f"### {label}")
    assert heading > lines.index("## Held-out evaluation (before / after training)")
    assert "`gsm8k-handwritten` (4 prompts): 40 grade-school problems written by hand" in lines[heading + 2]
    # the headline run.json states (length_error: the first metric of HEADLINE_ORDER it has), from eval.json
    c = json.loads((tmp_path / "eval.json").read_text())["transfer"]["comparisons"][
        "length_error/length_reward"
    ]
    row = next(line for line in lines[heading:] if line.startswith("| length_error/length_reward |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1:] == [
        f"{c['before']:.3f}",
        f"{c['after']:.3f}",
        f"{c['mean_diff']:+.3f}",
        f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]",
        c["verdict"],
    ]
    assert (cells[1], cells[2]) == ("22.500", "16.000")  # the second set's means, not the first set's 9.750


def test_a_hub_model_and_dataset_become_metadata(tmp_path):
    run = tmp_path / "run"
    _make_run(run, overrides={"model": "smollm2-135m-instruct", "dataset_source": None})
    card = ModelCard.load(
        write_model_card(run / "adapter", run_dir=run, kind="merged", gguf_files=["m.gguf"])
    )
    assert card.data.base_model == "HuggingFaceTB/SmolLM2-135M-Instruct"  # the alias, as its Hub id
    assert card.data.datasets == ["mlabonne/smoltldr"]
    assert card.data.library_name == "transformers" and "gguf" in card.data.tags
    assert "`m.gguf`" in card.text


def test_a_folder_without_its_run_says_what_is_missing(tmp_path):
    model, tokenizer = tiny_model(seed=0, lora={"r": 4, "lora_alpha": 8, "lora_dropout": 0.0})
    save_adapter(model, tokenizer, tmp_path / "adapter")
    card = ModelCard.load(write_model_card(tmp_path / "adapter", run_dir=None, kind="adapter"))
    assert "No held-out evaluation was recorded" in card.text
    assert check_export_files(tmp_path / "adapter") == []


def _snapshot(folder):
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def test_push_offline_stops_before_any_work_and_leaves_the_run_as_it_was(run, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = _snapshot(run)
    out = tmp_path / "out"
    assert main(["export", str(run), "--out", str(out), "--push-to-hub", "me/smol-grpo"]) == 2
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 1 and "HF_HUB_OFFLINE" in lines[0] and "Nothing was exported" in lines[0]
    assert not out.exists()  # no merge happened
    assert _snapshot(run) == before


def test_push_without_a_token_names_the_login(run, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr("huggingface_hub.constants.HF_STORED_TOKENS_PATH", str(tmp_path / "no-tokens"))
    with pytest.raises(PushError, match="hf auth login"):
        check_can_push("me/smol-grpo")
    assert main(["export", str(run), "--out", str(tmp_path / "out"), "--push-to-hub", "me/x"]) == 2
    assert "HF_TOKEN" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("repo_id", ["no-owner", "bad//name", "a/b/c"])
def test_a_bad_repo_id_is_refused(repo_id):
    with pytest.raises(PushError, match="ORG/NAME"):
        check_can_push(repo_id, check_token_online=False)


def test_the_upload_would_send_the_export_its_card_and_the_gguf_files(run, tmp_path):
    write_model_card(run / "adapter", run_dir=run, kind="adapter")
    gguf = tmp_path / "model-f16.gguf"
    gguf.write_bytes(b"GGUF" + bytes(12))
    files = upload_plan(run / "adapter", [gguf])
    names = [f.path_in_repo for f in files]
    assert names == sorted(names)
    assert {
        "README.md",
        "reward_curve.png",
        "adapter_config.json",
        "adapter_model.safetensors",
        "grpo_kit_export.json",
        "model-f16.gguf",
    } <= set(names)
    assert {f.local_path.parent for f in files if f.path_in_repo != "model-f16.gguf"} == {run / "adapter"}
    assert sum(f.size_bytes for f in files) > 1000
    with pytest.raises(PushError, match="model card"):
        upload_plan(tmp_path)  # no README.md: not an export
