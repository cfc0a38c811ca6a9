"""math-verify with a wall-clock bound that works in any thread, and a fast path for plain numbers.

Why: math-verify bounds ``parse``/``verify`` with ``signal.alarm``, which only works in the main
thread of the main interpreter. TRL therefore switches the timeouts *off* whenever its reward
function runs in another thread, so one pathological completion can hang training forever.

What we do instead, without changing a single verdict:

1. **Fast path.** When the gold answer is an integer (GSM8K style) or a simple fraction and the
   completion has nothing math-verify could extract (a plain trailing number, no answer), one
   ``\\boxed{…}`` or one anchored ``$…$`` holding a plain number (integer, thousands commas, decimal,
   ``\\frac{p}{q}``, ``\\$18``), also among GSM8K's ``$`` money signs, the verdict and the logged
   strings follow from math-verify 0.9's rules alone (:mod:`rewards.math_verify_fast`), checked against
   TRL in ``tests/rewards``. No worker process is started for these: a cold first call costs
   microseconds, not a sympy import.
2. **Bounded slow path.** Everything else goes to worker processes (:mod:`rewards._verify_worker`)
   that run TRL's exact ``parse``/``verify`` calls with math-verify's own timeouts disabled; the
   parent waits at most ``timeout_s`` per completion and kills a worker that runs over (verdict 0.0,
   what TRL's signal timeout gives in the main thread). Workers are plain subprocesses, so this works
   from threads, from processes, and from notebooks, and never imports sympy into the caller.
3. **Process pool.** Big batches of slow-path completions are spread over several workers.
4. **Verdict cache.** math-verify is deterministic; a repeated (completion, gold) pair, common inside
   a GRPO group, is answered from a bounded LRU cache (timeouts are never cached).

POSIX only (the scheduler waits on the workers' pipes with select), like math-verify's own timeout.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

from . import math_verify_fast as fast
from .math_verify_fast import Gold, parse_gold

__all__ = [
    "MathVerifyPool",
    "VerifyResult",
    "configure",
    "fast_verdict",
    "plain_int_gold",
    "verify_batch",
    "warm_up",
]

DEFAULT_TIMEOUT_S = 10.0  # per completion: TRL's main-thread budget is parse 10 s + verify 5 s
STARTUP_TIMEOUT_S = 120.0  # importing sympy in a fresh worker on a busy machine
PARALLEL_MIN_JOBS = 8  # below this, one worker (a second one costs ~1 s of imports)

# A canonical integer written as math-verify's ExprExtractionConfig reads it: parse("72") == [72, "72"].
_PLAIN_INT = re.compile(r"-?(?:0|[1-9]\d{0,14})")
_UNSEEN = object()


@dataclass(frozen=True)
class VerifyResult:
    """One verdict with the strings TRL logs through ``log_extra``."""

    reward: float | None
    gold_parsed: str
    answer_parsed: str


def plain_int_gold(solution: str) -> int | None:
    """The gold value when ``solution`` is a canonical integer string, else ``None`` (use math-verify)."""
    if isinstance(solution, str) and _PLAIN_INT.fullmatch(solution):
        return int(solution)
    return None


def fast_verdict(content: str, gold: int) -> VerifyResult | None:
    """TRL's verdict for an integer gold answer when math-verify's rules alone decide it (see
    :mod:`rewards.math_verify_fast`); ``None`` when the completion needs the real math-verify."""
    parsed_gold = parse_gold(str(gold))
    decided = fast.fast_verdict(content, parsed_gold) if parsed_gold is not None else None
    return None if decided is None else VerifyResult(decided[0], parsed_gold.parsed, decided[1])


_TIMED_OUT = VerifyResult(0.0, "[timeout]", "[timeout]")
_SKIPPED = VerifyResult(None, "[unparseable]", "[skipped]")  # TRL's row for a gold it cannot parse
_UNPARSEABLE_GOLDS = 4096


# The worker's start: Python in isolated mode (-I: no current folder, no PYTHONPATH, no user site added),
# then exactly the parent's import path, which it receives as arguments.
_WORKER_START = (
    "import runpy, sys; sys.path[:] = sys.argv[1:]; del sys.argv[1:]; "
    "runpy.run_module('rewards._verify_worker', run_name='__main__')"
)


def worker_import_path() -> list[str]:
    """The import path a worker starts with: this package's folder, then the parent's ``sys.path`` without
    the entries that mean "the current folder" (``''``, ``'.'``). ``python -m`` would put the current folder
    first, and a ``latex2sympy2_extended.py`` lying there (a freshly cloned repo) would run in every worker."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = [package_parent] + [p for p in sys.path if p not in ("", ".") and p != package_parent]
    return path


