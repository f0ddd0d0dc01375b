"""Question answering: exact match and token F1 against reference answers, with SQuAD's answer normalization
(Rajpurkar et al. 2016; the official evaluation script): lowercase, punctuation removed, the articles a / an / the
removed, whitespace collapsed. Search-R1 (Jin et al. 2025) trains on exact match.

The answer is the contents of the last `<answer>...</answer>` of the reply (Search-R1's format), else the whole final
reply. The guards of the rule verifiers (rlvr.verifiers.guards) apply: an answer that copies the question's sentences
is not an answer (class `echo`); different answers in several `<answer>` tags, or alternatives offered inside one
("Paris or Lyon", "Paris / Lyon") when no reference is written that way, are a hedge and score 0 (class `hedge`); an
answer cut off by the token limit scores 0 (class `unfinished`).

Every reference in `golden_answers` (NQ, TriviaQA, HotpotQA as Search-R1 ships them) counts; the best one scores.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any

from rlvr.verifiers.extraction import reply_text
from rlvr.verifiers.guards import without_prompt_copies
from rlvr.verifiers.verdict import shown_answer

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
OPEN_ANSWER = re.compile(r"<answer>(?!.*</answer>)(.*)$", re.DOTALL | re.IGNORECASE)
INFORMATION = re.compile(r"<information>.*?</information>", re.DOTALL | re.IGNORECASE)
ARTICLES = re.compile(r"\b(a|an|the)\b")
PUNCTUATION = set(string.punctuation)
ALTERNATIVES = re.compile(r"\bor\b|/|;|\beither\b", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """SQuAD's normalization: lowercase, punctuation removed, articles removed, whitespace collapsed."""
    text = "".join(ch for ch in str(text).lower() if ch not in PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", text).split())


def exact_match_score(prediction: str, reference: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(reference))


def f1_score(prediction: str, reference: str) -> float:
    """SQuAD's token F1 of the normalized texts (both empty: 1; one empty: 0)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def references(answer: Any = None, golden_answers: Any = None) -> list[str]:
    """The reference answers: `golden_answers` (a list or one string), else `answer`."""
    found = golden_answers if golden_answers is not None else answer
    if found is None:
        return []
    return [str(a) for a in (found if isinstance(found, (list, tuple)) else [found]) if str(a).strip()]


def stated_answers(completion: str) -> tuple[list[str], bool]:
    """(the answers the reply states, finished): the contents of its `<answer>` tags, else the whole reply (the
    retrieved `<information>` blocks left out); an `<answer>` left open counts as unfinished."""
    reply, closed = reply_text(completion)
    tagged = [" ".join(a.split()) for a in ANSWER_TAG.findall(reply)]
    if tagged:
        return tagged, True
    opened = OPEN_ANSWER.search(reply)
    if opened:
        return [" ".join(opened.group(1).split())], False
    return [" ".join(INFORMATION.sub(" ", reply).split())], closed


def qa_scores(prompt: Any, completion: str, answer: Any = None, golden_answers: Any = None,
              truncated: bool = False) -> tuple[float, float, str | None]:
    """(exact match, F1, the answer judged) of the last stated answer against the best reference, after the
    guards."""
    refs = references(answer, golden_answers)
    stated, finished = stated_answers(completion)
    final = stated[-1] if stated else ""
    shown = shown_answer(final)
    if not refs or not final:
        return 0.0, 0.0, shown
    hedged = len({normalize_answer(s) for s in stated}) > 1 or (
        ALTERNATIVES.search(final) and not any(ALTERNATIVES.search(r) for r in refs))
    echoed = not " ".join(without_prompt_copies(final, prompt, refs[0]).split())
    if hedged or echoed or (truncated and not finished):
        return 0.0, 0.0, shown
    return max(exact_match_score(final, r) for r in refs), max(f1_score(final, r) for r in refs), shown


def exact_match(prompt: Any, completion: str, answer: Any = None, golden_answers: Any = None,
                truncated: bool = False, **_: Any) -> dict[str, Any]:
    """1.0 when the final answer equals a reference after SQuAD's normalization; F1 is reported beside it."""
    em, f1, shown = qa_scores(prompt, completion, answer, golden_answers, truncated)
    return {"score": em, "f1": f1, "answer": shown}


def token_f1(prompt: Any, completion: str, answer: Any = None, golden_answers: Any = None,
             truncated: bool = False, **_: Any) -> dict[str, Any]:
    """SQuAD's token F1 of the final answer against the best reference; exact match is reported beside it."""
    em, f1, shown = qa_scores(prompt, completion, answer, golden_answers, truncated)
    return {"score": f1, "exact_match": em, "answer": shown}
