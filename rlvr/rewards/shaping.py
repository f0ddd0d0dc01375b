"""Reward shaping terms: output format (as a term or a gate), length (LASER, Kimi's group length reward, also
among correct answers only), overlong.

Each is a plain reward function; the trainer hands every reward `completion_tokens`, `truncated`,
`max_new_tokens` and the task verifier's `verifier_score` besides the problem's own fields, so terms that
depend on correctness read the verdict instead of verifying again.
"""

from __future__ import annotations

import re

from rlvr.rewards.loading import resolve_function
from rlvr.verifiers import guards


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


THINK_ANSWER = (r"<think>(?P<think>(?:(?!</?think>).)*)</think>\s*<answer>(?P<answer>(?:(?!</?answer>).)*)"
                r"</answer>")


def _format_match(prompt: object, completion: str, pattern: str, prefix: str, reference: object = None
                  ) -> re.Match | None:
    """The full match of `pattern` on prefix + the stripped completion, read without the sentences it copies from
    the prompt (an echoed format example is not the completion's own); None when it does not match, or when a named
    group (the <think> and <answer> contents by default) is empty or copied whole from the prompt (a placeholder
    such as "your answer"; the reference itself may be) (docs/verifiers.md, "Reward hacking")."""
    reference = None if reference is None else str(reference)
    text = guards.without_prompt_copies(completion, prompt, reference)
    match = re.fullmatch(pattern, prefix + text.strip(), flags=re.DOTALL)
    if match is None:
        return None
    prompt_words = " ".join(guards.prompt_text(prompt).split())
    for value in match.groupdict().values():
        content = " ".join((value or "").split())
        if not content or (content in prompt_words and content != reference):  # empty, or the prompt's placeholder
            return None
    return match


def format_reward(prompt: str, completion: str, pattern: str = THINK_ANSWER, prefix: str = "", **fields: object
                  ) -> float:
    """1.0 when the whole completion matches `pattern`, else 0.0: the format reward of DeepSeek-R1 (DeepSeek-AI
    2025, sec. 2.2.2), which asks for the reasoning inside <think></think> and the answer inside
    <answer></answer>. The default pattern wants exactly one of each, in that order, with nothing around them,
    and neither empty (every named group of `pattern` must hold something). Sentences copied from the prompt do
    not count as the completion's (an echoed format example does not match). `prefix` is text the prompt already
    opened (e.g. '<think>' at the end of an R1-Zero template), put in front of the completion before matching.
    Regex is re.DOTALL, full match:
        r_format = 1[fullmatch(pattern, prefix + strip(y)) and every named group non-empty]
    """
    return float(_format_match(prompt, completion, pattern, prefix, fields.get("answer")) is not None)


def gated(prompt: str, completion: str, verifier_score: float, inner: str | None = None,
          pattern: str = THINK_ANSWER, prefix: str = "", answer_only: bool = False, **fields: object) -> float:
    """Format as a gate: the verifier's score (or, with `inner`, the reward 'module:function' given the same
    fields) when the completion matches `pattern` (see format_reward), else 0.0 without calling anything:
        r = 1[format ok] * r_inner(x, y')
    With `answer_only` (which needs `inner`), y' is the pattern's `answer` group (the <answer> contents by
    default) instead of the whole completion, so an answer left in the reasoning does not count.
    DeepSeek-R1 adds its format reward to accuracy; gating instead makes a correct answer in the wrong format
    worth nothing."""
    if answer_only and inner is None:
        raise ValueError("gated: answer_only=True needs `inner`, the reward to call on the answer alone")
    match = _format_match(prompt, completion, pattern, prefix, fields.get("answer"))
    if match is None:
        return 0.0
    if inner is None:
        return verifier_score
    value = resolve_function(inner)(prompt, match.group("answer") if answer_only else completion,
                                    verifier_score=verifier_score, **fields)
    return float(value["score"] if isinstance(value, dict) else value)


def laser_bonus(prompt: str, completion: str, verifier_score: float, completion_tokens: int, target_tokens: int,
                **_: object) -> float:
    """The step of LASER, Length-bAsed StEp Reward (Liu et al. 2025, "Learn to Reason Efficiently with Adaptive
    Length-based Reward Shaping", Table 2), whose reward is correctness plus a bonus for correct answers within
    a target length L_T:
        R(x, y) = C(y) + alpha * 1[C(y) = 1] * 1[L(y) <= L_T]
    This term is 1[C(y) = 1] * 1[L(y) <= L_T] with C the verifier's score, L(y) = completion_tokens and
    L_T = target_tokens; give it weight alpha (0.5 in the authors' code) next to the verifier's weight 1."""
    return float(verifier_score >= 1.0 and completion_tokens <= target_tokens)


def group_length_reward(prompts: list[str], completions: list[str], verifier_score: list[float],
                        completion_tokens: list[int], among: str = "all", **_: object) -> list[float]:
    """Kimi k1.5's length reward (Kimi Team 2025, sec. 2.3.3), a batched reward over one prompt's group:
        lambda_i = 0.5 - (len_i - min_len) / (max_len - min_len)
        r_i      = lambda_i if correct_i, else min(0, lambda_i)
    with min/max over the group's responses (r = 0 when they all have one length). Give it a weight next to
    the verifier (R = C + w * r). With among='correct', only correct answers compete on length (bounds from
    the correct answers, wrong ones get 0), the correct-only penalties of TRAAC and Apriel."""
    if among not in ("all", "correct"):
        raise ValueError(f"among must be 'all' or 'correct', got {among!r}")
    correct = [score >= 1.0 for score in verifier_score]
    ranked = [n for n, ok in zip(completion_tokens, correct) if ok or among == "all"]
    if not ranked or max(ranked) == min(ranked):
        return [0.0] * len(completions)
    low, span = min(ranked), max(ranked) - min(ranked)
    rewards = []
    for n, ok in zip(completion_tokens, correct):
        lam = 0.5 - (n - low) / span
        rewards.append(lam if ok else (min(0.0, lam) if among == "all" else 0.0))
    return rewards


def tool_call_reward(prompt: str, completion: str, episode_metrics: dict[str, float] | None = None, **_: object
                     ) -> float:
    """1.0 when the episode called a tool and every call was well formed (parsed, a known tool with known arguments,
    answered without an error), else 0.0: a format reward for tool use, the kind ToolRL (Qian et al. 2025, "ToolRL:
    Reward is All Tool Learning Needs") adds to the answer's correctness. It reads the `tools` environment's episode
    metrics (tool_calls, tool_errors); a sample that is not an episode of a tool environment is refused with an
    error rather than scored 0.
        r_call = 1[tool_calls > 0 and tool_errors = 0]"""
    if episode_metrics is None or "tool_calls" not in episode_metrics:
        raise ValueError("tool_call_reward scores episodes of the `tools` environment (data.tasks[].env.name: tools); "
                         "this sample has no tool-call metrics")
    return float(episode_metrics["tool_calls"] > 0 and episode_metrics["tool_errors"] == 0)
