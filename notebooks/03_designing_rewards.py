# /// script
# requires-python = ">=3.10"
# dependencies = [
#     "grpo-kit[notebooks] @ git+https://github.com/grpo-kit/grpo-kit@v0.1.0",
# ]
# ///
import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell(hide_code=True)
def _():
    import marimo as mo

    return (mo,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    # Lesson 3 · Designing rewards

    In GRPO the reward function *is* the specification: the model becomes whatever scores well.
    TRL's contract is small —

    ```python
    def my_reward(completions, **kwargs) -> list[float | None]: ...
    ```

    `completions` is a list of strings (standard format) or a list of message lists
    (conversational: `[{"role": "assistant", "content": "..."}]`); every dataset column arrives as a
    keyword argument (`answer`, `solution`, …) together with `prompts`, `completion_ids` and
    `trainer_state`; `None` means "this function has no opinion on this row".

    This lesson uses the `rewards` package of grpo-kit: TRL's functions with the same names and
    outputs, the Hugging Face course's functions with their pitfalls fixed, and a **lint** that
    catches hackable rewards before they cost a training run.
    """)
    return


@app.cell
def _():
    from grpo_kit.models import smollm2_tokenizer

    # Token-based rewards need token ids; GRPOTrainer passes `completion_ids` from the model's tokenizer.
    tokenizer = smollm2_tokenizer()
    return (tokenizer,)


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 1 · Type a completion, see every reward score it

    The gold answer goes to the `solution` column (TRL's accuracy rewards) and the `answer` column
    (the course's GSM8K rewards). Try: put the reasoning on one line; delete the newline after
    `</answer>`; answer `72.0`, `-3` or `\boxed{72}`; empty the tags.
    """)
    return


@app.cell
def _(mo):
    completion_box = mo.ui.text_area(
        value="<reasoning>\nShe had 30 apples and bought 42 more.\n30 + 42 = 72.\n</reasoning>\n<answer>\n72\n</answer>\n",
        label="completion",
        rows=8,
        full_width=True,
    )
    gold_box = mo.ui.text(value="72", label="gold answer")
    mo.vstack([completion_box, gold_box])
    return completion_box, gold_box


@app.cell
def _():
    import rewards

    # Every reward function of the library, built with illustrative settings.
    reward_functions = {
        "accuracy_reward (TRL, math-verify)": rewards.accuracy_reward,
        "reasoning_accuracy_reward (TRL)": rewards.reasoning_accuracy_reward,
        "think_format_reward (TRL)": rewards.think_format_reward,
        "soft_overlong_punishment (TRL, L=96, cache=32)": rewards.get_soft_overlong_punishment(96, 32),
        "repetition_penalty_reward (TRL, 3-grams)": rewards.get_repetition_penalty_reward(),
        "cosine_scaled_reward (TRL, max_len=96)": rewards.get_cosine_scaled_reward(96),
        "format_reward (course 12.4, fixed)": rewards.format_reward,
        "length_reward(50, tokens) (course 12.5, fixed)": rewards.length_reward(50, unit="tokens"),
        "length_reward(50, chars)": rewards.length_reward(50, unit="chars"),
        "xmlcount_reward (course 12.6)": rewards.xmlcount_reward,
        "soft_format_reward (course 12.6)": rewards.soft_format_reward,
        "strict_format_reward (course 12.6)": rewards.strict_format_reward,
        "int_reward (course 12.6)": rewards.int_reward,
        "correctness_reward (course 12.6)": rewards.correctness_reward,
    }
    return reward_functions, rewards


@app.cell
def _(completion_box, gold_box, reward_functions, tokenizer):
    def score_everything(text: str, gold: str) -> dict[str, tuple]:
        """Each function's reward for `text`, standard and conversational (they must agree)."""
        _ids = [tokenizer(text, add_special_tokens=False)["input_ids"]]
        _columns = {
            "prompts": [[{"role": "user", "content": "How many apples?"}]],
            "completion_ids": _ids,
            "solution": [gold],
            "answer": [gold],
            "trainer_state": None,
        }
        _scores = {}
        for _name, _fn in reward_functions.items():
            # By keyword, as GRPOTrainer calls them (TRL's token rewards take completion_ids first).
            _plain = _fn(completions=[text], **_columns)[0]
            _chat = _fn(completions=[[{"role": "assistant", "content": text}]], **_columns)[0]
            _scores[_name] = (_plain, _chat)
        return _scores

    typed_scores = score_everything(completion_box.value, gold_box.value)
    return score_everything, typed_scores


