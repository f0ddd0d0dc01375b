"""Guards against answers a policy can game, shared by the rule verifiers (docs/verifiers.md, "Reward hacking").

A rule verifier pays for a final answer; RL then amplifies whatever it pays for. Each guard here names one way of
being paid without answering, as a class of completions rather than a list of examples:

- **restated question**: the answer is an expression the prompt already holds (`58 + 96` for "What is 58 + 96?",
  commuted, bracketed or boxed), unless the reference itself is written that way (`restates_prompt`); and, for a
  numeric reference, an answer that is not written as a number (`written_as_number`);
- **the prompt echoed**: sentences copied from the prompt are not the completion's words (`without_prompt_copies`);
- **hedges**: several candidate values in the final answer (lists, "or", ranges and bounds, several boxes) or an
  alternative offered after it (`hedged_values`, `later_alternatives`);
- **unfinished**: an answer cut off by the token limit (`finished`), or a marker left without content
  (`empty_final_marker`).

Everything here is linear in the text's length (no nested quantifiers over unbounded input).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

# --- the prompt --------------------------------------------------------------------------------------------------

COPY_MIN_CHARS = 12  # a prompt sentence shorter than this ("58 + 96") may well be written again while working
PROMPT_SENTENCE = re.compile(r"[^.?!\n]+[.?!]*")


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


def prompt_text(prompt: Any) -> str:
    """A prompt as text: a string, or a conversation's message contents one per line (of a multimodal message, its
    text parts)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        return "\n".join(_content_text(m.get("content", "")) for m in prompt if isinstance(m, dict))
    return "" if prompt is None else str(prompt)


@lru_cache(maxsize=256)
def _prompt_sentences(prompt: str) -> tuple[str, ...]:
    sentences = (s.strip() for s in PROMPT_SENTENCE.findall(prompt))
    return tuple(dict.fromkeys(s for s in sentences if len(s) >= COPY_MIN_CHARS and re.search(r"\w", s)))


def without_prompt_copies(completion: str, prompt: Any, reference: str | None = None) -> str:
    """`completion` with every sentence of the prompt that it copies word for word (COPY_MIN_CHARS characters or
    more) blanked out, so that an echoed question, instruction or list of options is not read as an answer
    (class `echo`). A copied sentence that is the reference itself (an option copied as the answer) stays."""
    prompt = prompt_text(prompt)
    if not prompt or not completion:
        return completion
    keep = " ".join(str(reference).split()) if reference is not None else None
    for sentence in _prompt_sentences(prompt):
        if sentence in completion and " ".join(sentence.split()).rstrip(".?!") != keep:
            completion = completion.replace(sentence, " " * len(sentence))
    return completion


# --- expressions, as multisets of tokens ---------------------------------------------------------------------------

MATH_FUNCTIONS = {"sin", "cos", "tan", "cot", "sec", "csc", "log", "ln", "exp", "sqrt", "frac", "dfrac", "tfrac",
                  "pi", "cdot", "times", "div", "pm", "mp", "le", "ge", "lt", "gt", "leq", "geq", "ne", "neq"}
OPERATOR_NAMES = {"cdot": "*", "times": "*", "div": "/", "frac": "/", "dfrac": "/", "tfrac": "/", "sqrt": "sqrt",
                  "pm": "pm", "mp": "pm", "le": "<=", "leq": "<=", "ge": ">=", "geq": ">=", "lt": "<", "gt": ">",
                  "ne": "!=", "neq": "!="}
OPERATORS = {"+", "-", "*", "/", "^", "=", "<", ">", "<=", ">=", "!=", "sqrt", "pm", "!"}
TOKEN = re.compile(
    r"(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"|\\(?P<command>[A-Za-z]+)"
    r"|(?P<word>[A-Za-z]+)"
    r"|(?P<op><=|>=|!=|[-+*/^=<>!×÷·−])"
    r"|(?P<gap>[?;:]\s|[.,](?!\d)\s*|\n)"
)
UNICODE_OPERATORS = {"×": "*", "·": "*", "÷": "/", "−": "-"}


