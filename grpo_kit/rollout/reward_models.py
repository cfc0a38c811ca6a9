"""Reward *models*: a sequence-classification model whose logit is the reward, on every path, as TRL 1.15.

TRL's ``GRPOTrainer(reward_funcs=...)`` takes, besides functions, a model id, a local path or a loaded
``AutoModelForSequenceClassification`` (with ``reward_processing_classes``, its tokenizer). This module
turns each into a :class:`RewardModelFunc`: an ordinary reward function (``fn(prompts, completions,
**kwargs) -> list[float]``) that every grpo-kit room calls the usual way (``rewards.call_reward_funcs``:
the standalone loop, ``evaluate``, preflight), and that still carries the model and tokenizer so the TRL
path hands *them* to ``GRPOTrainer`` (``unwrap_for_trl``), which then scores them itself.

Scoring is TRL's ``_calculate_rewards`` for an ``nn.Module``: the text is ``prompt + completion`` (chat
prompts: the tokenizer's chat template over prompt + completion messages, ``tokenize=False``), tokenized
right-padded without special tokens, run in eval mode under ``torch.inference_mode()``; the reward is
``logits[:, 0]``. Loading is TRL's too: ``AutoModelForSequenceClassification.from_pretrained(id,
num_labels=1)``, the tokenizer from the same id, ``pad_token = eos_token`` when missing, and the model's
``pad_token_id`` set to the tokenizer's (the model reads the logit at the last non-pad token).

Stricter than TRL: a model that is not a sequence-classification model (a causal LM object, or a checkpoint
whose ``config.architectures`` names no ``…ForSequenceClassification``, whose head would be random) is
refused before training with a message naming the fix. Simplification: texts are scored in batches of
``batch_size`` (TRL: all at once; equal up to float rounding when a batch is split).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["RewardModelFunc", "as_reward_funcs", "is_reward_model", "load_reward_model", "unwrap_for_trl"]


def is_reward_model(value: Any) -> bool:
    """A model id, a local path, or a ``torch.nn.Module`` given where reward functions go."""
    return isinstance(value, (str, os.PathLike, torch.nn.Module, RewardModelFunc))


def _model_name(model: torch.nn.Module) -> str:
    """TRL's name for the reward (``rewards/<name>/mean``): the last part of the model's id."""
    config = getattr(model, "config", None)
    name = getattr(config, "_name_or_path", "") or type(model).__name__
    return str(name).rstrip("/").split("/")[-1]


def _check_sequence_classification(model: Any, where: str) -> None:
    if not isinstance(model, torch.nn.Module) or not type(model).__name__.endswith(
        "ForSequenceClassification"
    ):
        raise TypeError(
            f"{where} is a {type(model).__name__}, not a sequence-classification model: a reward model must "
            "output one logit per text. Load it with transformers.AutoModelForSequenceClassification"
            ".from_pretrained(..., num_labels=1), or pass a reward function."
        )


def load_reward_model(spec: str | os.PathLike, *, where: str = "reward model") -> torch.nn.Module:
    """``AutoModelForSequenceClassification.from_pretrained(spec, num_labels=1)`` after checking its config."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    config = AutoConfig.from_pretrained(spec)
    architectures = list(getattr(config, "architectures", None) or [])
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise TypeError(
            f"{where} {str(spec)!r} is a {', '.join(architectures)} checkpoint, not a sequence-classification "
            "reward model: its classification head would be random. Name a reward model "
            "(…ForSequenceClassification) or pass a reward function."
        )
    return AutoModelForSequenceClassification.from_pretrained(spec, num_labels=1)


