r"""TRL's ``accuracy_reward`` verdict without math-verify, where math-verify's own rules decide it.

TRL parses the gold answer with math-verify's defaults and the completion with
``LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False)`` in
``first_match`` mode, then ``verify``. Read from math-verify 0.9 (``parser.lazy_latex_regex``,
``extract_target_from_pred``, ``grader.sympy_numeric_eq``), that extraction can only match:

* priority 0: ``\boxed{…}`` (alone, greedy to the *last* ``}`` of the text, or inside a ``$…$``,
  ``$$…$$``, ``\[…\]``, ``\(…\)``, `` […] `` environment), and ``final answer is <env> I hope``;
* priority 50–200: a LaTeX environment (or a bare ``\frac{a}{b}``) at most 50 characters after the
  word "answer" (any case; 100 after "final answer … is").

Within a priority the rightmost match is tried and, in ``first_match`` mode, only that one. So:

The ``$`` environments open and close only at an *unescaped* ``$`` (``(?<!\\)\$``; the inline one also
not after a digit, ``(?<!\\|\d)\$``), never cross an unescaped ``$``, and the inline one stays on one
line (``(?:\\[$]|[^\n$])``). So a GSM8K money sign opens an environment only when another unescaped
``$`` follows on its line: "She earns $18 a day." opens nothing, "$5 and $10" opens ``$5 and $``.

1. **Nothing to extract** — no ``\boxed{``, and no environment can start in an anchor's window: every
   possible start (an unescaped ``$$``; an unescaped ``$`` with a closing one later on its line; every
   ``\[``, ``\(``, ``[``, ``\frac``) lies outside 0–52 characters after each "answer", and none follows a
   "final answer" (its ``\s+is\s*`` runs are unbounded). The verdict is 0.0. This covers plain trailing
   numbers ("… so the answer is 72."), "The answer is $18.", no answer at all, unanchored ``$72$`` and
   money ``$…$`` spans far from the anchor.
2. **One boxed number** — exactly one ``\boxed{``, no "I hope", no ``\[`` or ``\(`` anywhere, no ``$$``
   after it (``$$…$$`` content holds no ``$$``, so a display environment around it needs one there;
   GSM8K's ``= $$<<16+27=43.00>>43.00`` lies before it), no ``[`` on its line, no ``}`` after it, and no inline ``$…$`` that could enclose it (an unescaped ``$``
   before it *and* after it on its line) unless that is exactly ``$\boxed{…}$`` with no percent after:
   the match is that ``\boxed{…}``, whatever "answer" anchors exist (they have lower priority). Money
   signs on other lines or on one side only do not matter; ``\boxed{\$18}`` reads ``\$18``, which
   math-verify's normalisation turns into ``18``.
3. **One anchored inline number** — no ``\boxed{``, no "I hope"; the environment start nearest an
   anchor is an inline ``$…$`` at most 50 characters after an "answer"; every other possible start
   (but those inside it) lies outside every anchor's window and before any "final answer" (money
   ``$…$`` spans elsewhere are fine); no "answer" inside it, no percent sign after it and no
   ``, and``/``or`` joining a further environment: every anchored pattern that matches extracts it.

The extracted LaTeX must be a number this module reads exactly as latex2sympy does: an integer
(``72``, ``-3``, ``007``), thousands commas (``1,234``), a decimal with at most 6 fractional digits
(``72.0``, ``1,234.5``; math-verify compares floats rounded to 6 places, so exact comparison gives the
same verdict), or a simple fraction (``\frac{3}{4}``, ``-\frac{1}{2}``). The gold must be a canonical
integer (also with thousands commas, ``2,125``) or a simple fraction. Anything else returns ``None`` and
goes to math-verify.

Proven against ``trl.rewards.accuracy_reward`` (verdicts *and* the logged ``gold_parsed`` /
``answer_parsed`` strings) on generated cases of every answer style in ``tests/rewards`` (GSM8K-style
solutions with money signs, percentages, ``<<48/2=24>>`` annotations and thousands commas among them)
and on random texts made of the pieces these rules turn on (hypothesis).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

__all__ = ["Gold", "fast_verdict", "parse_gold"]

_MAX_DIGITS = 15  # sympy Floats carry 15 significant digits: stay where strings round-trip exactly

_GOLD_INT = re.compile(r"0|-?[1-9]\d{0,14}")
_FRACTION = re.compile(r"(-?)\\frac\{(0|[1-9]\d{0,14})\}\{([1-9]\d{0,14})\}")
_INTEGER = re.compile(r"-?\d{1,15}")
_THOUSANDS = re.compile(r"-?[1-9]\d{0,2}(?:,\d{3}){1,4}")
_DECIMAL = re.compile(r"-?(?:0|[1-9]\d{0,2}(?:,\d{3}){1,4}|[1-9]\d{0,13})\.\d{1,6}")
_ANSWER = re.compile(r"(?i:answer)")  # math-verify's anchor, with its Unicode case-insensitivity
_FINAL_ANSWER = re.compile(r"(?i:final answer)")
_NEXT_GROUP = re.compile(r"\s*(?:,?and|,?or|,)")  # what joins a further environment into a set
_PERCENT_AFTER = re.compile(r"\s*(?:\\?%|[Pp]ercent|[Pp]ct)")  # math-verify's percent group
_ANCHOR_WINDOW = 50  # answer.{0,50}?<env>


@dataclass(frozen=True)
class Gold:
    """A gold answer this module can decide for: its exact value and math-verify's logged string."""

    value: int | Fraction  # an int when whole (cheaper to build; compares exactly with a Fraction)
    parsed: str  # str(parse(solution)), what TRL logs as gold_parsed