def expression_runs(text: str) -> list[list[str]]:
    """The math in `text` as runs of tokens (numbers, one-letter variables, operators; brackets and spacing
    dropped); a word of prose or the end of a sentence ends a run."""
    runs: list[list[str]] = [[]]
    for match in TOKEN.finditer(text):
        kind, value = match.lastgroup, match.group()
        if kind == "number":
            runs[-1].append(value.replace(",", ""))
        elif kind == "command":
            name = match.group("command")
            if name in OPERATOR_NAMES:
                runs[-1].append(OPERATOR_NAMES[name])
            elif name in MATH_FUNCTIONS:
                runs[-1].append(name)
            elif name in ("text", "mathrm", "textbf", "mbox", "operatorname"):
                continue
            elif name not in ("left", "right", "boxed", "fbox", "displaystyle", "quad", "qquad"):
                runs[-1].append(name)
        elif kind == "word":
            if len(value) == 1 or value.lower() in MATH_FUNCTIONS:
                runs[-1].append(value)
            elif runs[-1]:
                runs.append([])
        elif kind == "op":
            runs[-1].append(UNICODE_OPERATORS.get(value, value))
        elif runs[-1]:  # a sentence gap
            runs.append([])
    return [run for run in runs if run]


def _operands(tokens: Iterable[str]) -> int:
    return sum(1 for t in tokens if t not in OPERATORS)


def is_compound(tokens: list[str]) -> bool:
    """An expression of two or more operands joined by operators (`58 + 96`, `x^2+1`), not one value (`-5`)."""
    return _operands(tokens) >= 2 and any(t in OPERATORS for t in tokens)


def _unsigned(tokens: list[str]) -> list[str]:
    """Tokens without `+`: commuting `a - b` into `-b + a` adds one."""
    return [t for t in tokens if t != "+"]


@lru_cache(maxsize=256)
def _prompt_windows(prompt: str, size: int) -> frozenset:
    """Every contiguous window of `size` tokens (without `+`) of the prompt's expressions, as a multiset."""
    windows = set()
    for run in expression_runs(prompt):
        run = _unsigned(run)
        for start in range(len(run) - size + 1):
            windows.add(frozenset(Counter(run[start : start + size]).items()))
    return frozenset(windows)


def restates_prompt(answer: str, prompt: Any, reference: str | None = None) -> bool:
    """Whether the answer is an expression the prompt already holds, written the same way or equal to it as an
    unevaluated expression (same operands and operators, in any order or bracketing: `96 + 58`, `(58)+(96)`
    for "What is 58 + 96?", `-2x + (x+1)^2` for `(x+1)^2 - 2x`), and not how the reference itself is written (`x + 1` answering a prompt that holds
    `x + 1` when the reference is `x+1`). Class `restated`."""
    prompt = prompt_text(prompt)
    runs = expression_runs(answer)
    if not prompt or len(runs) != 1 or not is_compound(runs[0]):
        return False
    tokens = _unsigned(runs[0])
    if reference is not None:
        ref_runs = expression_runs(str(reference))
        if len(ref_runs) == 1 and Counter(_unsigned(ref_runs[0])) == Counter(tokens):
            return False
    return frozenset(Counter(tokens).items()) in _prompt_windows(prompt, len(tokens))


# --- the form of a numeric answer ------------------------------------------------------------------------------

_NUM = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:[.,]\d+)?|[-+]?\.\d+"
NUMBER_FORM = re.compile(
    rf"(?:{_NUM})"  # 154, -3.5, 1,220, 0,5
    rf"|[-+]?\\frac\{{\s*-?\d+\s*\}}\{{\s*-?\d+\s*\}}"  # \frac{1}{3}
    rf"|[-+]?\d+\s*/\s*\d+"  # 1/3
    rf"|(?:{_NUM})\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{{?\s*[-+]?\d+\s*\}}?"  # 4.5 \times 10^{3}
)
NUMBER_SUFFIX = re.compile(r"\s*(?:\\%|%|\^\s*\{?\s*\\circ\s*\}?)$")


def written_as_number(latex: str) -> bool:
    """Whether a (normalized) answer is written as one number: an integer or decimal (separators allowed), a
    fraction of integers, scientific notation, optionally a percentage or degrees; `58 + 96`, `\\sqrt{4}` and
    `2 \\cdot 77` are expressions, not numbers."""
    text = NUMBER_SUFFIX.sub("", latex.strip().strip("$*_").strip())
    text = re.sub(r"^\(\s*(.*?)\s*\)$", r"\1", text)
    return bool(NUMBER_FORM.fullmatch(text))


