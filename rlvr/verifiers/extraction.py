"""Find the final answer in a completion, by one rule that every built-in verifier follows (docs/verifiers.md,
"The final answer"):

1. **The reply ends where its turn ends**: at the first chat-template marker after its text (`<|im_end|>`,
   `<|eot_id|>`, `</s>`, `<end_of_turn>`, `<|im_start|>user` ...); a courtesy sign-off at its end ("I hope it is
   correct.", Minerva's closing) is no part of the answer; a closed `<think>...</think>` block is working.
2. **The explicit final answer is the answer.** The contents of the `<answer>...</answer>` tags when the reply has
   them (R1-Zero's template); else the reply from its first final-answer line on ("Final answer: ...", "The final
   answer is ...", GSM8K's "#### ...", a line opening with "Answer:" or "The answer is", in several languages), so
   results boxed or stated before it are intermediate work; else the whole reply.
3. **A hedge is several different final answers** (two tags, a correction after the last tag, two boxes or
   answer lines after the final-answer line, a list in the answer), never intermediate work before the final
   answer.

`answer_regions` applies 1 and 2; the verifiers read their answer from each region (math-verify for the math
verifier; `extract_answer` below for the others: the last \\boxed{...} / \\fbox{...}, an "Answer:" or "####"
line, or the last number, tried in a configurable order) and apply 3 with the guards of rlvr.verifiers.guards."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rlvr.verifiers.guards import later_alternatives

BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)\s*")
ANSWER_MARKERS = (
    re.compile(r"^[ \t>*_#-]*(?:final\s+)?answer[ \t*_]*[:：][ \t*_]*(\S[^\n]*)", re.IGNORECASE | re.MULTILINE),
    re.compile(r"\b(?:answer|option|choice)\s+is[ \t:*_]*(\S(?:(?!\b(?:answer|option|choice)\s+is\b)[^\n])*)",
               re.IGNORECASE),
    re.compile(r"####[ \t]*([-+]?[\d$\\.(][^\n]*)"),  # GSM8K's "#### 72", not a markdown heading
)
NESTED_MARKER = re.compile(r"[\s*_]*(?:the\s+)?(?:final\s+)?answer\s*(?:is\b|[:：])", re.IGNORECASE)
SENTENCE_END = re.compile(r"\.(?:\s|$)|,\s+(?:which|because|since|so|as|that|where|and\s+this)\b", re.IGNORECASE)
BRACE_OR_ESCAPE = re.compile(r"\\.|[{}]", re.DOTALL)
# A number standing on its own: after a space, '=' or '$' and before a space, '$' or the end of a sentence, never
# a digit inside an expression (the 2 of \frac{1+\sqrt{5}}{2}, the 1 of [0,1), the 4 of 2^{4}), nor a label: a
# step or list number ("Step 1:", "Case 2", "1. Add the ones", "2) carry").
NUMBER = re.compile(r"(?<![^\s=$])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?(?=[\s$]|[.,;!?](?:\s|$)|$)")
LABEL_WORD = re.compile(r"(?:step|case|part|stage|phase|problem|question|example|method|option|line|item|no\.?|#)\s*$",
                        re.IGNORECASE)
LINE_DECORATION = re.compile(r"[ \t>*_#-]*")
LABEL_REACH = 80  # how far back a list number's line start is looked for


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
    if BOX_COMMAND.search(line):  # an unclosed box: an answer cut off, not stated
        return ""
    end = SENTENCE_END.search(line)
    line = line[: end.start()] if end else line
    return line.strip().strip("*_").strip().strip("$").strip()


def answer_lines(text: str) -> list[tuple[int, str]]:
    """(position, answer) for every "Answer:" / "Final answer:" / "... answer is" / "... option is" / "####"
    marker, in order: what follows it to the end of its sentence or line ('' when nothing does)."""
    found = sorted((m.start(1), m.group(1)) for pattern in ANSWER_MARKERS for m in pattern.finditer(text))
    # "Final Answer: The final answer is 72." is one statement: a content that opens with another marker is read
    # from that marker
    return [(position, _clean_answer(line)) for position, line in found if not NESTED_MARKER.match(line)]


def answer_line(text: str) -> str | None:
    """What follows the last "Answer:" / "Final answer:" / "... answer is" / "... option is" / "####" marker, to
    the end of its sentence or line."""
    found = answer_lines(text)
    return (found[-1][1] or None) if found else None


def _is_label(text: str, match: re.Match) -> bool:
    """A step or list number, not a value: after a label word ("Step 1", "Case 2"), or opening a line and followed
    by `.` or `)` and more text ("1. Add the ones")."""
    if LABEL_WORD.search(text[max(0, match.start() - 12) : match.start()]):
        return True
    window = max(0, match.start() - LABEL_REACH)  # a bounded look back keeps a long line linear
    line_start = text.rfind("\n", window, match.start()) + 1 or (0 if window == 0 else -1)
    opens_line = line_start >= 0 and LINE_DECORATION.fullmatch(text, line_start, match.start()) is not None
    return opens_line and re.match(r"[.)][ \t]*\S", text[match.end() : match.end() + 3]) is not None


def final_number(text: str) -> str | None:
    """The last number standing on its own in the text (integers, decimals, thousands separators, simple fractions
    like 3/4); step and list numbers are labels, not values."""
    last = next((m for m in reversed(list(NUMBER.finditer(text))) if not _is_label(text, m)), None)
    return last.group().replace(" ", "") if last else None


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




# --- the final-answer rule ---------------------------------------------------------------------------------------

# The end of a reply's turn as chat templates write it (ChatML, Llama 3, DeepSeek, Gemma, Mistral, EOS strings):
# what follows is no part of the reply (a model that goes on to write the user's next turn has finished answering).
TURN_MARKER = re.compile(r"<\|[A-Za-z_]{2,40}\|>|<｜[^｜\n]{1,40}｜>|</s>|<eos>|<(?:end|start)_of_turn>|\[/?INST\]")
ROLE_NAME = re.compile(r"^[ \t]*(?:assistant|model)\b[ \t]*(?=\n|<)", re.IGNORECASE)
# Courtesy closings at the end of a reply (Minerva's "I hope it is correct." is part of the format it prompts for).
SIGN_OFF = re.compile(
    r"(?:I\s+hope\s+(?:it|this|that)\s+(?:is\s+correct|helps)|Hope\s+(?:it|this|that)\s+helps"
    r"|Let\s+me\s+know\s+if\b[^.!?\n]{0,120}|Feel\s+free\s+to\b[^.!?\n]{0,120}|Good\s+luck)[.!?]*",
    re.IGNORECASE)
SIGN_OFF_CHARS = 200  # a sign-off sentence is shorter than this ...
SIGN_OFFS = 3  # ... and at most this many end a reply
THINK_BLOCK = re.compile(r"<(think|thinking)>.*?</\1>", re.DOTALL | re.IGNORECASE)
ANSWER_TAG = re.compile(r"<answer>(.*?)(</answer>|$)", re.DOTALL | re.IGNORECASE)
# "Answer" and "final answer" in other languages, as a marker (followed by a colon or "is"), read as the English one.
_FINAL_WORDS = (r"réponse\s+finale|respuesta\s+final|resposta\s+final|risposta\s+finale|endgültige\s+antwort"
                r"|окончательный\s+ответ|最终答案|最終答案|最終的な答え|최종\s*답")
_ANSWER_WORDS = r"réponse|respuesta|resposta|risposta|antwort|ответ|答案|答え|解答|정답"
FOREIGN_MARKER = re.compile(
    rf"(?:\b(?:la|le|die|a|il)\s+)?(?:(?P<final>{_FINAL_WORDS})|(?P<plain>{_ANSWER_WORDS}))"
    r"(?:\s*[:：]|\s+(?:est|es|é|è|ist)\b|\s*(?:是|は))\s*",
    re.IGNORECASE)
GSM8K_MARKER = re.compile(r"####[ \t]*(?=[-+]?[\d$\\.(])")  # "#### 72", read as "Final answer: 72"
# A final-answer line: "final answer" followed by "is" or a colon, or as a heading ("### Final Answer"), or a line
# that opens with "Answer:" or "(so) the answer is" (markdown emphasis, quotes and list marks allowed before it).
FINAL_MARKER = re.compile(
    r"\bfinal\s+answer\b(?:[^\n.]{0,40}?(?:\bis\b|[:=])|[ \t*_#]*(?=\n))"
    r"|^[ \t>*_#-]*(?:(?:so|thus|therefore|hence)\b,?\s*)?(?:the\s+)?answer(?:\s+is\b|[ \t*_]*:)",
    re.IGNORECASE | re.MULTILINE)


def without_sign_off(text: str) -> str:
    """`text` without the courtesy sign-offs at its end, each a sentence of its own ("I hope it is correct.", "Let
    me know if ..."); the text as it is when it is nothing but sign-offs."""
    end = len(text)
    for _ in range(SIGN_OFFS):
        last = text[:end].rstrip(" \t\n*_").rstrip(".!?")
        start = max(last.rfind(c, max(0, len(last) - SIGN_OFF_CHARS)) for c in ".!?\n") + 1
        if not SIGN_OFF.fullmatch(last[start:].strip(" \t\n*_")) or not last[:start].strip():
            break
        end = start
    return text[:end]


FORMATS_READ = ("the contents of <answer>...</answer> tags (<think>...</think> before them is working), else a "
                "final-answer line ('Final Answer: The final answer is 72.', '#### 72', 'Answer: 72', 'The answer is "
                "72', in English, French, Spanish, German, Portuguese, Italian, Russian, Chinese, Japanese or Korean), "
                "else the last \\boxed{...} or a short answer on its own, up to the end of the turn")


def turn_text(completion: str) -> tuple[str, bool]:
    """(the completion up to the end of its turn, whether a turn marker ended it): chat-template markers before any
    text are dropped (with the role they open: `<|im_start|>assistant`), the first one after text ends the
    reply."""
    text = completion
    while (lead := TURN_MARKER.match(text.lstrip())) is not None:  # the template's opening, and the role it names
        text = text.lstrip()[lead.end() :]
        text = ROLE_NAME.sub("", text, count=1)
    end = TURN_MARKER.search(text)
    return (text[: end.start()], True) if end else (text, False)


def reply_text(completion: str) -> tuple[str, bool]:
    """(the reply the final answer is read from, whether something after it closed it: the end of its turn or a
    sign-off): up to the end of its turn, closed `<think>` blocks blanked, GSM8K's and foreign answer markers read
    as English ones. A sign-off stays (math-verify reads "final answer is X. I hope" first); readers that count
    the text after an answer drop it (`without_sign_off`)."""
    text, closed = turn_text(completion)
    closed = closed or without_sign_off(text) != text
    text = GSM8K_MARKER.sub("Final answer: ", THINK_BLOCK.sub(lambda m: " " * len(m.group()), text))
    return FOREIGN_MARKER.sub(lambda m: "Final answer: " if m.group("final") else "Answer: ", text), closed


@dataclass(frozen=True)
class Region:
    """Where a completion states its final answer: `text` to read it from, `closed` when something after it
    shows it was finished (a closing tag, the turn's end, a sign-off), and `how` it was found: 'tag' (an
    `<answer>` tag's contents), 'after_tag' (a value that a sentence after the last tag offers as a correction
    or a hedge: another final answer), 'final_line' (the reply from its first final-answer line on) or
    'reply'."""

    text: str
    closed: bool
    how: str


def answer_regions(completion: str) -> list[Region]:
    """The regions of the final-answer rule (module docstring): one per different `<answer>` tag's contents (a
    hedge offers several), and each value a sentence after the last tag offers as a correction or a hedge
    ("Actually, 150."); else the reply from its first final-answer line on (when something follows the marker);
    else the reply."""
    text, closed = reply_text(completion)
    tags = ANSWER_TAG.findall(text)
    if tags:
        contents = list(dict.fromkeys(c.strip() for c, end in tags if c.strip()))
        ends = {c.strip(): bool(end) or closed for c, end in tags}
        regions = [Region(c, ends[c], "tag") for c in contents] or [Region("", True, "tag")]
        after = text[text.lower().rfind("</answer>") + len("</answer>") :] if "</answer>" in text.lower() else ""
        # another final answer after the last tag: "<answer>154</answer> Actually, 150." (a check naming the
        # answer again, "Wait, let me check: 154 - 96 = 58", is none)
        offered = later_alternatives(after, contents[-1]) if contents else []
        return regions + [Region(value, closed, "after_tag") for value in dict.fromkeys(offered)]
    for marker in FINAL_MARKER.finditer(text):
        if re.search(r"[^\s*_:.$=]", text[marker.end() :]):
            return [Region(text[marker.start() :], closed, "final_line")]
    return [Region(text, closed, "reply")]


def extract_answer(text: str, order: str | Iterable[str] = DEFAULT_ORDER) -> str | None:
    """The final answer by the final-answer rule: in each of the completion's `answer_regions`, the answer found by
    the first extractor in `order` that finds one; several different ones (a hedge) joined by " or "; None when no
    region states one."""
    names = extraction_order(order)
    found = []
    for region in answer_regions(text):
        answer = next((a for a in (EXTRACTORS[n](region.text) for n in names) if a is not None), None)
        if answer is not None:
            found.append(answer)
    found = list(dict.fromkeys(found))
    return " or ".join(found) if found else None


WRAPPERS = re.compile(r"^(?:\$\$?(?P<a>[^$]*)\$\$?|\\\((?P<b>(?:(?!\\[()]).)*)\\\)|\\\[(?P<c>(?:(?!\\[][]).)*)\\\]"
                      r"|\*\*(?P<d>(?:(?!\*\*).)*)\*\*)$", re.DOTALL)


def bare(text: str) -> str:
    """An answer as written without what only dresses it: spacing, markdown emphasis, math delimiters (`$...$`,
    `\\(...\\)`, `\\[...\\]`), one box around all of it, a full stop at its end (`**$\\boxed{72}$.**` -> `72`)."""
    previous = None
    text = text.strip()
    while text != previous:
        previous = text
        text = text.strip().rstrip(".").strip().strip("_").strip()
        wrapped = WRAPPERS.match(text)
        if wrapped:
            text = next(g for g in wrapped.groups() if g is not None)
        elif BOX_COMMAND.match(text) and last_boxed(text) is not None:
            box = BOX_COMMAND.match(text)
            if text[box.end() : box.end() + 1] == "{" and closing_braces(text).get(box.end()) == len(text) - 1:
                text = text[box.end() + 1 : -1]
    return text.strip()
