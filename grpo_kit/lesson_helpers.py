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
standalone loop).

Nothing in this module imports torch at import time: it only needs marimo.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = [
    "LiveRewardCurve",
    "ci_size",
    "cli_args",
    "interactive",
    "on_gpu",
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


class LiveRewardCurve:
    """Collects the logged metrics of a run and, in the marimo editor, redraws the reward curve live.

    TRL: ``trl_path.train(..., callbacks=[curve.trainer_callback()])``.
    Standalone loop: ``loop.train(..., callbacks=[curve])`` (called as ``curve(state, step_metrics)``).
    Outside the editor it only collects (``curve.records``); nothing is drawn.
    """

    def __init__(self, title: str = "GRPO reward") -> None:
        self.title = title
        self.records: list[dict[str, Any]] = []

    def __call__(self, state: Any, metrics: dict[str, Any]) -> None:
        # The standalone loop calls back after every step with the loss only; the logged record (reward,
        # reward_std, …) is the last entry of state.log_history when this step was a logging step.
        history = getattr(state, "log_history", None) or []
        step = getattr(state, "global_step", None)
        if history and history[-1].get("step") == step:
            self.add(dict(history[-1]))

    def add(self, record: dict[str, Any]) -> None:
        if record.get("reward") is None:
            return  # TRL's final summary record, eval records
        self.records.append(dict(record))
        if interactive():
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
        """A matplotlib Figure of reward (± reward_std) per step."""
        from matplotlib.figure import Figure

        figure = Figure(figsize=(7, 3.2))
        axis = figure.subplots()
        steps = [r["step"] for r in self.records]
        reward = [r["reward"] for r in self.records]
        std = [r.get("reward_std") or 0.0 for r in self.records]
        axis.plot(steps, reward, marker="o", markersize=3, label="reward (mean)")
        axis.fill_between(
            steps,
            [m - s for m, s in zip(reward, std)],
            [m + s for m, s in zip(reward, std)],
            alpha=0.2,
            label="± reward_std",
        )
        axis.set_xlabel("step")
        axis.set_ylabel("reward")
        axis.set_title(self.title)
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
        figure.tight_layout()
        return figure

    def _redraw(self) -> None:
        import marimo as mo

        mo.output.replace(self.figure())


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
