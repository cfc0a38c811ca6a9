"""Image tasks for vision-language GRPO: synthetic pictures drawn with Pillow, or a folder of images + a JSONL.

Rows follow TRL's vision-language format (TRL's GRPO docs, "Dataset format"): an ``image`` column (a PIL image)
and a conversational ``prompt`` whose user message holds an image placeholder block ``{"type": "image"}`` before
its text; TRL's ``prepare_multimodal_messages`` puts the row's image into that placeholder. A synthetic row's prompt
ends with an assistant turn that opens the answer (``"The square is on the"``): the VLM chat template leaves it
open, so the first word generated is the choice (:class:`ImageTask`). Each row also carries
``answer`` (the gold word), ``choices`` (the task's answer words, comma-separated, for
:func:`rewards.visual.visual_answer_reward`) and ``task``.

Synthetic tasks (:data:`IMAGE_TASKS`), each answerable from the picture alone:

* ``colour``: one filled shape (square, circle or triangle) in red, green, blue or yellow -> its colour;
* ``count``: 1-4 black dots -> how many (a digit);
* ``side``: one square in the left or right half -> ``left`` / ``right``;
* ``colour_side``: one coloured shape in the left or right half -> a two-part answer, ``red, left``
  (``choices`` lists each part's words, the parts separated by ``|``: ``red,green,blue,yellow|left,right``).

:func:`caption_rows` writes picture-caption rows for the alignment stage before GRPO (a recipe's ``warmup_sft``
with ``dataset: shapes-captions``): the ``colour_side`` pictures, each described in one sentence ("A red circle on
the left."), drawn from a stream of their own and never one of the task rows' pictures (:func:`caption_rows`).

``style="train"`` draws large shapes (18-30 px on 64 px) anywhere; ``style="transfer"`` draws them differently
(small, 8-14 px, hugging the corners, a grey background) for a second held-out set. Same seed, same rows.

:func:`load_image_tasks` reads a JSONL whose lines are ``{"image": "path/relative/to/the/jsonl.png",
"prompt": "<image>What colour is the shape?", "answer": "red"}`` (``choices`` optional) into the same rows:
``<image>`` marks where the picture goes; an image path that leads outside the JSONL's folder (``..``, an absolute
path, a symlink out) is refused. Every bad line is one :class:`ImageDataError` naming the file, the
line and the fix. Pillow is imported inside the functions.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, NamedTuple

from datasets_prep.files import jsonl_lines

__all__ = [
    "CAPTION_PROMPT",
    "IMAGE_PLACEHOLDER",
    "IMAGE_TASKS",
    "ImageDataError",
    "caption_rows",
    "draw_image_task",
    "image_prompt",
    "load_image_tasks",
    "load_shapes",
    "rows_have_images",
    "shapes_rows",
]

#: What marks the picture's place in a JSONL prompt (the processor's image token in the VLMs grpo-kit builds).
IMAGE_PLACEHOLDER = "<image>"

_COLOURS = {"red": (220, 30, 30), "green": (30, 170, 40), "blue": (30, 60, 220), "yellow": (235, 215, 20)}
_COUNT_WORDS = ("1", "2", "3", "4")


class ImageTask(NamedTuple):
    """One synthetic task: the question (``{choices}`` lists the answers), the answer words, the answer opening."""

    question: str
    answers: tuple[str, ...]
    #: The assistant's first words, given in the prompt (a prefill), so that the next word sampled is the answer:
    #: the untrained model, asked "Answer with one word", mostly starts "The ..." and wanders before naming one.
    opening: str


#: task -> :class:`ImageTask`. The question lists the answers (``{choices}``), in an order drawn per row, so that the
#: untrained model's habit of naming the first one listed is no answer.
IMAGE_TASKS: dict[str, ImageTask] = {
    "colour": ImageTask(
        "What colour is the shape? Answer with one word: {choices}.", tuple(_COLOURS), "The shape is"
    ),
    "count": ImageTask(
        "How many dots are in the picture? Answer with one number: {choices}.",
        _COUNT_WORDS,
        "The number of dots is",
    ),
    "side": ImageTask(
        "Is the square on the left or on the right? Answer with one word: {choices}.",
        ("left", "right"),
        "The square is on the",
    ),
    "colour_side": ImageTask(
        "What colour is the shape ({choices}), and is it on the left or the right? Answer with two words: "
        "colour, side.",
        tuple(_COLOURS),
        "Answer:",
    ),
}

#: The second part of a two-part task's answer: task -> that part's words (the first part's are the task's answers).
SECOND_PART = {"colour_side": ("left", "right")}
#: What separates the parts of a two-part answer (``red, left``) and of its ``choices`` (``red,green|left,right``).
ANSWER_SEPARATOR, CHOICES_SEPARATOR = ", ", "|"


def _listed(words) -> str:
    """``a, b, c or d``."""
    return ", ".join(words[:-1]) + " or " + words[-1]


_STYLES = ("train", "transfer")


class ImageDataError(ValueError):
    """Image rows that cannot be used; the message names the file or row and the fix."""


def image_prompt(text: str, opening: str = "") -> list[dict[str, Any]]:
    """A conversational prompt: the image placeholder, then ``text`` (TRL's layout); with ``opening``, an assistant
    turn that starts the answer (the VLM chat template leaves it open: generation continues it)."""
    prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    if opening:
        prompt.append({"role": "assistant", "content": [{"type": "text", "text": opening}]})
    return prompt


def _shape_box(rng: random.Random, size: int, style: str) -> tuple[int, int, int]:
    """(x, y, side): large and anywhere (train), or small and in a corner (transfer)."""
    if style == "train":
        side = rng.randint(18, 30)
        return rng.randint(0, size - side), rng.randint(0, size - side), side
    side = rng.randint(8, 14)
    return rng.choice((1, size - side - 1)), rng.choice((1, size - side - 1)), side


def _draw_shape(draw, kind: str, box: tuple[int, int, int], fill) -> None:
    x, y, side = box
    if kind == "square":
        draw.rectangle((x, y, x + side - 1, y + side - 1), fill=fill)
    elif kind == "circle":
        draw.ellipse((x, y, x + side - 1, y + side - 1), fill=fill)
    else:
        draw.polygon(((x + side // 2, y), (x, y + side - 1), (x + side - 1, y + side - 1)), fill=fill)


def _colour_side_picture(rng: random.Random, size: int, style: str):
    """(colour, shape kind, side, box) of one coloured shape wholly in the left or the right half."""
    colour = rng.choice(tuple(_COLOURS))
    kind = rng.choice(_KINDS)
    side_word = rng.choice(("left", "right"))
    return colour, kind, side_word, _box_in_half(rng, side_word, size, style)


def _box_in_half(rng: random.Random, side_word: str, size: int, style: str) -> tuple[int, int, int]:
    """(x, y, side) of a shape wholly in the ``side_word`` half: 14-26 px anywhere in it (train), or 8-12 px in
    one of its corners (transfer)."""
    half = size // 2
    side = rng.randint(14, 26) if style == "train" else rng.randint(8, 12)
    low, high = (0, half - side) if side_word == "left" else (half, size - side)
    x = rng.randint(low, high) if style == "train" else (low + 1 if side_word == "left" else high - 1)
    y = rng.randint(0, size - side) if style == "train" else rng.choice((1, size - side - 1))
    return x, y, side


def draw_image_task(task: str, rng: random.Random, *, size: int = 64, style: str = "train"):
    """One picture of ``task`` drawn from ``rng`` -> ``(PIL.Image, answer)``."""
    from PIL import Image, ImageDraw

    if task not in IMAGE_TASKS:
        raise ImageDataError(f"Unknown image task {task!r}; choose one of {sorted(IMAGE_TASKS)}.")
    if style not in _STYLES:
        raise ImageDataError(f"Unknown style {style!r}; choose one of {list(_STYLES)}.")
    background = (255, 255, 255) if style == "train" else (200, 200, 200)
    image = Image.new("RGB", (size, size), background)
    draw = ImageDraw.Draw(image)
    if task == "colour":
        answer = rng.choice(tuple(_COLOURS))
        _draw_shape(
            draw, rng.choice(("square", "circle", "triangle")), _shape_box(rng, size, style), _COLOURS[answer]
        )
    elif task == "colour_side":
        colour, kind, side_word, box = _colour_side_picture(rng, size, style)
        _draw_shape(draw, kind, box, _COLOURS[colour])
        answer = f"{colour}{ANSWER_SEPARATOR}{side_word}"
    elif task == "side":
        answer = rng.choice(("left", "right"))
        _draw_shape(draw, "square", _box_in_half(rng, answer, size, style), (0, 0, 0))
    else:
        count = rng.randint(1, 4)
        answer = str(count)
        radius = rng.randint(4, 6) if style == "train" else rng.randint(2, 3)
        centres: list[tuple[int, int]] = []
        while len(centres) < count:  # dots that do not touch
            centre = (rng.randint(radius + 1, size - radius - 2), rng.randint(radius + 1, size - radius - 2))
            if all(abs(centre[0] - a) + abs(centre[1] - b) > 4 * radius for a, b in centres):
                centres.append(centre)
        for cx, cy in centres:
            draw.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), fill=(0, 0, 0))
    return image, answer


def shapes_rows(
    n: int, *, seed: int = 0, tasks=("colour",), size: int = 64, style: str = "train", opening: bool = True
) -> list[dict]:
    """``n`` synthetic rows (TRL's image column + conversational prompt), tasks in turn, reproducible from ``seed``.

    ``opening``: end each prompt with the task's answer opening (an open assistant turn; the chat template of the
    VLMs grpo-kit assembles leaves it open). ``False`` for a model whose template would close that turn instead.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ImageDataError(f"n must be a positive int; got {n!r}.")
    tasks = (tasks,) if isinstance(tasks, str) else tuple(tasks)
    for task in tasks:
        if task not in IMAGE_TASKS:
            raise ImageDataError(f"Unknown image task {task!r}; choose one of {sorted(IMAGE_TASKS)}.")
    rng = random.Random(f"shapes-{seed}-{style}")
    rows = []
    for index in range(n):
        task = tasks[index % len(tasks)]
        image, answer = draw_image_task(task, rng, size=size, style=style)
        question, choices, task_opening = IMAGE_TASKS[task]
        question = question.format(choices=_listed(rng.sample(choices, len(choices))))
        words = ",".join(choices)
        if task in SECOND_PART:
            words += CHOICES_SEPARATOR + ",".join(SECOND_PART[task])
        rows.append(
            {
                "prompt": image_prompt(question, task_opening if opening else ""),
                "image": image,
                "answer": answer,
                "choices": words,
                "task": task,
            }
        )
    return rows


#: The alignment stage's question: the caption answers it. It lists no words: with the words listed, the caption's
#: tokens are half prompt, and the loss settles at the cost of a caption that ignores the picture (docs/results.md,
#: "Align first, then GRPO").
CAPTION_PROMPT = "Describe the picture."
_KINDS = ("square", "circle", "triangle")


def _picture_key(image) -> bytes:
    import hashlib

    return hashlib.sha256(image.tobytes()).digest()


def _task_pictures(tasks, n: int) -> set[bytes]:
    """The pictures of the synthetic task rows a recipe can draw (``n`` per split and style, each task alone and
    ``tasks`` together), as keys."""
    keys = set()
    for combination in {(task,) for task in tasks} | {tuple(tasks)}:
        for seed in _SPLIT_SEEDS.values():
            for style in _STYLES:
                keys |= {
                    _picture_key(r["image"])
                    for r in shapes_rows(n, seed=seed, tasks=combination, style=style)
                }
    return keys


def caption_rows(
    n: int = 1024, *, seed: int = 0, size: int = 64, excluded_rows: int | None = None
) -> list[dict]:
    """``n`` picture-caption rows for the alignment stage (LLaVA's "feature alignment": teach the vision tower and
    projector to describe the picture before any task): ``{"prompt": [user: picture + "Describe the picture."],
    "completion": [assistant: "A red circle on the left."], "image": PIL image}``, prompt-completion rows as TRL's
    SFTTrainer reads them, reproducible from ``seed``.

    The pictures are ``colour_side`` pictures (one shape, its colour, kind and side named) from a stream of their own,
    and none is one of the pictures of the synthetic task rows (train and test splits, both styles, the first
    ``excluded_rows``, default :data:`SHAPES_ROWS`, of ``colour``, ``side`` and ``colour_side``): a picture that
    would be is drawn again. Alignment never sees a picture GRPO trains on or is evaluated on."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ImageDataError(f"n must be a positive int; got {n!r}.")
    from PIL import Image, ImageDraw

    taken = _task_pictures(("colour", "side", "colour_side"), excluded_rows or SHAPES_ROWS)
    rng = random.Random(f"captions-{seed}")
    rows = []
    while len(rows) < n:
        colour, kind, side_word, box = _colour_side_picture(rng, size, "train")
        image = Image.new("RGB", (size, size), (255, 255, 255))
        _draw_shape(ImageDraw.Draw(image), kind, box, _COLOURS[colour])
        if _picture_key(image) in taken:
            continue
        rows.append(
            {
                "prompt": [
                    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": CAPTION_PROMPT}]}
                ],
                "completion": [{"role": "assistant", "content": f"A {colour} {kind} on the {side_word}."}],
                "image": image,
            }
        )
    return rows


def _open_image(path: Path, where: str):
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise ImageDataError(
            f"{where}: image file {path} does not exist. Put the file there, or fix the path "
            "(relative to the JSONL's folder)."
        )
    try:
        with Image.open(path) as image:
            return image.convert("RGB")  # loads the pixels now: a truncated file fails here, not in training
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise ImageDataError(
            f"{where}: {path} is not an image Pillow can read ({type(error).__name__}). Re-save it as PNG or JPEG, "
            "or drop the line."
        ) from None


def _image_path(jsonl: Path, name: Any, where: str) -> Path:
    """The image a JSONL line names: a path relative to the JSONL's folder that stays inside it once symlinks are
    resolved; an absolute path, ``..`` or a link out of the folder is refused naming the line."""
    folder = jsonl.parent.resolve()
    image = (folder / str(name)).resolve()
    if not image.is_relative_to(folder):
        raise ImageDataError(
            f"{where}: image {str(name)!r} leads outside the JSONL's folder {folder} (to {image}); image paths "
            "are relative to that folder and stay inside it. Copy the image into the folder and name it there."
        )
    return image


def _prompt_blocks(text: str, where: str) -> list[dict[str, Any]]:
    if not isinstance(text, str) or IMAGE_PLACEHOLDER not in text:
        raise ImageDataError(
            f"{where}: the prompt has no {IMAGE_PLACEHOLDER} placeholder. Write {IMAGE_PLACEHOLDER} where the picture "
            f'goes, e.g. "{IMAGE_PLACEHOLDER}What colour is the shape?".'
        )
    if text.count(IMAGE_PLACEHOLDER) != 1:
        raise ImageDataError(
            f"{where}: the prompt has {text.count(IMAGE_PLACEHOLDER)} {IMAGE_PLACEHOLDER} placeholders but a row has "
            "one image. Keep exactly one."
        )
    before, after = text.split(IMAGE_PLACEHOLDER)
    blocks = [{"type": "text", "text": before}] if before.strip() else []
    blocks.append({"type": "image"})
    if after.strip():
        blocks.append({"type": "text", "text": after})
    return [{"role": "user", "content": blocks}]


def load_image_tasks(path: str | Path) -> list[dict]:
    """A JSONL of ``{"image", "prompt", "answer"[, "choices"]}`` lines -> rows like :func:`shapes_rows`' (images
    opened and checked now, paths relative to the JSONL's folder and inside it)."""
    path = Path(path)
    if not path.is_file():
        raise ImageDataError(f"{path} does not exist. Pass a .jsonl file of image/prompt/answer lines.")
    rows = []
    for number, line in jsonl_lines(path):  # one line at a time, each within files.max_row_bytes
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ImageDataError(
                f"{where} is not JSON ({error.msg}). Write one JSON object per line."
            ) from None
        missing = [
            key for key in ("image", "prompt", "answer") if not isinstance(record, dict) or key not in record
        ]
        if missing:
            raise ImageDataError(
                f"{where} lacks {missing}. Each line needs image (a path), prompt and answer."
            )
        prompt = _prompt_blocks(record["prompt"], where)
        image = _open_image(_image_path(path, record["image"], where), where)
        choices = record.get("choices", "")
        if isinstance(choices, list):
            choices = ",".join(str(choice) for choice in choices)
        rows.append(
            {
                "prompt": prompt,
                "image": image,
                "answer": str(record["answer"]),
                "choices": str(choices),
                "task": "file",
            }
        )
    if not rows:
        raise ImageDataError(f"{path} holds no rows. Write one JSON object per line.")
    return rows


def rows_have_images(rows) -> bool:
    """True when the rows (a list of dicts or a ``datasets.Dataset``) carry TRL's ``image`` or ``images`` column."""
    columns = getattr(rows, "column_names", None)
    if columns is None:  # a list of dicts (an iterable dataset of unknown features: no column to see)
        columns = list(rows[0]) if isinstance(rows, list) and rows and isinstance(rows[0], dict) else []
    return "image" in columns or "images" in columns


#: Rows ``load_shapes`` draws when no size is asked (the recipe keeps ``dataset_size`` of them).
SHAPES_ROWS = 512
_SPLIT_SEEDS = {"train": 0, "test": 1}


def load_shapes(
    split: str = "train",
    source=None,
    *,
    tasks=("colour",),
    n: int = SHAPES_ROWS,
    style: str = "train",
    opening: bool = True,
):
    """The image-task rows as a ``datasets.Dataset`` (columns prompt, image, answer, choices, task).

    ``source``: None draws :func:`shapes_rows` (``split`` "train" seed 0, "test" seed 1: disjoint pictures);
    a ``.jsonl`` path reads :func:`load_image_tasks`; a list of such rows is taken as it is.
    ``opening``: :func:`shapes_rows`' (synthetic rows only).
    """
    import datasets

    if source is None:
        if split not in _SPLIT_SEEDS:
            raise ImageDataError(
                f"Unknown split {split!r} for synthetic shapes; use one of {sorted(_SPLIT_SEEDS)}."
            )
        rows = shapes_rows(n, seed=_SPLIT_SEEDS[split], tasks=tasks, style=style, opening=opening)
    elif isinstance(source, (str, Path)):
        rows = load_image_tasks(source)
    elif isinstance(source, list):
        rows = source
    else:
        raise ImageDataError(
            f"source must be None (synthetic shapes), a .jsonl path or a list of rows; got {type(source).__name__}."
        )
    if not rows_have_images(rows):
        raise ImageDataError(
            "these rows have no image column; image tasks need one PIL image per row in `image`."
        )
    return datasets.Dataset.from_list(rows)
