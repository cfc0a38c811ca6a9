"""datasets_prep.images: synthetic picture tasks in TRL's image format, a JSONL + image folder, and bad input."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from datasets_prep.images import (
    IMAGE_TASKS,
    ImageDataError,
    draw_image_task,
    load_image_tasks,
    load_shapes,
    shapes_rows,
)
from rewards import visual_answer_reward, visual_choice_reward


def _pixels(image):
    return list(image.getdata())


def test_rows_follow_trls_image_format_and_repeat_from_their_seed():
    rows = shapes_rows(6, seed=3, tasks=("colour", "count", "side"))
    again = shapes_rows(6, seed=3, tasks=("colour", "count", "side"))
    assert [r["task"] for r in rows] == ["colour", "count", "side"] * 2
    for row, same in zip(rows, again):
        assert row["prompt"][0]["role"] == "user"
        assert row["prompt"][0]["content"][0] == {
            "type": "image"
        }  # TRL fills this placeholder with the image
        assert isinstance(row["image"], Image.Image) and row["image"].size == (64, 64)
        assert row["answer"] in row["choices"].split(",") == list(IMAGE_TASKS[row["task"]][1])
        assert (row["answer"], _pixels(row["image"])) == (same["answer"], _pixels(same["image"]))
    questions = {r["prompt"][0]["content"][1]["text"] for r in shapes_rows(16, seed=0)}
    assert len(questions) > 1  # the answers are listed in an order drawn per row: the first one is no answer
    assert all(all(colour in q for colour in ("red", "green", "blue", "yellow")) for q in questions)
    other = shapes_rows(6, seed=4, tasks=("colour", "count", "side"))
    assert [_pixels(r["image"]) for r in rows] != [_pixels(r["image"]) for r in other]


def test_each_prompt_opens_the_answer_so_the_next_word_is_the_choice():
    for row in shapes_rows(3, seed=0, tasks=("colour", "count", "side")):
        opening = row["prompt"][-1]
        assert opening["role"] == "assistant" and len(row["prompt"]) == 2
        assert opening["content"] == [{"type": "text", "text": IMAGE_TASKS[row["task"]].opening}]
        assert not any(block["type"] == "image" for block in opening["content"])
    plain = shapes_rows(3, seed=0, tasks=("colour", "count", "side"), opening=False)
    assert [[message["role"] for message in row["prompt"]] for row in plain] == [["user"]] * 3


@pytest.mark.parametrize("task", sorted(IMAGE_TASKS))
def test_the_answer_is_in_the_picture(task):
    import random

    rng = random.Random(0)
    for style in ("train", "transfer"):
        for _ in range(20):
            image, answer = draw_image_task(task, rng, style=style)
            background = image.getpixel((0, 0)) if style == "train" else (200, 200, 200)
            ink = [(x, y) for y in range(64) for x in range(64) if image.getpixel((x, y)) != background]
            assert ink
            if task == "colour":
                colours = {image.getpixel(p) for p in ink}
                assert len(colours) == 1 and answer in {"red", "green", "blue", "yellow"}
            elif task == "side":
                xs = [x for x, _ in ink]
                assert (max(xs) < 32) if answer == "left" else (min(xs) >= 32)


def test_the_transfer_style_draws_differently():
    train = shapes_rows(32, seed=0, style="train")
    transfer = shapes_rows(32, seed=0, style="transfer")

    def side(image):  # the drawn shape's bounding-box side
        from PIL import ImageChops

        left, top, right, bottom = ImageChops.difference(
            image, Image.new("RGB", image.size, image.getpixel((0, 0)))
        ).getbbox()
        return max(right - left, bottom - top)

    assert (
        max(side(r["image"]) for r in transfer) < 18 <= min(side(r["image"]) for r in train)
    )  # transfer: at most 14 px, train: at least 18
    assert {r["image"].getpixel((32, 32)) for r in transfer} <= {(200, 200, 200)}  # corners, grey background


def test_the_reward_reads_the_first_answer_word():
    golds = ["red", "red", "red", "3", "3", "left"]
    choices = ["red,green,blue,yellow"] * 3 + ["1,2,3,4"] * 2 + ["left,right"]
    completions = ["The shape is red.", "Blue, or maybe red", "", "Three dots", "4", "LEFT"]
    assert visual_answer_reward(completions, answer=golds, choices=choices) == [1.0, 0.0, 0.0, 1.0, 0.0, 1.0]
    conversational = [[{"role": "assistant", "content": "red"}]]
    assert visual_answer_reward(conversational, answer=["red"]) == [1.0]
    with pytest.raises(ValueError, match="needs the `answer` column"):
        visual_answer_reward(["red"])
    # its format reward: any listed answer named, right or wrong, scores; none named, or no list, scores 0
    assert visual_choice_reward(completions, choices=choices) == [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert visual_choice_reward(["a shape", "red"], choices=["red,blue", ""]) == [0.0, 0.0]
    with pytest.raises(ValueError, match="needs the `choices` column"):
        visual_choice_reward(["red"])


def _write(tmp_path, lines):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def test_a_jsonl_with_an_image_folder_reads_into_the_same_rows(tmp_path):
    (tmp_path / "images").mkdir()
    Image.new("RGB", (40, 30), (220, 30, 30)).save(tmp_path / "images" / "a.png")
    path = _write(
        tmp_path,
        [
            {
                "image": "images/a.png",
                "prompt": "<image>What colour?",
                "answer": "red",
                "choices": ["red", "blue"],
            }
        ],
    )
    (row,) = load_image_tasks(path)
    assert row["prompt"] == [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What colour?"}]}
    ]
    assert (row["answer"], row["choices"], row["image"].size) == ("red", "red,blue", (40, 30))
    dataset = load_shapes(source=path)
    assert dataset.column_names == ["prompt", "image", "answer", "choices", "task"] and len(dataset) == 1


def test_a_missing_image_file_names_the_line_and_the_fix(tmp_path):
    path = _write(tmp_path, [{"image": "images/nope.png", "prompt": "<image>Colour?", "answer": "red"}])
    with pytest.raises(
        ImageDataError, match=r"line 1: image file .*nope.png does not exist\. Put the file there"
    ):
        load_image_tasks(path)


def test_an_unreadable_image_names_the_fix(tmp_path):
    (tmp_path / "broken.png").write_bytes(b"not a picture at all")
    path = _write(tmp_path, [{"image": "broken.png", "prompt": "<image>Colour?", "answer": "red"}])
    with pytest.raises(ImageDataError, match="is not an image Pillow can read.*Re-save it as PNG or JPEG"):
        load_image_tasks(path)


def test_a_prompt_without_an_image_placeholder_names_the_fix(tmp_path):
    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    path = _write(tmp_path, [{"image": "a.png", "prompt": "What colour is it?", "answer": "red"}])
    with pytest.raises(
        ImageDataError, match="line 1: the prompt has no <image> placeholder. Write <image> where"
    ):
        load_image_tasks(path)


@pytest.mark.parametrize("how", ["dot-dot", "absolute", "symlink", "symlinked-folder"])
def test_an_image_path_out_of_the_jsonl_folder_is_refused_naming_the_line(tmp_path, how):
    """Paths are relative to the JSONL's folder and stay inside it, symlinks resolved (issue 55)."""
    private = tmp_path / "private"
    private.mkdir()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(private / "secret.png")
    data = tmp_path / "data"
    data.mkdir()
    Image.new("RGB", (8, 8)).save(data / "fine.png")
    name = {"dot-dot": "../private/secret.png", "absolute": str(private / "secret.png")}.get(how, "")
    if how == "symlink":
        (data / "link.png").symlink_to(private / "secret.png")
        name = "link.png"
    elif how == "symlinked-folder":
        (data / "pictures").symlink_to(private)
        name = "pictures/secret.png"
    path = _write(
        data,
        [
            {"image": "fine.png", "prompt": "<image>Colour?", "answer": "red"},
            {"image": name, "prompt": "<image>Colour?", "answer": "red"},
        ],
    )
    with pytest.raises(
        ImageDataError, match=r"line 2: image .* leads outside the JSONL's folder .*Copy the image"
    ):
        load_image_tasks(path)


def test_a_symlink_inside_the_folder_is_read(tmp_path):
    (tmp_path / "images").mkdir()
    Image.new("RGB", (8, 8), (220, 30, 30)).save(tmp_path / "images" / "a.png")
    (tmp_path / "b.png").symlink_to(tmp_path / "images" / "a.png")
    path = _write(tmp_path, [{"image": "b.png", "prompt": "<image>Colour?", "answer": "red"}])
    (row,) = load_image_tasks(path)
    assert row["image"].getpixel((0, 0)) == (220, 30, 30)
