"""The `judge` reward: a local causal LM asked, with the reference answer, whether a reply answers the question
correctly; the verdict is read from its next-token probabilities of yes and no, never parsed from its text.

LLM judges pay "master key" replies that answer nothing (a lone colon, "Solution", "Thought process:", "Let's solve
this problem step by step."), and RL learns to write them (Zhao et al. 2025, "One Token to Fool LLM-as-a-Judge").
Defences, on by default, each switchable so its effect can be measured (`rlvr verify judge-probe`):
- `require_answer`: a reply from which the verifiers' extraction reads no final answer (after the sentences it
  copies from the question are blanked, and an answer that only restates the question's expression, speaks of the
  grading, or has no number where the reference is one is dropped: rlvr.verifiers.guards) scores 0 without asking
  the judge;
- `sealed_reply`: the reply cannot write the verdict position: the verdict is the first token of the judge's own
  turn after the chat template's assistant prefix, and the reply's special-token strings are broken up so it
  cannot close the user turn and open a turn of its own (in a plain prompt the final answer it shows is put on one
  line, so it cannot write a verdict line);
- `reads: answer` (off by default): the judge reads only the final answer and compares it with the reference
  in a few-shot list of answer pairs, the way compact verifiers judge (Chen et al. 2025, "xVerify"): a 135M judge
  cannot grade a solution but can tell two answers apart;
- `threshold`: the reply passes only when P(yes) / (P(yes) + P(no)) reaches a confidence threshold; `auto` (the
  default) calibrates it when the judge loads (`calibrate`): a small judge's P(yes) is high for right and wrong
  answers alike (SmolLM2-135M-Instruct with reads=answer: 0.77 and 0.67), so a fixed 0.5 passes nearly every wrong
  answer.

The final answer is read by the final-answer rule every rule verifier follows (rlvr.verifiers.extraction: the
`<answer>` tag, the final-answer line, else the reply; a step or list number is a label, not an answer), and a
reply that offers several different final answers is refused like one that offers none.

Verdicts of identical (question, reference, reply) triples are cached per process; a call scores one prompt
group in batches of `batch_size`. The judge runs in the reward workers like every reward, so its calls keep the
per-item timeout and failure budget; a worker loads the judge before it reports ready, so loading never counts
against rewards.timeout_s (rewards.load_timeout_s limits it).
"""

from __future__ import annotations

import functools
import math
import random
import re
from collections import OrderedDict
from typing import Any

from rlvr.config import JudgeSettings, ModelConfig
from rlvr.rewards.loading import register_reward, split_settings
from rlvr.verifiers import guards
from rlvr.verifiers.extraction import extract_answer

TEMPLATE = (
    "Grade the response against the reference answer.\n"
    "Question: {question}\n"
    "Reference answer: {reference}\n"
    "[RESPONSE START]\n{response}\n[RESPONSE END]\n"
    "Does the response give a final answer equal to the reference answer? Reply Yes or No."
)
# reads=answer: a small judge continues a few-shot list of answer pairs. On SmolLM2-135M-Instruct this ranks a right
# sum above wrong ones (AUC 0.97) where the reference-guided chat prompt over the whole reply cannot (0.49):
# benchmarks/judge_ranking.py; a shot with a decimal keeps it from paying decimals (docs/rewards.md)
ANSWER_TEMPLATE = (
    "Decide whether two answers are the same.\n\n"
    "Reference: 12\nAnswer: 12\nSame: Yes\n\n"
    "Reference: 47\nAnswer: 74\nSame: No\n\n"
    "Reference: 85\nAnswer: 85\nSame: Yes\n\n"
    "Reference: 30\nAnswer: 31\nSame: No\n\n"
    "Reference: 126\nAnswer: 126\nSame: Yes\n\n"
    "Reference: 94\nAnswer: 9.4\nSame: No\n\n"
    "Reference: {reference}\nAnswer: {response}\nSame:"
)
# an "answer" that speaks of the grading instead of stating one ("the same as the reference answer")
GRADER_TALK = re.compile(r"\b(?:reference|verdict|grader|grading|judge|the response)\b", re.IGNORECASE)
PLAIN_VERDICT_PREFIX = "\nVerdict:"  # after the judge prompt when its tokenizer has no chat template
FENCES = ("[RESPONSE START]", "[RESPONSE END]")


