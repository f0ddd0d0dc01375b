"""Math answer checking through math-verify (Hugging Face): its own extraction (boxed answers, "final answer is",
"Answer:", LaTeX environments, plain numbers with separators and decimal commas, several boxes or `$a$ and $b$` as
an answer set) and its own comparison (symbolic and numeric equality of fractions, decimals, LaTeX, sets,
intervals, tuples, matrices, equations), under a per-call time limit.

On top of math-verify, only rules it lacks, each backed by labelled rows of `data/math_audit.jsonl`
(rlvr/verifiers/rules.py): hedged answers and conflicting units are rejected; word answers and choice letters
compare as text; percentages, degrees, scientific and mixed-number notation, number words and the like are
retried in a normalized form when math-verify says no. In front of all that, the guards against gamed answers
(rlvr/verifiers/guards.py, docs/verifiers.md "Reward hacking"): restated questions, echoed prompts, hedges,
unfinished answers and empty markers score 0.

Where the answer is read follows the final-answer rule every rule verifier shares (rlvr.verifiers.extraction,
docs/verifiers.md "The final answer"): the `<answer>` tags' contents, else the reply from its final-answer line
on, else the reply, up to the end of its turn; each region is read as above.

`math_score` is a reward function: `rlvr.verifiers.math:math_score`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rlvr.errors import RlvrError
from rlvr.verifiers import guards, rules
from rlvr.verifiers.extraction import Region, answer_line, answer_regions, last_boxed, without_sign_off
from rlvr.verifiers.normalize import normalize_answer
from rlvr.verifiers.timelimit import time_limit
from rlvr.verifiers.verdict import Verdict, shown_answer

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
# The same without the fallback to the last LaTeX or number anywhere: a box, "final answer is", "Answer:" and the like.
ANCHORED = (LatexExtractionConfig(try_extract_without_anchor=False), ExprExtractionConfig(try_extract_without_anchor=False))
BOXED_ONLY = (LatexExtractionConfig(try_extract_without_anchor=False, boxed_match_priority=0),)
EXTRACT_MODES = ("auto", "boxed", "anywhere")
ANSWER_FORMS = ("auto", "number", "any")
UNANCHORED_TAIL_CHARS = 200  # an answer found without an anchor is followed by at most this much text ...
UNANCHORED_TAIL_SENTENCES = 1  # ... in at most this many sentences
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


@dataclass(frozen=True)
class Reading:
    """The answer a text states, as the verdict reads it. `how` it was found: 'whole' (the text is a short answer
    on its own), 'anchored' (in a box, or after "final answer is", "Answer:", "the answer ... is": math-verify's
    anchored patterns), 'unanchored' (math-verify's fallback: the last LaTeX or number anywhere), or 'none'.
    `start`/`end` locate the answer in `prepared` (-1 when it cannot be located, such as a set of boxes)."""

    source: str  # the text as given
    prepared: str  # as handed to math-verify's extraction (rules.prepared)
    found: tuple  # math-verify's parse: (value, extracted string), or ()
    how: str
    start: int = -1
    end: int = -1

    @property
    def answer(self) -> str | None:
        """The answer as written (math-verify's extracted string), or None."""
        return _answer(self.found)


def _parsed(found: list) -> bool:
    return bool(found) and not isinstance(found[0], str)  # a bare string is a match math-verify could not parse


MATH_END = re.compile(r"\d|(?<!\\)\$|\\[)\]]")
ANSWER_WORD = re.compile(r"answer", re.IGNORECASE)
MARKER_REACH = 160  # math-verify's answer patterns take the value within 100 characters of "answer" (and an "=")
# An extracted expression that the text goes on to equate with a value ("the final answer is 92 + 61 = 153."):
# math-verify's answer patterns stop before the `=`.
CONTINUED = re.compile(r"[ \t$]*=[ \t]*([^=\n]{1,80}?)[ \t]*(?=[.!?;,]?(?:\s|$))")


def _locate(text: str, answer: str | None, how: str) -> tuple[int, int]:
    """Where the answer stands in `text`: the last box holding it; for another anchored answer, its first
    occurrence after the last "answer" marker that reaches it; else its last occurrence (not inside a number), or,
    when math-verify rewrote it (`0.5` read as `\\frac{1}{2}`, a set of several `$...$`), the last math in the
    text, where its rightmost match ends."""
    if not answer:
        return -1, -1
    written = re.compile(rf"(?<![\d.]){re.escape(answer)}(?!\d)")
    if how == "anchored":
        for start, end in reversed(rules.boxes(text)):
            inner = text[start:end]
            if " ".join(inner[inner.index("{") + 1 : -1].split()) == " ".join(answer.split()):
                return start + inner.index("{") + 1, end - 1
        for marker in reversed([m.end() for m in ANSWER_WORD.finditer(text)]):  # math-verify's marker patterns
            after = written.search(text, marker, marker + MARKER_REACH)
            if after:
                return after.span()
    last = _last_match(written, text) or _last_match(MATH_END, text)
    return (last.start(), last.end()) if last else (-1, -1)


def _last_match(pattern: re.Pattern, text: str) -> re.Match | None:
    found = None
    for found in pattern.finditer(text):  # noqa: B007 - the last one is wanted
        pass
    return found


@lru_cache(maxsize=4096)
def read(text: str, boxed_only: bool = False) -> Reading:
    """The answer `text` states, read with math-verify's extraction (its default configs: boxed, final answer,
    Answer:, LaTeX, numbers), anchored patterns first. A bare math expression is read whole as LaTeX (`$...$`),
    so that `x < 3` is an inequality rather than the number 3 found inside it. `boxed_only`: boxes only."""
    # math-verify's own timeouts are off (None): their signal.alarm(0) would cancel our time_limit's timer.
    if boxed_only:
        found = tuple(parse(text, extraction_config=BOXED_ONLY, parsing_timeout=None)) \
            if last_boxed(text) is not None else ()
        return Reading(text, text, found, "anchored" if found else "none", *_locate(text, _answer(found), "anchored"))
    if _is_bare_math(text):
        found = tuple(parse(f"${text.strip()}$", extraction_config=EXTRACTION, parsing_timeout=None))
        if _parsed(found):
            return Reading(text, text, found, "whole", 0, len(text))
    prepared = rules.prepared(text)
    found = parse(prepared, extraction_config=ANCHORED, parsing_timeout=None)
    how = "anchored"
    if not _parsed(found):  # the same extraction as math-verify's defaults: anchored patterns rank first
        found = parse(prepared, extraction_config=EXTRACTION, parsing_timeout=None)
        how = "whole" if rules.is_bare_answer(text) else "unanchored"
    if not found:
        return Reading(text, prepared, (), "none")
    start, end = _locate(prepared, _answer(found), how)
    result = CONTINUED.match(prepared, end) if end >= 0 else None
    if result and result.group(1).strip(" $"):  # "the final answer is 92 + 61 = 153": the answer is 153
        found = parse(result.group(1).strip(" $"), extraction_config=EXTRACTION, parsing_timeout=None)
        return Reading(text, prepared, tuple(found), how if found else "none", *result.span(1))
    return Reading(text, prepared, tuple(found), how, start, end)


def _answer(found) -> str | None:
    return next((f for f in reversed(found) if isinstance(f, str)), None)


def parse_math(text: str, boxed_only: bool = False) -> tuple:
    """math-verify's parse of `text` (see `read`), as (value, extracted string) or ()."""
    return read(text, boxed_only).found


def _math_verify_says(gold: tuple, found: tuple) -> bool:
    if not gold or not found:
        return False
    return verify(list(gold), list(found), allow_set_relation_comp=True, timeout_seconds=None)


def required_form(answer_form: str, gold: str, prompt: Any) -> str:
    """The form the answer must take: 'number' or 'any'. 'auto' asks for a number when a completion is scored for
    a prompt and the reference is a plain number (an integer, decimal or fraction, maybe with a unit or percent
    sign); comparing two answers without a prompt (majority votes, the audit) judges equivalence only."""
    if answer_form not in ANSWER_FORMS:
        raise ValueError(f"answer_form must be one of {', '.join(ANSWER_FORMS)}, got {answer_form!r}")
    if answer_form != "auto":
        return answer_form
    numeric = guards.written_as_number(normalize_answer(gold).latex) and "\\circ" not in gold
    return "number" if numeric and guards.prompt_text(prompt).strip() else "any"


def well_formed(stated: str, gold: str, prompt: Any = "", form: str = "any") -> bool:
    """Whether a stated answer is an answer at all: not an expression the prompt already holds (class
    `restated`), and written as a number when the form asks for one (`58 + 96` is not a number). An answer
    written as an equation is judged by its right-hand side (`58 + 96 = 154` states 154)."""
    result = guards.equation_result(stated)
    if any(guards.restates_prompt(part, prompt, gold) for part in dict.fromkeys((stated, result))):
        return False
    return form != "number" or guards.written_as_number(normalize_answer(result).latex)


def offered_answers(reading: Reading) -> list[str]:
    """The answers a text offers when it offers several (class `hedge`): the values listed, joined by "or" or given
    as a range in the answer's statement; different answers stated in boxes or after answer markers, the last not
    said to correct the one before; a value offered after the answer by a sentence opening with a hedge or a
    correction ("Or maybe 150.", "Actually, it is 150."), or before it when the answer's sentence opens as an
    alternative ("153. Maybe 154."). [] when it offers one answer."""
    text, answer = reading.prepared, reading.answer
    if reading.start >= 0:
        head, stop = guards.answer_statement(text, reading.start, reading.end)
        offered = guards.hedged_values(text[head:stop], (reading.start - head, reading.end - head))
        earlier = guards.earlier_alternative(text, head, answer or "")
        offered = offered or (earlier + [answer] if earlier and answer else [])
    else:
        offered = rules.alternatives(reading.source)
    offered = offered or rules.several_answers(reading.source)
    if reading.how == "anchored" and reading.end >= 0 and answer:
        later = guards.later_alternatives(text[reading.end :], answer)
        if later:
            offered = (offered or [answer]) + later
    return list(dict.fromkeys(_unwrapped(o) for o in offered))


def _as_shown(answer: str | None) -> str | None:
    """An answer as shown: an equation by its right-hand side, which is what was compared (`58 + 96 = 154.` shows
    154)."""
    return None if answer is None else guards.equation_result(answer).rstrip(" .*_").lstrip("*_ ") or answer


def _unwrapped(value: str) -> str:
    """An offered value without `$...$` or a box around it."""
    value = " ".join(value.split()).strip("$").strip()
    boxed = re.fullmatch(r"\\(?:boxed|fbox)\{(.*)\}", value)
    return boxed.group(1).strip() if boxed else value


def judge(reading: Reading, gold: str, prompt: Any = "", form: str = "any") -> tuple[bool, str | None]:
    """Whether the text read as `reading` states the answer `gold`, and the answer it was judged on: math-verify's
    verdict, then the rules it lacks (rlvr/verifiers/rules.py) and the guards against gamed answers
    (rlvr/verifiers/guards.py; `prompt` and `form` as in math_score)."""
    text, answer = reading.source, reading.answer
    parsed_gold = read(gold).found
    if rules.is_text_answer(gold):  # a word answer or a choice letter
        return rules.text_answers_match(text, gold), rules.written_answer(text) or answer
    if not rules.has_several_values(gold, parsed_gold):
        offered = offered_answers(reading)
        if offered:  # a hedge: every alternative must be right
            ok = all(well_formed(o, gold, prompt, form) and _math_verify_says(parsed_gold, read(o).found)
                     for o in offered)
            return ok, " or ".join(_as_shown(o) for o in offered)
        if reading.start >= 0 and guards.states_a_bound(reading.prepared[: reading.start],
                                                         reading.prepared[reading.end :]):
            return False, answer
    stated = rules.stated_answer(text, reading.found)
    written = answer or stated  # as extracted; a short text without an anchor is a stated answer as a whole
    if written is not None and not well_formed(written, gold, prompt, form):
        return False, written
    if rules.units_conflict(text, gold):
        return False, answer
    if rules.scaled_number(text):
        return rules.normalized_match(text, gold, _compare_latex), text
    if _math_verify_says(parsed_gold, reading.found):
        return True, answer
    return stated is not None and rules.normalized_match(stated, gold, _compare_latex), answer or stated


def unanswered(reading: Reading, truncated: bool, words: bool = False, anywhere: bool = False) -> bool:
    """Whether a completion has given no answer that counts: it states none; its last answer marker is empty
    (`58 + 96 = \\boxed{}`, "The answer is" at the end) and no box or answer line holds an answer (class
    `empty_marker`); it was cut off by the token limit and holds no answer it finished in a box or after an
    answer marker (class `unfinished`); or its only answer is math-verify's unanchored fallback far from its end,
    followed by more than UNANCHORED_TAIL_SENTENCES sentence or UNANCHORED_TAIL_CHARS characters, a sign-off aside
    (class `unfinished`). `words`: the reference is a word answer or a choice letter, which the rules read as text.
    `anywhere` (extract='anywhere') drops the two `unfinished` rules: any answer math-verify finds counts."""
    text = reading.source
    if words:  # a word answer or a choice letter: the box, the answer line or the short text states it
        written = rules.written_answer(text).strip()
        if not written:
            return True
        anchored = last_boxed(text) is not None or answer_line(text) is not None
        return truncated and not (anchored and guards.finished(text, text.rfind(written) + len(written)))
    if reading.how == "none" and not rules.written_answer(text).strip():
        return True
    if guards.empty_final_marker(text) and last_boxed(text) is None and answer_line(text) is None:
        return True
    if anywhere:
        return False
    if truncated and not (reading.how == "anchored" and reading.end >= 0
                          and guards.finished(reading.prepared, reading.end)):
        return True
    if reading.how == "unanchored":
        tail = without_sign_off(reading.prepared[reading.end :] if reading.end >= 0 else reading.prepared)
        sentences = [s for s in guards.SENTENCES.findall(tail) if s.strip(" \t\n.!?$)}*_")]
        return len(tail.strip()) > UNANCHORED_TAIL_CHARS or len(sentences) > UNANCHORED_TAIL_SENTENCES
    return False


def _compare_latex(gold: str, candidate: str) -> bool:
    """math-verify on two normalized LaTeX answers, each read whole (used by the rules' retry)."""
    return _math_verify_says(_parse_whole(gold), _parse_whole(candidate))


@lru_cache(maxsize=4096)
def _parse_whole(latex: str) -> tuple:
    return tuple(parse(f"\\boxed{{{latex}}}", extraction_config=BOXED_ONLY, parsing_timeout=None))


def answers_match(candidate: str, gold: str, timeout_s: float = 5.0, prompt: Any = None,
                  answer_form: str = "auto") -> bool:
    """Whether a stated answer (`\\frac{1}{2}`, `$x \\lt 3$`, `The answer is 0.5`) equals the reference answer
    mathematically (hedges such as "3 or 4" match only if every alternative does; an empty box states nothing).
    With the `prompt` it answers, the guards of math_score against restated and echoed questions apply too, and
    `answer_form` as there. Raises TimeLimitExceeded after `timeout_s` seconds (0: no limit)."""
    with time_limit(timeout_s, "math verification"):
        form = required_form(answer_form, gold, prompt)
        text = guards.without_prompt_copies(candidate, prompt, gold) if prompt else candidate
        return final_verdict(text, gold, prompt or "", form)[0]


def same_answer(a: str, b: str) -> bool:
    """Whether two stated answers are one answer for majority votes: equal text, or mathematically equal; an
    unevaluated expression (`58 + 96`) is no vote for a number (`154`). A comparison that fails or runs out of
    time keeps them apart."""
    try:
        return a == b or answers_match(a, b, answer_form="number" if guards.written_as_number(b) else "any")
    except Exception:  # noqa: BLE001
        return False


def region_verdict(region: Region, gold: str, prompt: Any = "", form: str = "any", truncated: bool = False,
                   extract: str = "auto") -> tuple[bool, str | None] | None:
    """Whether one region of the final-answer rule (rlvr.verifiers.extraction.answer_regions) states `gold`, and the
    answer judged (as shown); None when it states no answer that counts (`unanswered`). A region that something
    closed (an answer tag's end, the end of the turn) was finished, whatever the token limit."""
    reading = read(region.text, boxed_only=extract == "boxed")
    words = rules.is_text_answer(gold)
    if unanswered(reading, truncated and not region.closed, words, anywhere=extract == "anywhere"):
        return None
    ok, shown = judge(reading, gold, prompt, form)
    return ok, (shown if words or " or " in (shown or "") else _as_shown(shown))


def final_verdict(text: str, gold: str, prompt: Any = "", form: str = "any", truncated: bool = False,
                  extract: str = "auto") -> tuple[bool, str | None]:
    """Whether the completion's final answer, by the final-answer rule, is `gold`, and the answer judged (None when
    it gave none): every region must state it (several different `<answer>` tags are a hedge)."""
    verdicts = [region_verdict(r, gold, prompt, form, truncated, extract) for r in answer_regions(text)]
    if any(v is None for v in verdicts):
        return False, None
    shown = [s for _, s in verdicts if s]
    return all(ok for ok, _ in verdicts), " or ".join(dict.fromkeys(shown)) or None


def gold_answer(reference: str) -> str:
    """The reference answer: the boxed answer of a worked solution (rules.final_boxed_answer), or the text."""
    return rules.final_boxed_answer(reference) or reference


def score_completion(prompt: Any, completion: str, answer: str, extract: str = "auto", answer_form: str = "auto",
                     truncated: bool = False) -> Verdict:
    """math_score's verdict without its time limit: the score and the answer it was judged on."""
    if extract not in EXTRACT_MODES:
        raise ValueError(f"extract must be one of {', '.join(EXTRACT_MODES)}, got {extract!r}")
    gold = gold_answer(str(answer))
    form = required_form(answer_form, gold, prompt)
    text = guards.without_prompt_copies(completion, prompt, gold)
    ok, shown = final_verdict(text, gold, prompt, form, bool(truncated), extract)
    return Verdict(float(ok), shown_answer(shown))


def math_score(prompt: Any, completion: str, answer: str, extract: str = "auto", timeout_s: float = 5.0,
               answer_form: str = "auto", truncated: bool = False, **_: Any) -> Verdict:
    """1.0 when the completion's final answer equals `answer`, else 0.0, as a Verdict that also carries the answer
    it judged (None when the completion gave none).

    `extract`: 'auto' reads the final answer as math-verify does (the last boxed answer or "final answer is ...",
    then "Answer: ...", then the last LaTeX or number standing on its own; a bare answer is read whole), an answer
    without such an anchor only near the completion's end and not in a truncated completion; 'boxed' scores only
    completions that box their answer; 'anywhere' takes math-verify's unanchored fallback wherever it stands, in
    truncated completions too (the other guards still apply). Answers that game the reward score 0 (docs/verifiers.md,
    "Reward hacking"): an expression the prompt already holds, text copied from the prompt, hedges, an empty
    answer marker, an answer the token limit cut off (`truncated`, which training hands every reward), and an
    unanchored answer far from the completion's end. `answer_form`: 'number' asks for an answer written as a
    number, 'any' for any equivalent form, 'auto' (default) for a number when the reference is a plain number
    and there is a prompt. A comparison running past `timeout_s` raises, which the reward pool records as an
    error scoring 0."""
    with time_limit(timeout_s, "math verification"):
        return score_completion(prompt, completion, answer, extract, answer_form, truncated)
