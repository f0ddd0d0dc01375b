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

The pieces: the messages to and from the workers (rlvr.rewards.messages; the worker's side, rlvr.rewards.worker),
the worker processes and their clocks (rlvr.rewards.worker_process), what the user is told (rlvr.rewards.notices);
here, dispatching items and the policy of giving up (a worker's overrun, the timeout loop).
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import wait

from rlvr.cancellation import POLL_S, Cancellation
from rlvr.rewards import messages
from rlvr.rewards.failures import PoolClosed, RewardLoadError, RewardTimeoutLoop
from rlvr.rewards.messages import RewardLoad, RewardOutcome, RewardRequest, Status, spec_label
from rlvr.rewards.notices import notice_replaced
from rlvr.rewards.worker_process import WorkerProcess, Workers
from rlvr.watchdog import WATCH

__all__ = ["RewardLoad", "RewardOutcome", "RewardPool", "RewardRequest", "spec_label"]


class TimeoutLoop:
    """Stops the run with RewardTimeoutLoop when `max_in_a_row` items of one reward time out (each counted once, at
    its first attempt) with no item of it finishing in between, naming the reward, the limit and the times measured
    (0: never)."""

    def __init__(self, max_in_a_row: int, timeout_s: float):
        self.max_in_a_row, self.timeout_s = max_in_a_row, timeout_s
        self.timed_out: dict[str, list[float]] = {}  # name -> its timed-out attempts since its last finished item
        self.item_s: dict[str, deque[float]] = {}  # name -> how long its recent finished items took

    def finished(self, name: str, seconds: float) -> None:
        self.timed_out.pop(name, None)
        self.item_s.setdefault(name, deque(maxlen=256)).append(seconds)

    def first_timeout(self, name: str, ran_s: float, load_s: dict[str, float]) -> None:
        """Count an item's first timed-out attempt; raise when the reward is in a loop (`load_s`: what loading each
        reward took, for the message)."""
        if not self.max_in_a_row:
            return
        attempts = self.timed_out.setdefault(name, [])
        attempts.append(ran_s)
        if len(attempts) >= self.max_in_a_row:
            raise RewardTimeoutLoop(self.message(name, attempts, load_s))

    def message(self, name: str, attempts: list[float], load_s: dict[str, float]) -> str:
        finished = self.item_s.get(name)
        took = (f"; its items that finished took {statistics.median(finished):.2f} s (median), at most "
                f"{max(finished):.2f} s" if finished else "; none of its items has finished yet")
        loaded = f"; loading it took {load_s[name]:.1f} s, outside the item limit" if name in load_s else ""
        return (f"reward {name}: {len(attempts)} items in a row timed out at rewards.timeout_s={self.timeout_s:g} s "
                f"(stopped after {', '.join(f'{s:.1f}' for s in attempts)} s), with "
                f"no item of it finishing in between{took}{loaded}. Stopping rather than replacing workers for ever. "
                f"Raise rewards.timeout_s above what one item takes, or make the reward faster "
                f"(rewards.max_timeouts_in_a_row={self.max_in_a_row} sets how many such timeouts stop the run).")


class RewardPool:
    """Scores reward requests in `num_workers` processes, each item limited to `timeout_s` seconds of scoring and
    each reward function's loading to `load_timeout_s`; its waits end when `cancellation` gives them up (none by
    default)."""

    def __init__(self, num_workers: int = 2, timeout_s: float = 10.0, chunk_size: int = 64,
                 max_memory_mb: float = 4096, load_timeout_s: float = 600.0, max_timeouts_in_a_row: int = 4,
                 cancellation: Cancellation | None = None):
        self.num_workers, self.timeout_s, self.chunk_size = num_workers, timeout_s, chunk_size
        self.load_timeout_s, self.max_memory_bytes = load_timeout_s, max_memory_mb * 2**20
        self.cancellation = cancellation if cancellation is not None else Cancellation()
        self.loads: list[RewardLoad] = []
        self._workers = Workers()
        self._timeout_loop = TimeoutLoop(max_timeouts_in_a_row, timeout_s)
        self._queue: deque[list[RewardRequest]] = deque()
        self._closed = False
        self.restarts = 0  # workers replaced after a timeout or crash
        self.retries = 0
        self.timeouts = 0
        self.crashes = 0
        self.load_s: dict[str, float] = {}  # label -> the longest a worker took to load it

    # ------------------------------------------------------------------ starting and loading

    def start(self, loads: Sequence[RewardLoad] = ()) -> None:
        """Launch the workers, each loading `loads`, and return at once (`wait_ready` waits for them)."""
        self.loads = list(loads)
        self._workers.start(self.num_workers, self.loads)

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
                "reward_pool/recycled": self._workers.recycled, "reward_pool/timeouts": self.timeouts,
                "reward_pool/crashes": self.crashes}

    @property
    def recycled(self) -> int:
        """Workers replaced for their memory."""
        return self._workers.recycled

    def describe(self) -> str:
        """What each worker is doing, for the watchdog's stall line."""
        return self._workers.describe(sum(len(chunk) for chunk in self._queue))

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

    def _feed(self, worker: WorkerProcess) -> None:
        if not worker.idle:
            return
        if worker.reserved:
            chunk, worker.reserved = worker.reserved, []
            worker.send(chunk)
        elif self._queue and not self._workers.recycled_if_grown(worker, self.max_memory_bytes):
            worker.send(self._queue.popleft())

    def _pump(self, results: dict[Hashable, RewardOutcome], retried: set[Hashable]) -> None:
        """Feed idle workers, wait a little for messages, handle them, and act on overrun limits."""
        if self._closed:
            raise PoolClosed("the reward pool was closed while a scoring waited on it")
        for w in self._workers:
            self._feed(w)
        now = time.monotonic()
        deadlines = [w.deadline(self.timeout_s, self.load_timeout_s) for w in self._workers]
        first = min((d for d in deadlines if d is not None), default=now + POLL_S)
        ready = wait([w.conn for w in self._workers], timeout=min(POLL_S, max(0.0, first - now)))
        for w in self._workers:
            if w.conn in ready:
                try:
                    message = w.conn.recv()
                except (EOFError, OSError):
                    self._died(w, results, retried)
                    continue
                self._handle(w, message, results)
        now = time.monotonic()
        for w in self._workers:
            limit = w.deadline(self.timeout_s, self.load_timeout_s)
            if limit is None or now <= limit or w.conn in ready:
                continue
            if w.loading is not None:
                raise w.load_overrun(self.load_timeout_s)
            self._fail_current(w, "timeout", f"no result within {self.timeout_s:g} s", results, retried)
        self.cancellation.check(lambda: f"rewards: {self.describe()}")

    def _handle(self, w: WorkerProcess, message: messages.WorkerMessage,
                results: dict[Hashable, RewardOutcome]) -> None:
        now = time.monotonic()
        match message:
            case messages.Loading(label):
                w.loading, w.since = label, now
            case messages.Loaded(label, seconds):
                self.load_s[label] = max(seconds, self.load_s.get(label, 0.0))
                w.loading, w.last_progress = None, now  # an item's clock starts after its function is loaded
            case messages.LoadFailed(label, text):
                raise RewardLoadError(f"reward {label} failed to load in a reward worker: {text}")
            case messages.Ready():
                w.ready, w.loading = True, None
            case messages.ItemScored(key, outcome):
                done = w.pending.popleft()
                assert done.key == key, "reward worker answered out of order"
                results[key] = outcome
                self._timeout_loop.finished(done.name, now - w.last_progress)
                w.last_progress = now
        WATCH.progress()

    def _died(self, w: WorkerProcess, results: dict[Hashable, RewardOutcome], retried: set[Hashable]) -> None:
        code = w.process.poll()
        if w.loading is not None:
            raise RewardLoadError(f"reward worker {w.number} died while loading {w.loading} (exit code {code})")
        if w.pending:
            self._fail_current(w, "crash", "the reward worker died while scoring this item", results, retried)
        else:
            self.restarts += 1
            self._workers.replace(w)

    def _fail_current(self, worker: WorkerProcess, status: Status, message: str,
                      results: dict[Hashable, RewardOutcome], retried: set[Hashable]) -> None:
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
        fresh = self._workers.replace(worker)
        fresh.reserved = ([current] if first_attempt else []) + list(worker.pending)
        notice_replaced(current.name, status, ran_s, worker.number, self.timeouts, self.crashes)
        if status == "timeout" and first_attempt:
            self._timeout_loop.first_timeout(current.name, ran_s, self.load_s)

    def close(self) -> None:
        self._closed = True
        self._workers.close()

    def __enter__(self) -> RewardPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