@functools.lru_cache(maxsize=2)
def load_causal_lm(name: str, dtype: str, device: str) -> tuple[Any, Any]:
    """A causal LM and its tokenizer (any HF directory, hub name, .gguf file or packaged model), in eval mode,
    loaded once per process."""
    from rlvr.models.loading import load_model, load_tokenizer, model_source, resolve_device

    cfg = ModelConfig(name=name, dtype=dtype)
    model = load_model(cfg, setting="judge args.model").to(resolve_device(device, "judge args.device"))
    return model.eval().requires_grad_(False), load_tokenizer(model_source(cfg, "judge args.model"),
                                                              setting="judge args.model")


def first_token_ids(tokenizer, words: list[str]) -> list[int]:
    """The first token of each word (as the judge would start its reply with it), without repeats."""
    ids = [tokenizer.encode(w, add_special_tokens=False)[:1] for w in words]
    return list(dict.fromkeys(i[0] for i in ids if i))


def final_answer(settings: JudgeSettings, question: str, reference: str, reply: str) -> str | None:
    """The reply's final answer as the extraction reads it: with `require_answer`, after the sentences the reply
    copies from the question are blanked; None when there is none."""
    text = guards.without_prompt_copies(reply, question, reference) if settings.require_answer else reply
    answer = extract_answer(text, settings.extract)
    return answer if answer is not None and answer.strip() else None


def refusal(settings: JudgeSettings, question: str, reference: str, reply: str) -> str | None:
    """Why `require_answer` refuses the reply before any judge is asked (no final answer, an answer restating the
    question, speaking of the grading, or without a number for a numeric reference), or None; needs no model."""
    if not settings.require_answer:
        return None
    return answer_refusal(question, reference, final_answer(settings, question, reference, reply))


def answer_refusal(question: str, reference: str, answer: str | None) -> str | None:
    """Why `require_answer` refuses a reply whose final answer (`final_answer`) is `answer`, or None."""
    if answer is None:
        return "no final answer"
    if " or " in answer and not guards.hedged_values(reference) or guards.hedged_values(answer):
        return "several final answers"
    if guards.restates_prompt(answer, question, reference):
        return "the answer restates the question"
    if GRADER_TALK.search(answer) and not GRADER_TALK.search(reference):
        return "the answer speaks of the grading"
    if guards.written_as_number(reference) and not re.search(r"\d", answer):
        return "the answer has no number, the reference is one"
    return None


CALIBRATION_QUESTIONS = 48  # seeded additions; each asked with its right sum and two wrong ones
MAX_WRONG_PASS_RATIO = 0.5  # auto: a wrong answer passes at most half as often as a right one


def calibration_replies(n: int = CALIBRATION_QUESTIONS) -> list[tuple[str, str, str, bool]]:
    """(question, reference, reply, right) for `n` seeded additions (a stream of its own, apart from the probes'):
    the right sum, one off by one and one off by ten, each written as a short boxed answer."""
    rng = random.Random("judge-calibration")
    replies = []
    for _ in range(n):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        question, reference = f"What is {a} + {b}? Put the final answer in \\boxed{{}}.", str(a + b)
        for value, right in ((a + b, True), (a + b + rng.choice((-1, 1)), False), (a + b + rng.choice((-10, 10)), False)):
            replies.append((question, reference, f"The answer is \\boxed{{{value}}}.", right))
    return replies


def pass_rates(p_right: list[float], p_wrong: list[float], threshold: float) -> tuple[float, float]:
    """(share of right answers passed, share of wrong answers passed) at `threshold`."""
    return (sum(p >= threshold for p in p_right) / len(p_right), sum(p >= threshold for p in p_wrong) / len(p_wrong))


def best_threshold(p_right: list[float], p_wrong: list[float], max_ratio: float = MAX_WRONG_PASS_RATIO) -> float:
    """The threshold, halfway between two observed P(yes), that best tells right from wrong answers (the largest
    share of right passed minus share of wrong passed) among those passing wrong answers at most `max_ratio` times
    as often as right ones; above every P(yes) of a wrong answer when none does."""
    values = sorted(set(p_right) | set(p_wrong))
    candidates = [(lo + hi) / 2 for lo, hi in zip(values, values[1:])] or values
    best, best_gap = None, -1.0
    for t in candidates:
        right, wrong = pass_rates(p_right, p_wrong, t)
        if right > 0 and wrong <= max_ratio * right and right - wrong > best_gap:
            best, best_gap = t, right - wrong
    if best is None:
        best = min(math.nextafter(max(p_wrong), 1.0), 1 - 1e-9)
    return best


