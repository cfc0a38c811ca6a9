"""Recipe files: your own task as a YAML or TOML file, read into the same :class:`grpo_kit.recipes.recipe.Recipe`
the shipped recipes are (``grpo-kit train --config my_task.yaml``), and any recipe written back as one
(``grpo-kit recipes --show NAME --as-yaml``; ``recipe_from_text(recipe_to_text(r)) == r``).

The keys are the Recipe's fields (``model``, ``dataset``, ``rewards``, ``lora``, ``quantization``, ``training``,
``eval_prompts``, ...), so there is nothing more to learn; what a file adds is a shorter way to name your own
data and your own reward functions:

    name: my-task
    model: smollm2-135m-instruct          # an alias, a Hub id, a local folder or a .gguf
    dataset:                              # a file, a folder or a Hub id (then config, split)
      source: my_task.jsonl
      prompt: question                    # the column holding the prompt
      columns: {answer: solution}         # {argument your reward reads: column}
      held_out: {fraction: 0.2, seed: 0}  # or {split: test}
    rewards:
      - my_rewards.py:exact_answer        # file.py:function, module.function or a name from rewards
      - {name: length_reward, weight: 0.5, kwargs: {ideal_length: 50}}
    lora: {r: 8}                          # null / false: full fine-tuning
    training: {learning_rate: 1.0e-4, max_steps: 40}   # GRPOConfig names
    warmup_sft: {dataset: sft_rows.jsonl, steps: 30}     # optional: SFT first (recipe_schema.WarmupSFT)

``dataset`` as text: a loader name of ``grpo_kit.recipes.recipe.DATASET_LOADERS`` (a shipped recipe's), else your rows
(``datasets_prep.load_prompts``, loader ``"prompts"``). Relative paths (data, reward files, a model folder or
.gguf) are read against the recipe file's folder and stored absolute, so a run folder's copy reads the same
files from anywhere. TRL's ``trl grpo`` keys are accepted where they mean the same (:data:`TRL_KEYS`; ``datasets:``
with one entry, ``test_split_size`` with it), GRPOConfig fields may also sit at the top level as in TRL's config
files, and every other key is refused with the grpo-kit name. A reward function of yours is imported now, because
the file names it, and checked against the contract (``rewards.check_reward_funcs``) before any model loads;
``module.function`` is looked up as ``trl grpo`` does, beside the recipe file first, then in the working folder,
then on Python's path (``grpo_kit.recipes.reward_specs.resolve_module_reward``), and a module found in a folder is
stored as its file (``/abs/my_rewards.py:function``).

YAML is read with PyYAML's safe loader (plus ``1e-5`` read as a number, as YAML 1.2 does); TOML with ``tomllib``
(``tomli`` on Python 3.10). TOML has no null: leave a key out for its default, and write ``lora = false`` for
full fine-tuning.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from grpo_kit.recipes.parsing import RecipeFileError, parse_recipe_text
from grpo_kit.recipes.recipe import (
    DATASET_LOADERS,
    LoraSettings,
    Recipe,
    RewardSpec,
    UnslothSettings,
    WarmupSFT,
)
from grpo_kit.recipes.reward_specs import (
    REWARD_MODEL_PREFIX,
    RewardImportError,
    imports_only_installed_rewards,
    is_user_reward,
    resolve_module_reward,
)
from grpo_kit.recipes.writing import recipe_to_dict, recipe_to_text

__all__ = [
    "RECIPE_FILE_SUFFIXES",
    "TRL_KEYS",
    "RecipeFileError",
    "check_recipe_name",
    "load_recipe_file",
    "recipe_from_dict",
    "recipe_from_text",
    "recipe_to_dict",
    "recipe_to_text",
    "refuse_reward_code_of_a_run",
]

RECIPE_FILE_SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}

#: ``trl grpo`` config keys (ScriptArguments, ModelConfig, GRPOScriptArguments) that mean what a grpo-kit key
#: means: TRL's name -> where it goes.
TRL_KEYS = {
    "model_name_or_path": "model",
    "dataset_name": "dataset",
    "dataset_config": "dataset.config",
    "dataset_train_split": "dataset_split",
    "dataset_test_split": "held_out.split",
    "datasets": "dataset (one entry: path, name, data_dir, data_files, split, columns)",
    "test_split_size": "held_out.fraction (with datasets:, as TRL splits only a mixture)",
    "reward_funcs": "rewards",
    "reward_model_name_or_path": "a model: reward, first in rewards",
    "reward_weights": "the weight of each reward",
    "use_peft": "lora",
    "lora_r": "lora.r",
    "lora_alpha": "lora.lora_alpha",
    "lora_dropout": "lora.lora_dropout",
    "lora_target_modules": "lora.target_modules",
    "load_in_4bit": "quantization: 4bit",
    "load_in_8bit": "quantization: 8bit",
}
#: ``trl grpo`` keys grpo-kit has no counterpart for, and what to write instead.
_TRL_REFUSED = {
    "torch_dtype": "grpo-kit picks the dtype for the hardware (grpo-kit doctor); set bf16: true in training",
    "dtype": "grpo-kit picks the dtype for the hardware (grpo-kit doctor); set bf16: true in training",
    "attn_implementation": "grpo-kit loads models with their default attention; drop the key",
    "trust_remote_code": "grpo-kit never runs a model's remote code; use a model transformers knows",
    "model_revision": "download the revision and name its folder in model:",
    "dataset_streaming": "grpo-kit loads the rows into memory; drop the key",
    "streaming": "grpo-kit loads the rows into memory; drop the key",
    "ignore_bias_buffers": "a DDP debugging switch of TRL's scripts, which grpo-kit does not use; drop the key",
    "lora_target_parameters": "name modules in lora: {target_modules: [...]}",
    "bnb_4bit_quant_storage": "quantization: 4bit stores the weights itself; drop the key",
    "use_dora": "grpo-kit trains LoRA adapters (lora:); drop the key",
    "use_rslora": "grpo-kit trains LoRA adapters (lora:); drop the key",
    "lora_task_type": "grpo-kit's adapters are CAUSAL_LM; drop the key",
    "lora_modules_to_save": "list the modules in lora: {target_modules: [...]}",
    "bnb_4bit_quant_type": "quantization: 4bit is NF4; drop the key",
    "use_bnb_nested_quant": "quantization: 4bit; drop the key",
    "config": "one recipe file per run; merge the two files",
}
_DATASET_KEYS = ("source", "config", "split", "size", "prompt", "columns", "system_prompt", "held_out")
_RECIPE_KEYS = {f.name for f in dataclasses.fields(Recipe)}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def check_recipe_name(name: Any, *, what: str = "name") -> str:
    """A recipe or task name: letters, digits, ``-``, ``_``, ``.``, starting with a letter or digit, at most 64
    characters (it becomes a folder name: ``outputs/<name>-<time>``, ``grpo-kit new NAME``)."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or ".." in name:
        raise ValueError(
            f"{what} {name!r}: use letters, digits, '-', '_' and '.', starting with a letter or digit, "
            "at most 64 characters (it becomes a folder name), e.g. my-task."
        )
    return name


