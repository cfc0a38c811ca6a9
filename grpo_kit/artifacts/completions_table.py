"""The completions table: what the model wrote, how each reward scored it, its advantage, the logged columns.

TRL 1.15's ``GRPOTrainer`` with ``log_completions=True`` keeps the last generation batch's prompts,
completions, rewards per function, advantages and the columns reward functions log through ``log_extra``
(``accuracy_reward``'s ``solution``/``gold_parsed``/``answer_parsed``), and at every logging step writes
them to ``<output_dir>/completions/completions_<step:05d>.parquet`` (columns ``step, prompt, completion,
<reward names...>, <extra columns...>, advantage``) and prints ``num_completions_to_print`` random rows
(all when None). The standalone loop does the same through :class:`CompletionsTable`; the TRL path gets the
file from TRL itself. ``read_completions`` reads either, and ``report_rows`` picks the rows ``report.md`` shows.

Untrusted text is text: the printed rows go out with rich markup off and control characters replaced.
Simplification: the printed sample is the first rows, not a random draw (the file holds them all).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_kit.support.markdown_text import table_cell

__all__ = ["COMPLETIONS_DIR", "CompletionsTable", "completions_file", "read_completions", "report_rows"]

COMPLETIONS_DIR = "completions"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def completions_file(output_dir: str | Path, step: int) -> Path:
    """TRL's path for a step's table."""
    return Path(output_dir) / COMPLETIONS_DIR / f"completions_{step:05d}.parquet"


class CompletionsTable:
    """The last generation batch's table (TRL's ``_logs``), filled by the loop, written at logging steps."""

    def __init__(self) -> None:
        self._pending_extra: dict[str, list[Any]] = defaultdict(list)
        self.columns: dict[str, list[Any]] | None = None

    def log_extra(self, column: str, values: Sequence[Any]) -> None:
        """The ``log_extra`` reward functions receive: one value per completion of the batch being scored."""
        self._pending_extra[column].extend(values)

    def record(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        rewards: dict[str, Sequence[float]],
        advantages: Sequence[float],
    ) -> None:
        """Replace the table with this generation batch, flushing the columns logged while scoring it."""
        n = len(prompts)
        extra = {
            column: list(self._pending_extra[column]) if len(self._pending_extra[column]) == n else [None] * n
            for column in sorted(self._pending_extra)
        }
        self._pending_extra.clear()
        self.columns = {
            "prompt": list(prompts),
            "completion": list(completions),
            **{name: [float(v) for v in values] for name, values in rewards.items()},
            **extra,
            "advantage": [float(a) for a in advantages],
        }

    def discard_pending(self) -> None:
        """A batch that was not scored to the end (a bad step): its logged columns go with it."""
        self._pending_extra.clear()

    def write(self, output_dir: str | Path, step: int) -> Path | None:
        """``completions/completions_<step>.parquet``, as TRL writes it; None before the first batch."""
        import pandas as pd

        if self.columns is None:
            return None
        path = completions_file(output_dir, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        n = len(self.columns["prompt"])
        pd.DataFrame({"step": [step] * n, **self.columns}).to_parquet(path)
        return path

    def print_sample(self, step: int, num_rows: int | None, console: Any = None) -> None:
        """The first ``num_rows`` rows (all when None) on the terminal, as text (no markup, no control chars)."""
        from rich.console import Console
        from rich.table import Table

        if self.columns is None:
            return
        names = [c for c in self.columns if c not in ("prompt", "completion")]
        table = Table(title=f"completions at step {step}", show_lines=True)
        for column in ["prompt", "completion", *names]:
            table.add_column(column)
        n = len(self.columns["prompt"])
        for i in range(n if num_rows is None else min(num_rows, n)):
            table.add_row(*(_cell(self.columns[c][i]) for c in ["prompt", "completion", *names]))
        (console or Console()).print(table, markup=False, highlight=False)


def _text(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[-1], dict):  # chat messages: the last one
        value = value[-1].get("content", "")
    elif isinstance(value, float):
        value = f"{value:.3f}"
    return _CONTROL.sub("�", str(value))


def _cell(value: Any) -> Any:
    from rich.text import Text

    return Text(_text(value))  # a Text is never parsed for markup


def read_completions(output_dir: str | Path) -> list[Any]:
    """Every ``completions_<step>.parquet`` of a run folder as pandas DataFrames, in step order."""
    import pandas as pd

    folder = Path(output_dir) / COMPLETIONS_DIR
    files = sorted(folder.glob("completions_*.parquet")) if folder.is_dir() else []
    return [pd.read_parquet(path) for path in files]


def report_rows(output_dir: str | Path, rows_per_step: int = 3, max_chars: int = 200) -> list[str]:
    """Markdown lines for ``report.md``: a few rows of the first and the last logged step; [] without a table."""
    tables = read_completions(output_dir)
    if not tables:
        return []
    picked = [tables[0]] if len(tables) == 1 else [tables[0], tables[-1]]
    columns = [c for c in picked[-1].columns if c != "step"]
    lines = [
        "## Completions (first and last logged step)",
        "",
        f"From `{COMPLETIONS_DIR}/` (TRL's `log_completions` table), {rows_per_step} rows per step.",
        "",
        "| step | " + " | ".join(columns) + " |",
        "|---" * (len(columns) + 1) + "|",
    ]
    for table in picked:
        for _, row in table.head(rows_per_step).iterrows():
            cells = [_md(row.get(c), max_chars) for c in columns]
            lines.append(f"| {int(row['step'])} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _md(value: Any, max_chars: int) -> str:
    if hasattr(value, "tolist"):  # numpy arrays of chat messages read back from parquet
        value = value.tolist()
    return table_cell(_text(value), max_chars, keep_end=True)
