"""Held-out rows, owned by the recipe and disjoint from its training rows by construction, and the one
evaluation of a recipe on them (``grpo-kit train``, ``grpo-kit eval``, lessons 6 and 8, the calculator
benchmark).

Where a recipe's evaluation rows come from (:func:`held_out_source`), in this order:

1. ``"test split"`` -- the loader's own held-out split: the calculator tasks' ``test`` questions
   (generated apart from the training ones), and GSM8K's / smoltldr's ``test`` split on the Hub;
2. ``"generated"`` -- synthetic recipes (``dataset_source="synthetic"``) get generated rows: synthetic
   GSM8K from a seed of its own (:data:`HELD_OUT_SEEDS`, lesson 6's held-out seed), synthetic TL;DR posts
   from the same seeded stream *after* the ``dataset_size`` rows training takes (a longer list starts
   with the shorter one, so training never generates them; the README's main-job figures were measured
   on them);
3. ``"reserved"`` -- anything else (a local file, DeepMath, which has no test split): the last
   :func:`reserved_count` rows of the split are set aside *before* training, and
   :func:`training_dataset` leaves them out. They never take every row: a split with fewer than twice as
   many rows as are reserved (it would train on fewer rows than it evaluates, or on none) is refused, in one
   line naming its size and the fix (carve a share with ``held_out``, or fewer ``eval_prompts``);
4. your own rows (loader ``"prompts"``, a recipe file) with ``held_out``: ``"named split"`` -- another split
   of the source, refused when it shares a prompt with the training split -- or ``"carved"`` -- a seeded
   fraction of the rows, set apart by ``datasets_prep.load_prompts`` before training sees them (at least one
   row is left to train on).
   :func:`held_out_summary` records which in run.json.

A named split is the test set you chose, so it is evaluated whole up to the run's ``eval_prompts`` (the
stated limit, 32 by default; ``--eval-prompts N`` moves it): a 20-row split is evaluated on its 20 rows, and
a 40-row split on its first 32, which run.json (``held_out``: ``rows``, ``split_rows``) and the run's summary
say (:func:`held_out_cut`: "held-out: 32 of 40 rows of the test split (eval_prompts)").

Whatever the source, held-out rows are rendered without the recipe's curriculum (``Recipe.held_out_kwargs``:
a fading worked example is on every held-out row, as on the first training rows), so a row's prompt never
depends on where it sits in a list. A candidate row whose prompt equals a training prompt (by content; with a
curriculum, whose question does) is dropped, so a run never evaluates on a row it trains on. When fewer rows remain than were asked for, :func:`held_out_rows`
says so (one ``UserWarning``) and returns fewer.

A recipe with ``transfer_eval`` also has a second held-out set, :func:`transfer_rows`: a set shipped with
the package (``datasets_prep.shipped``), written apart from the generator the training rows come from,
rendered through the recipe's own loader (the instruction and chat template its training rows get, without
the curriculum, then the set's own ``loader_kwargs``: gsm8k-handwritten is asked without the worked example)
and held to the same rule (a row whose prompt is a training prompt is dropped, and said).

:func:`evaluate_held_out` evaluates a model on those rows with the recipe's completion budget, chat
template arguments and reward weights, greedy (plus ``k`` seeded samples): a recipe with tools is rolled
out with its tools (``grpo_kit.rollout.tool_rollout``, the multi-turn loop lesson 8 uses).
"""

from __future__ import annotations

import hashlib
import json
import sys
import warnings
from typing import Any

__all__ = [
    "HELD_OUT_SEEDS",
    "HELD_OUT_SPLITS",
    "check_reserve_fits",
    "evaluate_held_out",
    "held_out_cut",
    "held_out_rows",
    "held_out_source",
    "held_out_summary",
    "prompt_key",
    "reserved_count",
    "training_dataset",
    "transfer_rows",
]

#: Loaders whose own held-out split is used when the recipe reads the dataset's Hub id (or generates it).
HELD_OUT_SPLITS: dict[str, str] = {
    "tool_tasks": "test",
    "environment_tasks": "test",
    "gsm8k": "test",
    "smoltldr": "test",
    "shapes": "test",  # datasets_prep.images: pictures drawn from another seed
}
#: Synthetic datasets whose held-out rows are generated from a seed of their own (training rows use seed 0).
HELD_OUT_SEEDS: dict[str, int] = {"gsm8k": 4321}


def prompt_key(prompt: Any) -> str:
    """A prompt's content as one string (conversational prompts as JSON), for disjointness checks."""
    return prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False, sort_keys=True)


