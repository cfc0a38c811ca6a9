"""Share an export on the Hugging Face Hub (``grpo-kit export RUN --push-to-hub ORG/NAME [--private]``).

Three steps, so that nothing is done for an upload that cannot happen and the network is touched in one place:

1. :func:`check_can_push` before any export work: a valid repo id, not offline (``HF_HUB_OFFLINE``), a token
   (``HF_TOKEN`` or ``hf auth login``), and the token accepted by the Hub (``whoami``, one bounded request).
   Each failure is a :class:`PushError` whose one line names the fix; the export folder is left as it was.
2. :func:`upload_plan`: the files the upload would send, as (path in the repo, local file): the export folder
   (adapter or merged model, its ``README.md`` model card and reward curve) and the GGUF files asked for.
   Pure: no network, so the file list is testable offline.
3. :func:`push_to_hub`: ``create_repo`` (``exist_ok``) and one ``create_commit`` with those files
   (``huggingface_hub``). Simplification: one commit of whole files; no resumable chunked upload beyond what
   huggingface_hub (hf_xet) does itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PushError", "UploadFile", "check_can_push", "push_to_hub", "upload_plan"]


class PushError(RuntimeError):
    """The upload cannot happen; the message is one line naming the fix."""


@dataclass(frozen=True)
class UploadFile:
    path_in_repo: str
    local_path: Path

    @property
    def size_bytes(self) -> int:
        return self.local_path.stat().st_size


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").upper() in (
        "1",
        "ON",
        "YES",
        "TRUE",
    )


def check_can_push(repo_id: str, *, check_token_online: bool = True) -> str:
    """Refuse (``PushError``) an upload that cannot happen, before any work; returns the token to use.
    ``check_token_online=False`` skips the one ``whoami`` request (tests)."""
    from huggingface_hub import get_token
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise PushError(
            f"--push-to-hub {repo_id!r} is not a Hub repo id; use ORG/NAME, e.g. my-org/smollm2-grpo."
        ) from error
    if "/" not in repo_id:
        raise PushError(f"--push-to-hub {repo_id!r}: name the owner too (ORG/NAME or YOUR_USER/NAME).")
    if _offline():
        raise PushError(
            "--push-to-hub needs the network, but HF_HUB_OFFLINE=1 is set; unset it (`unset HF_HUB_OFFLINE`) "
            "and run the export again. Nothing was exported or uploaded."
        )
    token = get_token()
    if not token:
        raise PushError(
            "--push-to-hub needs a Hugging Face token with write access: run `hf auth login` or set HF_TOKEN. "
            "Nothing was exported or uploaded."
        )
    if check_token_online:
        import httpx
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError

        try:
            HfApi().whoami(token=token)
        except (OSError, httpx.HTTPError, HfHubHTTPError) as error:  # no network, a revoked token, a proxy
            raise PushError(
                f"--push-to-hub: the Hub did not accept the token or could not be reached "
                f"({type(error).__name__}); check your connection and `hf auth whoami`. Nothing was exported "
                "or uploaded."
            ) from None
    return token


def upload_plan(
    export_dir: str | os.PathLike, gguf_files: Sequence[str | os.PathLike] = ()
) -> list[UploadFile]:
    """The files an upload of ``export_dir`` (+ GGUF files, at the repo root) would send, sorted by repo path.
    The export's own manifest is sent too (the sha256 of every file, as exported)."""
    folder = Path(export_dir)
    if not (folder / "README.md").is_file():
        raise PushError(f"{folder} has no README.md model card; export it again with `grpo-kit export`.")
    files = [
        UploadFile(p.relative_to(folder).as_posix(), p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    ]
    for gguf in gguf_files:
        path = Path(gguf)
        files.append(UploadFile(path.name, path))
    names = [f.path_in_repo for f in files]
    if len(set(names)) != len(names):
        raise PushError(f"two files would land on the same name in the repo: {sorted(names)}")
    return sorted(files, key=lambda f: f.path_in_repo)


def push_to_hub(
    files: Sequence[UploadFile],
    repo_id: str,
    *,
    token: str,
    private: bool = False,
    message: str | None = None,
) -> str:
    """Create ``repo_id`` (if needed) and upload ``files`` in one commit; returns the repo URL."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(token=token)
    url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    api.create_commit(
        repo_id,
        operations=[CommitOperationAdd(f.path_in_repo, f.local_path) for f in files],
        commit_message=message or "Upload a grpo-kit export (model card, weights)",
        repo_type="model",
    )
    return str(url)