def equation_result(latex: str) -> str:
    """The right-hand side of an answer written as an equation (`58 + 96 = 154` -> `154`, `x = 3` -> `3`); the
    answer itself otherwise. Only a top-level `=` counts (not one inside braces)."""
    depth, cut = 0, -1
    for i, char in enumerate(latex):
        if char in "{([":
            depth += 1
        elif char in "})]":
            depth -= 1
        elif char == "=" and depth == 0 and latex[i - 1 : i] not in ("<", ">", "!"):
            cut = i
    return latex[cut + 1 :].strip() if cut >= 0 else latex


# --- hedges ----------------------------------------------------------------------------------------------------

# One value a hedge offers: $...$, a box, a number (maybe as `x = 3`), a choice letter.
VALUE = (r"(?:\$[^$\n]{1,200}\$|\\(?:boxed|fbox)\{[^{}\n]{0,200}\}|(?:[a-z]\s*=\s*)?[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)"
         r"(?:\.\d+)?(?:/\d+)?|\([A-E]\))")
# What joins the values of a hedge: a list, "or", "and", a range ("150 to 160"; a hyphen is a minus sign), also in
# the languages whose answer markers the final-answer rule reads ("150 ou 154", "150 oder 154", "150或154").
JOIN = (r"(?:\s*,?\s*\(?\s*(?:\\text\{\s*(?:or|and|to)\s*\}|\b(?:or|and|to|through|thru|and/or|ou|oder|o|y|et|und|e"
        r"|или|и)\b(?:\s+(?:maybe|possibly|perhaps|even|else|peut-être|vielleicht|quizás))?|或者?|または|还是|\\quad\s*"
        r"(?:or|and)?)\s*(?:\\quad\s*)?|\s*,\s+|\s*;\s*|\s*(?:–|\\ldots|\.\.\.|…)\s*)")
HEDGE = re.compile(rf"{VALUE}(?:{JOIN}{VALUE})+", re.IGNORECASE)
# A bound instead of a value: "at most 154", "more than 150", "154 or less", "154 ± 1".
BOUND_BEFORE = re.compile(
    r"(?:\bat\s+(?:least|most)|\bno\s+(?:more|less|fewer|greater)\s+than|\b(?:more|less|fewer|greater|smaller|larger"
    r"|higher|lower|bigger)\s+than|\bup\s+to|\babove|\bbelow|\bbetween|\bwithin|\bexceeds?|[<>≤≥]=?|\\(?:le|ge|lt|gt"
    r"|leq|geq)\b)[\s$({]*$",
    re.IGNORECASE,
)
BOUND_AFTER = re.compile(
    r"^[\s$})]*(?:or\s+(?:less|more|fewer|greater|higher|lower|above|below|so|thereabouts|over|under|fewer)\b"
    r"|\+(?![\w(\\\s]*\d)|\\pm(?![A-Za-z])|±|-?ish\b|(?:and|or)\s+(?:up|down|above|below|over|under|higher|lower|less|more)\b)",
    re.IGNORECASE,
)


def _bracket_depth(text: str, end: int) -> int:
    depth = 0
    for char in text[:end]:
        if char in "([":
            depth += 1
        elif char in ")]" and depth:
            depth -= 1
    return depth


def hedged_values(statement: str, span: tuple[int, int] | None = None) -> list[str]:
    """The values an answer statement offers side by side ("150, 151 or 154", `\\boxed{1} or \\boxed{2}`,
    "between 150 and 160", `$2$ and $5$`); [] when it offers one. Values inside brackets are a tuple or an
    interval, not alternatives. With `span`, the answer's (start, end) in `statement`, only a list that holds the
    answer counts ("Adding 58 and 96 gives 154" offers one value, 154). Class `hedge`."""
    collapse = re.compile(r"\s+")  # single spaces keep the pattern linear
    text = collapse.sub(" ", statement)
    if span is not None:
        start = len(collapse.sub(" ", statement[: span[0]]))
        span = (start, start + len(collapse.sub(" ", statement[span[0] : span[1]])))
    found: list[str] = []
    for match in HEDGE.finditer(text):
        holds_answer = span is None or (match.start() < span[1] and match.end() > span[0])
        if holds_answer and _bracket_depth(text, match.start()) == 0:
            found = re.findall(VALUE, match.group(), re.IGNORECASE)
    return found


SENTENCE_BREAK = re.compile(r"[.!?](?=\s)|\n")
STATEMENT_END = re.compile(r"[.!?](?=\s|$)|\n")
STATEMENT_CHARS = 400  # how far back an answer's statement may start