def held_out_source(recipe: Any) -> str:
    """``"test split"``, ``"generated"``, ``"reserved"``, or for your own rows (loader ``"prompts"``) with a
    ``held_out`` in ``dataset_kwargs``: ``"named split"`` or ``"carved"``: where the recipe's held-out rows
    come from."""
    held_out = recipe.dataset_kwargs.get("held_out") if recipe.dataset == "prompts" else None
    if held_out:
        return "named split" if "split" in held_out else "carved"
    if recipe.dataset in ("tool_tasks", "environment_tasks"):  # generated: their own test split
        return "test split"
    if recipe.dataset_source == "synthetic":
        return "generated"
    if recipe.dataset_source is None and recipe.dataset in HELD_OUT_SPLITS:
        return "test split"
    return "reserved"


def reserved_count(recipe: Any) -> int:
    """Rows set aside before training when the recipe has no held-out split: its ``eval_prompts`` (32 when
    evaluation is off, so `grpo-kit eval` still has rows later)."""
    return recipe.eval_prompts or 32


def _whole_split(recipe: Any, dataset_kwargs: Any = None):
    """Every row of the split (dataset_size not applied); ``dataset_kwargs`` as in ``Recipe.load_dataset``."""
    return recipe.load_dataset(size=sys.maxsize, dataset_kwargs=dataset_kwargs)


def training_dataset(recipe: Any):
    """The rows the run trains on: ``recipe.load_dataset()``, less the reserved rows when the held-out
    source is ``"reserved"`` (they are the split's last rows, so the first training rows stay the same). A
    split too small to reserve them from is refused (:func:`check_reserve_fits`)."""
    if held_out_source(recipe) != "reserved":
        return recipe.load_dataset()
    rows = _whole_split(recipe)
    check_reserve_fits(recipe, len(rows))
    keep = len(rows) - reserved_count(recipe)
    if recipe.dataset_size is not None:
        keep = min(keep, recipe.dataset_size)
    return rows.select(range(keep))


