"""Can the Hugging Face Hub be used right now? Decided once, never by waiting on a timeout.

``HF_HUB_OFFLINE=1`` (or ``TRANSFORMERS_OFFLINE`` / ``HF_DATASETS_OFFLINE``) means no, on every
call. Otherwise one TCP connect to the Hub endpoint with a short timeout decides for the whole
process: an offline machine answers in milliseconds (no route, no DNS), so loaders fall back
to local data at once instead of sitting through HTTP retries.
"""

from __future__ import annotations

import functools
import os
import socket
from urllib.parse import urlparse

_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
PROBE_TIMEOUT_S = 1.5


def offline_vars() -> list[str]:
    """The ``*_OFFLINE`` environment variables that ask for offline mode (their names)."""
    return [
        name
        for name in _OFFLINE_VARS
        if os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
    ]


def offline_by_env() -> bool:
    """True when an ``*_OFFLINE`` environment variable asks for offline mode."""
    return bool(offline_vars())


@functools.lru_cache(maxsize=1)
def _endpoint_answers() -> bool:
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (80 if parsed.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def hub_available() -> bool:
    """Whether the Hub can be used: no offline variable set and the endpoint answered (probed once)."""
    if offline_by_env():
        return False
    return _endpoint_answers()
