"""A pool of reward worker processes: each loads the reward functions first, then scores items under a per-item
wall-clock timeout.

Loading is not scoring. `start(loads)` launches the workers and returns at once (the trainer loads its model
meanwhile); each worker imports every reward function it is given (a file or module, a pickled callable, a
judge's or reward model's weights) before it reports ready, under its own limit (`load_timeout_s`), and says what it
loaded and how long that took (`wait_ready`). A function first met in a request is loaded the same way before its
item's clock starts. A function that fails to load, or takes longer than the load limit, stops the run
(RewardLoadError) naming it and the exception.

Scoring: a reward that raises is recorded as an error. An item that hangs past the timeout or kills its worker has
its worker replaced and is retried once on the fresh one; if it fails again it is recorded as a timeout or crash.
Failed items score 0 and are counted, and the remaining items go on, so training continues, unless
`max_timeouts_in_a_row` items of one reward time out (each counted once, at its first attempt) with no item of it
finishing in between: then the pool stops with RewardTimeoutLoop, naming the reward, the limit and the times
measured, instead of replacing workers for ever (0: never).
A worker whose resident memory has grown past a limit (a leaking reward) is replaced between chunks. Timeouts,
crashes and replacements are printed as they happen (rate-limited notices, rlvr.watchdog), and while the pool waits
the watchdog's stall line says what each worker is doing.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Literal

from rlvr.cancellation import POLL_S, Cancellation
from rlvr.errors import ConfigError
from rlvr.rewards.failures import PoolClosed, RewardLoadError, RewardTimeoutLoop
from rlvr.watchdog import NOTICES, WATCH

Status = Literal["ok", "error", "timeout", "crash"]


def spec_label(spec: str | bytes) -> str:
    """How a reward spec is named in messages: a file path relative to the working directory where it lies below
    it; a pickled callable as such."""
    if isinstance(spec, bytes):
        return "a Python callable"
    target, _, function = spec.rpartition(":")
    if target.endswith(".py"):
        try:
            target = str(Path(target).resolve().relative_to(Path.cwd()))
        except ValueError:
            pass
        return f"{target}:{function}"
    return spec


@dataclass
class RewardLoad:
    """A reward function a worker loads before it reports ready: its spec, the `args` of its config entry (what a
    registered reward preloads for), and how messages name it."""

    spec: str | bytes
    args: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    def payload(self) -> tuple:
        return self.spec, self.args, self.label or spec_label(self.spec)


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
    label: str = ""  # how messages name the reward (default: from the spec)

    @property
    def name(self) -> str:
        return self.label or spec_label(self.spec)

    def payload(self) -> tuple:
        return (self.key, self.spec, self.prompt, self.completion, self.fields, self.batched, self.name)


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
    """One worker: a fresh `python -m rlvr.rewards.worker` in its own session, talking over a socket pair. It is
    sent its loads at once and is fed items once it says it is ready.

    A plain subprocess (not multiprocessing's spawn/forkserver) never re-imports the user's __main__,
    so scripts without an `if __name__ == "__main__"` guard work, and the whole process group
    (anything a reward started) can be killed at once.
    """

    def __init__(self, number: int, loads: list[RewardLoad]):
        parent, child = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rlvr.rewards.worker", str(child.fileno())],
            pass_fds=[child.fileno()], start_new_session=True, stdin=subprocess.DEVNULL,
        )
        child.close()
        self.number = number  # its place in the pool, as messages name it
        self.conn = Connection(parent.detach())
        self.conn.send([load.payload() for load in loads])
        self.ready = False
        self.loading: str | None = "the reward worker (starting Python)"  # what it is loading, None when not
        self.since = time.monotonic()  # when the current load began
        self.load_s: dict[str, float] = {}
        self.pending: deque[RewardRequest] = deque()
        self.reserved: list[RewardRequest] = []  # sent first once ready: a retried item and those queued behind it
        self.last_progress = time.monotonic()  # when its current item's clock started
        self.fed = False  # whether it has been sent any item

    def resident_bytes(self) -> int:
        """The worker's resident memory (from /proc; 0 where that is not available)."""
        try:
            with open(f"/proc/{self.process.pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0

    def send(self, chunk: list[RewardRequest]) -> None:
        self.fed = True
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
    """Scores reward requests in `num_workers` processes, each item limited to `timeout_s` seconds of scoring and
    each reward function's loading to `load_timeout_s`; its waits end when `cancellation` gives them up (none by
    default)."""

    def __init__(self, num_workers: int = 2, timeout_s: float = 10.0, chunk_size: int = 64,
                 max_memory_mb: float = 4096, load_timeout_s: float = 600.0, max_timeouts_in_a_row: int = 4,
                 cancellation: Cancellation | None = None):
        self.num_workers, self.timeout_s, self.chunk_size = num_workers, timeout_s, chunk_size
        self.load_timeout_s, self.max_timeouts_in_a_row = load_timeout_s, max_timeouts_in_a_row
        self.max_memory_bytes = max_memory_mb * 2**20
        self.cancellation = cancellation if cancellation is not None else Cancellation()
        self.loads: list[RewardLoad] = []
        self._workers: list[_Worker] = []
        self._queue: deque[list[RewardRequest]] = deque()
        self._closed = False
        self.restarts = 0  # workers replaced after a timeout or crash
        self.retries = 0
        self.recycled = 0  # workers replaced for their memory
        self.timeouts = 0
        self.crashes = 0
        self.load_s: dict[str, float] = {}  # label -> the longest a worker took to load it
        self._timed_out: dict[str, list[float]] = {}  # label -> its timed-out attempts since its last finished item
        self._item_s: dict[str, deque[float]] = {}  # label -> how long its recent finished items took

    # ------------------------------------------------------------------ starting and loading

    def start(self, loads: Sequence[RewardLoad] = ()) -> None:
        """Launch the workers, each loading `loads`, and return at once (`wait_ready` waits for them)."""
        self.loads = list(loads)
        self._workers += [_Worker(len(self._workers) + i + 1, self.loads)
                          for i in range(self.num_workers - len(self._workers))]

    def wait_ready(self) -> dict[str, float]:
        """Wait until every worker has loaded its reward functions; {label: seconds} (the slowest worker's)."""
        self._check_started()
        with self._closing_guard(), WATCH.waiting(self.describe):
            while not all(w.ready for w in self._workers):
                self._pump({}, set())
        return dict(self.load_s)

    def _check_started(self) -> None:
        if not self._workers and not self._closed:
            raise RuntimeError("the reward pool was not started: call start(loads) first, as the set-up path does "
                               "(rlvr.assembly.start_pool / start_rewards), so the workers load before scoring")

    def counts(self) -> dict[str, float]:
        """Running totals for the metrics: workers replaced (after a timeout or crash, or for their memory), items
        retried, and attempts that timed out or crashed."""
        return {"reward_pool/restarts": self.restarts, "reward_pool/retries": self.retries,
                "reward_pool/recycled": self.recycled, "reward_pool/timeouts": self.timeouts,
                "reward_pool/crashes": self.crashes}

    def describe(self) -> str:
        """What each worker is doing, for the watchdog's stall line."""
        now = time.monotonic()
        parts, idle = [], 0
        for w in self._workers:
            if w.loading is not None:
                parts.append(f"reward worker {w.number}: loading {w.loading} for {now - w.since:.0f} s")
            elif w.pending:
                parts.append(f"reward worker {w.number}: scoring an item of {w.pending[0].name} for "
                             f"{now - w.last_progress:.0f} s")
            else:
                idle += 1
        queued = sum(len(chunk) for chunk in self._queue)
        return "; ".join(parts + [f"{idle} reward worker(s) idle, {queued} item(s) queued"])

    def _replace(self, worker: _Worker) -> _Worker:
        worker.kill()
        fresh = _Worker(worker.number, self.loads)
        self._workers[self._workers.index(worker)] = fresh
        return fresh

    # ------------------------------------------------------------------ scoring

    def score(self, requests: Sequence[RewardRequest]) -> dict[Hashable, RewardOutcome]:
        self._check_started()
        results: dict[Hashable, RewardOutcome] = {}
        size = max(1, min(self.chunk_size, -(-len(requests) // (self.num_workers * 2))))
        self._queue = deque(list(requests[i : i + size]) for i in range(0, len(requests), size))
        retried: set[Hashable] = set()
        try:
            with self._closing_guard(), WATCH.waiting(self.describe):
                while len(results) < len(requests):
                    self._pump(results, retried)
        finally:
            self._queue = deque()
        return results

    @contextmanager
    def _closing_guard(self) -> Iterator[None]:
        """Whatever a wait meets once `close` has begun (closed connections, a cleared list) is PoolClosed."""
        try:
            yield
        except PoolClosed:
            raise
        except Exception:
            if self._closed:
                raise PoolClosed("the reward pool was closed while a scoring waited on it") from None
            raise

    def _feed(self, worker: _Worker) -> None:
        if not worker.ready or worker.loading is not None or worker.pending:
            return
        if worker.reserved:
            chunk, worker.reserved = worker.reserved, []
            worker.send(chunk)
        elif self._queue:
            if (held := worker.resident_bytes()) > self.max_memory_bytes:
                if not worker.fed:  # a fresh worker over the limit: replacing it would start the same one forever
                    raise ConfigError(
                        f"reward worker {worker.number} holds {held / 2**20:.0f} MB right after loading its rewards, "
                        f"before scoring anything: above rewards.worker_max_memory_mb="
                        f"{self.max_memory_bytes / 2**20:g} MB, so every fresh worker would be replaced at once. "
                        f"Raise rewards.worker_max_memory_mb well above {held / 2**20:.0f} MB.")
                self.recycled += 1
                NOTICES.notice("reward-memory", f"reward worker {worker.number} grew past "
                               f"rewards.worker_max_memory_mb={self.max_memory_bytes / 2**20:g} MB; replaced "
                               f"({self.recycled} so far)")
                self._replace(worker)
                return
            worker.send(self._queue.popleft())

    def _pump(self, results: dict[Hashable, RewardOutcome], retried: set[Hashable]) -> None:
        """Feed idle workers, wait a little for messages, handle them, and act on overrun limits."""
        if self._closed:
            raise PoolClosed("the reward pool was closed while a scoring waited on it")
        for w in list(self._workers):
            self._feed(w)
        now = time.monotonic()
        deadlines = [self._deadline(w) for w in self._workers]
        deadline = min((d for d in deadlines if d is not None), default=now + POLL_S)
        ready = wait([w.conn for w in self._workers], timeout=min(POLL_S, max(0.0, deadline - now)))
        for w in list(self._workers):
            if w.conn in ready:
                try:
                    message = w.conn.recv()
                except (EOFError, OSError):
                    self._died(w, results, retried)
                    continue
                self._handle(w, message, results)
        now = time.monotonic()
        for w in list(self._workers):
            limit = self._deadline(w)
            if limit is None or now <= limit or w.conn in ready:
                continue
            if w.loading is not None:
                raise RewardLoadError(f"reward worker {w.number} did not finish loading {w.loading} within "
                                      f"rewards.load_timeout_s={self.load_timeout_s:g} s. Raise rewards.load_timeout_s "
                                      "if loading it legitimately takes longer (a large model on a cold machine).")
            self._fail_current(w, "timeout", f"no result within {self.timeout_s:g} s", results, retried)
        self.cancellation.check(lambda: f"rewards: {self.describe()}")

    def _deadline(self, w: _Worker) -> float | None:
        if w.loading is not None:
            return w.since + self.load_timeout_s
        if w.pending:
            return w.last_progress + self.timeout_s
        return None

    def _handle(self, w: _Worker, message: tuple, results: dict[Hashable, RewardOutcome]) -> None:
        kind = message[0]
        now = time.monotonic()
        if kind == "loading":
            w.loading, w.since = message[1], now
        elif kind == "loaded":
            label, seconds = message[1], message[2]
            w.load_s[label] = seconds
            self.load_s[label] = max(seconds, self.load_s.get(label, 0.0))
            w.loading, w.last_progress = None, now  # an item's clock starts after its function is loaded
        elif kind == "load_failed":
            raise RewardLoadError(f"reward {message[1]} failed to load in a reward worker: {message[2]}")
        elif kind == "ready":
            w.ready, w.loading = True, None
        else:
            _, key, status, value, extras, text, answer = message
            done = w.pending.popleft()
            assert done.key == key, "reward worker answered out of order"
            results[key] = RewardOutcome(status, value, extras, text, answer)
            self._timed_out.pop(done.name, None)
            self._item_s.setdefault(done.name, deque(maxlen=256)).append(now - w.last_progress)
            w.last_progress = now
        WATCH.progress()

    def _died(self, w: _Worker, results: dict[Hashable, RewardOutcome], retried: set[Hashable]) -> None:
        code = w.process.poll()
        if w.loading is not None:
            raise RewardLoadError(f"reward worker {w.number} died while loading {w.loading} (exit code {code})")
        if w.pending:
            self._fail_current(w, "crash", "the reward worker died while scoring this item", results, retried)
        else:
            self.restarts += 1
            self._replace(w)

    def _fail_current(self, worker: _Worker, status: Status, message: str, results: dict[Hashable, RewardOutcome],
                      retried: set[Hashable]) -> None:
        current = worker.pending.popleft()
        ran_s = time.monotonic() - worker.last_progress
        first_attempt = current.key not in retried
        if first_attempt:  # once more, alone, on the fresh worker
            retried.add(current.key)
            self.retries += 1
        else:
            results[current.key] = RewardOutcome(status, message=f"{message} (also on retry)")
        self.restarts += 1
        if status == "timeout":
            self.timeouts += 1
        else:
            self.crashes += 1
        fresh = self._replace(worker)
        fresh.reserved = ([current] if first_attempt else []) + list(worker.pending)
        happened = "timed out after" if status == "timeout" else "killed its worker after"
        NOTICES.notice(f"reward-{status}", f"reward {current.name}: an item {happened} {ran_s:.1f} s; reward worker "
                       f"{worker.number} replaced ({self.timeouts} timeout(s), {self.crashes} crash(es) so far)")
        if status == "timeout" and first_attempt and self.max_timeouts_in_a_row:
            attempts = self._timed_out.setdefault(current.name, [])
            attempts.append(ran_s)
            if len(attempts) >= self.max_timeouts_in_a_row:
                raise RewardTimeoutLoop(self._timeout_loop_message(current.name, attempts))

    def _timeout_loop_message(self, name: str, attempts: list[float]) -> str:
        finished = self._item_s.get(name)
        took = (f"; its items that finished took {statistics.median(finished):.2f} s (median), at most "
                f"{max(finished):.2f} s" if finished else "; none of its items has finished yet")
        loaded = f"; loading it took {self.load_s[name]:.1f} s, outside the item limit" if name in self.load_s else ""
        return (f"reward {name}: {len(attempts)} items in a row timed out at rewards.timeout_s={self.timeout_s:g} s "
                f"(stopped after {', '.join(f'{s:.1f}' for s in attempts)} s), with "
                f"no item of it finishing in between{took}{loaded}. Stopping rather than replacing workers for ever. "
                f"Raise rewards.timeout_s above what one item takes, or make the reward faster "
                f"(rewards.max_timeouts_in_a_row={self.max_timeouts_in_a_row} sets how many such timeouts stop the "
                "run).")

    def close(self) -> None:
        self._closed = True
        for w in self._workers:
            w.stop()
        self._workers.clear()

    def __enter__(self) -> RewardPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