class _Worker:
    """One ``rewards._verify_worker`` process (started with the parent's clean import path) and the bytes
    read from it so far."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _WORKER_START, *worker_import_path()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self.fd = self.proc.stdout.fileno()
        self.buffer = b""
        self.ready = False

    def send(self, content: str, solution: str, profile: str = "trl") -> bool:
        try:
            self.proc.stdin.write(json.dumps([content, solution, profile]).encode("ascii") + b"\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def read_lines(self) -> list[bytes] | None:
        """Lines now available; ``None`` at end of file (the worker died)."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return lines

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


class MathVerifyPool:
    """A pool of math-verify worker processes with a per-completion wall-clock bound.

    ``run`` may be called from any thread, concurrently; idle workers are reused across calls.
    """

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S, max_workers: int | None = None) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self.max_workers = max(1, max_workers or min(os.cpu_count() or 1, 8))
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        # Gold solutions math-verify could not parse (per profile): every completion against them is skipped
        # (None), so later jobs with the same gold need no worker (TRL's own cost there is one failed parse).
        self._unparseable: OrderedDict[tuple[str, str], None] = OrderedDict()

    # -- worker bookkeeping -------------------------------------------------------------------
    def _checkout(self, n: int) -> list[_Worker]:
        with self._lock:
            if self._pid != os.getpid():  # forked: those workers belong to the parent process
                self._idle, self._pid = [], os.getpid()
            taken = []
            while self._idle and len(taken) < n:
                worker = self._idle.pop()
                if worker.alive():
                    taken.append(worker)
                else:
                    worker.kill()
        return taken + [_Worker() for _ in range(n - len(taken))]

    def _checkin(self, workers: list[_Worker]) -> None:
        with self._lock:
            for worker in workers:
                if worker.alive() and len(self._idle) < self.max_workers and self._pid == os.getpid():
                    self._idle.append(worker)
                else:
                    worker.kill()

    def _remember_unparseable(self, gold_key: tuple[str, str]) -> None:
        with self._lock:
            self._unparseable[gold_key] = None
            if len(self._unparseable) > _UNPARSEABLE_GOLDS:
                self._unparseable.popitem(last=False)

    def close(self) -> None:
        """Stop the idle workers (they also exit on their own when this process ends)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.kill()

    # -- the scheduler ------------------------------------------------------------------------
    def run(self, jobs: list[tuple[str, str]], profile: str = "trl") -> list[VerifyResult]:
        """Verdicts for ``(completion_text, solution)`` pairs, each bounded by ``timeout_s``; ``profile`` names
        the reward whose math-verify calls the worker makes (:mod:`rewards._verify_worker`).

        Jobs only go to workers that are ready; a worker still importing math-verify joins in when
        it is, so a cold start never counts against a job's time bound.
        """
        results: list[VerifyResult | None] = [None] * len(jobs)
        pending = deque()
        for index, (_, solution) in enumerate(jobs):
            if (profile, solution) in self._unparseable:
                results[index] = _SKIPPED
            else:
                pending.append(index)
        if not pending:
            return results  # type: ignore[return-value]
        n_jobs = len(pending)
        n_workers = 1 if n_jobs < PARALLEL_MIN_JOBS else min(self.max_workers, math.ceil(n_jobs / 4))
        attempts = [0] * len(jobs)
        free: list[_Worker] = []
        starting: dict[int, tuple[_Worker, float]] = {}  # fd -> (worker, startup deadline)
        busy: dict[int, tuple[_Worker, int, float]] = {}  # fd -> (worker, job index, deadline)
        spawned = 0

        def add(worker: _Worker) -> None:
            if worker.ready:
                free.append(worker)
            else:
                starting[worker.fd] = (worker, time.monotonic() + STARTUP_TIMEOUT_S)

        for worker in self._checkout(n_workers):
            add(worker)
        try:
            while pending or busy:
                while free and pending:
                    index = pending.popleft()
                    if (profile, jobs[index][1]) in self._unparseable:
                        results[index] = _SKIPPED
                        continue
                    worker = free.pop()
                    attempts[index] += 1
                    if worker.send(*jobs[index], profile):
                        busy[worker.fd] = (worker, index, time.monotonic() + self.timeout_s)
                        continue
                    worker.kill()  # died while idle (killed from outside): retry the job once
                    if attempts[index] < 2:
                        pending.appendleft(index)
                    else:
                        results[index] = _TIMED_OUT
                if pending and not (free or busy or starting):
                    if spawned >= 2 * n_workers + 2:  # workers cannot start here at all
                        for index in pending:
                            results[index] = _TIMED_OUT
                        break
                    spawned += 1
                    add(_Worker())
                    continue
                if not (busy or (pending and starting)):
                    continue
                watched = list(busy) + (list(starting) if pending else [])
                deadlines = [d for _, _, d in busy.values()] + [d for _, d in starting.values()]
                wait = max(0.0, min(deadlines) - time.monotonic())
                readable, _, _ = select.select(watched, [], [], wait)
                for fd in readable:
                    worker = busy[fd][0] if fd in busy else starting[fd][0]
                    lines = worker.read_lines()
                    if lines is None:  # crashed (e.g. killed for memory): same verdict as a timeout
                        worker.kill()
                        if fd in busy:
                            results[busy.pop(fd)[1]] = _TIMED_OUT
                        else:
                            starting.pop(fd)
                        continue
                    for line in lines:
                        message = json.loads(line)
                        if message == "ready":
                            worker.ready = True
                            if fd in starting:
                                del starting[fd]
                                free.append(worker)
                        elif fd in busy:
                            _, index, _ = busy.pop(fd)
                            results[index] = VerifyResult(*message)
                            if message[0] is None:
                                self._remember_unparseable((profile, jobs[index][1]))
                            free.append(worker)
                now = time.monotonic()
                for fd, (worker, index, deadline) in list(busy.items()):
                    if now >= deadline:
                        del busy[fd]
                        worker.kill()
                        results[index] = _TIMED_OUT
                for fd, (worker, deadline) in list(starting.items()):
                    if now >= deadline:
                        del starting[fd]
                        worker.kill()
        finally:
            for worker, _, _ in busy.values():  # only on an exception: their replies are lost
                worker.kill()
            self._checkin(free + [worker for worker, _ in starting.values()])
        return [r if r is not None else _TIMED_OUT for r in results]

    def warm_up(self, workers: int | None = None) -> None:
        """Start ``workers`` (default ``max_workers``) worker processes now and wait until they are ready."""
        n = self.max_workers if workers is None else max(1, min(workers, self.max_workers))
        pool = self._checkout(n)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        try:
            for worker in pool:
                while not worker.ready and time.monotonic() < deadline:
                    readable, _, _ = select.select([worker.fd], [], [], deadline - time.monotonic())
                    lines = worker.read_lines() if readable else []
                    if lines is None:
                        break
                    worker.ready = worker.ready or b'"ready"' in lines
        finally:
            self._checkin(pool)


_default_pool: MathVerifyPool | None = None
_default_lock = threading.Lock()


def _pool() -> MathVerifyPool:
    global _default_pool
    with _default_lock:
        if _default_pool is None:
            _default_pool = MathVerifyPool()
            atexit.register(_default_pool.close)
        return _default_pool


def configure(timeout_s: float | None = None, max_workers: int | None = None) -> MathVerifyPool:
    """Set the per-completion time bound and the number of worker processes of the shared pool."""
    global _default_pool
    old = _pool()
    new = MathVerifyPool(
        timeout_s=old.timeout_s if timeout_s is None else timeout_s,
        max_workers=old.max_workers if max_workers is None else max_workers,
    )
    with _default_lock:
        _default_pool = new
        atexit.register(new.close)
    old.close()
    return new


# math-verify is deterministic, so a slow-path verdict can be reused: GRPO groups often repeat a
# completion (low temperature, short answers). Timeouts are not cached: they depend on the machine.
_CACHE_SIZE = 8192
_CACHE_MAX_CHARS = 4096
_cache: OrderedDict[tuple[str, str, str], VerifyResult] = OrderedDict()  # (content, solution, profile)
_cache_lock = threading.Lock()


def _cached(key: tuple[str, str, str]) -> VerifyResult | None:
    with _cache_lock:
        result = _cache.get(key)
        if result is not None:
            _cache.move_to_end(key)
        return result


def _remember(key: tuple[str, str, str], result: VerifyResult) -> None:
    if result is _TIMED_OUT or len(key[0]) + len(key[1]) > _CACHE_MAX_CHARS:
        return
    with _cache_lock:
        _cache[key] = result
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def warm_up(workers: int | None = None) -> None:
    """Start the shared pool's worker processes ahead of time (each imports sympy: ~1-3 s, once)."""
    _pool().warm_up(workers)


