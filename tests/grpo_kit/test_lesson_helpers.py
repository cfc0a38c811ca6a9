"""The lessons' display helpers: code shown where code is the lesson, long text wrapped and shown as text."""

from __future__ import annotations

from grpo_kit.lesson_helpers import source_code, wrapped_text
from rewards import course_original


def test_source_code_shows_the_functions_verbatim():
    html = source_code(course_original.int_reward_func, course_original.soft_format_reward_func).text
    assert "int_reward_func" in html and "soft_format_reward_func" in html and "isdigit" in html
    assert "<pre" in html or "<code" in html  # a code block, not prose


def test_wrapped_text_wraps_and_keeps_tags():
    html = wrapped_text("<answer>72</answer> " + "x" * 5000).text
    assert "white-space: pre-wrap" in html and "&lt;answer&gt;72&lt;/answer&gt;" in html
    assert "<answer>" not in html
