"""Small glue the marimo lessons share: run buttons that scripts pass through, safe CLI args,
and CPU/GPU settings.

A lesson runs in four places: the marimo editor (interactive), ``python notebooks/<lesson>.py``
(marimo's script mode), ``pytest`` (marimo runs the cells a ``test_*`` cell depends on) and
Jupyter/Colab (the exported ``.ipynb``). Only the first has someone to press a button, so a heavy
cell asks ``should_run(button)``: the button's value in the editor, ``True`` everywhere else.

``marimo.cli_args()`` raises outside marimo's runtime (pytest, Jupyter); ``cli_args()`` here
returns an empty mapping there instead.

``LiveRewardCurve`` redraws the reward curve in the running cell's output after every logged step,
for both training paths (a ``transformers.TrainerCallback`` for TRL, a ``cb(state, metrics)`` for the
standalone loop); ``finish()`` takes it down when training returns, so the saved curve is the only one left.

Nothing in this module imports torch at import time: it only needs marimo.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "LessonSize",
    "LiveRewardCurve",
    "ci_size",
    "cli_args",
    "interactive",
    "lesson_size",
    "on_gpu",
    "picture",
    "picture_gallery",
    "picture_png",
    "preflight_verdict",
    "run_button",
    "should_run",
    "source_code",
    "stack",
    "wrapped_text",
]


def ci_size() -> bool:
    """True when the project's own tests run a lesson (they set ``GRPO_KIT_LESSON_SIZE=ci``): heavy runs shrink
    to a few steps that show every part run. Everyone else gets the settings the README measures."""
    return os.environ.get("GRPO_KIT_LESSON_SIZE", "").strip().lower() == "ci"


def interactive() -> bool:
    """True inside a running marimo editor/app session (someone can press buttons)."""
    import marimo as mo

    return bool(mo.running_in_notebook())


def run_button(label: str, *, kind: str = "success") -> Any:
    """A ``mo.ui.run_button`` with the lessons' look; pair it with ``should_run``."""
    import marimo as mo

    return mo.ui.run_button(label=label, kind=kind)


def should_run(button: Any) -> bool:
    """Whether a heavy cell gated by ``button`` runs now.

    In the marimo editor: only after the button was pressed. In script mode, under pytest and in
    Jupyter/Colab nobody can press it, so the cell runs (that is what lets CI run every lesson
    top to bottom).
    """
    if not interactive():
        return True
    return bool(getattr(button, "value", False))


def cli_args() -> Mapping[str, Any]:
    """``mo.cli_args()`` where marimo's runtime provides it, an empty mapping elsewhere.

    ``python notebooks/04_practicum_smollm2_trl.py --max-steps 50`` gives ``{"max-steps": "50"}``.
    """
    import marimo as mo

    if not _has_marimo_context():  # pytest, Jupyter: mo.cli_args() would raise ContextNotInitializedError
        return {}
    args = mo.cli_args()
    return {key: args.get(key) for key in args.keys()}  # noqa: SIM118 (CLIArgs is not a dict)


def _has_marimo_context() -> bool:
    """Whether marimo's runtime context exists (editor, app or script mode), without catching everything."""
    from marimo._runtime.context import ContextNotInitializedError, get_context

    try:
        get_context()
    except ContextNotInitializedError:
        return False
    return True


def on_gpu() -> bool:
    """True when CUDA is available (the lessons then use the course's full settings)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@dataclass(frozen=True)
class LessonSize:
    """The settings a lesson runs at: ``"gpu"`` (the course's), ``"cpu"`` (scaled to a 2-core CPU, and still
    shows the result) or ``"small"`` (the project's CI, or ``-- --small``: every part runs, too few steps to
    show a result). ``args`` are the lesson's command-line arguments (``cli_args``)."""

    name: str
    args: Mapping[str, Any]

    @property
    def gpu(self) -> bool:
        return self.name == "gpu"

    @property
    def small(self) -> bool:
        return self.name == "small"

    def pick(self, *, gpu: Any, cpu: Any, small: Any = None) -> Any:
        """This size's value of a setting (``small`` defaults to the CPU one)."""
        if self.gpu:
            return gpu
        return cpu if small is None or not self.small else small

    def steps(self, *, gpu: int, cpu: int, small: int | None = None) -> int:
        """``-- --max-steps N`` when given, else this size's number of optimizer steps."""
        given = self.args.get("max-steps")
        if given is None:
            return int(self.pick(gpu=gpu, cpu=cpu, small=small))
        if not str(given).isdigit() or int(given) < 1:
            raise ValueError(
                f"--max-steps takes a whole number of steps, 1 or more (got {given!r}): -- --max-steps 8"
            )
        return int(given)

    def output_dir(self, lesson: str) -> Path:
        """``-- --output-dir DIR`` when given, else a fresh temporary folder named after the lesson."""
        import tempfile

        return Path(self.args.get("output-dir") or tempfile.mkdtemp(prefix=f"grpo-kit-{lesson}-"))


