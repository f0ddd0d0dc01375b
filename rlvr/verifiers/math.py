"""Math answer checking: extract the final answer, normalize it, and compare it with the reference through
math-verify (Hugging Face; symbolic and numeric equality of fractions, decimals, LaTeX, sets, intervals,
percentages), under a per-call time limit.

`math_score` is a reward function: `rlvr.verifiers.math:math_score`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from rlvr.errors import RlvrError
from rlvr.verifiers.extraction import DEFAULT_ORDER, extract_answer, last_boxed
from rlvr.verifiers.normalize import leading_choice, normalize_answer
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

EXTRACTION_CONFIG = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())
FLOAT_DIGITS = 6  # math-verify's float_rounding default
DECIMAL = re.compile(r"^-?(?:\d+(?:\.\d*)?|\.\d+)$")
THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
ANGLE_IN_DEGREES = re.compile(r"(\d+(?:\.\d+)?)\s*\^\s*\{?\s*\\circ\s*\}?")
FRACTION = re.compile(r"^(-?)(?:\\frac\{(-?\d+)\}\{(-?\d+)\}|(-?\d+)/(-?\d+))$")


def _parsed(latex: str) -> list:
    # math-verify's own timeouts are off (None): their signal.alarm(0) would cancel our time_limit's timer.
    return parse(f"\\boxed{{{latex}}}", extraction_config=EXTRACTION_CONFIG, parsing_timeout=None)


def _plain_number(latex: str) -> tuple[Fraction, bool] | None:
    """(value, written as a decimal) for an integer, decimal, a/b or \\frac{a}{b}; None for anything else."""
    text = _compact(latex)
    if THOUSANDS.match(text):
        text = text.replace(",", "")
    if DECIMAL.match(text):
        return Fraction(text), "." in text
    fraction = FRACTION.match(text)
    if fraction:
        sign, numerator, denominator = fraction.group(1), *(g for g in fraction.groups()[1:] if g is not None)
        if int(denominator) != 0:
            return Fraction(int(numerator), int(denominator)) * (-1 if sign else 1), False
    return None


def _numbers_equal(ref: str, cand: str) -> bool | None:
    """Plain numbers compared without sympy, as math-verify compares them (decimals rounded to FLOAT_DIGITS
    places, exact otherwise); None when either is not a plain number."""
    a, b = _plain_number(ref), _plain_number(cand)
    if a is None or b is None:
        return None
    if a[1] or b[1]:
        return round(a[0], FLOAT_DIGITS) == round(b[0], FLOAT_DIGITS)
    return a[0] == b[0]


def _compact(latex: str) -> str:
    return re.sub(r"\s+", "", latex)


def _comparisons(ref: str, cand: str) -> list[tuple[str, str]]:
    """(reference, candidate) forms to try: as written; for percentages also the bare numbers, so that 12.5\\%
    matches both 12.5 and 0.125 (math-verify itself equates 9\\% with 9 only for integers); for an angle in
    degrees against one in radians, the degrees converted (90^\\circ and \\frac{\\pi}{2})."""
    forms = [(ref, cand), (ref.removesuffix("\\%").strip(), cand.removesuffix("\\%").strip())]
    if ("\\pi" in ref) != ("\\pi" in cand):
        forms.append((ANGLE_IN_DEGREES.sub(r"(\1\\pi/180)", ref), ANGLE_IN_DEGREES.sub(r"(\1\\pi/180)", cand)))
    return list(dict.fromkeys(forms))


def answers_match(candidate: str, gold: str, timeout_s: float = 5.0) -> bool:
    """Whether a final answer equals the reference answer mathematically.

    Both are normalized (units, text, percent, notation; see rlvr.verifiers.normalize). Word answers and
    choice letters compare as text; conflicting known units (5 m vs 5 cm) never match; the rest goes to
    math-verify. Raises TimeLimitExceeded after `timeout_s` seconds (0: no limit)."""
    with time_limit(timeout_s, "math verification"):
        return _answers_match(candidate, gold)


def _answers_match(candidate: str, gold: str) -> bool:
    cand, ref = normalize_answer(candidate), normalize_answer(gold)
    if ref.text is not None and len(ref.text) == 1:  # a choice letter: also accept '(B) 12'
        return cand.text == ref.text or leading_choice(candidate) == ref.text
    if cand.text is not None or ref.text is not None:
        return cand.text == ref.text
    if cand.unit and ref.unit and cand.unit != ref.unit:
        return False
    if not cand.latex or not ref.latex:
        return False
    for r, c in _comparisons(ref.latex, cand.latex):
        same = _compact(r) == _compact(c) or _numbers_equal(r, c)
        if same is None:
            same = verify(_parsed(r), _parsed(c), allow_set_relation_comp=True, timeout_seconds=None)
        if same:
            return True
    return False


def gold_answer(reference: str) -> str:
    """The reference answer: the last \\boxed{} of a worked solution, or the text itself."""
    return last_boxed(reference) or reference


def math_score(prompt: str, completion: str, answer: str, extract: str | Iterable[str] = DEFAULT_ORDER,
               timeout_s: float = 5.0, **_: Any) -> float:
    """1.0 when the completion's final answer equals `answer`, else 0.0.

    The final answer is found by the extractors named in `extract`, tried in order (boxed, answer_line,
    final_number, whole; see rlvr.verifiers.extraction). A comparison running past `timeout_s` raises, which
    the reward pool records as an error scoring 0."""
    with time_limit(timeout_s, "math verification"):
        found = extract_answer(completion, extract)
        return 0.0 if found is None else float(_answers_match(found, gold_answer(str(answer))))
