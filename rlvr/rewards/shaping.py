"""Reward shaping terms: output format (as a term or a gate), length (LASER, correct-only), overlong.

Each is a plain reward function; the trainer hands every reward `completion_tokens`, `truncated` and
`max_new_tokens` besides the problem's own fields. Terms that depend on correctness (the gate, LASER, the
correct-only length penalty) call the verifier they are given by name, with the same fields.
"""

from __future__ import annotations

import re

from rlvr.rewards.loading import resolve_function


def overlong_penalty(prompt: str, completion: str, completion_tokens: int, max_new_tokens: int,
                     buffer_tokens: int | None = None, **_: object) -> float:
    """DAPO soft overlong punishment (Yu et al. 2025, eq. 13), with L_max = max_new_tokens and
    L_cache = buffer_tokens (default 20% of L_max):
        0                                  if |y| <= L_max - L_cache
        ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max
        -1                                 if |y| > L_max
    """
    buffer = buffer_tokens if buffer_tokens is not None else max(1, max_new_tokens // 5)
    start = max_new_tokens - buffer
    if completion_tokens <= start:
        return 0.0
    if completion_tokens <= max_new_tokens:
        return (start - completion_tokens) / buffer
    return -1.0


THINK_ANSWER = r"<think>(?:(?!</?think>).)*</think>\s*<answer>(?P<answer>(?:(?!</?answer>).)*)</answer>"


def _format_match(completion: str, pattern: str, prefix: str) -> re.Match | None:
    return re.fullmatch(pattern, prefix + completion.strip(), flags=re.DOTALL)


def format_reward(prompt: str, completion: str, pattern: str = THINK_ANSWER, prefix: str = "", **_: object) -> float:
    """1.0 when the whole completion matches `pattern`, else 0.0: the format reward of DeepSeek-R1 (DeepSeek-AI
    2025, sec. 2.2.2), which asks for the reasoning inside <think></think> and the answer inside
    <answer></answer>. The default pattern wants exactly one of each, in that order, with nothing around them.
    `prefix` is text the prompt already opened (e.g. '<think>' at the end of an R1-Zero template), put in
    front of the completion before matching. Regex is re.DOTALL, full match:
        r_format = 1[fullmatch(pattern, prefix + strip(y))]
    """
    return float(_format_match(completion, pattern, prefix) is not None)


def _call_reward(spec: str, prompt: str, completion: str, fields: dict) -> float:
    """Score of the reward function `spec` ('module:function'); a dict result gives its 'score'."""
    value = resolve_function(spec)(prompt, completion, **fields)
    return float(value["score"] if isinstance(value, dict) else value)


def gated(prompt: str, completion: str, inner: str, pattern: str = THINK_ANSWER, prefix: str = "",
          answer_only: bool = False, **fields: object) -> float:
    """Format as a gate: the reward `inner` ('module:function', given the same fields) when the completion
    matches `pattern` (see format_reward), else 0.0 without calling it:
        r = 1[format ok] * r_inner(x, y')
    With `answer_only`, y' is the pattern's `answer` group (the <answer> contents by default) instead of the
    whole completion, so an answer left in the reasoning does not count. DeepSeek-R1 adds its format reward
    to accuracy; gating instead makes a correct answer in the wrong format worth nothing."""
    match = _format_match(completion, pattern, prefix)
    if match is None:
        return 0.0
    scored = match.group("answer") if answer_only else completion
    return _call_reward(inner, prompt, scored, fields)


def laser_reward(prompt: str, completion: str, verifier: str, completion_tokens: int, target_tokens: int,
                 bonus: float = 0.5, **fields: object) -> dict[str, float]:
    """LASER, Length-bAsed StEp Reward (Liu et al. 2025, "Learn to Reason Efficiently with Adaptive
    Length-based Reward Shaping", Table 2): correctness plus a step bonus for correct answers within a
    target length L_T:
        R(x, y) = C(y) + alpha * 1[C(y) = 1] * 1[L(y) <= L_T]
    with C the `verifier`'s score (called here, with the same fields), L(y) = completion_tokens,
    L_T = target_tokens and alpha = bonus (0.5 in the authors' code). Use it in place of the verifier
    (give the task verifier weight 0 to keep it as the accuracy metric). LASER-D's per-difficulty target
    needs group accuracy, which a per-sample reward does not see (docs/verifiers.md)."""
    correct = _call_reward(verifier, prompt, completion, fields)
    length_bonus = bonus if correct >= 1.0 and completion_tokens <= target_tokens else 0.0
    return {"score": correct + length_bonus, "correct": correct, "length_bonus": length_bonus}


def correct_length_penalty(prompt: str, completion: str, verifier: str, completion_tokens: int,
                           max_new_tokens: int, coef: float = 0.5, penalize_wrong: bool = True,
                           **fields: object) -> dict[str, float]:
    """Length reward that prefers shorter correct answers (Kimi k1.5, Kimi Team 2025, sec. 2.3.3), per sample.

    Kimi's length reward uses the group's shortest and longest responses:
        lambda = 0.5 - (len - min_len) / (max_len - min_len)
        r_len  = lambda if correct, else min(0, lambda)
    A reward function sees one sample, so the group bounds are replaced by the fixed ones [0, L_max]
    (L_max = max_new_tokens): lambda = 0.5 - len / L_max. Returns C(y) + coef * r_len with C the
    `verifier`'s score; with penalize_wrong=False wrong answers get no length term (only correct answers
    compete on length, as in TRAAC / Apriel's correct-only penalties). The group-relative form needs a
    group-level reward stage (proposed in docs/verifiers.md)."""
    correct = _call_reward(verifier, prompt, completion, fields)
    lam = 0.5 - min(completion_tokens, max_new_tokens) / max_new_tokens
    if correct >= 1.0:
        length_term = lam
    else:
        length_term = min(0.0, lam) if penalize_wrong else 0.0
    return {"score": correct + coef * length_term, "correct": correct, "length_reward": coef * length_term}
