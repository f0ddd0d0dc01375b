"""Math answer checking through math-verify (Hugging Face): its own extraction (boxed answers, "final answer is",
"Answer:", LaTeX environments, plain numbers with separators and decimal commas, several boxes or `$a$ and $b$` as
an answer set) and its own comparison (symbolic and numeric equality of fractions, decimals, LaTeX, sets,
intervals, tuples, matrices, equations), under a per-call time limit.

On top of math-verify, only rules it lacks, each backed by labelled rows of `data/math_audit.jsonl`
(rlvr/verifiers/rules.py): hedged answers and conflicting units are rejected; word answers and choice letters
compare as text; percentages, degrees, scientific and mixed-number notation, number words and the like are
retried in a normalized form when math-verify says no.

`math_score` is a reward function: `rlvr.verifiers.math:math_score`.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any

from rlvr.errors import RlvrError
from rlvr.verifiers import rules
from rlvr.verifiers.extraction import last_boxed
from rlvr.verifiers.timelimit import time_limit

try:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
except ImportError:
    raise RlvrError("Math verification needs the 'math' extra: pip install 'rlvr[math]'.") from None


class _DropDisabledTimeoutWarning(logging.Filter):
    """math-verify warns when its own timeout is off; ours (time_limit) replaces it, so the warning is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropDisabledTimeoutWarning())

EXTRACTION = (LatexExtractionConfig(), ExprExtractionConfig())  # math-verify's defaults
BOXED_ONLY = (LatexExtractionConfig(try_extract_without_anchor=False, boxed_match_priority=0),)
EXTRACT_MODES = ("auto", "boxed")
DELIMITED = re.compile(r"\$|\\\(|\\\[|\\boxed|\\fbox")
# A number as math-verify's plain-text extraction reads it (thousands separators, decimal point or comma, percent).
PLAIN_NUMBER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?|\.\d+)\s*%?")
WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")
TEXT_ARGUMENT = re.compile(r"\\(?:text|mbox|mathrm|textbf|operatorname|begin|end)\s*\{[^{}]*\}")


def _is_bare_math(text: str) -> bool:
    """A short answer written without math delimiters (`x < 3`, `2\\sqrt{2}`, `\\{1,2,3\\}`), as answer columns hold:
    no words of prose, and not a plain number (math-verify reads those, separators and all, as plain text)."""
    text = text.strip()
    if not text or len(text) > 200 or DELIMITED.search(text) or PLAIN_NUMBER.fullmatch(text):
        return False
    words = WORD.findall(TEXT_ARGUMENT.sub(" ", text))
    return all(w.lower() in rules.MATH_WORDS for w in words)


@lru_cache(maxsize=4096)
def parse_math(text: str, boxed_only: bool = False) -> tuple:
    """math-verify's parse of `text` (its default extraction: boxed, final answer, Answer:, LaTeX, numbers), as
    (value, extracted string) or (). A bare math expression is read whole as LaTeX (`$...$`), so that `x < 3`
    is an inequality rather than the number 3 found inside it."""
    if boxed_only:
        found = parse(text, extraction_config=BOXED_ONLY, parsing_timeout=None)
    else:
        # math-verify's own timeouts are off (None): their signal.alarm(0) would cancel our time_limit's timer.
        found = parse(f"${text.strip()}$", extraction_config=EXTRACTION, parsing_timeout=None) \
            if _is_bare_math(text) else []
        found = found or parse(rules.prepared(text), extraction_config=EXTRACTION, parsing_timeout=None)
    return tuple(found)


def _math_verify_says(gold: tuple, found: tuple) -> bool:
    if not gold or not found:
        return False
    return verify(list(gold), list(found), allow_set_relation_comp=True, timeout_seconds=None)


def judge(text: str, gold: str, found: tuple) -> bool:
    """Whether `text`, whose math-verify parse is `found`, states the answer `gold`: math-verify's verdict, then
    the rules it lacks (rlvr/verifiers/rules.py)."""
    parsed_gold = parse_math(gold)
    if rules.is_text_answer(gold):  # a word answer or a choice letter
        return rules.text_answers_match(text, gold)
    offered = rules.alternatives(text)
    if offered and not rules.has_several_values(gold, parsed_gold):  # a hedge: every alternative must be right
        return all(_math_verify_says(parsed_gold, parse_math(answer.strip("$"))) for answer in offered)
    if rules.units_conflict(text, gold):
        return False
    if rules.scaled_number(text):
        return rules.normalized_match(text, gold, _compare_latex)
    if _math_verify_says(parsed_gold, found):
        return True
    stated = rules.stated_answer(text, found)
    return stated is not None and rules.normalized_match(stated, gold, _compare_latex)


def _compare_latex(gold: str, candidate: str) -> bool:
    """math-verify on two normalized LaTeX answers, each read whole (used by the rules' retry)."""
    return _math_verify_says(_parse_whole(gold), _parse_whole(candidate))


@lru_cache(maxsize=4096)
def _parse_whole(latex: str) -> tuple:
    return tuple(parse(f"\\boxed{{{latex}}}", extraction_config=BOXED_ONLY, parsing_timeout=None))


def answers_match(candidate: str, gold: str, timeout_s: float = 5.0) -> bool:
    """Whether a stated answer (`\\frac{1}{2}`, `$x \\lt 3$`, `The answer is 0.5`) equals the reference answer
    mathematically. Raises TimeLimitExceeded after `timeout_s` seconds (0: no limit)."""
    with time_limit(timeout_s, "math verification"):
        return judge(candidate, gold, parse_math(candidate))


def gold_answer(reference: str) -> str:
    """The reference answer: the boxed answer of a worked solution (rules.final_boxed_answer), or the text."""
    return rules.final_boxed_answer(reference) or reference


def math_score(prompt: str, completion: str, answer: str, extract: str = "auto", timeout_s: float = 5.0,
               **_: Any) -> float:
    """1.0 when the completion's final answer equals `answer`, else 0.0.

    `extract`: 'auto' reads the final answer as math-verify does (the last boxed answer or "final answer is ...",
    then "Answer: ...", then the last LaTeX or number standing on its own; a bare answer is read whole);
    'boxed' scores only completions that box their answer. A comparison running past `timeout_s` raises,
    which the reward pool records as an error scoring 0."""
    if extract not in EXTRACT_MODES:
        raise ValueError(f"extract must be one of {', '.join(EXTRACT_MODES)}, got {extract!r}")
    with time_limit(timeout_s, "math verification"):
        gold = gold_answer(str(answer))
        if extract == "boxed":
            found = parse_math(completion, boxed_only=True) if last_boxed(completion) is not None else ()
            return float(bool(found) and judge(completion, gold, found))
        return float(judge(completion, gold, parse_math(completion)))
