"""The lessons as a learner opens them: ``marimo run`` in headless Chromium, driven by playwright.

playwright cannot download its own browsers here (no network but PyPI), so it drives the system's
Chromium (``apt-get install -y chromium``; ``GRPO_KIT_CHROMIUM`` names another binary). Without one,
every test of this folder skips with that command as the reason; ``.ci/run`` installs it, so CI runs
them. Lessons run in their small/CPU settings (no CUDA here), and buttons that train stay unclicked
except where a test presses one on purpose.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LESSONS = {p.stem[:2]: p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))}
INSTALL_HINT = "apt-get install -y chromium (Debian/Ubuntu) or set GRPO_KIT_CHROMIUM to a Chromium binary"

# TeX that reached the page as text instead of being typeset by KaTeX.
RAW_TEX = re.compile(
    r"\$\$|\\(?:frac|dfrac|mathcal|mathrm|hat|operatorname|sum|beta|pi|rho|varepsilon|log|text|Big|big|min"
    r"|cdot|approx|left|right|sigma|mathbb|theta|epsilon|alpha|tfrac|le|ge|in|times)\b"
)


def chromium_path() -> str | None:
    """The system Chromium playwright should launch, or None."""
    explicit = os.environ.get("GRPO_KIT_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    ours = [item for item in items if Path(str(item.fspath)).is_relative_to(here)]
    for item in ours:
        item.add_marker(pytest.mark.browser)
    reason = None
    try:
        import playwright  # noqa: F401
    except ImportError:
        reason = 'playwright is not installed: pip install -e ".[dev]" -c constraints.txt'
    if reason is None and chromium_path() is None:
        reason = f"no Chromium found: {INSTALL_HINT}"
    if reason:
        for item in ours:
            item.add_marker(pytest.mark.skip(reason=reason))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _lesson_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GRPO_KIT_LESSON_SIZE"] = "ci"  # heavy lessons (6) run their few-step CI size
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        MPLBACKEND="Agg",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),
    )
    for name in [k for k in env if k.startswith("PYTEST_")]:  # marimo changes behaviour under PYTEST_*
        env.pop(name)
    return env


@dataclass
class LessonPage:
    """One lesson served by ``marimo run`` and opened in a browser tab."""

    number: str
    page: object
    console_errors: list[str] = field(default_factory=list)

    def save_first_screen(self) -> None:
        """``make screenshots`` (GRPO_KIT_SCREENSHOTS=docs/img): the lesson's first screen as lesson_NN.png."""
        folder = os.environ.get("GRPO_KIT_SCREENSHOTS")
        if folder:
            self.page.evaluate("window.scrollTo(0, 0)")
            Path(folder).mkdir(parents=True, exist_ok=True)
            path = Path(folder) / f"lesson_{self.number}.png"
            self.page.screenshot(path=str(path))
            from PIL import Image

            # 256 colours: the README's images stay small (~3x smaller) and text stays crisp.
            Image.open(path).convert("RGB").quantize(colors=256).save(path, optimize=True)

    def text(self) -> str:
        return self.page.inner_text("body")

    def prose(self) -> str:
        """The visible text without code, tables' code cells and inputs: where TeX must have been typeset."""
        return self.page.evaluate(
            """() => { const body = document.body.cloneNode(true);
                       body.querySelectorAll('code, pre, input, textarea').forEach(e => e.remove());
                       document.documentElement.appendChild(body); const text = body.innerText; body.remove();
                       return text; }"""
        )

    def settle(self, must_contain: tuple[str, ...] = (), timeout: float = 420.0, quiet: float = 2.0) -> str:
        """Wait until the expected texts are visible, no cell runs, and the page text stops changing."""
        deadline = time.monotonic() + timeout
        last, stable_since = None, time.monotonic()
        while time.monotonic() < deadline:
            text = self.text()
            running = self.page.locator('[data-status="running"], [data-status="queued"]').count()
            if text != last or running:
                last, stable_since = text, time.monotonic()
            elif all(s in text for s in must_contain) and time.monotonic() - stable_since >= quiet:
                return text
            time.sleep(0.25)
        missing = [s for s in must_contain if s not in (last or "")]
        raise AssertionError(
            f"page did not settle in {timeout:.0f} s; missing {missing}\n{(last or '')[-2000:]}"
        )

    def assert_clean(self) -> None:
        """No browser console errors, no cell with an error output, no untypeset formula (TeX shown as code is fine)."""
        assert not self.console_errors, self.console_errors
        errored = self.page.locator(".marimo-cell.has-error")
        assert errored.count() == 0, [errored.nth(i).inner_text()[:500] for i in range(errored.count())]
        raw = sorted({m.group(0) for m in RAW_TEX.finditer(self.prose())})
        assert not raw, f"raw TeX in the visible text (a formula did not render): {raw}"


@pytest.fixture(scope="module")
def browser():
    # Module scope, not session: playwright's sync API marks an event loop as running in this thread while it
    # lives, and a later test in the same worker calling asyncio.run() would fail.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        yield instance
        instance.close()


@pytest.fixture
def open_lesson(browser, tmp_path) -> Iterator:
    """``open_lesson("01", *args)``: serve lesson 01 (CLI args after ``--``) and open it in a new tab."""
    servers: list[subprocess.Popen] = []
    contexts = []

    def _open(number: str, *args: str, width: int = 1280, height: int = 900) -> LessonPage:
        port = _free_port()
        command = [
            sys.executable,
            "-m",
            "marimo",
            "run",
            str(LESSONS[number]),
            "--headless",
            "--port",
            str(port),
            "--no-token",
            "--no-sandbox",
            "--no-check",
        ]
        if args:
            command += ["--", *args]
        log = open(tmp_path / f"marimo-{number}.log", "w")  # noqa: SIM115 (closed with the process)
        server = subprocess.Popen(
            command, cwd=tmp_path, env=_lesson_env(), stdout=log, stderr=subprocess.STDOUT
        )
        servers.append(server)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / f"marimo-{number}.log").read_text()[-3000:]) from None
                time.sleep(0.2)
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        page = context.new_page()
        lesson = LessonPage(number, page)
        page.on("console", lambda m: lesson.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: lesson.console_errors.append(str(e)))
        page.goto(f"http://127.0.0.1:{port}/")
        return lesson

    yield _open
    for context in contexts:
        context.close()
    for server in servers:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
