"""Reward shaping terms that depend on the completion's form rather than its correctness.

Each is a plain reward function; the trainer hands every reward `completion_tokens`, `truncated` and
`max_new_tokens` besides the problem's own fields.
"""

from __future__ import annotations


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