def refuse_reward_code_of_a_run(specs: Iterable[RewardSpec], where: str) -> None:
    """``RecipeFileError`` when a reward of ``specs``, the rewards a recipe read back from a run folder resolved to
    (its ``recipe.yaml``, its stored invocation, run.json's settings), would import code that is not the installed
    ``rewards`` package's (:func:`grpo_kit.recipes.reward_specs.imports_only_installed_rewards`: the names are
    judged by the file they import, as the loader resolves them, not by how they are spelled).

    Importing a module runs it. A run folder may come from someone else, so the code it names is imported only
    when you name it again: ``--trust-reward-code``, or ``grpo-kit train --config <run>/recipe.yaml``. Functions
    of ``rewards`` and reward models are not code of the user's."""
    code = [spec.name for spec in specs if not imports_only_installed_rewards(spec.name, spec.kwargs)]
    if code:
        raise RecipeFileError(
            f"{where} names reward code ({', '.join(code)}), which runs when it is imported; grpo-kit imports a "
            "run folder's code only when you name it: pass --trust-reward-code if the run and that code are yours."
        )


def load_recipe_file(path: str | Path, *, trust_reward_code: bool = True) -> Recipe:
    """The recipe in ``path`` (``.yaml``/``.yml``/``.toml``), checked (module docstring); ``RecipeFileError`` or
    ``FileNotFoundError`` naming the fix. ``trust_reward_code=False`` for a file you did not name yourself (a run
    folder's copy): reward code it names is refused before it is imported (:func:`refuse_reward_code_of_a_run`)."""
    path = Path(path).expanduser()
    fmt = RECIPE_FILE_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise RecipeFileError(f"--config {path}: a recipe file ends in .yaml, .yml or .toml.")
    if not path.is_file():
        raise FileNotFoundError(
            f"--config {path}: no such file; write one (grpo-kit new NAME makes a start)."
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise RecipeFileError(f"{path}: not UTF-8 text ({error}); save it as UTF-8.") from None
    return recipe_from_text(
        text,
        fmt,
        where=str(path),
        base_dir=path.resolve().parent,
        default_name=path.stem,
        trust_reward_code=trust_reward_code,
    )


def recipe_from_text(
    text: str,
    fmt: str = "yaml",
    *,
    where: str = "recipe file",
    base_dir: Path | None = None,
    default_name: str = "recipe",
    trust_reward_code: bool = True,
    check_training: bool = True,
) -> Recipe:
    """:func:`recipe_from_dict` of the YAML or TOML ``text``."""
    return recipe_from_dict(
        parse_recipe_text(text, fmt, where),
        where=where,
        base_dir=base_dir,
        default_name=default_name,
        trust_reward_code=trust_reward_code,
        check_training=check_training,
    )


def recipe_from_dict(
    data: Mapping[str, Any],
    *,
    where: str = "recipe",
    base_dir: Path | None = None,
    default_name: str = "recipe",
    trust_reward_code: bool = True,
    check_training: bool = True,
) -> Recipe:
    """A Recipe from a recipe file's table (grpo-kit or TRL keys), every rule checked, user rewards imported and
    checked; ``RecipeFileError`` naming the field and the fix. ``trust_reward_code=False`` (a table read back from
    a run folder): a reward that would import code outside the installed ``rewards`` package is refused, as
    resolved here, before anything is imported (:func:`refuse_reward_code_of_a_run`). ``check_training=False``
    leaves the training names to :meth:`Recipe.validate` when the run is planned (it imports TRL, which takes
    seconds): the catalogue reads its shipped files so, and ``grpo-kit recipes`` lists them without TRL."""
    base_dir = Path(base_dir) if base_dir is not None else Path.cwd()
    try:
        fields = _fields(dict(data), where, base_dir, default_name)
        recipe = Recipe(**fields)
        if check_training:
            recipe.validate()
    except RecipeFileError:
        raise
    except (ValueError, TypeError) as error:
        raise RecipeFileError(f"{where}: {' '.join(str(error).split())}") from None
    if not trust_reward_code:
        refuse_reward_code_of_a_run(recipe.rewards, where)
    _check_rewards(recipe, where)
    return recipe


def _unknown_key(key: str, where: str, known: set[str]) -> RecipeFileError:
    if key in _TRL_REFUSED:
        return RecipeFileError(f"{where}: TRL's {key!r} has no grpo-kit counterpart: {_TRL_REFUSED[key]}.")
    close = difflib.get_close_matches(key, sorted(known), n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return RecipeFileError(
        f"{where}: unknown key {key!r}.{hint} Keys: {', '.join(sorted(_RECIPE_KEYS))}, 'held_out', or a GRPOConfig "
        "field (they go into training:)."
    )


def _training_names() -> set[str]:
    """The names a training table takes (GRPOConfig's: imports TRL, so read only for a key no other rule knows)."""
    from grpo_kit.config.rules import LOOP_ONLY_FIELDS, RETIRED_TRAINING_FIELDS, grpo_config_field_names

    return grpo_config_field_names() | LOOP_ONLY_FIELDS | set(RETIRED_TRAINING_FIELDS)


def _fields(data: dict[str, Any], where: str, base_dir: Path, default_name: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    training: dict[str, Any] = dict(data.pop("training", None) or {})
    if not isinstance(training, dict):
        raise RecipeFileError(f"{where}: training must be a table of GRPOConfig fields, got {training!r}.")
    lora: dict[str, Any] = {}
    dataset: dict[str, Any] = {}
    weights = data.pop("reward_weights", None)
    reward_model = data.pop("reward_model_name_or_path", None)
    mixture, split_size = data.pop("datasets", None), data.pop("test_split_size", None)
    if "rewards" in data and "reward_funcs" in data:
        raise RecipeFileError(
            f"{where}: rewards and reward_funcs (TRL's name for it) are both set; keep one list of rewards."
        )
    for key, value in data.items():
        if key in ("model", "model_name_or_path"):
            fields["model"] = value
        elif key in ("dataset", "dataset_name"):
            if isinstance(value, Mapping):
                dataset.update(value)
            else:
                dataset["name"] = value
        elif key == "dataset_config":
            dataset["config"] = value
        elif key in ("dataset_split", "dataset_train_split"):
            dataset["split"] = value
        elif key == "dataset_test_split":
            dataset["held_out"] = {"split": value}
        elif key == "held_out":
            dataset["held_out"] = _held_out(value, where)
        elif key in ("dataset_source", "dataset_size", "dataset_kwargs"):
            dataset[key] = value
        elif key in ("rewards", "reward_funcs"):
            fields["rewards"] = value
        elif key == "use_peft":
            lora.setdefault("on", bool(value))
        elif key in ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules"):
            lora[{"lora_r": "r", "lora_target_modules": "target_modules"}.get(key, key)] = value
        elif key in ("load_in_4bit", "load_in_8bit"):
            if value:
                fields["quantization"] = "4bit" if key == "load_in_4bit" else "8bit"
        elif key == "lora":
            if value in (None, False):
                lora["on"] = False
            elif isinstance(value, Mapping):
                lora.update(value)
            else:
                raise RecipeFileError(
                    f"{where}: lora must be a table ({{r: 8}}) or null for full fine-tuning, got {value!r}."
                )
        elif key == "unsloth":
            fields["unsloth"] = UnslothSettings(**_table(value, where, key))
        elif key == "warmup_sft":
            fields["warmup_sft"] = _warmup_sft(value, where, base_dir)
        elif key in _RECIPE_KEYS:
            fields[key] = value
        elif key in _training_names():
            if key in training:
                raise RecipeFileError(f"{where}: {key} is set twice, at the top and in training:; keep one.")
            training[key] = value
        else:
            raise _unknown_key(key, where, _RECIPE_KEYS | set(TRL_KEYS) | _training_names())
    fields["name"] = check_recipe_name(fields.get("name", default_name), what=f"{where}: name")
    fields.setdefault("description", f"A recipe file ({fields['name']}).")
    if "model" not in fields:
        raise RecipeFileError(
            f"{where}: no model; write model: smollm2-135m-instruct (an alias, a Hub id, a folder or a .gguf)."
        )
    fields["model"] = _model(fields["model"], where, base_dir)
    if mixture is not None:
        _trl_datasets(mixture, split_size, data, dataset, where)
    elif split_size is not None:
        raise RecipeFileError(
            f"{where}: test_split_size: TRL splits only a datasets: mixture by it (with dataset_name it reads "
            f"dataset_test_split); for a carved held-out share write held_out: {{fraction: {split_size}, seed: 0}}."
        )
    fields.update(_dataset(dataset, where, base_dir))
    if (
        reward_model is not None
    ):  # trl grpo: the reward model comes first, then reward_funcs (reward_weights too)
        if not isinstance(reward_model, str) or not reward_model:
            raise RecipeFileError(
                f"{where}: reward_model_name_or_path must be a Hub id or a folder, got {reward_model!r}."
            )
        local = _resolve(reward_model, base_dir)
        model = f"{REWARD_MODEL_PREFIX}{local if local.exists() else reward_model}"
        listed = fields.get("rewards")
        listed = [] if listed is None else [listed] if isinstance(listed, (str, Mapping)) else listed
        fields["rewards"] = [model, *listed] if isinstance(listed, list) else listed
    fields["rewards"] = _rewards(fields.get("rewards"), weights, where, base_dir)
    fields["lora"] = _lora(lora, where)
    for key in ("environment", "trainable_parts"):  # tuples in a Recipe, lists in YAML and TOML
        if isinstance(fields.get(key), list):
            fields[key] = tuple(fields[key])
    fields["training"] = training
    return fields


#: TRL's ``datasets:`` entry (``trl.scripts.utils.DatasetConfig``, the arguments of ``datasets.load_dataset``).
_TRL_DATASET_ENTRY = ("path", "name", "data_dir", "data_files", "split", "columns", "fraction")
#: ``datasets.load_dataset`` builders whose rows are named by ``data_files`` / ``data_dir``.
_FILE_BUILDERS = ("json", "csv", "parquet")
#: grpo-kit's and TRL's keys that name the data too: with ``datasets:``, TRL ignores them or fails on them.
_NAMED_WITH_DATASETS = (
    "dataset_name",
    "dataset_config",
    "dataset_train_split",
    "dataset_test_split",
    "dataset_split",
    "dataset_source",
    "held_out",
)


def _trl_datasets(
    mixture: Any, split_size: Any, data: Mapping[str, Any], dataset: dict[str, Any], where: str
) -> None:
    """TRL's ``datasets:`` (a ``DatasetMixtureConfig`` of one entry) and ``test_split_size`` into ``dataset``, with
    TRL's meaning: the entry's rows (``path``, or ``data_files``/``data_dir`` of a json/csv/parquet builder), its
    configuration ``name`` and ``split``, only its ``columns``; ``test_split_size``: a carved held-out share.
    What TRL would ignore or fail on beside it is refused in one line naming what to write."""
    at = f"{where}: datasets"
    if not isinstance(mixture, list) or not mixture or not all(isinstance(e, Mapping) for e in mixture):
        raise RecipeFileError(
            f"{at} must be a list of one table ({{path: rows.jsonl, split: train}}), got {mixture!r}."
        )
    if len(mixture) > 1:
        raise RecipeFileError(
            f"{at}: a mixture of {len(mixture)} datasets; grpo-kit trains on one: join the rows into one file or "
            "folder and name it (dataset: rows.jsonl)."
        )
    entry = dict(mixture[0])
    table = data.get("dataset")
    # trl grpo names the mixture's parts "train" and, split by test_split_size, "test": those names mean it
    parts = {"dataset_train_split": "train", "dataset_test_split": "test" if split_size is not None else None}
    clash = [k for k in _NAMED_WITH_DATASETS if k in data and data[k] != parts.get(k)]
    if table is not None and not isinstance(table, Mapping):
        clash.append("dataset")
    elif table is not None:  # a dataset: table may add prompt:, columns:, system_prompt: to TRL's entry
        clash += [
            f"dataset: {{{k}: ...}}" for k in ("source", "config", "split", "size", "held_out") if k in table
        ]
    if clash:
        raise RecipeFileError(
            f"{at} and {clash[0]} both name the data (trl grpo reads datasets: and ignores or fails on the other); "
            "keep datasets: with the split in its entry (split: train) and test_split_size for held-out rows."
        )
    unknown = sorted(set(entry) - set(_TRL_DATASET_ENTRY))
    if unknown:
        raise RecipeFileError(
            f"{at}: unknown key {unknown[0]!r}; an entry has {', '.join(_TRL_DATASET_ENTRY)}."
        )
    path, files, folder = entry.get("path"), entry.get("data_files"), entry.get("data_dir")
    if not isinstance(path, str) or not path:
        raise RecipeFileError(
            f"{at}: path must be a file, a folder, a Hub id or json/csv/parquet, got {path!r}."
        )
    if path in _FILE_BUILDERS:
        if (files is None) == (folder is None) or not isinstance(files if folder is None else folder, str):
            raise RecipeFileError(
                f"{at}: path: {path} reads the rows of one data_files: FILE or one data_dir: FOLDER (grpo-kit reads "
                f"one file or folder), got data_files={files!r}, data_dir={folder!r}."
            )
        source = files if folder is None else folder
    elif files is not None:
        raise RecipeFileError(
            f"{at}: data_files beside path: {path}; name the file itself as the path (path: rows.jsonl), or "
            "download the Hub files and name their folder."
        )
    else:
        source = path if folder is None else f"{path.rstrip('/')}/{folder}"
    if entry.get("fraction") is not None:
        raise RecipeFileError(
            f"{at}: fraction weighs the datasets of a mixture; with one dataset TRL keeps every row: drop it "
            "(dataset_size: N keeps N rows)."
        )
    dataset["name"] = source
    for trl_key, key in (("name", "config"), ("split", "split")):
        if entry.get(trl_key) is not None:
            dataset[key] = entry[trl_key]
    columns = entry.get("columns")
    if columns is not None:
        if not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns):
            raise RecipeFileError(f"{at}: columns must be a list of column names to keep, got {columns!r}.")
        dataset["dataset_kwargs"] = {**(dataset.get("dataset_kwargs") or {}), "select_columns": columns}
    if split_size is not None:
        if isinstance(split_size, bool) or not isinstance(split_size, (int, float)) or not 0 < split_size < 1:
            raise RecipeFileError(
                f"{where}: test_split_size: {split_size!r}; grpo-kit carves a share of the rows: a number between "
                "0 and 1 (0.2: a fifth), fixed by seed 0 (TRL draws its split unseeded)."
            )
        dataset["held_out"] = _held_out(float(split_size), where)  # seed 0, as held_out: 0.2


def _table(value: Any, where: str, key: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise RecipeFileError(f"{where}: {key} must be a table, got {value!r}.")
    return dict(value)


def _held_out(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, str):
        return {"split": value}
    if isinstance(value, float):
        return {"fraction": value, "seed": 0}
    if isinstance(value, Mapping):
        return {"seed": 0, **value} if "fraction" in value else dict(value)
    raise RecipeFileError(
        f"{where}: held_out {value!r}: write held_out: test (a split), held_out: 0.2 (a fifth, seed 0) or "
        "held_out: {fraction: 0.2, seed: 1}."
    )


def _resolve(value: str, base_dir: Path) -> Path:
    return (base_dir / Path(value).expanduser()).resolve()


def _looks_like_path(text: str) -> bool:
    return (
        text.lower().endswith((*_DATA_SUFFIXES, ".gguf", ".py"))
        or text.startswith((".", "/", "~"))
        or text.count("/") >= 2
    )


def _model(value: Any, where: str, base_dir: Path) -> str:
    if not isinstance(value, str) or not value:
        raise RecipeFileError(
            f"{where}: model must be text (an alias, a Hub id, a folder or a .gguf), got {value!r}."
        )
    from grpo_kit.models import TINY_MODEL
    from grpo_kit.models.embedded import ALIASES

    if value in ALIASES or value == TINY_MODEL:  # an alias names the model wherever the file is read
        return value
    local = _resolve(value, base_dir)
    if local.exists():
        return str(local)
    if _looks_like_path(value):
        raise RecipeFileError(
            f"{where}: model: no such file or folder {local}; fix the path (relative to the recipe file)."
        )
    return value


def _dataset(dataset: dict[str, Any], where: str, base_dir: Path) -> dict[str, Any]:
    name = dataset.pop("name", None)
    if name is None and "source" in dataset:
        name = "prompts"
    if name is None:
        raise RecipeFileError(
            f"{where}: no dataset; write dataset: my_rows.jsonl (a file, a folder or a Hub id)."
        )
    if not isinstance(name, str):
        raise RecipeFileError(
            f"{where}: dataset must be text or a table (source:, prompt:, ...), got {name!r}."
        )
    own = {k: dataset.pop(k) for k in _DATASET_KEYS if k in dataset}
    fields = {
        "dataset_source": dataset.pop("dataset_source", own.pop("source", None)),
        "dataset_size": dataset.pop("dataset_size", own.pop("size", None)),
        "dataset_split": own.pop("split", "train"),
        "dataset_kwargs": dict(dataset.pop("dataset_kwargs", None) or {}),
    }
    if dataset:
        raise RecipeFileError(
            f"{where}: dataset: unknown key {min(dataset)!r}; a dataset table has {', '.join(_DATASET_KEYS)}."
        )
    if name in DATASET_LOADERS and name != "prompts":
        if own:
            raise RecipeFileError(
                f"{where}: dataset {name!r} is a shipped loader; {', '.join(own)} belong to your own rows "
                "(dataset: {source: rows.jsonl, ...}); pass its arguments in dataset_kwargs."
            )
        return {"dataset": name, **fields}
    if name != "prompts":  # your rows, named directly: dataset: rows.jsonl | dataset: org/name
        if fields["dataset_source"] is not None:
            raise RecipeFileError(
                f"{where}: dataset {name!r} and a source; name your rows once (dataset: FILE)."
            )
        fields["dataset_source"] = name
    source = fields["dataset_source"]
    if not isinstance(source, str) or not source:
        raise RecipeFileError(
            f"{where}: dataset: source must be a file, a folder or a Hub id 'org/name', got {source!r}."
        )
    local = _resolve(source, base_dir)
    if local.exists():
        fields["dataset_source"] = str(local)
    elif _looks_like_path(source) or not re.match(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$", source):
        raise RecipeFileError(
            f"{where}: dataset: no such file or folder {local}; fix the path (relative to the recipe file), "
            "or name a Hub dataset 'org/name'."
        )
    kwargs = fields["dataset_kwargs"]
    for key, value in own.items():
        kwargs[key] = _held_out(value, where) if key == "held_out" else value
    if "held_out" in kwargs:
        from datasets_prep.prompts import check_held_out

        try:
            kwargs["held_out"] = check_held_out(kwargs["held_out"], where="held_out")
        except ValueError as error:
            raise RecipeFileError(f"{where}: {error}") from None
    return {"dataset": "prompts", **fields}


def _reward_name(name: Any, where: str, at: str, base_dir: Path) -> str:
    if not isinstance(name, str) or not name:
        raise RecipeFileError(
            f"{where}: {at}: a reward is a name (file.py:function, module.function or a rewards name), got {name!r}."
        )
    if name.startswith(REWARD_MODEL_PREFIX) or not is_user_reward(name):
        return name
    if ":" in name:
        file, _, function = name.rpartition(":")
        return f"{_resolve(file, base_dir)}:{function}"
    try:  # module.function: beside the recipe file, then in the working folder (trl grpo: the working folder)
        resolved = resolve_module_reward(name, [base_dir, Path.cwd()])
    except RewardImportError as error:
        raise RecipeFileError(f"{where}: {at}: {error}") from None
    module, _, function = name.rpartition(".")
    if resolved == name and not _importable(module.split(".")[0]):
        raise RecipeFileError(
            f"{where}: {at}: reward {name!r}: no module {module!r} beside the recipe file ({base_dir.resolve()}), in the "
            f"working folder ({Path.cwd()}) or installed; put {module.replace('.', '/')}.py there, or write its "
            f"path: path/to/{module.replace('.', '/')}.py:{function}."
        )
    return resolved


def _importable(top: str) -> bool:
    """True when Python's path finds the top-level module ``top`` (``find_spec`` runs no module code)."""
    import importlib.util

    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def _rewards(value: Any, weights: Any, where: str, base_dir: Path) -> tuple[RewardSpec, ...]:
    if value is None:
        raise RecipeFileError(
            f"{where}: no rewards; write rewards: [my_rewards.py:my_reward] (or a name from rewards)."
        )
    items = [value] if isinstance(value, (str, Mapping)) else value
    if not isinstance(items, list) or not items:
        raise RecipeFileError(f"{where}: rewards must be a list of rewards, got {value!r}.")
    if weights is not None and (not isinstance(weights, list) or len(weights) != len(items)):
        raise RecipeFileError(
            f"{where}: reward_weights needs one weight per reward ({len(items)}), got {weights!r}."
        )
    specs = []
    for i, item in enumerate(items):
        at = f"rewards[{i}]"
        if isinstance(item, Mapping):
            unknown = sorted(set(item) - {"name", "weight", "kwargs"})
            if unknown:
                raise RecipeFileError(
                    f"{where}: {at}: unknown key {unknown[0]!r}; a reward has name, weight and kwargs."
                )
            spec = RewardSpec(
                _reward_name(item.get("name"), where, at, base_dir),
                item.get("weight", 1.0),
                dict(item.get("kwargs") or {}),
            )
        else:
            spec = RewardSpec(_reward_name(item, where, at, base_dir))
        if weights is not None:
            spec = dataclasses.replace(spec, weight=weights[i])
        if isinstance(spec.weight, bool) or not isinstance(spec.weight, (int, float)):
            raise RecipeFileError(f"{where}: {at}: weight must be a number, got {spec.weight!r}.")
        specs.append(spec)
    return tuple(specs)


def _lora(lora: dict[str, Any], where: str) -> LoraSettings | None:
    on = lora.pop("on", True)
    if not on:
        if lora:
            raise RecipeFileError(
                f"{where}: LoRA is off (lora: null / use_peft: false) but {', '.join(lora)} are set; drop one."
            )
        return None
    if isinstance(lora.get("target_modules"), list):
        lora["target_modules"] = tuple(lora["target_modules"])
    try:
        return LoraSettings(**lora)
    except TypeError:
        known = [f.name for f in dataclasses.fields(LoraSettings)]
        raise RecipeFileError(
            f"{where}: lora: unknown key among {sorted(lora)}; LoRA keys are {', '.join(known)}."
        ) from None


def _warmup_sft(value: Any, where: str, base_dir: Path) -> WarmupSFT | None:
    """``warmup_sft:`` -> :class:`WarmupSFT` (null / false: none); a .jsonl path relative to the recipe file is
    stored absolute, and a missing one refused here."""
    if value in (None, False):
        return None
    table = _table(value, where, "warmup_sft")
    known = [f.name for f in dataclasses.fields(WarmupSFT)]
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise RecipeFileError(
            f"{where}: warmup_sft: unknown key {unknown[0]!r}; its keys are {', '.join(known)}."
        )
    dataset = table.get("dataset")
    if isinstance(dataset, str) and dataset.endswith(".jsonl"):
        local = _resolve(dataset, base_dir)
        if not local.is_file():
            raise RecipeFileError(
                f"{where}: warmup_sft.dataset: no such file {local}; fix the path (relative to the recipe file)."
            )
        table["dataset"] = str(local)
    return WarmupSFT(**table)


def _check_rewards(recipe: Recipe, where: str) -> None:
    """Every reward name resolves: a ``rewards`` export (a factory with its ``kwargs``), or a user function
    imported now and held to the contract (``rewards.check_reward_funcs``); reward models are checked where they
    load."""
    import rewards
    from rewards import check_reward_funcs

    for i, spec in enumerate(recipe.rewards):
        at = f"{where}: rewards[{i}] {spec.name!r}"
        if spec.name.startswith(REWARD_MODEL_PREFIX):
            continue
        if not is_user_reward(spec.name):
            if not hasattr(rewards, spec.name):
                close = difflib.get_close_matches(
                    spec.name, [n for n in dir(rewards) if not n.startswith("_")], n=2
                )
                hint = f" Did you mean {', '.join(close)}?" if close else ""
                raise RecipeFileError(
                    f"{at}: rewards has no such function.{hint} A function of yours is named file.py:function."
                )
            factory = getattr(rewards, spec.name)
            if getattr(factory, "is_reward_factory", False) and not spec.kwargs:
                import inspect

                names = [n for n in inspect.signature(factory).parameters if n != "tokenizer"]
                raise RecipeFileError(
                    f"{at} is a reward factory: give its arguments ({', '.join(names)}), e.g. "
                    f"- {{name: {spec.name}, kwargs: {{{names[0] if names else 'name'}: ...}}}}."
                )
            continue
        try:
            fn = spec.build()
            check_reward_funcs([fn], where=f"rewards[{i}]")
        except RewardImportError as error:
            raise RecipeFileError(f"{where}: {error}") from None
        except TypeError as error:
            raise RecipeFileError(f"{at}: {' '.join(str(error).split())}") from None
