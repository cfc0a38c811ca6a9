"""The math-verify worker process (run as ``python -m rewards._verify_worker``).

It speaks JSON lines on stdin/stdout: first it writes ``"ready"`` once math-verify is imported, then
for every request ``[content, solution, profile]`` it writes ``[reward, gold_parsed, answer_parsed]``,
with exactly the calls of the reward the profile names but with math-verify's own signal-based
timeouts switched off: ``"trl"`` TRL's ``accuracy_reward``; ``"open_r1"`` open-r1's ``accuracy_reward``
(``equations=True``; a ``verify`` that raises gives ``None``); ``"open_r1_length"`` the correctness
inside open-r1's ``len_reward`` and cosine reward (the gold parsed as LaTeX only, the answer normalised
with ``boxed=True``, ``verify(answer, gold)``); ``"open_r1_length_plain_gold"`` the same with the gold
parsed by math-verify's defaults (the fix behind ``plain_gold=True``). The parent (:mod:`rewards.math_verify_bounded`) bounds each request by wall-clock time
and kills this process when one runs over, which works from any thread, unlike ``signal.alarm``.

Model output only reaches ``LatexExtractionConfig`` (latex2sympy's ANTLR parser), never sympy's
``parse_expr``; the gold answer is parsed with math-verify's defaults, as in TRL.
"""

from __future__ import annotations

import json
import logging
import sys


def main() -> None:
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse, verify

    # We disable math-verify's timeouts on purpose (the parent enforces them): silence its warning.
    for name in ("math_verify", "math_verify.parser", "math_verify.grader", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.CRITICAL)

    def answer_config(**normalization) -> list:
        return [
            LatexExtractionConfig(
                normalization_config=NormalizationConfig(units=True, **normalization),
                boxed_match_priority=0,
                try_extract_without_anchor=False,
            )
        ]

    # profile -> (the gold's parse arguments, the answer's extraction config, verify(answer, gold)?)
    profiles = {
        "trl": ({}, answer_config(), False),
        "open_r1": ({"extraction_mode": "first_match"}, answer_config(equations=True), False),
        "open_r1_length": (
            {"extraction_mode": "first_match", "extraction_config": [LatexExtractionConfig()]},
            answer_config(equations=True, boxed=True),
            True,
        ),
        # the same with the gold read as accuracy_reward reads it (a plain "72" parses): the cosine fix
        "open_r1_length_plain_gold": (
            {"extraction_mode": "first_match"},
            answer_config(equations=True, boxed=True),
            True,
        ),
    }
    gold_cache: dict[tuple[str, str], list] = {}  # one GRPO group shares its gold answer: parse it once
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    stdout.write(b'"ready"\n')
    stdout.flush()
    for line in stdin:
        try:
            content, solution, profile = json.loads(line)
            gold_config, answer_extraction, answer_first = profiles[profile]
            gold = gold_cache.get((profile, solution))
            if gold is None:
                gold = parse(solution, parsing_timeout=None, **gold_config)
                if len(gold_cache) > 4096:
                    gold_cache.clear()
                gold_cache[(profile, solution)] = gold
            if len(gold) == 0:
                result = [None, "[unparseable]", "[skipped]"]
            else:
                answer = parse(
                    content,
                    extraction_config=answer_extraction,
                    extraction_mode="first_match",
                    parsing_timeout=None,
                )
                try:
                    pair = (answer, gold) if answer_first else (gold, answer)
                    reward = float(verify(*pair, timeout_seconds=None))
                except Exception:  # open-r1 skips the row (None); TRL scores 0.0
                    if profile != "open_r1":
                        raise
                    reward = None
                result = [reward, str(gold), str(answer) if answer else "[unparseable]"]
        except Exception:  # noqa: BLE001 - math-verify swallows its own errors; anything left is a 0.0, as in TRL
            result = [0.0, "[error]", "[error]"]
        stdout.write(json.dumps(result).encode("ascii") + b"\n")
        stdout.flush()


if __name__ == "__main__":
    main()
