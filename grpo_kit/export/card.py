"""The model card of an export: ``README.md`` with Hub metadata, written into every export folder.

What a reader of a shared model needs, taken from the run folder the model came from (nothing is typed in):

* metadata (``huggingface_hub.ModelCardData``): ``base_model`` (an alias such as ``smollm2-135m-instruct``
  becomes its Hub id; a local path or the test model ``tiny`` is named in the text only, the Hub would reject
  it), ``library_name`` (``peft`` for an adapter, ``transformers`` for a merged model), ``tags`` (grpo, trl,
  grpo-kit, + lora / gguf), ``datasets`` (the recipe's Hub dataset; a synthetic or local one is named in the
  text), ``pipeline_tag: text-generation``;
* the recipe and the overrides it ran with (``run_config.json``), the reward functions and their weights,
  the training loop and the number of steps (``run.json``);
* the held-out before/after table with its confidence intervals, from the run's report card (``eval.json``:
  the same rows, never trained on, the same greedy decoding before and after), and, where the recipe has a
  second held-out set written differently (``eval.json["transfer"]``), that set's headline metric under its
  label (``transfer_label``: how it was asked);
* the reward curve (``reward_curve.png``, copied next to the card so the Hub shows it).

A folder without a run around it (an adapter folder passed to ``grpo-kit export``) gets a card with what
can be known, and says what is missing. The export's manifest is rewritten to list the card, so
:func:`grpo_kit.export.check_export_files` still passes. Simplification: the card is rendered once per
export; later edits on the Hub are not merged back.

    write_model_card("runs/x/merged", run_dir="runs/x", kind="merged")
    ModelCard.load("runs/x/merged/README.md").data.base_model
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_kit.export.folder import MANIFEST, _read_manifest, write_manifest

__all__ = [
    "CARD_FILE",
    "RunFacts",
    "build_model_card",
    "read_run_facts",
    "write_export_cards",
    "write_model_card",
]

CARD_FILE = "README.md"
CURVE_FILE = "reward_curve.png"
_HUB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: The repository the README's molab links and the notebooks' install cell assume.
REPOSITORY_URL = "https://github.com/grpo-kit/grpo-kit"
LIBRARY = {"adapter": "peft", "merged": "transformers", "gguf": "gguf"}


@dataclass
class RunFacts:
    """What a run folder records about how a model was made (None / empty where the folder lacks it)."""

    run_dir: Path | None = None
    recipe: str | None = None
    description: str | None = None
    model: str | None = None  # as the recipe names it (alias, Hub id, path, "tiny")
    overrides: dict[str, Any] = field(default_factory=dict)
    loop: str | None = None
    steps: int | None = None
    dataset: str | None = None  # datasets_prep loader name
    dataset_source: str | None = None
    dataset_size: int | None = None
    rewards: list[dict[str, Any]] = field(default_factory=list)  # name, weight, kwargs
    lora: dict[str, Any] | None = None
    training: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] | None = None  # eval.json
    warmup_sft: dict[str, Any] | None = None  # run.json "warmup_sft": the SFT stage before GRPO
    reward_curve: Path | None = None

    @property
    def base_model_hub_id(self) -> str | None:
        """The base model's Hub id, when it has one (aliases resolved)."""
        from grpo_kit.models import ALIASES

        name = ALIASES.get(self.model or "", self.model)
        return name if name and _HUB_ID_RE.match(name) and not Path(name).exists() else None

    @property
    def dataset_hub_id(self) -> str | None:
        """The training dataset's Hub id: the loader's own (no source) or a Hub id given as the source."""
        if self.dataset_source is None and self.dataset:
            import importlib

            try:
                return getattr(importlib.import_module(f"datasets_prep.{self.dataset}"), "HUB_ID", None)
            except ImportError:
                return None
        if self.dataset_source and _HUB_ID_RE.match(self.dataset_source):
            return self.dataset_source if not Path(self.dataset_source).exists() else None
        return None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_run_facts(
    run_dir: str | Path | None, *, base_model: str | None = None, recipe: Any = None
) -> RunFacts:
    """The facts of the run in ``run_dir`` (``run_config.json``, ``run.json``, ``eval.json``,
    ``reward_curve.png``); ``base_model`` fills the model when no run records it (e.g. adapter_config.json),
    ``recipe`` (a ``Recipe``) the recipe, dataset and rewards when no ``run_config.json`` does (a lesson
    that called ``loop.train`` itself)."""
    given = _recipe_record(recipe)
    if run_dir is None:
        return _from_recipe_record(RunFacts(model=base_model), given)
    run_dir = Path(run_dir)
    stored = _read_json(run_dir / "run_config.json") or {}
    config = stored.get("config", stored)
    invocation = config.get("invocation", {}) if isinstance(config, dict) else {}
    recipe = (config.get("recipe") if isinstance(config, dict) else None) or given
    summary = _read_json(run_dir / "run.json") or {}
    curve = run_dir / CURVE_FILE
    return RunFacts(
        run_dir=run_dir,
        recipe=summary.get("recipe") or invocation.get("recipe") or recipe.get("name"),
        description=recipe.get("description"),
        model=summary.get("model") or recipe.get("model") or base_model,
        overrides=dict(invocation.get("overrides") or {}),
        loop=summary.get("loop") or config.get("loop"),
        steps=summary.get("steps"),
        dataset=recipe.get("dataset"),
        dataset_source=recipe.get("dataset_source"),
        dataset_size=recipe.get("dataset_size"),
        rewards=list(recipe.get("rewards") or []),
        lora=recipe.get("lora"),
        training=dict(summary.get("training") or recipe.get("training") or {}),
        evaluation=_read_json(run_dir / "eval.json"),
        warmup_sft=summary.get("warmup_sft") if isinstance(summary.get("warmup_sft"), dict) else None,
        reward_curve=curve if curve.is_file() else None,
    )