class RewardModelFunc:
    """A reward function that scores ``prompt + completion`` with a sequence-classification model's logit."""

    def __init__(
        self,
        model: torch.nn.Module,
        processing_class: Any = None,
        *,
        batch_size: int = 32,
        chat_template_kwargs: dict[str, Any] | None = None,
        where: str = "reward model",
    ) -> None:
        _check_sequence_classification(model, where)
        if processing_class is None:
            from transformers import AutoTokenizer

            processing_class = AutoTokenizer.from_pretrained(model.config._name_or_path)
        if processing_class.pad_token_id is None:
            processing_class.pad_token = processing_class.eos_token
        # The model reads the logit at the last non-pad token: it must know the tokenizer's pad id (TRL).
        model.config.get_text_config().pad_token_id = processing_class.pad_token_id
        self.model = model.eval()
        self.processing_class = processing_class
        self.batch_size = batch_size
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.__name__ = _model_name(model)

    def texts(self, prompts: Sequence[Any], completions: Sequence[Any]) -> list[str]:
        """What the model reads: TRL's rendering of each prompt + completion."""
        if prompts and isinstance(prompts[0], list):  # conversational
            return [
                self.processing_class.apply_chat_template(
                    list(p) + list(c), tokenize=False, **self.chat_template_kwargs
                )
                for p, c in zip(prompts, completions, strict=True)
            ]
        return [p + c for p, c in zip(prompts, completions, strict=True)]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        texts = self.texts(prompts, completions)
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()  # no dropout: a reward is a measurement
        scores: list[float] = []
        try:
            for start in range(0, len(texts), self.batch_size):
                encoded = self.processing_class(
                    text=texts[start : start + self.batch_size],
                    return_tensors="pt",
                    padding=True,
                    padding_side="right",
                    add_special_tokens=False,
                ).to(device)
                with torch.inference_mode():
                    logits = self.model(**encoded).logits  # (b, num_labels)
                scores.extend(logits[:, 0].float().tolist())
        finally:
            self.model.train(was_training)
        return scores

    def to(self, device: Any) -> RewardModelFunc:
        self.model.to(device)
        return self


def as_reward_funcs(
    funcs: Any,
    reward_processing_classes: Any = None,
    *,
    where: str = "reward_funcs",
    chat_template_kwargs: dict[str, Any] | None = None,
) -> list[Callable]:
    """``reward_funcs`` as TRL accepts them (functions, model ids, paths, models) -> reward functions.

    ``reward_processing_classes``: one tokenizer or a list aligned with ``funcs`` (``None`` entries, and the
    entries of functions, are ignored; a model's ``None`` loads the tokenizer of its id), as TRL.
    Refuses a model that is not a sequence-classification model, then checks the functions
    (``rewards.check_reward_funcs``).
    """
    from rewards import check_reward_funcs

    single = callable(funcs) or isinstance(funcs, (str, os.PathLike))  # a model is callable too
    items = [funcs] if single else list(funcs)
    if reward_processing_classes is None:
        classes = [None] * len(items)
    elif isinstance(reward_processing_classes, (list, tuple)):
        classes = list(reward_processing_classes)
    else:
        classes = [reward_processing_classes]
    if len(classes) != len(items):
        raise ValueError(
            f"{len(classes)} reward_processing_classes for {len(items)} reward functions; give one per entry "
            "(None for reward functions), as TRL."
        )
    converted: list[Any] = []
    for i, (item, processing_class) in enumerate(zip(items, classes, strict=True)):
        at = where if single else f"{where}[{i}]"
        if isinstance(item, (str, os.PathLike)):
            item = load_reward_model(item, where=at)
        if isinstance(item, torch.nn.Module):
            item = RewardModelFunc(
                item, processing_class, where=at, chat_template_kwargs=chat_template_kwargs
            )
        converted.append(item)
    return check_reward_funcs(converted, where=where)


def unwrap_for_trl(funcs: Sequence[Any]) -> tuple[list[Any], list[Any] | None]:
    """``(reward_funcs, reward_processing_classes)`` for ``GRPOTrainer``: each :class:`RewardModelFunc`
    becomes its model and tokenizer again, so TRL scores it itself; ``None`` when there is no model."""
    models = [isinstance(f, RewardModelFunc) for f in funcs]
    unwrapped = [f.model if is_model else f for f, is_model in zip(funcs, models, strict=True)]
    if not any(models):
        return unwrapped, None
    classes = [f.processing_class if is_model else None for f, is_model in zip(funcs, models, strict=True)]
    return unwrapped, classes
