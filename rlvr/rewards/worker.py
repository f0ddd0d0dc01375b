"""The reward worker process: loads its rewards, then scores requests one at a time and reports each result as it
finishes, in the messages of rlvr.rewards.messages. It exits quietly when its pool says stop, closes its end of
the connection, or dies."""

from __future__ import annotations

import pickle
import time
import traceback
from collections.abc import Callable, Hashable
from multiprocessing.connection import Connection
from typing import Any

from rlvr.rewards.contract import as_reward, as_rewards, reported_answer, result_payload, result_spans
from rlvr.rewards.messages import (
    ItemScored,
    Loaded,
    LoadFailed,
    Loading,
    Ready,
    RewardLoad,
    RewardOutcome,
    RewardRequest,
    Stop,
)


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


def outcome(request: RewardRequest, result) -> RewardOutcome:
    """What a reward returned, read by the contract (rlvr.rewards.contract), as the pool's outcome."""
    if request.batched:
        value, extras = as_rewards(result, len(request.completion))
        return RewardOutcome("ok", value, extras, "", [reported_answer(r) for r in result],
                             [result_spans(r, text, False) for r, text in zip(result, request.completion)],
                             [result_payload(r) for r in result])
    value, extras = as_reward(result, request.spans)
    return RewardOutcome("ok", value, extras, "", reported_answer(result),
                         result_spans(result, request.completion, request.spans), result_payload(result))


class RewardRaised(Exception):
    """A reward's own code (loading it, calling it, or what it returned) raised: the one-line message to report.
    Anything else escaping `serve` is the connection's."""


def guarded(call: Callable[..., Any], *args: Any) -> Any:
    """`call(*args)`, with any exception it raises as RewardRaised."""
    try:
        return call(*args)
    except Exception as e:
        raise RewardRaised(failure_message(e)) from None


def scored(function: Callable, request: RewardRequest) -> RewardOutcome:
    """`function` called on `request`, its return read by the contract (rlvr.rewards.contract) as an outcome."""
    return outcome(request, function(request.prompt, request.completion, **request.fields))


def serve(conn: Connection) -> None:
    """Load every RewardLoad of the start-up message (Loading, then Loaded, or LoadFailed and exit), say Ready, then
    answer chunks of RewardRequests with an ItemScored each until told to Stop. A request's reward not loaded at
    start-up is loaded before it is scored, between Loading and Loaded, so the pool does not count loading against
    the item's time limit. Raises EOFError or OSError when the pool's end of the connection is gone."""
    loaded: dict[Hashable, Callable] = {}

    def load_announced(spec: str | bytes, fields: dict, label: str) -> Callable:
        key = load_key(spec, fields)
        if key not in loaded:
            conn.send(Loading(label))
            started = time.perf_counter()
            try:
                loaded[key] = guarded(load, spec, fields)
            finally:
                conn.send(Loaded(label, time.perf_counter() - started))
        return loaded[key]

    startup: list[RewardLoad] = conn.recv()
    for item in startup:
        try:
            load_announced(item.spec, item.args, item.name)
        except RewardRaised as e:  # reported to the pool, which stops the run at start naming the reward
            conn.send(LoadFailed(item.name, str(e)))
            return
    conn.send(Ready())
    while not isinstance(batch := conn.recv(), Stop):
        for request in batch:
            try:
                function = load_announced(request.spec, request.fields, request.name)
                answer = guarded(scored, function, request)
            except RewardRaised as e:  # a user's reward failed: report, keep serving
                answer = RewardOutcome("error", message=str(e))
            conn.send_bytes(sendable(ItemScored(request.key, answer)))


def sendable(message: ItemScored) -> bytes:
    """The message pickled for the pool; an outcome that cannot be pickled (a payload holding a lock, a model) is
    the reward's error, not the worker's end."""
    try:
        return pickle.dumps(message)
    except Exception as e:
        return pickle.dumps(ItemScored(message.key, RewardOutcome(
            "error", message=f"what the reward returned cannot be sent to the trainer: {failure_message(e)}")))


def failure_message(error: Exception) -> str:
    """The exception in one line (a reward's import failure already names its file and line)."""
    return traceback.format_exception_only(type(error), error)[-1].strip()


def exit_with_parent(interval_s: float = 1.0) -> None:
    """Die when the trainer dies, even while a reward hangs (the worker runs in its own session)."""
    import os
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def main(fd: int) -> None:
    """Serve the pool on connection `fd`; a pool that closed its end (or died) ends the worker without a word."""
    exit_with_parent()
    try:
        serve(Connection(fd))
    except (EOFError, OSError):  # the parent's end is gone: nobody is left to tell
        pass


if __name__ == "__main__":
    import sys

    main(int(sys.argv[1]))
