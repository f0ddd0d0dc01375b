"""What rlvr adds to math-verify's verdict, each rule backed by labelled rows of data/math_audit.jsonl (their
`class` is named in each docstring):

- a hedged answer ("3 or 4", `\\boxed{1} or \\boxed{2}`) matches a single-valued gold only if every alternative
  does (class `hedging`);
- the last stated answer wins: boxes of earlier sentences do not join the final one (class `last_answer`);
- two different known units never match (`5 m` against `5 cm`; class `units`);
- word answers and choice letters compare as text (`Tuesday`, `(C)`; classes `text`, `choice`);
- a number with a magnitude word is scaled (`5 thousand`; class `number_words`);
- when math-verify says no, the stated answer is retried in a normalized form (rlvr/verifiers/normalize.py:
  percentages, degrees, scientific and mixed-number notation, number words, `\\dfrac`, unicode; classes
  `percent`, `degrees`, `scientific`, `mixed_number`, `number`, `dfrac`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from rlvr.verifiers import guards
from rlvr.verifiers.extraction import (
    answer_line,
    answer_lines,
    answer_regions,
    bare,
    closing_braces,
    last_boxed,
    without_sign_off,
)
from rlvr.verifiers.normalize import MULTIPLIER, leading_choice, normalize_answer

MATH_WORDS = {"sin", "cos", "tan", "cot", "sec", "csc", "log", "exp", "sqrt", "arcsin", "arccos", "arctan", "sinh",
              "cosh", "tanh", "mod", "inf", "max", "min", "gcd", "lcm", "det", "infty"}
SHORT_ANSWER_CHARS = 80  # a bare answer, not a completion
FLOAT_DIGITS = 6  # math-verify's float_rounding default
DECIMAL = re.compile(r"^-?(?:\d+(?:\.\d*)?|\.\d+)$")
THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
FRACTION = re.compile(r"^(-?)(?:\\frac\{(-?\d+)\}\{(-?\d+)\}|(-?\d+)/(-?\d+))$")
ANGLE_IN_DEGREES = re.compile(r"(\d+(?:\.\d+)?)\s*\^\s*\{?\s*\\circ\s*\}?")

SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\\$])|\n+")
ANCHORED = re.compile(r"\\boxed|\\fbox|answer|(?<!\\)\$", re.IGNORECASE)  # a box, an answer line, math in prose
BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")
LATER_ANSWER = re.compile(r"\banswer\s*(?:is|:)\s*(?:\$|\\\(|-?\d)", re.IGNORECASE)
LOWER_CHOICE = re.compile(r"\(?([a-e])\)?\.?")  # '(b)' answering choice B
SEVERAL_IN_TEXT = re.compile(r"\\pm(?![A-Za-z])|\bor\b|\band\b|,(?!\d{3}\b)|;|\\cup")  # not a thousands separator


def final_statement(text: str) -> str:
    """The last sentence (or line) of `text` that states something mathematical (holds a digit or `$`), from its
    last "answer" on."""
    sentences = [s for s in SENTENCE.split(text.strip()) if s.strip()]
    statement = next((s for s in reversed(sentences) if re.search(r"[\d$]|\\boxed", s)), "")
    anchor = statement.lower().rfind("answer")
    return statement[anchor:] if anchor >= 0 else statement


def boxes(text: str) -> list[tuple[int, int]]:
    """(start, end) of each complete, non-empty \\boxed{...} / \\fbox{...} in `text` (an empty box holds no answer)."""
    closing, spans = closing_braces(text), []
    for match in BOX.finditer(text):
        brace = match.end() - 1
        if brace in closing and text[brace + 1 : closing[brace]].strip():
            spans.append((match.start(), closing[brace] + 1))
    return spans


def prepared(text: str) -> str:
    """A completion as handed to math-verify's extraction: `\\fbox` read as `\\boxed`, currency signs (`\\$`)
    dropped (math-verify reads neither; classes `boxed`, `units`), earlier statements' boxes unboxed."""
    return last_statement_only(text.replace("\\fbox", "\\boxed").replace("\\$", ""))


def scaled_number(text: str) -> bool:
    """A bare answer whose number carries a magnitude word (`5 thousand`), which math-verify reads as the bare
    number; the normalized form decides (class `number_words`)."""
    return is_bare_answer(text) and bool(MULTIPLIER.search(text))


def final_statement_start(text: str, spans: list[tuple[int, int]]) -> int:
    """Index of the first box (of `spans`, in order) in the final statement: boxes with no sentence end between
    them belong to one statement."""
    first = len(spans) - 1
    while first > 0 and not SENTENCE_END.search(text[spans[first - 1][1] : spans[first][0]]):
        first -= 1
    return first


def final_boxed_answer(text: str) -> str | None:
    """The boxed answer of a worked solution: the contents of its last box, or, when the final statement boxes
    several answers (`\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}`), those boxes as written (math-verify
    reads them as one answer set); None without a box."""
    spans = boxes(text)
    if not spans:
        return None
    first = final_statement_start(text, spans)
    if first == len(spans) - 1:
        return last_boxed(text)
    return text[spans[first][0] : spans[-1][1]]