@app.cell
def _(completion_box, mo, tokenizer, typed_scores):
    def _fmt(value):
        return "None" if value is None else f"{value:+.3f}"

    _rows = "\n".join(
        f"| `{name}` | {_fmt(plain)} | {_fmt(chat)} |" for name, (plain, chat) in typed_scores.items()
    )
    _n_tokens = len(tokenizer(completion_box.value, add_special_tokens=False)["input_ids"])
    mo.md(
        f"{len(completion_box.value)} characters, {_n_tokens} tokens (SmolLM2 tokenizer).\n\n"
        "| reward function | standard (`str`) | conversational (`[{role, content}]`) |\n|:---|:---|:---|\n"
        + _rows
    )
    return


@app.cell
def test_every_reward_scores_both_formats_alike(score_everything):
    _perfect = "<reasoning>\nShe had 30 apples.\n30 + 42 = 72.\n</reasoning>\n<answer>\n72\n</answer>\n"
    _scores = score_everything(_perfect, "72")
    for _name, (_plain, _chat) in _scores.items():
        assert _plain == _chat, _name
    # The five GSM8K rewards give the course's maximum on a perfect completion: 0.5 + 0.5 + 0.5 + 0.5 + 2.0.
    _gsm8k = [k for k in _scores if "course 12.6" in k]
    assert sum(_scores[k][0] for k in _gsm8k) == 4.0
    # A wrong answer loses correctness but keeps every format reward: correctness (2.0) weighs as much as all four together.
    _wrong = score_everything(_perfect.replace("\n72\n</answer>", "\n71\n</answer>"), "72")
    assert _wrong["correctness_reward (course 12.6)"][0] == 0.0
    assert sum(_wrong[k][0] for k in _gsm8k) == 2.0
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 2 · The course's pitfalls, live — and fixed

    The Hugging Face LLM course (chapter 12) writes its rewards in a few lines each. Four of those
    lines quietly teach the model something else. Below, the **course's code, verbatim**, next to the
    library's function, on the input that exposes the difference.
    """)
    return


@app.cell
def _():
    # The course's code (LLM Course ch. 12.5-12.6), verbatim — shipped in rewards.course_original only as
    # the "before" exhibit (read its source there). Never train with these.
    from rewards import course_original

    course_reward_len = course_original.reward_len_50
    course_soft_format_reward_func = course_original.soft_format_reward_func
    course_strict_format_reward_func = course_original.strict_format_reward_func
    course_int_reward_func = course_original.int_reward_func
    course_correctness_reward_func = course_original.correctness_reward_func
    return (
        course_correctness_reward_func,
        course_int_reward_func,
        course_reward_len,
        course_soft_format_reward_func,
        course_strict_format_reward_func,
    )


@app.cell
def _(
    course_correctness_reward_func,
    course_int_reward_func,
    course_reward_len,
    course_soft_format_reward_func,
    rewards,
    tokenizer,
):
    import contextlib
    import io

    def _chat(text):
        return [[{"role": "assistant", "content": text}]]

    _prompts = [[{"role": "user", "content": "What is 2 - 5?"}]]
    _multiline = "<reasoning>\nStart at 2.\nTake away 5.\n</reasoning>\n<answer>\n-3\n</answer>\n"
    _summary = " ".join(["The cat is a small domesticated carnivorous mammal kept as a pet."] * 4)
    _summary_ids = [tokenizer(_summary, add_special_tokens=False)["input_ids"]]
    _quiet = io.StringIO()  # the course's correctness function prints every batch
    with contextlib.redirect_stdout(_quiet):
        _course_decimal = course_correctness_reward_func(
            _prompts, _chat("<answer>\n72.0\n</answer>"), ["72"]
        )[0]

    pitfalls = [
        {
            "pitfall": "regex without re.DOTALL: multi-line reasoning never matches",
            "input": _multiline,
            "course": course_soft_format_reward_func(_chat(_multiline))[0],
            "ours": rewards.soft_format_reward(_chat(_multiline))[0],
            "right": 0.5,
        },
        {
            "pitfall": f"characters vs tokens: 'ideal 50' measured in characters ({len(_summary)} chars, "
            f"{len(_summary_ids[0])} tokens)",
            "input": _summary,
            "course": float(course_reward_len([_summary])[0]),
            "ours": rewards.length_reward(50, unit="tokens")([_summary], completion_ids=_summary_ids)[0],
            "right": -abs(50.0 - len(_summary_ids[0])),
        },
        {
            "pitfall": "str.isdigit: a negative integer is 'not an integer'",
            "input": _multiline,
            "course": course_int_reward_func(_chat(_multiline))[0],
            "ours": rewards.int_reward(_chat(_multiline))[0],
            "right": 0.5,
        },
        {
            "pitfall": "string comparison: '72.0' is not '72'",
            "input": "<answer>\n72.0\n</answer>",
            "course": _course_decimal,
            "ours": rewards.correctness_reward(_chat("<answer>\n72.0\n</answer>"), answer=["72"])[0],
            "right": 2.0,
        },
    ]
    return (pitfalls,)


@app.cell
def _(
    course_correctness_reward_func,
    course_int_reward_func,
    course_reward_len,
    course_soft_format_reward_func,
    mo,
    pitfalls,
):
    from grpo_kit.teaching.lesson_helpers import source_code as _source_code

    _rows = "\n".join(
        f"| {p['pitfall']} | {p['course']:+.2f} | **{p['ours']:+.2f}** | {p['right']:+.2f} |"
        for p in pitfalls
    )
    _table = mo.md(
        "| pitfall | course's code | `rewards` | should be |\n|:---|:---|:---|:---|\n" + _rows + "\n\n"
        "Each of these is also a unit test of the library that fails on the course's code "
        "(`tests/rewards/`). The library's docstrings (`rewards.course`, `rewards.gsm8k`) list the rest: "
        "empty tags that earn format rewards, `count_xml` charging the whole text when the completion "
        "ends at `</answer>`, a bare `except:` that scores everything 0."
    )
    mo.vstack(
        [
            _table,
            mo.accordion(
                {
                    "The course's code, verbatim (rewards.course_original)": _source_code(
                        course_soft_format_reward_func,
                        course_reward_len,
                        course_int_reward_func,
                        course_correctness_reward_func,
                    )
                }
            ),
        ]
    )
    return


@app.cell
def test_course_pitfalls_are_fixed(pitfalls):
    for _p in pitfalls:
        assert _p["ours"] == _p["right"], _p["pitfall"]
        assert _p["course"] != _p["right"], _p["pitfall"]
    return


@app.cell
def _(course_strict_format_reward_func, mo, rewards):
    # A model usually stops at EOS right after </answer>: the completion has no final newline.
    eos_completion = "<reasoning>\nAdd 30 and 42.\n</reasoning>\n<answer>\n72\n</answer>"
    eos_scores = {
        "course": course_strict_format_reward_func([[{"role": "assistant", "content": eos_completion}]])[0],
        "ours": rewards.strict_format_reward([eos_completion])[0],
    }
    mo.md(
        "**Stopping at EOS.** The course's `strict_format_reward_func` demands `\\n` after `</answer>`, so a "
        f"completion that ends at `</answer>` scores **{eos_scores['course']:.1f}**; "
        f"`rewards.strict_format_reward` accepts an optional final newline: **{eos_scores['ours']:.1f}**."
    )
    return (eos_scores,)


@app.cell
def test_strict_format_accepts_eos_after_the_answer_tag(eos_scores):
    assert eos_scores == {"course": 0.0, "ours": 0.5}
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 3 · math-verify: is `\frac{1}{2}` the same answer as `0.5`?

    `accuracy_reward` (TRL's, and ours with the same verdicts) parses both the completion and the gold
    solution with [math-verify](https://github.com/huggingface/Math-Verify) and compares them
    symbolically. A gold answer it cannot parse gives `None` — the row is skipped, not punished.
    Ours decides plain, boxed and inline numbers without math-verify (same verdicts) and keeps a
    wall-clock bound in any thread.
    """)
    return


