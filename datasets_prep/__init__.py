"""Dataset formatters and offline data for GRPO lessons.

Every loader returns a ``datasets.Dataset`` with a ``prompt`` column, from ``source`` =
``None`` (the Hub id), a Hub id, a local directory, a ``.jsonl``/``.json``/``.parquet``/``.csv``
file, or raw rows already loaded (a ``datasets.Dataset`` or ``list[dict]``)::

    from datasets_prep import load_gsm8k, synthetic_gsm8k
    train = load_gsm8k("train", source=synthetic_gsm8k(64, seed=0))   # prompt (conversational), answer

``datasets`` is imported lazily, inside the loaders; importing this package is cheap.
"""

from datasets_prep.chat import (
    SAMPLING_PROMPT,
    is_conversational_prompt,
    prompt_to_sample_from,
    prompt_to_text,
)
from datasets_prep.deepmath import format_deepmath_row, load_deepmath
from datasets_prep.environment_tasks import environment_task_rows, load_environment_task_split
from datasets_prep.gsm8k import (
    SYSTEM_PROMPT,
    XML_COT_FORMAT,
    check_gsm8k_row,
    format_gsm8k_row,
    load_gsm8k,
    worked_example_rows,
)
from datasets_prep.hub import hub_available
from datasets_prep.images import load_image_tasks, load_shapes, shapes_rows
from datasets_prep.prompts import load_prompts
from datasets_prep.shipped import TRANSFER_SETS, transfer_set_rows
from datasets_prep.smoltldr import check_smoltldr_row, load_smoltldr
from datasets_prep.sources import load_raw
from datasets_prep.synthetic import synthetic_gsm8k, synthetic_tldr
from datasets_prep.tool_tasks import CALCULATOR_TOOLS, load_tool_task_split, load_tool_tasks, tool_task_rows

__all__ = [
    "CALCULATOR_TOOLS",
    "SAMPLING_PROMPT",
    "SYSTEM_PROMPT",
    "TRANSFER_SETS",
    "XML_COT_FORMAT",
    "check_gsm8k_row",
    "check_smoltldr_row",
    "environment_task_rows",
    "format_deepmath_row",
    "format_gsm8k_row",
    "hub_available",
    "is_conversational_prompt",
    "load_deepmath",
    "load_environment_task_split",
    "load_gsm8k",
    "load_image_tasks",
    "load_prompts",
    "load_raw",
    "load_shapes",
    "load_smoltldr",
    "load_tool_task_split",
    "load_tool_tasks",
    "prompt_to_sample_from",
    "prompt_to_text",
    "shapes_rows",
    "synthetic_gsm8k",
    "synthetic_tldr",
    "tool_task_rows",
    "transfer_set_rows",
    "worked_example_rows",
]