def _recipe_record(recipe: Any) -> dict[str, Any]:
    if recipe is None:
        return {}
    from grpo_kit.config.stored import jsonable_config

    return jsonable_config(recipe)


def _from_recipe_record(facts: RunFacts, recipe: Mapping[str, Any]) -> RunFacts:
    if recipe:
        facts.recipe = recipe.get("name")
        facts.description = recipe.get("description")
        facts.model = facts.model or recipe.get("model")
        facts.dataset = recipe.get("dataset")
        facts.dataset_source = recipe.get("dataset_source")
        facts.dataset_size = recipe.get("dataset_size")
        facts.rewards = list(recipe.get("rewards") or [])
        facts.lora = recipe.get("lora")
        facts.training = dict(recipe.get("training") or {})
    return facts


def _cell(value: Any) -> str:
    """A markdown table cell: pipes escaped, control characters and newlines flattened."""
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", str(value))
    return text.replace("|", "\\|")


def _num(value: Any, fmt: str = ".3f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return format(value, fmt)


def held_out_table(evaluation: Mapping[str, Any] | None) -> list[str]:
    """The report card's comparisons as markdown lines: metric, before, after, change, CI, verdict."""
    if not evaluation or not evaluation.get("comparisons"):
        return ["No held-out evaluation was recorded for this model (the run folder has no `eval.json`)."]
    from grpo_kit.evaluation.report_card import HEADLINE

    comparisons = evaluation["comparisons"]
    order = [
        n
        for key in HEADLINE
        for n in comparisons
        if n == key or (key.endswith(("/", "@")) and n.startswith(key))
    ]
    names = list(dict.fromkeys(order + sorted(comparisons)))
    first = comparisons[names[0]]
    level = first.get("level", 0.95)
    settings = (evaluation.get("before") or {}).get("settings") or {}
    decoding = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()) if not isinstance(v, (dict, list)))
    intro = (
        f"Held out: {first.get('n')} prompts the run never trained on, answered with the same decoding before "
        f"and after training ({_cell(decoding) or 'greedy'}). Change = after - before, with its "
        f"{level:.0%} paired-bootstrap confidence interval ({first.get('n_boot')} resamples)."
    )
    lines = [
        intro,
        "",
        f"| metric | before | after | change | {level:.0%} CI | verdict |",
        "|---|---:|---:|---:|---|---|",
    ]
    lines += [_comparison_row(name, comparisons[name]) for name in names]
    return lines + _hack_line(evaluation.get("reward_hack_signs"), comparisons)


def transfer_headline(evaluation: Mapping[str, Any] | None) -> list[str]:
    """The second held-out set's headline as markdown lines (eval.json's ``"transfer"``, ``[]`` without one):
    its label (how it was asked), what the set is, and one row of the table above for the metric run.json
    states (``headline_metric``): before, after, change, CI, verdict."""
    transfer = (evaluation or {}).get("transfer")
    if not transfer or not transfer.get("comparisons"):
        return []
    from grpo_kit.evaluation.comparison import headline_metric
    from grpo_kit.evaluation.report_card import transfer_about, transfer_label

    comparisons = transfer["comparisons"]
    metric = headline_metric(comparisons)
    c = comparisons[metric]
    level = c.get("level", 0.95)
    about = transfer_about(f"`{transfer['set']}`", c.get("n"), transfer.get("description"))
    lines = [
        f"### {_cell(transfer.get('label') or transfer_label(transfer['set']))}",
        "",
        f"{_cell(about)} Its headline metric:",
        "",
        f"| metric | before | after | change | {level:.0%} CI | verdict |",
        "|---|---:|---:|---:|---|---|",
        _comparison_row(metric, c),
    ]
    return lines + _hack_line(transfer.get("reward_hack_signs"), comparisons)


