"""Find the final answer in a completion: the last \\boxed{...} / \\fbox{...}, an "Answer:" or "####" line,
or the last number; tried in a configurable order."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)\s*")
ANSWER_MARKERS = (
    re.compile(r"^[ \t>*_#-]*(?:final\s+)?answer[ \t*_]*[:：][ \t*_]*(\S[^\n]*)", re.IGNORECASE | re.MULTILINE),
    re.compile(r"\b(?:answer|option|choice)\s+is[ \t:*_]*(\S(?:(?!\b(?:answer|option|choice)\s+is\b)[^\n])*)",
               re.IGNORECASE),
    re.compile(r"####[ \t]*(\S[^\n]*)"),
)
SENTENCE_END = re.compile(r"\.(?:\s|$)|,\s+(?:which|because|since|so|as|that|where|and\s+this)\b", re.IGNORECASE)
BRACE_OR_ESCAPE = re.compile(r"\\.|[{}]", re.DOTALL)
# A number standing on its own: after a space, '=' or '$' and before a space, '$' or the end of a sentence, never
# a digit inside an expression (the 2 of \frac{1+\sqrt{5}}{2}, the 1 of [0,1), the 4 of 2^{4}).
NUMBER = re.compile(r"(?<![^\s=$])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?(?=[\s$]|[.,;:!?](?:\s|$)|$)")


def closing_braces(text: str) -> dict[int, int]:
    """Position of each '{' -> position of its matching '}' (escaped \\{ and \\} skipped), in one pass."""
    closing, stack = {}, []
    for match in BRACE_OR_ESCAPE.finditer(text):
        char = match.group()
        if char == "{":
            stack.append(match.start())
        elif char == "}" and stack:
            closing[stack.pop()] = match.start()
    return closing


def last_boxed(text: str) -> str | None:
    """The contents of the last complete, non-empty \\boxed{...} or \\fbox{...} (nested braces allowed; also
    `\\boxed 5`)."""
    matches = list(BOX_COMMAND.finditer(text))
    if not matches:
        return None
    closing = closing_braces(text)
    for match in reversed(matches):
        end = match.end()
        if end in closing and text[end + 1 : closing[end]].strip():
            return text[end + 1 : closing[end]].strip()
        if end < len(text) and text[end] != "{" and match.group().endswith((" ", "\t")):
            token = re.match(r"[^\s$]+", text[end:])
            if token:
                return token.group()
    return None


def _clean_answer(line: str) -> str:
    """An answer line without markdown emphasis, math delimiters and what follows its first sentence or
    clause ('12 apples, which is ...')."""
    boxed = last_boxed(line)
    if boxed is not None:
        return boxed
    end = SENTENCE_END.search(line)
    line = line[: end.start()] if end else line
    return line.strip().strip("*_").strip().strip("$").strip()


def answer_lines(text: str) -> list[tuple[int, str]]:
    """(position, answer) for every "Answer:" / "Final answer:" / "... answer is" / "... option is" / "####"
    marker, in order: what follows it to the end of its sentence or line ('' when nothing does)."""
    found = sorted((m.start(1), m.group(1)) for pattern in ANSWER_MARKERS for m in pattern.finditer(text))
    return [(position, _clean_answer(line)) for position, line in found]


def answer_line(text: str) -> str | None:
    """What follows the last "Answer:" / "Final answer:" / "... answer is" / "... option is" / "####" marker, to
    the end of its sentence or line."""
    found = answer_lines(text)
    return (found[-1][1] or None) if found else None


def final_number(text: str) -> str | None:
    """The last number standing on its own in the text (integers, decimals, thousands separators, simple fractions
    like 3/4)."""
    numbers = NUMBER.findall(text)
    return numbers[-1].replace(" ", "") if numbers else None


def whole_text(text: str) -> str | None:
    """The whole completion, for completions that are just the answer."""
    return text.strip() or None


EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "boxed": last_boxed,
    "answer_line": answer_line,
    "final_number": final_number,
    "whole": whole_text,
}
DEFAULT_ORDER = ("boxed", "answer_line", "final_number")


def extraction_order(order: str | Iterable[str]) -> tuple[str, ...]:
    """A validated tuple of extractor names, from a comma-separated string or a list."""
    names = tuple(n.strip() for n in (order.split(",") if isinstance(order, str) else order) if n.strip())
    unknown = [n for n in names if n not in EXTRACTORS]
    if unknown or not names:
        raise ValueError(f"unknown answer extractor(s) {unknown or names}; choose from {', '.join(EXTRACTORS)}")
    return names


def extract_answer(text: str, order: str | Iterable[str] = DEFAULT_ORDER) -> str | None:
    """The answer found by the first extractor in `order` that finds one, or None."""
    for name in extraction_order(order):
        answer = EXTRACTORS[name](text)
        if answer is not None:
            return answer
    return None
