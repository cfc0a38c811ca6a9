"""Install the pinned torch for `make setup`: the CPU build from PyTorch's own index when it is reachable.

    python scripts/install_torch.py torch==2.13.0 -c constraints.txt            # what `make setup` runs
    python scripts/install_torch.py torch==2.13.0 --dry-run                     # print the pip command only
    python scripts/install_torch.py torch==2.13.0 --index ""                    # plain pin (GPU machines)
    python scripts/install_torch.py torch==2.13.0 --index https://download.pytorch.org/whl/cu130

Why: on the public index (PyPI) the Linux x86_64 wheel of torch is the CUDA build (about 500 MiB plus the
CUDA toolkit, cuDNN, NCCL and Triton wheels). PyTorch publishes the CPU build (``2.13.0+cpu``, which
``torch==2.13.0`` matches) on https://download.pytorch.org/whl/cpu. So:

* the index answers within ``--timeout`` seconds -> ``pip install torch==2.13.0 --index-url <index>
  --extra-index-url https://pypi.org/simple`` (torch from the index, anything else it lacks from PyPI);
* it does not (offline, a firewall, a mirror-only machine) -> the plain pin, ``pip install torch==2.13.0``,
  with a one-line note: pip's own configuration decides (a local CPU wheel through pip's ``find-links``,
  as on this project's CI machine, or PyPI's default build);
* ``--index ""`` skips the check: the plain pin, PyPI's default (the CUDA build on Linux x86_64).

Simplification: "reachable" means an HTTP answer for ``<index>/torch/``; a proxy or a certificate that
pip would accept but urllib would not reads as unreachable (and falls back to the plain pin, with the note).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import urllib.error
import urllib.request

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PYPI = "https://pypi.org/simple"


def index_reachable(index: str, timeout: float = 5.0) -> bool:
    """True when ``<index>/torch/`` answers with HTTP 2xx within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(index.rstrip("/") + "/torch/", timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def pip_command(
    requirement: str, pip_args: list[str], index: str, reachable: bool, python: str = sys.executable
) -> tuple[list[str], str | None]:
    """The pip command to run and the note to print (``None``: nothing to say)."""
    cmd = [python, "-m", "pip", "install", requirement, *pip_args]
    if not index:
        return cmd, None
    if reachable:
        return [*cmd, "--index-url", index, "--extra-index-url", PYPI], None
    return cmd, (
        f"note: {index} is not reachable; installing the plain pin {requirement} with pip's own "
        "configuration (a local CPU wheel if pip finds one, else PyPI's default: the CUDA build on Linux x86_64)."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requirement", help="the torch pin, e.g. torch==2.13.0")
    parser.add_argument("--index", default=CPU_INDEX, help=f'the torch index (default {CPU_INDEX}; "": none)')
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the index")
    parser.add_argument("--dry-run", action="store_true", help="print the pip command, run nothing")
    args, pip_args = parser.parse_known_args(argv)
    reachable = bool(args.index) and index_reachable(args.index, args.timeout)
    cmd, note = pip_command(args.requirement, pip_args, args.index, reachable)
    if note:
        print(note, file=sys.stderr)
    print("+ " + " ".join(cmd), flush=True)
    if args.dry_run:
        return 0
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