def _comparison_row(name: str, c: Mapping[str, Any]) -> str:
    return (
        f"| {_cell(name)} | {_num(c.get('before'))} | {_num(c.get('after'))} | {_num(c.get('mean_diff'), '+.3f')} "
        f"| [{_num(c.get('ci_low'), '+.3f')}, {_num(c.get('ci_high'), '+.3f')}] | {_cell(c.get('verdict'))} |"
    )


def _hack_line(signs: Sequence[str] | None, comparisons: Mapping[str, Any]) -> list[str]:
    if not signs:
        return []
    from grpo_kit.evaluation.reward_hacking import collapse_warning

    title, sentence = collapse_warning(signs, (c.get("verdict") for c in comparisons.values()))
    return ["", f"**{title}**: {_cell(sentence)}."]


def build_model_card(
    facts: RunFacts, *, kind: str, gguf_files: Sequence[str] = (), repo_id: str | None = None
):
    """A ``huggingface_hub.ModelCard`` for an export of ``kind`` ("adapter" | "merged" | "gguf")."""
    from huggingface_hub import ModelCard, ModelCardData

    if kind not in LIBRARY:
        raise ValueError(f"kind={kind!r}: choose one of {sorted(LIBRARY)}")
    tags = (
        ["grpo", "trl", "grpo-kit"]
        + (["lora"] if kind == "adapter" else [])
        + (["gguf"] if gguf_files else [])
    )
    base = facts.base_model_hub_id
    dataset = facts.dataset_hub_id
    data = ModelCardData(
        base_model=base,
        library_name=LIBRARY[kind],
        tags=tags,
        datasets=[dataset] if dataset else None,
        pipeline_tag="text-generation",
        model_name=repo_id.split("/")[-1] if repo_id else None,
    )
    title = repo_id or (f"{facts.recipe} ({kind})" if facts.recipe else f"GRPO-trained model ({kind})")
    what = {"adapter": "a LoRA adapter", "merged": "a merged 16-bit model", "gguf": "GGUF files"}[kind]
    on_top_of = (
        f"[{base}](https://huggingface.co/{base})" if base else f"`{_cell(facts.model or 'unrecorded')}`"
    )
    intro = (
        f"{what[0].upper() + what[1:]} trained with GRPO (Group Relative Policy Optimization) by "
        f"[grpo-kit]({REPOSITORY_URL}), on top of {on_top_of}."
    )
    lines = [
        f"# {_cell(title)}",
        "",
        intro,
        "",
        "## Training",
        "",
        "| | |",
        "|---|---|",
        f"| recipe | `{_cell(facts.recipe or 'not recorded')}` |",
        f"| overrides | {_cell(', '.join(f'`{k}={v!r}`' for k, v in facts.overrides.items()) or 'none')} |",
        f"| base model | `{_cell(facts.model or 'not recorded')}` |",
        f"| dataset | {_dataset_text(facts, dataset)} |",
        f"| reward functions | {_rewards_text(facts.rewards)} |",
        f"| loop | {_cell(facts.loop or 'not recorded')} |",
        f"| steps | {facts.steps if facts.steps is not None else 'not recorded'} |",
    ]
    for key in ("learning_rate", "num_generations", "max_completion_length", "beta", "loss_type"):
        if key in facts.training:
            lines.append(f"| {key} | `{_cell(facts.training[key])}` |")
    if facts.lora:
        lines.append(f"| LoRA | {_cell(', '.join(f'{k}={v}' for k, v in facts.lora.items()))} |")
    if facts.warmup_sft:
        stage = _stage_names(facts.warmup_sft)[0]
        lines.append(f"| {stage} before GRPO | {_warmup_text(facts.warmup_sft)} |")
    if facts.description:
        lines += ["", f"The recipe: {_cell(facts.description)}"]
    lines += ["", "## Held-out evaluation (before / after training)", "", *held_out_table(facts.evaluation)]
    second = transfer_headline(facts.evaluation)
    if second:
        lines += ["", *second]
    if facts.reward_curve is not None:
        lines += ["", "## Reward during training", "", f"![reward curve]({CURVE_FILE})"]
    lines += ["", "## Use", "", *_usage(kind, repo_id or "path/to/this/folder", base, gguf_files)]
    content = f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines) + "\n"
    return ModelCard(content)


def _stage_names(warmup: Mapping[str, Any]) -> tuple[str, str]:
    from grpo_kit.trainers.sft_warmup import stage_names

    return stage_names(str(warmup.get("dataset")))


