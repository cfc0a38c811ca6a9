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


# Every element of the page, shadow roots included (marimo's widgets live in them), whose content is wider
# than its box: a line running off the page, cut at the box's edge or hidden behind a scrollbar. Typeset
# formulas (KaTeX keeps a zero-width MathML copy), fixed panels and hidden elements are not content.
OVERFLOWING = """() => {
  const found = [];
  const visit = (root) => root.querySelectorAll('*').forEach(el => {
    if (el.shadowRoot) visit(el.shadowRoot);
    if (el.closest('.katex, math')) return;
    const style = getComputedStyle(el);
    if (style.position === 'fixed' || style.display === 'none' || el.clientWidth <= 4) return;
    if (el.scrollWidth > el.clientWidth + 4) {
      found.push(`${el.tagName} ${el.scrollWidth}px in ${el.clientWidth}px: ` +
                 (el.innerText || '').slice(0, 80).replace(/\\s+/g, ' '));
    }
  });
  visit(document);
  return found;
}"""

# Table cells of prose (three words or more) that are right-aligned: marimo's tables align right unless the
# Markdown asks for left (`|:---|`), which makes sentences hard to read.
RIGHT_ALIGNED_PROSE = """() => {
  const found = [];
  const visit = (root) => root.querySelectorAll('*').forEach(el => {
    if (el.shadowRoot) visit(el.shadowRoot);
    if (!['TD', 'TH'].includes(el.tagName)) return;
    const align = getComputedStyle(el).textAlign;
    const words = (el.innerText || '').trim().split(/\\s+/).filter(w => /[a-z]{2}/i.test(w));
    if ((align === 'right' || align === 'end') && words.length >= 3) found.push(el.innerText.slice(0, 60));
  });
  visit(document);
  return found;
}"""

# Each marimo slider with the value it shows beside it ('' when it shows none).
SLIDER_VALUES = """() => [...document.querySelectorAll('marimo-slider')].map(el => {
  const shown = el.shadowRoot && el.shadowRoot.querySelector('[role="slider"]') &&
                el.shadowRoot.querySelector('.text-muted-foreground');  // marimo's show_value=True label
  return shown ? shown.innerText.trim() : '';
})"""


@dataclass
class LessonPage:
    """One lesson served by ``marimo run`` and opened in a browser tab."""

    number: str
    page: object
    console_errors: list[str] = field(default_factory=list)
    opened_at: float = field(default_factory=time.monotonic)
    # seconds from opening the page until everything that runs on open had run: the page can be used
    clickable_after: float | None = None
    record: object = None  # the test's user_properties: the time goes into its report

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
                if self.clickable_after is None:
                    self.clickable_after = stable_since - self.opened_at
                    if self.record is not None:
                        self.record.append((f"clickable_s/lesson_{self.number}", self.clickable_after))
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
        overflowing = self.page.evaluate(OVERFLOWING)
        if (
            overflowing
        ):  # once more after a moment: on a loaded machine a box can be read mid-layout (lesson 7's
            self.page.wait_for_timeout(2000)  # textless 'DIV 50px in 45px' once, clean when run again)
            overflowing = self.page.evaluate(OVERFLOWING)
        assert not overflowing, f"content wider than its box: {overflowing}"
        right_aligned = self.page.evaluate(RIGHT_ALIGNED_PROSE)
        assert not right_aligned, f"prose in right-aligned table cells: {right_aligned}"
        sliders = self.page.evaluate(SLIDER_VALUES)
        assert all(sliders), f"a slider shows no value beside it: {sliders}"


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
def open_lesson(browser, tmp_path, request) -> Iterator:
    """``open_lesson("01", *args)``: serve lesson 01 (CLI args after ``--``) and open it in a new tab. The time
    to a clickable page of each lesson opened is kept in the test's report (tests/conftest.py prints it)."""
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
        lesson = LessonPage(number, page, record=request.node.user_properties)
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
