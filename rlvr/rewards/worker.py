"""The reward worker process: scores requests one at a time and reports each result as it finishes."""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable, Hashable
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


def load(spec: str | bytes, fields: dict) -> Callable:
    """The reward function of `spec` (a pickled callable, a registered name, 'module:function' or 'file.py:function'),
    with what a registered reward preloads for the settings among `fields` (a judge's model) already loaded."""
    from rlvr.rewards.callables import load_reward
    from rlvr.rewards.loading import resolve_function

    function = load_reward(spec) if isinstance(spec, bytes) else resolve_function(spec)
    preload = getattr(function, "preload", None)
    if preload is not None:
        settings = function.settings
        preload(settings(**{k: v for k, v in fields.items() if k in settings.model_fields}))
    return function


def load_key(spec: str | bytes, fields: dict) -> Hashable:
    """What a load is remembered by: the spec, and for a registered reward that preloads, its settings."""
    from rlvr.rewards.loading import REWARDS

    if isinstance(spec, str) and spec in REWARDS and REWARDS.get(spec).preload is not None:
        names = REWARDS.get(spec).settings.model_fields
        return spec, repr(sorted((k, repr(v)) for k, v in fields.items() if k in names))
    return spec


def serve(conn: Connection) -> None:
    """First load every (spec, args, label) of the start-up message, saying ('loading', label), then ('loaded',
    label, seconds) for each, or ('load_failed', label, message) and exit; then ('ready',). Then answer batches of
    (key, spec, prompt, completion, fields, batched, label) with ('result', key, status, value, extras, message,
    answer) until told to stop (None) or orphaned; `answer` as `reported_answer` (a list for batched). A spec not
    loaded at start-up is loaded before its first item is scored, between ('loading', label) and ('loaded', ...),
    so the pool does not count loading against the item's time limit."""
    loaded: dict[Hashable, Callable] = {}

    def load_announced(spec: str | bytes, fields: dict, label: str) -> Callable:
        key = load_key(spec, fields)
        if key not in loaded:
            conn.send(("loading", label))
            started = time.perf_counter()
            try:
                loaded[key] = load(spec, fields)
            finally:
                conn.send(("loaded", label, time.perf_counter() - started))
        return loaded[key]

    try:
        startup = conn.recv()
    except EOFError:
        return
    for spec, args, label in startup:
        try:
            load_announced(spec, args, label)
        except Exception as e:  # reported to the pool, which stops the run at start naming the reward
            conn.send(("load_failed", label, failure_message(e)))
            return
    conn.send(("ready",))
    while True:
        try:
            batch = conn.recv()
        except EOFError:
            return
        if batch is None:
            return
        for key, spec, prompt, completion, fields, batched, label in batch:
            try:
                function = load_announced(spec, fields, label)
                result = function(prompt, completion, **fields)
                value, extras = as_rewards(result, len(completion)) if batched else as_reward(result)
                answer = [reported_answer(r) for r in result] if batched else reported_answer(result)
                conn.send(("result", key, "ok", value, extras, "", answer))
            except Exception as e:  # a user's reward failed: report, keep serving
                conn.send(("result", key, "error", 0.0, {}, failure_message(e), ()))


def failure_message(error: Exception) -> str:
    """The exception in one line (a reward's import failure already names its file and line)."""
    return traceback.format_exception_only(type(error), error)[-1].strip()


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