def _warmup_text(warmup: Mapping[str, Any]) -> str:
    """run.json's ``warmup_sft`` in one table cell: what ran, and the held-out headline after SFT alone."""
    if not warmup.get("ran"):
        return _cell(warmup.get("reason") or "not run")
    text = (
        f"{warmup.get('steps')} steps of {_cell(warmup.get('path'))} at learning rate {warmup.get('learning_rate')} "
        f"on {warmup.get('rows')} rows of `{_cell(warmup.get('dataset'))}`, loss {_num(warmup.get('first_loss'))} "
        f"-> {_num(warmup.get('last_loss'))}"
    )
    only = f"{_stage_names(warmup)[1]} only"
    for key, label in (("evaluation", f"held-out, {only}"), ("grpo_added", "what GRPO added")):
        if isinstance(warmup.get(key), Mapping) and warmup[key].get("headline"):
            text += f"; {label}: {_cell(warmup[key]['headline'])}"
    return text


def _dataset_text(facts: RunFacts, hub_id: str | None) -> str:
    if hub_id:
        text = f"[{hub_id}](https://huggingface.co/datasets/{hub_id})"
    elif facts.dataset_source == "synthetic":
        text = f"synthetic `{_cell(facts.dataset)}` rows generated offline (grpo-kit's datasets_prep)"
    elif facts.dataset_source:
        text = f"a local file (`{_cell(Path(facts.dataset_source).name)}`)"
    else:
        return "not recorded"
    return text + (f", {facts.dataset_size} rows" if facts.dataset_size else "")


def _rewards_text(rewards: Sequence[Mapping[str, Any]]) -> str:
    if not rewards:
        return "not recorded"
    parts = []
    for r in rewards:
        kwargs = ", ".join(f"{k}={v!r}" for k, v in (r.get("kwargs") or {}).items())
        name = str(r.get("name"))
        # file.py:function: the file's name, not this machine's path
        if ":" in name and not name.startswith("model:"):
            file, _, function = name.rpartition(":")
            name = f"{Path(file).name}:{function}"
        parts.append(f"`{_cell(name)}({_cell(kwargs)})` × {r.get('weight', 1.0)}")
    return " + ".join(parts)


def _usage(kind: str, where: str, base: str | None, gguf_files: Sequence[str]) -> list[str]:
    if kind == "adapter":
        code = [
            "from peft import AutoPeftModelForCausalLM",
            "from transformers import AutoTokenizer",
            f'model = AutoPeftModelForCausalLM.from_pretrained("{where}")',
            f'tokenizer = AutoTokenizer.from_pretrained("{where}")',
        ]
    else:
        code = [
            "from transformers import AutoModelForCausalLM, AutoTokenizer",
            f'model = AutoModelForCausalLM.from_pretrained("{where}")',
            f'tokenizer = AutoTokenizer.from_pretrained("{where}")',
        ]
    lines = ["```python", *code, "```"] if kind != "gguf" else []
    if gguf_files:
        lines += [
            "",
            "GGUF (llama.cpp, Ollama, LM Studio): " + ", ".join(f"`{_cell(f)}`" for f in gguf_files),
        ]
    return lines


def write_model_card(
    export_dir: str | Path,
    *,
    run_dir: str | Path | None,
    kind: str,
    base_model: str | None = None,
    gguf_files: Sequence[str] = (),
    repo_id: str | None = None,
    recipe: Any = None,
) -> Path:
    """Write ``README.md`` (and the reward curve it shows) into ``export_dir`` and list them in its manifest.
    ``recipe``: the Recipe, where the run folder has no ``run_config.json`` (see :func:`read_run_facts`)."""
    out = Path(export_dir)
    facts = read_run_facts(run_dir, base_model=base_model, recipe=recipe)
    card = build_model_card(facts, kind=kind, gguf_files=gguf_files, repo_id=repo_id)
    if facts.reward_curve is not None and facts.reward_curve.resolve() != (out / CURVE_FILE).resolve():
        shutil.copyfile(facts.reward_curve, out / CURVE_FILE)
    card.save(out / CARD_FILE)
    manifest = _read_manifest(out)
    if manifest is not None or (out / MANIFEST).exists():
        write_manifest(out, (manifest or {}).get("kind", kind))
    return out / CARD_FILE


def write_export_cards(
    folders: Mapping[str | Path, str],
    *,
    run_dir: str | Path | None,
    base_model: str | None = None,
    gguf_files: Sequence[str | Path] = (),
    repo_id: str | None = None,
) -> list[Path]:
    """:func:`write_model_card` for each export folder (``{folder: kind}``); the GGUF files written beside them
    are listed in every card by name. Returns the cards written."""
    names = [Path(g).name for g in gguf_files]
    return [
        write_model_card(
            folder, run_dir=run_dir, kind=kind, base_model=base_model, gguf_files=names, repo_id=repo_id
        )
        for folder, kind in folders.items()
    ]
