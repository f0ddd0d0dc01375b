"""Bring a final answer to a form math-verify parses: strip delimiters, spacing macros, trailing units and
text, unify percent, degree, scientific and mixed-number notation; tell text answers from math answers.

Rule-based checkers miss equivalent forms (Verifiable yet Noisy Rewards, 2025: 12/36 against 1/3; Pitfalls
of Rule- and Model-based Verifiers, 2025), so the rules here are general rewrites, never per-problem cases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from rlvr.verifiers.extraction import last_boxed

LITERALS = {  # unicode math, vulgar fractions, synonyms: replaced as plain strings
    "−": "-", "–": "-", "—": "-", "×": r"\times ", "÷": r"\div ", "·": r"\cdot ", "⋅": r"\cdot ", "√": r"\sqrt",
    "π": r"\pi ", "°": r"^\circ", "∞": r"\infty ", "≤": r"\le ", "≥": r"\ge ", "≠": r"\ne ", "∪": r"\cup ",
    "≈": r"\approx ", "\u00a0": " ", "\u2009": " ", "\u202f": " ", "²": "^2", "³": "^3", "½": r"\frac{1}{2}",
    "⅓": r"\frac{1}{3}", "⅔": r"\frac{2}{3}", "¼": r"\frac{1}{4}", "¾": r"\frac{3}{4}", "⅕": r"\frac{1}{5}",
    "⅛": r"\frac{1}{8}", r"\langle": "(", r"\rangle": ")", "{,}": "", r"\varnothing": r"\emptyset",
    r"\dfrac": r"\frac", r"\tfrac": r"\frac", r"\$": " ", "$": " ",
}
SPACING = re.compile(r"(?<!\\)\\[,;:! ]|\\(?:left|right|big|Big|bigg|Bigg)(?![a-zA-Z])|\\displaystyle|\\quad|\\qquad|~")
TEXT_MACRO = re.compile(r"\\(?:text|textbf|textit|textrm|mbox|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}")
LEADING_TEXT = re.compile(r"^\\(?:text|mbox|textrm)\s*\{[^{}\d]*\}\s*(?=\S)")  # '\\text{The area is } 5'
LEADING_PHRASE = re.compile(
    r"^(?:(?:the\s+)?(?:final\s+)?answer\s*(?:is|:)|(?:so|thus|therefore|hence)\b,?|approximately|about|=|\\approx)\s*",
    re.IGNORECASE,
)
PERCENT = re.compile(r"\s?(?:\\?%|\\text\{\s?percent\s?\}|\bpercent\b)")
DEGREES = re.compile(r"\s?(?:\^\s?\{?\s?\\circ\s?\}?|\\degree\b|degrees?\b)")
MULTIPLIER = re.compile(r"(\d)\s*(hundred|thousand|million|billion|trillion)s?\b", re.IGNORECASE)
POWERS_OF_TEN = {"hundred": 2, "thousand": 3, "million": 6, "billion": 9, "trillion": 12}
POWER_WORD = re.compile(r"\s*\b(squared|cubed)\b", re.IGNORECASE)
NEGATIVE_WORD = re.compile(r"^(?:negative|minus)\s+(?=[\d.\\a-z])", re.IGNORECASE)
SQRT_PARENS = re.compile(r"\\sqrt\s*\(([^()]*)\)")
SCIENTIFIC_E = re.compile(r"(\d(?:\.\d+)?)[eE]([+-]?\d+)\b")
TIMES_TEN = re.compile(r"(\d)\s*(?:x|\*|\\cdot)\s*10\s*\^")
MIXED_NUMBER = re.compile(r"(?<![\w.^_}])(\d+)(?:\s*\\frac\{(\d+)\}\{(\d+)\}|\s+(\d+)\s*/\s*(\d+)(?![\d.]))")
REPEATING_DECIMAL = re.compile(r"(?<![\d.])(\d*)\.(\d*)\\overline\{(\d+)\}")
ALTERNATIVES = re.compile(r"\s*(?:\\text\{\s*(?:or|and)\s*\}|\s(?:or|and)\s)\s*")
CHOICE = re.compile(r"^\(?([A-E])\)?\.?$")  # upper case: a lone lower-case letter is a variable
LEADING_CHOICE = re.compile(r"^\s*(?:\(([A-E])\)|([A-E])[.):](?:\s|$))")
OTHER_CHOICE = re.compile(r"\(\s*[A-E]\s*\)|\b[A-E][.)](?:\s|$)")
UNITS_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
               "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS_WORDS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
NUMBER_WORD = re.compile(
    rf"^(?:({'|'.join(TENS_WORDS)})(?:[-\s]({'|'.join(UNITS_WORDS[1:10])}))?|({'|'.join(UNITS_WORDS)}))\b(?=[A-Za-z\s]*$)",
    re.IGNORECASE,
)
# A trailing unit phrase: words (\text{cm}, cm, square feet, m/s, cm^2) after the number they qualify.
UNIT_WORD = r"(?:\\(?:text|mbox|mathrm|textrm)\s*\{[^{}\d]*[A-Za-z][^{}]*\}|(?<![\\A-Za-z])[A-Za-z]+\.?)"
UNIT_POWER = r"(?:\s*\^\s*\{?\s*[23]\s*\}?)?"
UNIT_TAIL = re.compile(rf"(?:\s*(?:(?:/|\\cdot|per)\s*)?{UNIT_WORD}{UNIT_POWER})+\s*$")
UNIT_TAIL_CHARS = 64  # a unit phrase is short; searching only the end keeps long answers linear
MATH_WORDS = {"sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp", "pi", "sqrt", "i", "e", "x", "y", "z",
              "n", "k", "t", "a", "b", "c", "d", "r", "mod", "or", "and", "inf"}
TEXT_ANSWER = re.compile(r"^[A-Za-z][A-Za-z\s'\-,.]*$")

UNIT_ALIASES = {
    "mm": "mm", "millimeter": "mm", "millimetre": "mm", "cm": "cm", "centimeter": "cm", "centimetre": "cm",
    "m": "m", "meter": "m", "metre": "m", "km": "km", "kilometer": "km", "kilometre": "km",
    "in": "in", "inch": "in", "ft": "ft", "foot": "ft", "feet": "ft", "yd": "yd", "yard": "yd",
    "mi": "mi", "mile": "mi", "mg": "mg", "milligram": "mg", "g": "g", "gram": "g", "kg": "kg", "kilogram": "kg",
    "lb": "lb", "pound": "lb", "oz": "oz", "ounce": "oz", "ml": "ml", "milliliter": "ml", "l": "l", "liter": "l",
    "litre": "l", "s": "s", "sec": "s", "second": "s", "min": "min", "minute": "min", "h": "h", "hr": "h",
    "hour": "h", "day": "day", "week": "week", "month": "month", "year": "year", "yr": "year",
    "dollar": "$", "cent": "cent", "deg": "deg", "degree": "deg", "rad": "rad", "radian": "rad",
    "mph": "mi/h", "kph": "km/h", "sq": "^2", "square": "^2", "cubic": "^3",
}
ONE_LETTER_UNITS = {"m", "g", "s", "h", "l", "L"}


@dataclass(frozen=True)
class Answer:
    """A normalized final answer: `latex` for math-verify, `unit` stripped from it (canonical, or None when
    absent or unknown), `text` set for answers that are words (compared as strings) or a choice letter."""

    latex: str
    unit: str | None = None
    text: str | None = None


def _improper_fraction(match: re.Match) -> str:
    """A mixed number (3\\frac{1}{2}, 3 1/2) as an improper fraction; other products are left alone."""
    whole = int(match.group(1))
    numerator, denominator = (int(g) for g in (match.group(2, 3) if match.group(2) else match.group(4, 5)))
    if not 0 < numerator < denominator:
        return match.group()
    return f"\\frac{{{whole * denominator + numerator}}}{{{denominator}}}"


def _repeating_decimal_fraction(match: re.Match) -> str:
    """0.1\\overline{6} -> \\frac{1}{6}."""
    whole, fixed, repeat = match.group(1) or "0", match.group(2), match.group(3)
    value = int(whole) + (Fraction(int(fixed or 0)) + Fraction(int(repeat), 10 ** len(repeat) - 1)) / 10 ** len(fixed)
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def _number_from_words(match: re.Match) -> str:
    """'twenty-five' -> '25', 'seven' -> '7'."""
    tens, ones, small = (g.lower() if g else g for g in match.groups())
    if small:
        return str(UNITS_WORDS.index(small))
    return str(20 + 10 * TENS_WORDS.index(tens) + (UNITS_WORDS.index(ones) if ones else 0))


def leading_choice(answer: str) -> str | None:
    """The choice letter an answer starts with: '(B) 12', 'B. 12', '\\textbf{(B)} 12' -> 'B'; None when it names
    more than one choice ('(B) or (C)')."""
    plain = TEXT_MACRO.sub(r"\1", answer)
    match = LEADING_CHOICE.match(plain)
    if not match or OTHER_CHOICE.search(plain, match.end()):
        return None
    return match.group(1) or match.group(2)


def _canonical_unit(raw: str) -> str | None:
    """'cm^2', 'square centimeters', '\\text{cm}^{2}' -> 'cm^2'; None when a word is not a known unit."""
    raw = TEXT_MACRO.sub(r" \1 ", raw).replace("\\cdot", "/").lower()
    words = re.findall(r"[a-z]+|\^\s*\{?\s*[23]|/|\bper\b", raw)
    parts: list[str] = []
    prefix_power = ""
    for word in words:
        if word in ("/", "per"):
            parts.append("/")
            continue
        if word.startswith("^"):
            parts[-1:] = [f"{parts[-1]}^{word[-1]}"] if parts else []
            continue
        unit = next((UNIT_ALIASES[w] for w in (word, word.removesuffix("s"), word.removesuffix("es"))
                     if w in UNIT_ALIASES), None)
        if unit is None:
            return None
        if unit.startswith("^"):
            prefix_power = unit
            continue
        parts.append(unit + prefix_power)
        prefix_power = ""
    return "".join(parts) or None


def _split_unit(latex: str) -> tuple[str, str | None]:
    """(the answer without its trailing unit phrase, the canonical unit or None)."""
    match = UNIT_TAIL.search(latex, max(0, len(latex) - UNIT_TAIL_CHARS))
    if not match or match.start() == 0:
        return latex, None
    core, tail = latex[: match.start()].rstrip(), match.group()
    words = [w.lower().rstrip(".") for w in re.findall(r"(?<![\\A-Za-z])[A-Za-z]+\.?", tail)]
    attached = not tail[:1].isspace() and not tail.lstrip().startswith("\\")
    # Plain words may be math rather than units: a variable ('2 x'), a function name, a product ('5x').
    looks_like_math = not TEXT_MACRO.search(tail) and (
        any(w in MATH_WORDS and w not in UNIT_ALIASES for w in words)
        or (attached and _canonical_unit(tail) is None)  # '5x' is a product, '5cm' a length
        or (len(words) == 1 and len(words[0]) == 1 and words[0] not in ONE_LETTER_UNITS)
    )
    qualifies_a_value = re.search(r"(?:[\d})\]]|\\pi|\\circ|\\%)$", core)
    if looks_like_math or not qualifies_a_value:
        return latex, None
    return core, _canonical_unit(tail)


def _text_form(answer: str) -> str | None:
    """The answer as lower-case words when it is words (no digits, no math), or a choice letter, else None."""
    plain = TEXT_MACRO.sub(r"\1", answer).strip().strip(".")
    choice = CHOICE.match(plain)
    if choice:
        return choice.group(1).upper()
    if "\\" in plain or not TEXT_ANSWER.match(plain) or not re.search(r"[A-Za-z]{2}", plain):
        return None
    words = re.sub(r"[^a-z\s]", " ", plain.lower()).split()
    if all(w in MATH_WORDS for w in words):
        return None
    return " ".join(w for w in words if w not in ("the", "a", "an"))


def _strip_wrappers(answer: str) -> str:
    """The answer without \\boxed, math delimiters, spacing macros, currency signs, lead-in prose and
    trailing punctuation; unicode and synonyms replaced, a leading number word as digits."""
    text = re.sub(r"\s+", " ", answer).strip()  # single spaces keep the patterns below linear
    if "\\boxed" in text or "\\fbox" in text:
        text = last_boxed(text) or text
    for literal, replacement in LITERALS.items():
        text = text.replace(literal, replacement)
    text = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", text.strip())
    text = SPACING.sub(" ", text)
    text = re.sub(r"\binfinity\b", r"\\infty", text, flags=re.IGNORECASE)
    text = LEADING_TEXT.sub("", text.strip())
    text = LEADING_PHRASE.sub("", text).strip().rstrip(".;").strip()
    whole_text = re.fullmatch(r"\\(?:text|mbox|textbf|mathrm)\s*\{(.*)\}", text)
    if whole_text and "{" not in whole_text.group(1):
        text = whole_text.group(1).strip()
    sign = NEGATIVE_WORD.match(text)
    if sign:
        return "-" + NUMBER_WORD.sub(_number_from_words, text[sign.end():])
    return NUMBER_WORD.sub(_number_from_words, text)


def _rewrite_notation(text: str) -> str:
    """Alternatives ('2 or 3') as lists; percent, degrees, number multipliers, scientific notation, mixed numbers
    and repeating decimals in the forms math-verify reads."""
    text = ALTERNATIVES.sub(", ", text)
    text = PERCENT.sub(r"\\%", text)
    text = DEGREES.sub(r"^\\circ", text)
    text = MULTIPLIER.sub(lambda m: f"{m.group(1)}\\times 10^{{{POWERS_OF_TEN[m.group(2).lower()]}}}", text)
    text = POWER_WORD.sub(lambda m: "^2" if m.group(1).lower() == "squared" else "^3", text)
    text = NEGATIVE_WORD.sub("-", text)
    text = SQRT_PARENS.sub(r"\\sqrt{\1}", text)
    text = SCIENTIFIC_E.sub(r"\1\\times 10^{\2}", text)
    text = TIMES_TEN.sub(r"\1\\times 10^", text)
    text = MIXED_NUMBER.sub(_improper_fraction, text)
    return REPEATING_DECIMAL.sub(_repeating_decimal_fraction, text)


def normalize_answer(answer: str) -> Answer:
    """Normalize an extracted final answer (or a gold answer) for comparison."""
    text = _strip_wrappers(answer)
    word_answer = _text_form(text)
    if word_answer is not None:
        return Answer(latex=text, text=word_answer)
    latex, unit = _split_unit(_rewrite_notation(text))
    return Answer(latex=latex.strip(), unit=unit)
