"""The math-verify worker process (run as ``python -m rewards._verify_worker``).

It speaks JSON lines on stdin/stdout: first it writes ``"ready"`` once math-verify is imported, then
for every request ``[content, solution]`` it writes ``[reward, gold_parsed, answer_parsed]``, with
exactly the calls TRL's ``accuracy_reward`` makes but with math-verify's own signal-based timeouts
switched off. The parent (:mod:`rewards.math_verify_bounded`) bounds each request by wall-clock time
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

    # The extraction TRL's accuracy_reward uses for the model's answer.
    answer_config = [
        LatexExtractionConfig(
            normalization_config=NormalizationConfig(units=True),
            boxed_match_priority=0,
            try_extract_without_anchor=False,
        )
    ]
    gold_cache: dict[str, list] = {}  # one GRPO group shares its gold answer: parse it once
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    stdout.write(b'"ready"\n')
    stdout.flush()
    for line in stdin:
        try:
            content, solution = json.loads(line)
            gold = gold_cache.get(solution)
            if gold is None:
                gold = parse(solution, parsing_timeout=None)
                if len(gold_cache) > 4096:
                    gold_cache.clear()
                gold_cache[solution] = gold
            if len(gold) == 0:
                result = [None, "[unparseable]", "[skipped]"]
            else:
                answer = parse(
                    content,
                    extraction_config=answer_config,
                    extraction_mode="first_match",
                    parsing_timeout=None,
                )
                reward = float(verify(gold, answer, timeout_seconds=None))
                result = [reward, str(gold), str(answer) if answer else "[unparseable]"]
        except Exception:  # noqa: BLE001 - math-verify swallows its own errors; anything left is a 0.0, as in TRL
            result = [0.0, "[error]", "[error]"]
        stdout.write(json.dumps(result).encode("ascii") + b"\n")
        stdout.flush()


if __name__ == "__main__":
    main()