class Judge:
    """A judge model with its settings: the prompt it reads, the defences, a calibrated threshold, and a verdict
    cache."""

    def __init__(self, settings: JudgeSettings, model=None, tokenizer=None):
        if model is None:
            model, tokenizer = load_causal_lm(settings.model, settings.dtype, settings.device)
        self.settings, self.model, self.tokenizer = settings, model, tokenizer
        self.template = settings.template or (ANSWER_TEMPLATE if settings.reads == "answer" else TEMPLATE)
        has_chat = bool(getattr(tokenizer, "chat_template", None))
        if settings.prompt == "chat" and not has_chat:
            raise ValueError(f"judge: prompt=chat, but the judge {settings.model!r} has no chat template; use "
                             "prompt=plain or auto")
        self.chat = settings.prompt == "chat" or (settings.prompt == "auto" and settings.reads == "reply" and has_chat)
        yes, no = first_token_ids(tokenizer, settings.yes), first_token_ids(tokenizer, settings.no)
        # a first token both lists share (a bare space, 'Y' of 'YES' and 'NO' split alike ...) tells nothing
        self.yes_ids, self.no_ids = [i for i in yes if i not in no], [i for i in no if i not in yes]
        if not self.yes_ids or not self.no_ids:
            raise ValueError(f"judge: the yes words {settings.yes} and no words {settings.no} must start with "
                             "distinct tokens of the judge's tokenizer")
        self.specials = sorted({t for t in (*tokenizer.all_special_tokens, *tokenizer.get_added_vocab()) if t},
                               key=len, reverse=True)
        self.cache: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self.hits = 0
        self.calibration: dict[str, float] = {}
        self.threshold = self.calibrate() if settings.threshold == "auto" else float(settings.threshold)

    def calibrate(self) -> float:
        """The `auto` threshold: the judge's P(yes) on `calibration_replies` (read as it reads any reply), then
        `best_threshold`; what it measured is kept in `calibration` (rlvr verify judge-probe prints it)."""
        items = calibration_replies()
        p = self.yes_probabilities([self.prompt_ids(q, ref, reply) for q, ref, reply, _ in items])
        p_right = [x for x, item in zip(p, items) if item[3]]
        p_wrong = [x for x, item in zip(p, items) if not item[3]]
        threshold = best_threshold(p_right, p_wrong)
        right, wrong = pass_rates(p_right, p_wrong, threshold)
        self.calibration = {"threshold": threshold, "right_passed": right, "wrong_passed": wrong,
                            "mean_p_yes_right": sum(p_right) / len(p_right),
                            "mean_p_yes_wrong": sum(p_wrong) / len(p_wrong), "questions": len(p_right)}
        return threshold

    def sealed(self, reply: str) -> str:
        """The reply with every special-token string (`<|im_start|>`, `<|im_end|>` ...) and the template's fences
        broken up, so that it reads as text and cannot end the user turn."""
        for token in (*self.specials, *FENCES):
            reply = reply.replace(token, f"{token[0]}\u2060{token[1:]}")  # a word joiner inside: no longer the token
        return reply

    def refusal(self, question: str, reference: str, reply: str) -> str | None:
        """Why a defence refuses the reply before the judge is asked, or None."""
        return refusal(self.settings, question, reference, reply)

    def shown(self, question: str, reference: str, reply: str) -> str:
        """What the judge reads of the reply: its last `max_reply_chars`, or with reads=answer its final answer (the
        reply itself when none is read and require_answer is off), cut to `max_answer_chars`. Sealed, a final answer
        is also put on one line, so it cannot write a verdict line of its own."""
        answer = final_answer(self.settings, question, reference, reply) if self.settings.reads == "answer" else None
        return self._shown(reply, answer)

    def _shown(self, reply: str, answer: str | None) -> str:
        """`shown` for a reply whose final answer has been read (`answer`; unused with reads=reply)."""
        if self.settings.reads == "reply":
            text = reply[-self.settings.max_reply_chars:]
            return self.sealed(text) if self.settings.sealed_reply else text
        text = (reply if answer is None else answer)[: self.settings.max_answer_chars]
        return " ".join(self.sealed(text).split()) if self.settings.sealed_reply else text

    def prompt_ids(self, question: str, reference: str, reply: str) -> list[int]:
        """The judge's input, ending where its verdict starts: the template in a user turn of its chat template, or
        as plain text."""
        return self.ids_for(question, reference, self.shown(question, reference, reply))

    def ids_for(self, question: str, reference: str, shown: str) -> list[int]:
        """The judge's input for what it reads of a reply (`shown`)."""
        text = self.template.format(question=question, reference=reference, response=shown)
        if self.chat:
            messages = [{"role": "user", "content": text}]
            if self.settings.system_prompt:
                messages.insert(0, {"role": "system", "content": self.settings.system_prompt})
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        prefix = f"{self.settings.system_prompt}\n" if self.settings.system_prompt else ""
        cue = "" if text.rstrip().endswith(":") else PLAIN_VERDICT_PREFIX
        return self.tokenizer.encode(prefix + text + cue, add_special_tokens=False)

    def yes_probabilities(self, prompts: list[list[int]]) -> list[float]:
        """P(yes) / (P(yes) + P(no)) at the next token of each prompt, `batch_size` prompts per forward pass (left
        padded, positions counted over real tokens)."""
        import torch

        out = []
        with torch.no_grad():
            device = next(self.model.parameters()).device
            pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
            for start in range(0, len(prompts), self.settings.batch_size):
                chunk = prompts[start : start + self.settings.batch_size]
                width = max(len(p) for p in chunk)
                ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=device)
                mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=device)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False,
                                    logits_to_keep=1).logits[:, -1].float()
                logp = torch.log_softmax(logits, -1)
                yes, no = logp[:, self.yes_ids].logsumexp(-1), logp[:, self.no_ids].logsumexp(-1)
                out += torch.sigmoid(yes - no).tolist()  # P(yes) / (P(yes) + P(no))
        return out

    def score(self, questions: list[str], replies: list[str], references: list[str]) -> list[dict[str, Any]]:
        """Per reply: {'score', 'p_yes', 'passed', 'refused'} (and 'why' a defence refused it, before asking the
        judge: p_yes 0)."""
        results: list[dict[str, Any] | None] = [None] * len(replies)
        asked: dict[tuple[str, str, str], list[int]] = {}
        reads_answer = self.settings.require_answer or self.settings.reads == "answer"
        for i, (q, reply, ref) in enumerate(zip(questions, replies, references)):
            answer = final_answer(self.settings, q, ref, reply) if reads_answer else None  # read once, used twice
            if self.settings.require_answer and (why := answer_refusal(q, ref, answer)) is not None:
                results[i] = {"score": 0.0, "p_yes": 0.0, "passed": 0.0, "refused": 1.0, "why": why}
                continue
            key = (q, ref, self._shown(reply, answer))  # replies with one final answer share a verdict (reads=answer)
            if key in self.cache:
                self.cache.move_to_end(key)
                self.hits += 1
                results[i] = self._result(self.cache[key])
            else:
                asked.setdefault(key, []).append(i)
        keys = list(asked)
        for key, p in zip(keys, self.yes_probabilities([self.ids_for(*k) for k in keys])):
            if not math.isfinite(p):
                raise ValueError(f"judge: a non-finite verdict probability ({p}) for {key[2][:80]!r}")
            self._remember(key, p)
            for i in asked[key]:
                results[i] = self._result(p)
        return results

    def _result(self, p_yes: float) -> dict[str, Any]:
        passed = p_yes >= self.threshold
        score = p_yes if self.settings.output == "probability" else float(passed)
        return {"score": score, "p_yes": p_yes, "passed": float(passed), "refused": 0.0}

    def _remember(self, key: tuple[str, str, str], p_yes: float) -> None:
        if self.settings.cache_size == 0:
            return
        self.cache[key] = p_yes
        while len(self.cache) > self.settings.cache_size:
            self.cache.popitem(last=False)


@functools.lru_cache(maxsize=4)
def shared_judge(settings_json: str) -> Judge:
    """One Judge per settings in a process (a reward worker keeps its judge and cache between calls)."""
    return Judge(JudgeSettings.model_validate_json(settings_json))


@register_reward("judge", JudgeSettings, batched=True, preload=lambda s: shared_judge(s.model_dump_json()))
def judge(prompts: list, completions: list[str], answer: list, **fields: Any) -> list[dict[str, float]]:
    """An LLM judge as a batched reward over a prompt group: 1 when the judge's P(yes) / (P(yes) + P(no)) for
    (question, reference answer, reply) reaches `threshold` (or that probability, with output=probability);
    the master-key defences of this module first. Settings: rlvr.config.JudgeSettings (rewards.functions[].args)."""
    settings, _ = split_settings(JudgeSettings, fields)
    results = shared_judge(settings.model_dump_json()).score(
        [guards.prompt_text(p) for p in prompts], list(completions), ["" if a is None else str(a) for a in answer])
    return [{k: v for k, v in r.items() if k != "why"} for r in results]