def last_statement_only(text: str) -> str:
    """`text` with the boxes of earlier statements unboxed, so the last stated answer wins: math-verify joins
    boxes up to 70 characters apart into one answer set (`Initially \\boxed{4}. After correcting, the answer is
    \\boxed{5}` would be {4, 5}); here boxes in different sentences are different statements, and an "answer is"
    after the last box outranks every box. Class `last_answer`."""
    spans = boxes(text)
    if not spans:
        return text
    keep = final_statement_start(text, spans)
    if LATER_ANSWER.search(text, spans[-1][1]):
        keep = len(spans)
    for start, end in reversed(spans[:keep]):
        inner = text[start:end]
        text = text[:start] + inner[inner.index("{") + 1 : -1] + text[end:]
    return text


def alternatives(text: str) -> list[str]:
    """The answers a final statement offers as alternatives ("the answer is 3 or 4", `\\boxed{1} or \\boxed{2}`,
    `x = 2 or x = 5`, "150, 151, 152"); [] when it offers one. Class `hedging`."""
    return guards.hedged_values(final_statement(text))


# Words by which a completion says a later answer corrects an earlier one.
CORRECTION = re.compile(
    r"\b(?:wait|actually|mistakes?|mistaken|wrong|errors?|incorrect|correct(?:ed|ing|ion)|redo(?:ing)?|re-?check\w*"
    r"|recomput\w*|recalculat\w*|missed|forgot|instead|oops|sorry|on second thought|double-check\w*|re-?do\w*)\b",
    re.IGNORECASE,
)


def stated_answers(text: str) -> list[tuple[int, int, str]]:
    """(start, end, answer) of every answer the text states with an anchor, in order: the contents of each box, and
    what follows each answer marker ("The answer is 5.", "Answer: 5", "#### 5")."""
    found = [(s, e, " ".join(text[s:e][text[s:e].index("{") + 1 : -1].split())) for s, e in boxes(text)]
    found += [(s, s + len(line), " ".join(line.split())) for s, line in answer_lines(text) if line]
    return sorted(found)


def several_answers(text: str) -> list[str]:
    """The different answers a text states with an anchor (boxes, answer markers), when it states more than one
    and does not say that its last corrects the one before ("\\boxed{150}. \\boxed{154}." and "Answer: 150\n
    Answer: 154" offer two answers; "Initially \\boxed{4}. After correcting the count, the answer is \\boxed{5}."
    answers 5); [] otherwise. Class `hedge`."""
    stated = stated_answers(text)
    forms = {value: _written_form(value) for _, _, value in stated}
    values = list(dict.fromkeys(forms.values()))
    if len(values) < 2:
        return []
    last = forms[stated[-1][2]]
    previous_end = max(end for _, end, value in stated if forms[value] != last)
    return [] if CORRECTION.search(text, previous_end, stated[-1][0]) else values


def _written_form(value: str) -> str:
    """A stated answer as written, without currency signs, spacing macros and delimiters (`\\$16,\\!386.20` and
    `16,\\!386.20` state one answer)."""
    return _compact(normalize_answer(value).latex).rstrip(".") or _compact(value).rstrip(".")


@dataclass(frozen=True)
class WrittenAnswers:
    """The final answers a completion states as written (several: a hedge), and whether each was finished (not
    cut by the token limit: something closes or follows it)."""

    values: list[str]
    finished: bool


def written_final_answers(completion: str) -> WrittenAnswers:
    """The final answers a completion states, as written, by the final-answer rule (rlvr.verifiers.extraction), for
    the verifiers that compare text (exact_match, arithmetic, reasoning_gym, the judge's answer): each `<answer>`
    tag's contents; in a final-answer line's region or in the reply, the last answer stated with an anchor (a box,
    an answer marker), or every different one when it states several without saying the last corrects the one
    before, and any value a later sentence offers as a hedge or a correction ("Or maybe 150."). No values when it
    states none with an anchor."""
    values, finished = [], True
    for region in answer_regions(completion):
        if region.how in ("tag", "after_tag"):
            values.append(bare(region.text))
            finished = finished and region.closed
            continue
        text = without_sign_off(region.text)
        stated = stated_answers(text)
        if not stated:
            continue
        offered = several_answers(text) or [stated[-1][2]]
        values += offered + guards.later_alternatives(text[stated[-1][1] :], offered[-1])
        finished = finished and (region.closed or guards.finished(text, stated[-1][1]))
    values = list(dict.fromkeys(v for v in (bare(v) for v in values) if v))
    return WrittenAnswers(values, finished)


def has_several_values(gold: str, parsed_gold: tuple) -> bool:
    """Whether the gold answer is several values (a set, an interval, `\\pm`, a list), so that alternatives in the
    answer may be the answer itself."""
    from sympy import FiniteSet, Set

    value = parsed_gold[0] if parsed_gold else None
    if isinstance(value, Set) and not (isinstance(value, FiniteSet) and len(value) <= 1):
        return True
    return bool(SEVERAL_IN_TEXT.search(gold))