def check_reserve_fits(recipe: Any, n_rows: int) -> None:
    """``ValueError`` in one line naming the size and the fix when the reserved rows (:func:`reserved_count`)
    would leave fewer rows to train on than they are: a 20-row file with the default 32 would train on none."""
    reserved = reserved_count(recipe)
    if n_rows >= 2 * reserved:
        return
    where = f"recipe {recipe.name!r}: its dataset has {n_rows} row{'s' * (n_rows != 1)}"
    if n_rows < 2:
        raise ValueError(f"{where}; a run needs at least 2 (one to train on, one to evaluate): add rows.")
    fits = max(1, n_rows // 5)
    fix = f"pass --set eval_prompts={fits} (or set it in the recipe), or use more rows"
    if recipe.dataset == "prompts":  # your own rows: a recipe file can carve a share or name a split instead
        fix = (
            f"carve a share in the recipe file's dataset, held_out: {{fraction: 0.2, seed: 0}}, or name a test "
            f"split, held_out: {{split: test}}, or set eval_prompts: {fits} (--set eval_prompts={fits})"
        )
    raise ValueError(
        f"{where}, too few to hold out its last {reserved} for evaluation (eval_prompts) and train on at least "
        f"as many; {fix}."
    )


def _candidates(recipe: Any, n: int):
    import datasets_prep
    from grpo_kit.recipes.recipe import SYNTHETIC_ROWS

    source = held_out_source(recipe)
    if source == "generated":
        make_rows = getattr(datasets_prep, SYNTHETIC_ROWS[recipe.dataset])
        extra = 2 * n + 16  # room for rows that repeat a training prompt
        if recipe.dataset in HELD_OUT_SEEDS:
            raw = make_rows(extra, seed=HELD_OUT_SEEDS[recipe.dataset])
        else:  # the stream after the rows training takes (Recipe.load_dataset: seed 0, dataset_size or 64)
            size = recipe.dataset_size or 64
            raw = make_rows(size + extra, seed=0)[size:]
        return recipe.load_dataset(source=raw, size=len(raw), dataset_kwargs=recipe.held_out_kwargs)
    if source == "test split":
        from grpo_kit.recipes.recipe import DATASET_LOADERS

        loader = getattr(datasets_prep, DATASET_LOADERS[recipe.dataset])
        kwargs = {**recipe.dataset_kwargs, **recipe.held_out_kwargs}
        return loader(split=HELD_OUT_SPLITS[recipe.dataset], source=None, **kwargs)
    # your own rows (datasets_prep.load_prompts): the held-out part, not the training one
    if source in ("named split", "carved"):
        return _whole_split(recipe, {**recipe.held_out_kwargs, "part": "held_out"})
    rows = _whole_split(recipe, recipe.held_out_kwargs)
    reserved = min(reserved_count(recipe), len(rows))
    return rows.select(range(len(rows) - reserved, len(rows)))


def _keys(prompt: Any, recipe: Any) -> set[str]:
    """What a prompt is compared by: its content (:func:`prompt_key`) and, for a recipe with a curriculum
    (``Recipe.curriculum``), its last turn too: the same question is rendered with or without a fading worked
    example by its place in the dataset, so the whole prompt alone would not catch it."""
    keys = {prompt_key(prompt)}
    if recipe.curriculum and isinstance(prompt, list) and prompt:
        keys.add(prompt_key(prompt[-1:]))
    return keys


def _image_key(row: Any) -> str:
    """The pixels of a row's image(s) as a digest ("" without one): image tasks ask one question of many
    pictures, so a row is its prompt *and* its picture."""
    images = row.get("images") or ([row["image"]] if row.get("image") is not None else [])
    digest = hashlib.sha256()
    for image in images:
        digest.update(f"{image.mode}{image.size}".encode())
        digest.update(image.tobytes())
    return digest.hexdigest() if images else ""


def _row_keys(row: Any, recipe: Any) -> set[str]:
    image = _image_key(row)
    return {key + image for key in _keys(row["prompt"], recipe)}


def _unseen_rows(candidates: Any, recipe: Any, training: Any, n: int) -> list[dict[str, Any]]:
    """The first ``n`` of ``candidates`` whose prompt (with its image, if any) is no training prompt
    (``training``: default :func:`training_dataset`) and no earlier candidate's: the rule every held-out set
    keeps."""
    training = training if training is not None else training_dataset(recipe)
    if "image" in training.column_names or "images" in training.column_names:
        seen = set().union(*(_row_keys(row, recipe) for row in training))
    else:
        seen = set().union(*(_keys(p, recipe) for p in training["prompt"]))
    if held_out_source(recipe) == "named split":
        _refuse_overlap(recipe, candidates, seen)
    rows: list[dict[str, Any]] = []
    for row in candidates:
        keys = _row_keys(row, recipe)
        if keys & seen:
            continue  # a training prompt is never a held-out prompt
        seen |= keys  # nor twice a held-out prompt
        rows.append(dict(row))
        if len(rows) == n:
            break
    return rows


def _refuse_overlap(recipe: Any, candidates: Any, training_keys: set[str]) -> None:
    """A held-out split named by the user that shares prompts with the training split is refused: it would
    measure memory, not learning (a split of our own loaders' drops the shared rows instead)."""
    shared = sum(bool(_row_keys(row, recipe) & training_keys) for row in candidates)
    if shared:
        split = recipe.dataset_kwargs["held_out"]["split"]
        raise ValueError(
            f"recipe {recipe.name!r}: held_out split {split!r} shares {shared} of its {len(candidates)} prompts "
            f"with the training split {recipe.dataset_split!r}; name a split with other rows, or carve one from "
            "the training data: held_out: {fraction: 0.2, seed: 0}."
        )


def _distinct_rows(candidates: Any, recipe: Any) -> int:
    """How many of ``candidates`` differ in prompt (and image): the rows a split can offer for evaluation."""
    seen: set[str] = set()
    count = 0
    for row in candidates:
        keys = _row_keys(row, recipe)
        if not keys & seen:
            seen |= keys
            count += 1
    return count


def held_out_summary(recipe: Any, evaluated: int | None = None) -> dict[str, Any]:
    """Where the held-out rows came from, for run.json: the source and, for your own rows, the split or the
    fraction and seed that carved them. A named split with ``evaluated`` (the rows a run evaluated) also
    records ``rows`` (that count) and ``split_rows`` (its distinct rows): :func:`held_out_cut` reads them."""
    summary: dict[str, Any] = {"source": held_out_source(recipe)}
    if summary["source"] in ("named split", "carved"):
        summary.update(recipe.dataset_kwargs["held_out"])
        if summary["source"] == "named split" and evaluated:
            summary["rows"] = evaluated
            summary["split_rows"] = _distinct_rows(_candidates(recipe, evaluated), recipe)
    elif summary["source"] == "reserved":
        summary["rows"] = reserved_count(recipe)
    return summary


def held_out_cut(summary: Any) -> str | None:
    """The line saying a named held-out split was not evaluated whole (None when it was, or for other
    sources), from :func:`held_out_summary`'s record: "held-out: 32 of 40 rows of the test split
    (eval_prompts)", and how to evaluate it whole."""
    if not summary or summary.get("source") != "named split":
        return None
    rows, split_rows = summary.get("rows"), summary.get("split_rows")
    if rows is None or split_rows is None or rows >= split_rows:
        return None
    return (
        f"held-out: {rows} of {split_rows} rows of the {summary['split']} split (eval_prompts); "
        f"--eval-prompts {split_rows} evaluates it whole"
    )


def held_out_rows(recipe: Any, n: int, *, training: Any = None) -> list[dict[str, Any]]:
    """Up to ``n`` evaluation rows (``{"prompt": ..., <columns>...}``) that share no prompt with the
    training rows (``training``: default :func:`training_dataset`). Fewer than ``n``: a ``UserWarning``, unless
    they are a whole named split (evaluated whole, as asked)."""
    if n <= 0:
        return []
    candidates = _candidates(recipe, n)
    rows = _unseen_rows(candidates, recipe, training, n)
    whole = held_out_source(recipe) == "named split" and len(rows) == len(candidates)
    if len(rows) < n and not whole:  # a named split smaller than n is evaluated whole, as asked
        warnings.warn(
            f"recipe {recipe.name!r}: {n} held-out prompts asked for, {len(rows)} exist that the run does "
            f"not train on ({held_out_source(recipe)}); evaluating on {len(rows)}.",
            UserWarning,
            stacklevel=2,
        )
    return rows


def transfer_rows(recipe: Any, n: int | None = None, *, training: Any = None) -> list[dict[str, Any]]:
    """The recipe's second held-out set (``transfer_eval``) as evaluation rows: the first ``n`` rows of the
    shipped set (``None``: every row; a run passes the held-out count, so ``--eval-prompts 4`` stays quick and
    both sets weigh the same), rendered as the held-out rows are (``recipe.load_dataset`` without the
    curriculum) with the set's ``loader_kwargs`` on top (``TransferSet``: gsm8k-handwritten asks its problems
    with the system prompt alone, no worked example), less any whose prompt is a training prompt (``training``: default :func:`training_dataset`; a ``UserWarning`` names how
    many). ``[]`` without one, or for ``n`` <= 0."""
    if recipe.transfer_eval is None or (n is not None and n <= 0):
        return []
    from datasets_prep.shipped import TRANSFER_SETS, transfer_set_rows

    rendering = {**recipe.held_out_kwargs, **TRANSFER_SETS[recipe.transfer_eval].loader_kwargs}
    if TRANSFER_SETS[recipe.transfer_eval].file is None:  # drawn by the recipe's loader, as loader_kwargs say
        raw = list(recipe.load_dataset(size=sys.maxsize, dataset_kwargs=rendering))[:n]  # images decoded
    else:
        raw = transfer_set_rows(recipe.transfer_eval)[:n]
    candidates = recipe.load_dataset(source=raw, size=len(raw), dataset_kwargs=rendering)
    rows = _unseen_rows(candidates, recipe, training, len(raw))
    if len(rows) < len(raw):
        warnings.warn(
            f"recipe {recipe.name!r}: {len(raw) - len(rows)} of the {len(raw)} rows of held-out set "
            f"{recipe.transfer_eval!r} are training prompts (or repeat a row); evaluating on {len(rows)}.",
            UserWarning,
            stacklevel=2,
        )
    return rows


#: Prompts decoded together by an evaluation (length-sorted, greedy; the answers do not depend on it). On the
#: 2-core CPU, the main job's 64 prompts (both held-out sets) decoded in 150 s at 32 a batch, 164 s at 64, 176 s at 8
#: (docs/benchmarks.md, "Where the main job's time goes"); the main job's sets are 32 prompts each: one batch.
EVALUATION_BATCH = 32


def evaluate_held_out(
    recipe: Any,
    model: Any,
    tokenizer: Any,
    reward_funcs: list,
    rows: list[dict],
    *,
    k: int = 1,
    seed: int = 0,
    generate_fn: Any = None,
):
    """``grpo_kit.evaluation.evaluate`` on ``rows`` with the recipe's decoding (``Decoding.from_training``:
    completion budget, sampling filters for the ``k`` samples, chat template arguments) and reward
    weights; greedy, so before and after differ only because the weights did. A recipe with ``tools`` is
    evaluated with them: multi-turn rollouts (``tool_rollout.tool_generate``) with the recipe's
    ``max_tool_calling_iterations``, on the recipe's tool template; a recipe with an ``environment`` plays
    one episode per row as TRL's trainer does, scored by its ``get_reward`` (weight 1) too. ``seed``: where the k samples start.
    ``generate_fn`` replaces the recipe's own generation (``unsloth_path.vllm_generate``: the model's vLLM
    engine), with the same decoding."""
    from grpo_kit.evaluation import evaluate
    from grpo_kit.rollout.generation import Decoding
    from grpo_kit.rollout.tool_rollout import recipe_generate, recipe_reward_funcs

    funcs, weights = recipe_reward_funcs(recipe, reward_funcs)  # + each environment's get_reward
    return evaluate(
        model,
        tokenizer,
        rows,
        funcs,
        num_prompts=len(rows),
        k=k,
        reward_weights=weights,
        decoding=Decoding.from_training(recipe.training, seed=seed, batch_size=EVALUATION_BATCH),
        generate_fn=generate_fn or recipe_generate(recipe, tokenizer),
    )