@dataclass(frozen=True)
class _Number:
    value: int | Fraction
    is_float: bool  # a decimal: sympy Float, compared after rounding to 6 places
    parsed: str  # str(parse(completion)), what TRL logs as answer_parsed


def _rational_str(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _parsed(value_str: str, latex: str) -> str:
    return f"[{value_str}, {latex!r}]"


def _fraction(text: str) -> Fraction | None:
    match = _FRACTION.fullmatch(text)
    if match is None:
        return None
    sign, numerator, denominator = match.groups()
    return Fraction(int(numerator), int(denominator)) * (-1 if sign else 1)


def parse_gold(solution: str) -> Gold | None:
    """The gold answer when it is a canonical integer (``72``, ``-3``), one with thousands commas
    (``2,125``: 14 of GSM8K's 1,319 test answers; math-verify logs it without them, ``[2125, '2125']``)
    or a simple ``\\frac{p}{q}``."""
    if not isinstance(solution, str):
        return None
    if _GOLD_INT.fullmatch(solution):
        return Gold(int(solution), _parsed(str(int(solution)), solution))
    if _THOUSANDS.fullmatch(solution):
        value = int(solution.replace(",", ""))
        return Gold(value, _parsed(str(value), str(value)))
    value = _fraction(solution)
    if value is not None:
        return Gold(value, _parsed(_rational_str(value), solution))
    return None


def _float_str(digits: str) -> str:
    """sympy's ``str(Float(digits))`` for 15 digits of precision (mpmath's fixed notation)."""
    value = Decimal(digits)
    return format(value.quantize(Decimal(1).scaleb(value.adjusted() - (_MAX_DIGITS - 1))), "f")


def _number(latex: str) -> _Number | None:
    """The value latex2sympy gives ``latex``, when it is one of the plain forms above.

    A leading ``\\$`` (``\\boxed{\\$18}``) is dropped, as math-verify's normalisation removes every
    ``\\$`` before parsing; the logged string is the normalised one (``[18, '18']``)."""
    latex = latex.removeprefix("\\$")
    if _INTEGER.fullmatch(latex) or _THOUSANDS.fullmatch(latex):
        value = int(latex.replace(",", ""))
        return _Number(value, False, _parsed(str(value.numerator), latex))
    if _DECIMAL.fullmatch(latex):
        digits = latex.replace(",", "")
        value = Fraction(digits)
        # mpmath switches to exponent notation below 1e-4; zero prints as 0.0: leave both to math-verify
        if value == 0 or abs(value) < Fraction(1, 10_000) or len(digits.strip("-0.").replace(".", "")) > 15:
            return None
        return _Number(value, True, _parsed(_float_str(digits), latex))
    value = _fraction(latex)
    if value is not None:
        return _Number(value, False, _parsed(_rational_str(value), latex))
    return None


def _verdict(answer: _Number, gold: Gold) -> float | None:
    if answer.is_float and gold.value.denominator != 1:
        return None  # float vs non-integer rational: math-verify's rounding decides
    return float(answer.value == gold.value)


def _boxed_latex(content: str) -> str | None:
    """Case 2: the content of the only ``\\boxed{…}`` when it must be the extracted match."""
    start = content.find("\\boxed{")
    if content.find("\\boxed{", start + 1) != -1 or "I hope" in content:
        return None
    if "\\[" in content or "\\(" in content or content.find("$$", start) != -1:
        return None  # a display environment could enclose it from another line
    # A "$$" only before it (GSM8K's "= $$<<16+27=43.00>>43.00", a money sign before an annotation) opens
    # no display environment around it: ``$$…$$`` needs a closing "$$" after the boxed, and there is none.
    line_start = content.rfind("\n", 0, start) + 1
    line_end = content.find("\n", start)
    line_end = len(content) if line_end == -1 else line_end
    if content.find("[", line_start, line_end) != -1:
        return None  # a " [ … \\boxed{…} … ] " environment could enclose it
    open_at = start + len("\\boxed{")
    close = _closing_brace(content, open_at)
    if close == -1:
        return None
    if content.find("}", close + 1) != -1:
        return None  # the greedy \\boxed{.+} runs to the last "}": math-verify decides
    opener = _enclosing_dollar(content, start, open_at, line_start, line_end)
    if opener != -1 and not (
        # exactly $\\boxed{…}$: the environment's normalisation keeps only the boxed content, so it
        # extracts the same number as the bare boxed match, unless a percent sign follows it
        opener == start - 1
        and content[close + 1 : close + 2] == "$"
        and _PERCENT_AFTER.match(content, close + 2) is None
    ):
        return None
    return content[open_at:close]


def _closing_brace(content: str, open_at: int) -> int:
    """Index of the ``}`` that closes the brace opened just before ``open_at`` (within 64 characters:
    numbers are short), else -1."""
    close = content.find("}", open_at, open_at + 64)
    if close == -1 or content.find("{", open_at, close) == -1:
        return close  # the usual \\boxed{72}: no nested brace
    depth = 1
    for i in range(open_at, min(len(content), open_at + 64)):
        char = content[i]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _unescaped_dollar(content: str, lo: int, hi: int, last: bool = False) -> int:
    """Index of the first (or last) ``$`` in ``content[lo:hi]`` not preceded by a backslash, else -1.

    math-verify's ``$`` environments open and close only at such a ``$`` (``(?<!\\)\\$``); an escaped
    ``\\$`` is environment content (``(?:\\\\[$]|[^\\n$])``), an unescaped one never is."""
    i = content.rfind("$", lo, hi) if last else content.find("$", lo, hi)
    while i != -1 and i > 0 and content[i - 1] == "\\":
        i = content.rfind("$", lo, i) if last else content.find("$", i + 1, hi)
    return i


def _enclosing_dollar(content: str, start: int, open_at: int, line_start: int, line_end: int) -> int:
    """The opening ``$`` of an inline ``$…\\boxed{…}…$`` environment (one line, no unescaped ``$`` inside) that could
    hold the ``\\boxed{`` at ``start``. It needs an opening ``$`` before it on its line, the nearest unescaped
    one, not preceded by a digit (``(?<!\\\\|\\d)\\$``), and an unescaped ``$`` after it on the line.
    Money signs elsewhere ("she earns $18 a day" on an earlier line) cannot enclose it. -1 when no
    such environment can exist."""
    opener = _unescaped_dollar(content, line_start, start, last=True)
    if opener == -1 or (opener > 0 and content[opener - 1].isdecimal()):
        return -1
    return opener if _unescaped_dollar(content, open_at, line_end) != -1 else -1


def _inline_latex(content: str) -> str | None:
    """Case 3: the content of the one ``$…$`` every anchored pattern extracts, else ``None``.

    The environment starts nearest an anchor (:func:`_env_starts`); it must be an inline ``$…$`` at
    most 50 characters after an "answer", every other possible start must lie outside every anchor's
    window (and before any "final answer"), no "answer" may sit inside it, and no percent sign or
    ``, and``/``or`` + environment may follow it (math-verify would read 0.72 or a set)."""
    if "I hope" in content:
        return None
    anchors = [m.end() for m in _ANSWER.finditer(content)]
    starts = _env_starts(content)
    final = _FINAL_ANSWER.search(content)
    reachable = [
        s
        for s in starts
        if any(0 <= s - end <= _ANCHOR_WINDOW + 2 for end in anchors)
        or (final is not None and s >= final.end())
    ]
    if not reachable:
        return None
    open_ = reachable[0]
    if content[open_] != "$" or content.startswith("$$", open_):
        return None
    close = _unescaped_dollar(content, open_ + 1, len(content))
    if any(s != open_ and not open_ < s < close for s in reachable):
        return None  # another environment an anchored pattern could extract
    if any(open_ < end <= close for end in anchors) or not any(
        0 <= open_ - end <= _ANCHOR_WINDOW for end in anchors
    ):
        return None
    if _PERCENT_AFTER.match(content, close + 1):
        return None  # "$72$ %" is 0.72 to math-verify
    joined = _NEXT_GROUP.match(content, close + 1)
    if joined is not None:
        after = len(content) - len(content[joined.end() :].lstrip())
        if {after, after + 1} & set(starts):
            return None  # "$72$ and $5$": math-verify extracts a set
    return content[open_ + 1 : close]


_NOTHING = "[unparseable]"


def _env_starts(content: str) -> list[int]:
    """Sorted positions where one of math-verify's LaTeX environments could begin (over-approximated).

    * an unescaped ``$$`` (display, may span lines);
    * an unescaped ``$`` not after a digit whose next unescaped ``$`` is on the same line and not the
      very next character (inline: ``(?<!\\\\|\\d)\\$`` … ``(?<!\\\\)\\$``). A lone money sign ("she
      earns $18 a day") opens nothing;
    * every ``\\[``, ``\\(``, ``[`` (`` [ … ] ``, which begins at the space before it) and ``\\frac``
      (a bare fraction; ``-\\frac`` begins one character earlier).
    """
    starts = []
    i = _unescaped_dollar(content, 0, len(content))
    while i != -1:
        after = _unescaped_dollar(content, i + 1, len(content))
        if after == i + 1:
            starts.append(i)  # $$
        elif (
            (i == 0 or not content[i - 1].isdecimal())
            and after != -1
            and content.find("\n", i + 1, after) == -1
        ):
            starts.append(i)
        i = after
    for marker in ("\\[", "\\(", "[", "\\frac"):
        j = content.find(marker)
        while j != -1:
            starts.append(j)
            j = content.find(marker, j + 1)
    return sorted(starts)


def _no_anchored_match(content: str) -> bool:
    """True when no anchored pattern of math-verify can match a text without ``\\boxed{``: every
    environment start is outside each "answer" anchor's window (``answer:?.{0,50}?<env>``: from the
    anchor's end to 52 characters after it, covering the colon and the space before `` [``), and none
    follows a "final answer" (``final answer.{0,100}?\\s+is:?\\s*<env>``, whose whitespace runs are
    unbounded). The ``… I hope`` pattern needs a "final answer" and an environment too."""
    anchors = [m.end() for m in _ANSWER.finditer(content)]
    if not anchors:
        return True
    starts = _env_starts(content)
    if not starts:
        return True
    final = _FINAL_ANSWER.search(content)
    if final is not None and starts[-1] >= final.end():
        return False
    for end in anchors:
        k = bisect.bisect_left(starts, end)
        if k < len(starts) and starts[k] <= end + _ANCHOR_WINDOW + 2:
            return False
    return True


_NOTHING = "[unparseable]"


def fast_verdict(content: str, gold: Gold) -> tuple[float, str] | None:
    """``(reward, answer_parsed)`` exactly as TRL's ``accuracy_reward`` gives them, or ``None`` when only
    math-verify can tell."""
    has_boxed = "\\boxed{" in content
    if not has_boxed and _no_anchored_match(content):
        return 0.0, _NOTHING  # case 1: no pattern can match
    latex = _boxed_latex(content) if has_boxed else _inline_latex(content)
    if latex is None:
        return None
    answer = _number(latex)
    if answer is None:
        return None
    reward = _verdict(answer, gold)
    return None if reward is None else (reward, answer.parsed)