@app.cell
def _(mo):
    verdict_completion = mo.ui.text(
        value=r"The answer is $\frac{1}{2}$.", label="completion", full_width=True
    )
    verdict_gold = mo.ui.text(value="0.5", label="gold solution")
    mo.vstack([verdict_completion, verdict_gold])
    return verdict_completion, verdict_gold


@app.cell
def _(mo, rewards, verdict_completion, verdict_gold):
    verdict_pairs = [
        (verdict_completion.value, verdict_gold.value),
        (r"\boxed{0.5}", r"$\frac{1}{2}$"),
        (r"\boxed{2\sqrt{2}}", r"$\sqrt{8}$"),
        (r"\boxed{\{1, 2\}}", r"$\{2, 1\}$"),
        (r"\boxed{1,000}", "1000"),
        (r"\boxed{-3}", "$-3$"),
        (r"\boxed{4}", "72"),
        ("I think it is 72", "72"),
        (r"\boxed{3}", "no answer here"),
    ]
    verdicts = rewards.accuracy_reward([c for c, _ in verdict_pairs], solution=[s for _, s in verdict_pairs])
    mo.md(
        "| completion | gold | `accuracy_reward` |\n|:---|:---|:---|\n"
        + "\n".join(f"| `{c}` | `{s}` | {v} |" for (c, s), v in zip(verdict_pairs, verdicts))
        + "\n\nNote `I think it is 72` → 0.0: math-verify wants the answer marked (`\\boxed{}` or `$…$`)."
    )
    return verdict_pairs, verdicts


