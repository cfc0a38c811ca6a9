"""Credential redaction: no token in any file a run writes, in any configuration hash, in any printed line.

A field holds a credential by TRL's (TrainingArguments') rule: its name ends in ``_token`` (``hub_token``), or it
is ``token`` itself, the Hub's keyword (:func:`is_credential_field`). :func:`jsonable_config` turns a
configuration (dataclasses, dicts, paths, enums, functions ...) into plain JSON data, the same on every run, with
each such value replaced by :data:`CREDENTIAL_PLACEHOLDER`: every configuration a run stores (``run.json``,
``run_config.json``, the model card) goes through it. :func:`without_credentials` leaves those fields out
altogether: what a configuration hash or a comparison of two configurations reads
(``grpo_kit.artifacts.checkpoint.config_hash``, ``config_diff``), so a token neither changes the hash nor makes two
runs differ. Plain Python and numpy: no torch at import.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from typing import Any

import numpy as np

__all__ = ["CREDENTIAL_PLACEHOLDER", "is_credential_field", "jsonable_config", "without_credentials"]

#: What a credential's value becomes in every file a run writes (TrainingArguments writes ``<HUB_TOKEN>``).
CREDENTIAL_PLACEHOLDER = "<redacted>"


def is_credential_field(name: Any) -> bool:
    """TRL's (TrainingArguments') rule for a field that holds a credential: its name ends in ``_token``
    (``hub_token``); also ``token`` itself, the Hub's keyword (``model_init_kwargs={"token": ...}``). Such
    values are never written to a run folder and never enter a configuration hash."""
    return isinstance(name, str) and (name == "token" or name.endswith("_token"))


def _redacted(key: Any, value: Any) -> Any:
    return (
        CREDENTIAL_PLACEHOLDER if is_credential_field(key) and value is not None else jsonable_config(value)
    )


def without_credentials(value: Any) -> Any:
    """``value`` (JSON data) with every credential field left out, at any depth: what a hash or a comparison
    of two configurations reads, so a token neither changes the hash nor makes two runs differ."""
    if isinstance(value, dict):
        return {k: without_credentials(v) for k, v in value.items() if not is_credential_field(k)}
    if isinstance(value, list):
        return [without_credentials(v) for v in value]
    return value


def jsonable_config(value: Any) -> Any:
    """``value`` as plain JSON data, the same on every run: dataclasses -> dicts, paths -> strings, tuples and
    sets -> lists, enums -> their value, functions -> ``module.qualname``; anything else -> ``repr``.
    Credential fields (:func:`is_credential_field`) become :data:`CREDENTIAL_PLACEHOLDER`: every file a run
    writes goes through here, and none may hold a token."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _redacted(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _redacted(k, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable_config(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable_config(v) for v in value), key=repr)
    if isinstance(value, enum.Enum):
        return jsonable_config(value.value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, np.generic):
        return value.item()
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    return repr(value)