def answer_statement(text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) of the statement that states the answer at text[start:end]: its sentence (or line), from its
    last "answer" before the answer on ("It could be 3 or 4, but the answer is 3" states 3)."""
    window = max(0, start - STATEMENT_CHARS)
    breaks = [m.end() for m in SENTENCE_BREAK.finditer(text, window, start)]
    head = breaks[-1] if breaks else window
    marker = text.lower().rfind("answer", head, start)
    stop = STATEMENT_END.search(text, end)
    return (marker if marker >= 0 else head), (stop.start() if stop else len(text))


def states_a_bound(before: str, after: str) -> bool:
    """Whether the text around an answer makes it a bound or a range rather than a value: "at most 154", "more
    than 150", "154 or less", "154 ± 1", `x \\le 154` (`before` ends where the answer starts, `after` starts where
    it ends). Class `hedge`."""
    return bool(BOUND_BEFORE.search(before[-40:]) or BOUND_AFTER.match(after[:40]))


# Words that open an alternative or a correction after an answer has been stated.
LATER_CUE = re.compile(
    r"^[\s*_>\-\"'(]*(?:or|maybe|perhaps|possibly|probably|alternatively|otherwise|either|else|unless|actually|wait"
    r"|no|nope|instead|correction|rather|oops|sorry|hmm+|on\s+second\s+thought|i\s+mean|but|it\s+(?:could|might)"
    r"|could|might)\b",
    re.IGNORECASE,
)
LATER_VALUE = re.compile(r"(?<![\w.^_{])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w^{])")
SENTENCES = re.compile(r"[^.!?\n]*(?:[.!?]+(?=\s|$)|\n|$)")


HEDGE_OPENING = re.compile(r"^[\s*_>\-\"'(]*(?:or|maybe|perhaps|possibly|alternatively|otherwise)\b", re.IGNORECASE)


def earlier_alternative(text: str, statement_start: int, answer: str) -> list[str]:
    """The value of the sentence before an answer whose statement opens as an alternative to it ("I think 153.
    Maybe 154." offers 153 too); [] otherwise. Class `hedge`."""
    if not HEDGE_OPENING.match(text[statement_start:]):
        return []
    before = LATER_VALUE.findall(text[max(0, statement_start - STATEMENT_CHARS) : statement_start])
    return [before[-1].replace("−", "-")] if before and before[-1] != answer else []


def later_alternatives(tail: str, answer: str) -> list[str]:
    """Values offered after the answer by a sentence that opens with a hedge or a correction ("Or maybe 150.",
    "Actually, it is 150.", "Wait, no: 150"), unless that sentence names the answer again (a check such as "Wait,
    let me check: 154 - 96 = 58"). Classes `hedge`, `changed`."""
    offered = []
    for sentence in SENTENCES.findall(tail):
        if not sentence.strip() or not LATER_CUE.match(sentence):
            continue
        if answer and answer in sentence:
            continue
        values = LATER_VALUE.findall(sentence)
        if values:
            offered.append(values[-1].replace("−", "-"))
    return offered


# --- unfinished answers ----------------------------------------------------------------------------------------

EMPTY_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{\s*(?:\\(?:text|mathrm)\{\s*\}|\\[,;! ]|\?|\.{3}|\\ldots)?\s*\}")
MARKER_AT_END = re.compile(
    r"(?:\banswer\s*(?:is|:|=)|\bresult\s*(?:is|:)|=|\\boxed\{?|<answer>)[\s*_:$.]*$", re.IGNORECASE)


def empty_final_marker(text: str) -> bool:
    """Whether the completion's last answer marker holds nothing: an empty box (`58 + 96 = \\boxed{}`) after which
    nothing states a number or boxes an answer, or an answer marker, `=` or an open box at the very end ("The
    answer is"). Class `empty_marker`."""
    if MARKER_AT_END.search(text[-200:]):
        return True
    empties = list(EMPTY_BOX.finditer(text))
    if not empties:
        return False
    after = text[empties[-1].end() :]
    return not re.search(r"\d|\\(?:boxed|fbox)\s*\{\s*[^\s}]", after)


def finished(text: str, answer_end: int) -> bool:
    """Whether an answer ending at `answer_end` in a completion cut off by the token limit was finished: something
    (a space, a closing brace or `$`, punctuation, more text) follows it. `The answer is 15|` may be the start of
    151. Class `unfinished`."""
    return bool(text[answer_end:].strip(" \t"))