@app.cell
def test_math_verify_verdicts(verdict_pairs, verdicts):
    _by_pair = dict(zip(verdict_pairs[1:], verdicts[1:]))  # skip the editable first row
    assert _by_pair[(r"\boxed{0.5}", r"$\frac{1}{2}$")] == 1.0
    assert _by_pair[(r"\boxed{2\sqrt{2}}", r"$\sqrt{8}$")] == 1.0
    assert _by_pair[(r"\boxed{4}", "72")] == 0.0
    assert _by_pair[(r"\boxed{3}", "no answer here")] is None  # unparsable gold: skipped, not punished
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## 4 · `rewards.lint`: catch the hack before the model does

    A first attempt at a format reward for `<think>…</think><answer>…</answer>`. It looks right and
    passes a quick try by hand. `rewards.lint` runs it the way `GRPOTrainer` will — over empty,
    multi-line, conversational, huge, malformed and adversarial completions — and reports in plain
    words what the model would exploit or where training would crash.
    """)
    return


@app.cell
def _(rewards):
    import re

    def my_format_reward(completions, **kwargs):
        pattern = r"<think>.*?</think><answer>.*?</answer>"
        return [1.0 if re.match(pattern, c) else 0.0 for c in completions]

    my_report = rewards.lint(my_format_reward, verbose=False)
    library_report = rewards.lint(rewards.format_reward, verbose=False)
    return library_report, my_format_reward, my_report


@app.cell
def _(library_report, mo, my_format_reward, my_report):
    from grpo_kit.teaching.lesson_helpers import source_code, wrapped_text

    mo.vstack(
        [
            mo.md("**The first attempt:**"),
            source_code(my_format_reward),
            wrapped_text(str(my_report)),
            mo.md(
                "Three lessons in one report: conversational completions are lists, not strings (it would "
                "crash inside `GRPOTrainer`); `.` without `re.DOTALL` stops at a newline, so real multi-line "
                "reasoning scores 0; and `<think></think><answer></answer>` — no reasoning, no answer — "
                "earns the full reward, which is exactly what the model will learn to write.\n\n"
                "**The library's `format_reward`:**"
            ),
            wrapped_text(str(library_report)),
            mo.md("From a shell: `grpo-kit-reward-lint my_module:my_reward` (exit status 1 on problems)."),
        ]
    )
    return


@app.cell
def test_lint_catches_the_hackable_reward(library_report, my_report):
    assert not my_report.ok
    assert {"dotall", "empty-tags", "exception"} <= my_report.checks()
    assert library_report.ok, str(library_report)
    return


@app.cell(hide_code=True)
def _(mo):
    mo.md(r"""
    ## Takeaways

    * Measure what you mean: tokens or characters, the last assistant message, numbers as numbers.
    * Reward the content, not the wrapping: a format reward that pays for empty tags is a reward hack
      waiting to happen. Make correctness weigh at least as much as all format rewards together (2.0 vs 4 × 0.5).
    * Return `None` when a function has no opinion (unparsable gold), never raise on model output.
    * Lint every new reward function before training: `rewards.lint(fn)`.

    Next: **Lesson 4** trains SmolLM2 with TRL on a length reward.
    """)
    return


if __name__ == "__main__":
    app.run()