def lesson_size() -> LessonSize:
    """``gpu`` where CUDA is, else ``small`` under the project's tests (``GRPO_KIT_LESSON_SIZE=ci``) or with
    ``-- --small``, else ``cpu``."""
    args = cli_args()
    if on_gpu():
        return LessonSize("gpu", args)
    return LessonSize("small" if ci_size() or args.get("small") is not None else "cpu", args)


def preflight_verdict(report: Any, *, if_no_go: str = "") -> Any:
    """A pre-flight report (grpo_kit.evaluation.preflight) as the callout a Train button sits under: the verdict, how
    many groups carry a learning signal, every finding with its fix, and ``if_no_go`` (what to do instead)
    when training at these settings would not learn."""
    import marimo as mo

    lines = [
        (
            f"**Pre-flight: {report.verdict.upper()}** ({report.num_prompts} prompts × {report.num_generations} "
            f"completions at the run's settings): {1 - report.zero_std_share:.0%} of the groups carry a learning "
            f"signal (their rewards differ), {report.clipped_ratio:.0%} of the completions hit the length limit."
        )
    ]
    lines += [f"- **{f.severity}**: {f.message} *Fix:* {f.fix}" for f in report.findings]
    if not report.go and if_no_go:
        lines.append(if_no_go)
    kind = "danger" if not report.go else ("warn" if report.findings else "success")
    return mo.callout(mo.md("\n\n".join(lines)), kind=kind)