def clear_cache() -> None:
    """Forget the remembered math-verify verdicts and unparseable golds (benchmarks measure cold runs)."""
    with _cache_lock:
        _cache.clear()
    pool = _pool()
    with pool._lock:
        pool._unparseable.clear()


PROFILES = ("trl", "open_r1", "open_r1_length", "open_r1_length_plain_gold")


def verify_batch(
    contents: list[str], solutions: list, pool: MathVerifyPool | None = None, profile: str = "trl"
) -> list[VerifyResult]:
    """Verdicts for each (completion text, gold solution) pair, bounded in time: TRL's ``accuracy_reward``
    (``profile="trl"``), open-r1's (``"open_r1"``), or the correctness inside open-r1's ``len_reward`` and
    cosine reward (``"open_r1_length"``; ``"open_r1_length_plain_gold"``: with the gold read by math-verify's
    defaults, the cosine reward's ``plain_gold=True``). The fast path decides the same answers for all three: it reads
    only plain numbers, which none of their normalisation differences (``equations``, ``boxed=True``)
    touch, against golds every profile parses alike (``tests/rewards/test_rewards_open_r1.py``)."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    results: list[VerifyResult | None] = [None] * len(contents)
    slow: dict[tuple[str, str, str], list[int]] = {}  # each distinct pair goes to math-verify once
    golds: dict[str, Gold | None] = {}
    for i, (content, solution) in enumerate(zip(contents, solutions)):
        if solution is None:
            results[i] = _SKIPPED
            continue
        gold = golds.get(solution, _UNSEEN)
        if gold is _UNSEEN:  # one GRPO group shares its gold answer: read it once
            gold = golds[solution] = parse_gold(solution)
        if gold is not None and profile == "open_r1_length" and isinstance(gold.value, int):
            results[i] = _SKIPPED  # LaTeX-only extraction finds nothing in a bare integer: parse("72") == []
            continue
        decided = fast.fast_verdict(content, gold) if gold is not None else None
        if decided is not None:
            results[i] = VerifyResult(decided[0], gold.parsed, decided[1])
            continue
        remembered = _cached((content, solution, profile))
        if remembered is None:
            slow.setdefault((content, solution, profile), []).append(i)
        else:
            results[i] = remembered
    if slow:
        keys = list(slow)
        jobs = [(content, solution) for content, solution, _ in keys]
        for key, result in zip(keys, (pool or _pool()).run(jobs, profile)):
            _remember(key, result)
            for i in slow[key]:
                results[i] = result
    return results  # type: ignore[return-value]