def is_bare_answer(text: str) -> bool:
    """A short answer on its own (`5 thousand`, `3\\frac{1}{2}`), not a completion stating one."""
    return len(text) <= SHORT_ANSWER_CHARS and "\n" not in text.strip() and not ANCHORED.search(text)


def stated_answer(text: str, found: tuple) -> str | None:
    """The answer as written, for the rules: a bare answer is itself; in a completion, math-verify's extracted
    string (`found`), else a box or an "Answer:" line (never a number picked from the prose)."""
    if is_bare_answer(text):
        return text
    extracted = next((f for f in reversed(found) if isinstance(f, str)), None)
    return extracted or final_boxed_answer(text) or answer_line(text)


def written_answer(text: str) -> str:
    """The answer with its unit as written (math-verify's extraction drops units)."""
    short = len(text) <= SHORT_ANSWER_CHARS and "\n" not in text.strip()
    return last_boxed(text) or answer_line(text) or (text if short else "")


def units_conflict(text: str, gold: str) -> bool:
    """Both answers carry a known unit and the units differ (`5 m` vs `5 cm`; no conversion). Class `units`."""
    cand, ref = normalize_answer(written_answer(text)), normalize_answer(gold)
    return bool(cand.unit and ref.unit and cand.unit != ref.unit)


def is_text_answer(gold: str) -> bool:
    """A gold answer made of words (`Tuesday`, `\\text{no solution}`) or a choice letter (`B`, `(B)`)."""
    return normalize_answer(gold).text is not None


def text_answers_match(text: str, gold: str) -> bool:
    """Words compare case-folded without articles; a gold choice letter also accepts an answer that starts with it
    (`(B) 12`) but not one naming several (`(B) or (C)`). Classes `text`, `choice`."""
    ref = normalize_answer(gold).text
    written = written_answer(text)
    cand = normalize_answer(written).text
    if len(ref) == 1:
        lower_case = LOWER_CHOICE.fullmatch(written.strip().strip("$").strip())
        return cand == ref or leading_choice(written) == ref or bool(lower_case and lower_case[1].upper() == ref)
    return cand == ref


def _plain_number(latex: str) -> tuple[Fraction, bool] | None:
    """(value, written as a decimal) for an integer, decimal, a/b or \\frac{a}{b}; None for anything else. Only
    unspaced thousands separators count (`32, 349` is two numbers)."""
    text = latex.strip()
    if THOUSANDS.match(text):
        text = text.replace(",", "")
    text = re.sub(r"\s+", "", text)
    if DECIMAL.match(text):
        return Fraction(text), "." in text
    fraction = FRACTION.match(text)
    if fraction:
        sign, numerator, denominator = fraction.group(1), *(g for g in fraction.groups()[1:] if g is not None)
        if int(denominator) != 0:
            return Fraction(int(numerator), int(denominator)) * (-1 if sign else 1), False
    return None


def _numbers_equal(ref: str, cand: str) -> bool | None:
    """Plain numbers compared exactly (decimals rounded to FLOAT_DIGITS places, as math-verify does); None when
    either is not a plain number."""
    a, b = _plain_number(ref), _plain_number(cand)
    if a is None or b is None:
        return None
    if a[1] or b[1]:
        return round(a[0], FLOAT_DIGITS) == round(b[0], FLOAT_DIGITS)
    return a[0] == b[0]


def _comparisons(ref: str, cand: str) -> list[tuple[str, str]]:
    """(reference, candidate) forms to try: as normalized; for percentages also the bare numbers (`12.5\\%` vs
    `12.5`; math-verify equates them for integers only); for an angle in degrees against one in radians, the
    degrees converted (`90^\\circ` vs `\\frac{\\pi}{2}`)."""
    forms = [(ref, cand), (ref.removesuffix("\\%").strip(), cand.removesuffix("\\%").strip())]
    if ("\\pi" in ref) != ("\\pi" in cand):
        forms.append((ANGLE_IN_DEGREES.sub(r"(\1\\pi/180)", ref), ANGLE_IN_DEGREES.sub(r"(\1\\pi/180)", cand)))
    return list(dict.fromkeys(forms))


def normalized_match(stated: str, gold: str, compare_latex: Callable[[str, str], bool]) -> bool:
    """The stated answer and the gold, both normalized (rlvr/verifiers/normalize.py), compared as plain numbers
    or by `compare_latex` (math-verify)."""
    if len(boxes(stated)) > 1 or len(boxes(gold)) > 1:  # several boxed answers: math-verify's answer set decides
        return False
    cand, ref = normalize_answer(stated), normalize_answer(gold)
    if cand.text is not None or not cand.latex or not ref.latex:
        return False
    rewritten = _compact(cand.latex) != _compact(stated) or _compact(ref.latex) != _compact(gold)
    for r, c in _comparisons(ref.latex, cand.latex):
        same = _numbers_equal(r, c)
        if same is None and (rewritten or (r, c) != (ref.latex, cand.latex)):  # else math-verify has said no
            same = compare_latex(r, c)
        if same:
            return True
    return False


def _compact(latex: str) -> str:
    return re.sub(r"\s+|(?<!\\)\$", "", latex)