class LiveRewardCurve:
    """Collects the logged metrics of a run and, in the marimo editor, redraws the reward curve live.

    TRL: ``trl_path.train_with_trl(..., callbacks=[curve.trainer_callback()])``.
    Standalone loop: ``loop.train(..., callbacks=[curve])`` (called as ``curve(state, step_metrics)``).
    Outside the editor it only collects (``curve.records``); nothing is drawn.
    """

    def __init__(self, title: str = "GRPO reward") -> None:
        self.title = title
        self.records: list[dict[str, Any]] = []
        self.held_out: list[
            dict[str, Any]
        ] = []  # eval/... records (eval_steps), drawn on an axis of their own

    def __call__(self, state: Any, metrics: dict[str, Any]) -> None:
        # The standalone loop calls back after every step with the loss only; the logged record (reward,
        # reward_std, …) is the last entry of state.log_history when this step was a logging step.
        history = getattr(state, "log_history", None) or []
        step = getattr(state, "global_step", None)
        this_step = []  # the step's records: its logged metrics, and its held-out evaluation (eval_steps)
        for record in reversed(history):
            if record.get("step") != step:
                break
            this_step.append(record)
        for record in reversed(this_step):
            self.add(dict(record))

    def add(self, record: dict[str, Any]) -> None:
        if any(str(key).startswith("eval/") for key in record):  # a held-out evaluation during training
            self.held_out.append(dict(record))
        elif record.get("reward") is None:
            return  # TRL's final summary record
        else:
            self.records.append(dict(record))
        if interactive() and self.records:
            self._redraw()

    def trainer_callback(self) -> Any:
        """A ``transformers.TrainerCallback`` feeding this curve from TRL's ``on_log``."""
        from transformers import TrainerCallback

        curve = self

        class _LiveRewardCurveCallback(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs:
                    curve.add({"step": state.global_step, **logs})

        return _LiveRewardCurveCallback()

    def figure(self) -> Any:
        """The run's reward curve so far (grpo_kit.artifacts.plots.reward_curve_figure: the same drawing as the saved PNG)."""
        from grpo_kit.artifacts.plots import reward_curve_figure

        metric = None
        if self.held_out:
            from grpo_kit.evaluation.comparison import headline_metric

            metric = headline_metric({k.removeprefix("eval/"): v for k, v in self.held_out[-1].items()})
        return reward_curve_figure(self.records + self.held_out, title=self.title, held_out_metric=metric)

    def finish(self) -> None:
        """End the live view once training returned: the running cell's curve gives way to one line, so the
        page shows the reward curve once (the lesson shows the run folder's saved curve below it)."""
        if interactive() and self.records:
            import marimo as mo

            mo.output.replace(
                mo.md(f"Trained: {len(self.records)} logged steps. The run's saved reward curve is below.")
            )

    def _redraw(self) -> None:
        import marimo as mo

        mo.output.replace(self.figure())


def train_with_live_curve(
    recipe: Any, *, train: Any = None, title: str | None = None, **train_kwargs: Any
) -> Any:
    """``trl_path.train_with_trl(recipe, **train_kwargs)`` behind a lesson's Train button: a
    :class:`LiveRewardCurve` on TRL's log (``title``: its title, "<recipe>: reward per step" unless given; redrawn
    in the editor while it trains, one line once it returns, so the page then shows the run's saved curve once),
    no progress bar and no final save unless ``train_kwargs`` say otherwise. ``train``: another training function
    with ``train_with_trl``'s signature (``unsloth_path.train_with_unsloth``), called with ``train_kwargs`` and
    the curve's callback only."""
    curve = LiveRewardCurve(title or f"{recipe.name}: reward per step")
    train_kwargs["callbacks"] = [curve.trainer_callback(), *train_kwargs.get("callbacks", [])]
    if train is None:
        from grpo_kit.trainers import trl_path

        train = trl_path.train_with_trl
        train_kwargs.setdefault("disable_tqdm", True)
        train_kwargs.setdefault("save_final", False)
    run = train(recipe, **train_kwargs)
    curve.finish()
    return run


def source_code(*functions: Any) -> Any:
    """The source of ``functions`` as a Python code block, for the prose that discusses them: ``marimo run``
    sends no code, so a lesson whose subject is the code shows it with this."""
    import inspect
    import textwrap

    import marimo as mo

    sources = "\n\n".join(textwrap.dedent(inspect.getsource(fn)).rstrip() for fn in functions)
    return mo.md(f"```python\n{sources}\n```")


def wrapped_text(text: str) -> Any:
    """``text`` shown as written (monospace, nothing read as markup), its long lines wrapped at the box's
    edge instead of running off the page as ``mo.plain_text`` does."""
    import html

    import marimo as mo

    return mo.Html(
        '<pre style="white-space: pre-wrap; overflow-wrap: anywhere; margin: 0">'
        + html.escape(str(text))
        + "</pre>"
    )


def picture_png(image: Any, *, scale: int = 3, grid: int | None = None) -> bytes:
    """A PIL ``image`` enlarged ``scale`` times without smoothing (each pixel a ``scale`` × ``scale`` block), as PNG
    bytes. ``grid``: also draw the vision tower's patch grid, a line every ``grid`` pixels of the original picture
    (lesson 10: 16-px patches on a 64-px picture, 16 image tokens)."""
    import io

    from PIL import Image, ImageDraw

    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ValueError(f"scale must be a whole number, 1 or more (got {scale!r}).")
    big = image.convert("RGB").resize((image.width * scale, image.height * scale), Image.Resampling.NEAREST)
    if grid:
        draw = ImageDraw.Draw(big)
        for x in range(0, image.width + 1, grid):  # the last line sits on the right edge
            column = min(x * scale, big.width - 1)
            draw.line((column, 0, column, big.height - 1), fill=(255, 0, 255), width=1)
        for y in range(0, image.height + 1, grid):
            row = min(y * scale, big.height - 1)
            draw.line((0, row, big.width - 1, row), fill=(255, 0, 255), width=1)
    buffer = io.BytesIO()
    big.save(buffer, format="PNG")
    return buffer.getvalue()


def picture(image: Any, *, scale: int = 3, grid: int | None = None, caption: str | None = None) -> Any:
    """``mo.image`` of :func:`picture_png` (a small picture enlarged so its pixels show), with ``caption``."""
    import marimo as mo

    # a thin frame: a white picture on a white page would otherwise have no edge
    return mo.image(
        src=picture_png(image, scale=scale, grid=grid), caption=caption, style={"border": "1px solid #bbb"}
    )


def picture_gallery(items: Any, *, scale: int = 2) -> Any:
    """Pictures side by side, wrapping: ``items`` are ``(PIL image, caption markdown)`` pairs, each caption under
    its picture."""
    import marimo as mo

    return mo.hstack(
        [
            mo.vstack([picture(image, scale=scale), mo.md(caption)], align="center")
            for image, caption in items
        ],
        justify="start",
        wrap=True,
        gap=1.0,
    )


def stack(items: list[Any]) -> Any:
    """``mo.vstack(items)`` under marimo; in Jupyter/Colab (the exported ipynb, no marimo runtime) each item is
    displayed on its own instead, so the notebook's outputs hold what a learner must see: a matplotlib figure
    as a PNG image, marimo text as HTML. (A ``mo.vstack`` there is an HTML shell whose figures and widgets
    need marimo's frontend: empty boxes.) Returns what the cell should show (None in Jupyter: shown already)."""
    import marimo as mo

    if _has_marimo_context():
        return mo.vstack(items)
    import io

    import IPython.display
    from IPython.display import HTML, Image

    # marimo patches IPython's display() the first time it formats one of its objects (a slider, mo.md), even
    # in a Jupyter kernel, where its replacement writes to a marimo output that does not exist: everything
    # displayed afterwards is lost. functools.wraps keeps the original as __wrapped__.
    display = getattr(IPython.display.display, "__wrapped__", IPython.display.display)
    for item in items:
        if hasattr(item, "savefig"):  # a matplotlib figure
            buffer = io.BytesIO()
            item.savefig(buffer, format="png", dpi=100)
            display(Image(data=buffer.getvalue(), format="png"))
        elif hasattr(item, "_repr_html_"):
            display(HTML(item._repr_html_()))
        else:
            display(item)
    return None
