"""The reward worker process: scores requests one at a time and reports each result as it finishes."""

from __future__ import annotations

import math
import traceback
from multiprocessing.connection import Connection


def reported_answer(value) -> tuple:
    """(answer,) when a reward says which final answer it scored: a Verdict (rlvr.verifiers.verdict), or a dict with
    an 'answer' key (text, or None for no answer); () when it does not say."""
    if isinstance(value, dict):
        if "answer" not in value:
            return ()
        answer = value["answer"]
    elif isinstance(value, float) and hasattr(value, "answer"):
        answer = value.answer
    else:
        return ()
    return (None if answer is None else str(answer),)


def as_reward(value) -> tuple[float, dict[str, float]]:
    """A float, or a dict holding 'score' plus extra numbers to log (and optionally the 'answer' it scored, see
    `reported_answer`)."""
    if isinstance(value, dict):
        if "score" not in value:
            raise ValueError(f"a reward dict must have a 'score' key, got keys {sorted(value)}")
        extras = {k: float(v) for k, v in value.items() if k not in ("score", "answer")}
        value = value["score"]
    else:
        extras = {}
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a reward must be a number or a dict with 'score', got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"a reward must be finite, got {value}")
    return value, extras


def as_rewards(values, count: int) -> tuple[list[float], list[dict[str, float]]]:
    """What a batched reward returns: a list (or tuple) of `count` rewards, each as in `as_reward`."""
    if not isinstance(values, (list, tuple)) or len(values) != count:
        got = f"{len(values)} values" if isinstance(values, (list, tuple)) else type(values).__name__
        raise ValueError(f"a batched reward must return a list of {count} rewards (one per completion), got {got}")
    scores, extras = zip(*(as_reward(v) for v in values))
    return list(scores), list(extras)


def serve(conn: Connection) -> None:
    """Answer batches of (key, spec, prompt, completion, fields, batched) with (key, status, value, extras,
    message, answer) until told to stop (None) or orphaned; `answer` as `reported_answer` (a list for batched)."""
    from rlvr.rewards.callables import load_reward
    from rlvr.rewards.loading import resolve_function

    conn.send("ready")
    while True:
        try:
            batch = conn.recv()
        except EOFError:
            return
        if batch is None:
            return
        for key, spec, prompt, completion, fields, batched in batch:
            try:
                function = load_reward(spec) if isinstance(spec, bytes) else resolve_function(spec)
                result = function(prompt, completion, **fields)
                value, extras = as_rewards(result, len(completion)) if batched else as_reward(result)
                answer = [reported_answer(r) for r in result] if batched else reported_answer(result)
                conn.send((key, "ok", value, extras, "", answer))
            except Exception as e:  # a user's reward failed: report, keep serving
                tb = traceback.format_exception_only(type(e), e)[-1].strip()
                conn.send((key, "error", 0.0, {}, tb, ()))


def exit_with_parent(interval_s: float = 1.0) -> None:
    """Die when the trainer dies, even while a reward hangs (the worker runs in its own session)."""
    import os
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


if __name__ == "__main__":
    import sys

    exit_with_parent()
    serve(Connection(int(sys.argv[1])))
