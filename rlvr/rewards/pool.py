"""A pool of reward worker processes with a per-item wall-clock timeout.

A reward that raises is recorded as an error. An item that hangs past the timeout or kills its worker has its
worker replaced and is retried once on a fresh one; if it fails again it is recorded as a timeout or crash.
Failed items score 0 and are counted in metrics, and the remaining items go on, so training continues.
A worker whose resident memory has grown past a limit (a leaking reward) is replaced between chunks.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Literal

Status = Literal["ok", "error", "timeout", "crash"]
STARTUP_TIMEOUT_S = 120.0


@dataclass
class RewardRequest:
    """One call of a reward function. A batched request holds lists (prompts, completions, and each field
    per sample) and is answered with one value per sample."""

    key: Hashable
    spec: str | bytes  # 'module:function', 'file.py:function', or a pickled callable (rlvr.rewards.callables)
    prompt: str | list[str]
    completion: str | list[str]
    fields: dict[str, Any] = field(default_factory=dict)
    batched: bool = False

    def payload(self) -> tuple:
        return (self.key, self.spec, self.prompt, self.completion, self.fields, self.batched)


@dataclass
class RewardOutcome:
    """`value`, `extras` and `answer` are per sample lists for a batched request. `answer` is (text or None,) when
    the reward said which final answer it scored (rlvr.rewards.worker.reported_answer), () when it did not."""

    status: Status
    value: float | list[float] = 0.0
    extras: dict[str, float] | list[dict[str, float]] = field(default_factory=dict)
    message: str = ""
    answer: tuple | list[tuple] = ()


class _Worker:
    """One worker: a fresh `python -m rlvr.rewards.worker` in its own session, talking over a socket pair.

    A plain subprocess (not multiprocessing's spawn/forkserver) never re-imports the user's __main__,
    so scripts without an `if __name__ == "__main__"` guard work, and the whole process group
    (anything a reward started) can be killed at once.
    """

    def __init__(self):
        parent, child = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rlvr.rewards.worker", str(child.fileno())],
            pass_fds=[child.fileno()], start_new_session=True, stdin=subprocess.DEVNULL,
        )
        child.close()
        self.conn = Connection(parent.detach())
        self.pending: deque[RewardRequest] = deque()
        self.last_progress = time.monotonic()

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """Block until the worker has started (so its start-up never counts against an item's timeout)."""
        if not self.conn.poll(timeout_s) or self.conn.recv() != "ready":
            self.kill()
            raise RuntimeError(f"a reward worker did not start within {timeout_s:g} s")

    def resident_bytes(self) -> int:
        """The worker's resident memory (from /proc; 0 where that is not available)."""
        try:
            with open(f"/proc/{self.process.pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0

    def send(self, chunk: list[RewardRequest]) -> None:
        self.pending.extend(chunk)
        self.last_progress = time.monotonic()
        self.conn.send([r.payload() for r in chunk])

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
            self.process.wait(timeout=2)
        except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class RewardPool:
    """Scores reward requests in `num_workers` processes, each item limited to `timeout_s` seconds."""

    def __init__(self, num_workers: int = 2, timeout_s: float = 10.0, chunk_size: int = 64,
                 max_memory_mb: float = 4096):
        self.num_workers, self.timeout_s, self.chunk_size = num_workers, timeout_s, chunk_size
        self.max_memory_bytes = max_memory_mb * 2**20
        self._workers: list[_Worker] = []
        self.restarts = 0  # workers replaced after a timeout or crash
        self.retries = 0
        self.recycled = 0  # workers replaced for their memory

    def _ensure_workers(self) -> None:
        started = [_Worker() for _ in range(self.num_workers - len(self._workers))]
        for worker in started:
            worker.wait_ready()
        self._workers += started

    def _replace(self, worker: _Worker) -> _Worker:
        worker.kill()
        fresh = _Worker()
        fresh.wait_ready()
        self._workers[self._workers.index(worker)] = fresh
        return fresh

    def score(self, requests: Sequence[RewardRequest]) -> dict[Hashable, RewardOutcome]:
        self._ensure_workers()
        results: dict[Hashable, RewardOutcome] = {}
        size = max(1, min(self.chunk_size, -(-len(requests) // (self.num_workers * 2))))
        queue = deque(requests[i : i + size] for i in range(0, len(requests), size))
        retried: set[Hashable] = set()

        def feed(worker: _Worker) -> None:
            if not worker.pending and queue:
                if worker.resident_bytes() > self.max_memory_bytes:
                    worker = self._replace(worker)
                    self.recycled += 1
                worker.send(list(queue.popleft()))

        def fail_current(worker: _Worker, status: Status, message: str) -> None:
            current = worker.pending.popleft()
            if current.key in retried:
                results[current.key] = RewardOutcome(status, message=f"{message} (also on retry)")
            else:  # once more, alone, on a fresh worker
                retried.add(current.key)
                self.retries += 1
                queue.appendleft([current])
            rest = list(worker.pending)
            self.restarts += 1
            fresh = self._replace(worker)
            if rest:
                fresh.send(rest)
            else:
                feed(fresh)

        for w in self._workers:
            feed(w)
        while len(results) < len(requests):
            busy = [w for w in self._workers if w.pending]
            now = time.monotonic()
            deadline = min(w.last_progress + self.timeout_s for w in busy)
            ready = wait([w.conn for w in busy], timeout=max(0.0, deadline - now))
            for w in busy:
                if w.conn not in ready:
                    continue
                try:
                    key, status, value, extras, message, answer = w.conn.recv()
                except (EOFError, OSError):
                    fail_current(w, "crash", "the reward worker died while scoring this item")
                    continue
                done = w.pending.popleft()
                assert done.key == key, "reward worker answered out of order"
                results[key] = RewardOutcome(status, value, extras, message, answer)
                w.last_progress = time.monotonic()
                feed(w)
            now = time.monotonic()
            for w in [w for w in self._workers if w.pending and w.conn not in ready]:
                if now - w.last_progress > self.timeout_s:
                    fail_current(w, "timeout", f"no result within {self.timeout_s:g} s")
        return results

    def close(self) -> None:
        for w in self._workers:
            w.stop()
        self._workers.clear()

    def __enter__(self) -> RewardPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
