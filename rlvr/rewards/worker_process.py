"""The reward pool's worker processes: each a fresh `python -m rlvr.rewards.worker` in its own session, started with
the rewards to load, replaced after a timeout or a crash, and recycled when its memory grew past a limit.

A plain subprocess (not multiprocessing's spawn/forkserver) never re-imports the user's __main__, so scripts without
an `if __name__ == "__main__"` guard work, and the whole process group (anything a reward started) can be killed at
once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from multiprocessing.connection import Connection

from rlvr.errors import ConfigError
from rlvr.rewards.failures import RewardLoadError
from rlvr.rewards.messages import RewardLoad, RewardRequest, Stop
from rlvr.rewards.notices import notice_recycled


class WorkerProcess:
    """One worker, talking over a socket pair. It is sent its loads at once and is fed items once it says it is
    ready."""

    def __init__(self, number: int, loads: Sequence[RewardLoad]):
        parent, child = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rlvr.rewards.worker", str(child.fileno())],
            pass_fds=[child.fileno()], start_new_session=True, stdin=subprocess.DEVNULL,
        )
        child.close()
        self.number = number  # its place in the pool, as messages name it
        self.conn = Connection(parent.detach())
        self.conn.send(list(loads))
        self.ready = False
        self.loading: str | None = "the reward worker (starting Python)"  # what it is loading, None when not
        self.since = time.monotonic()  # when the current load began
        self.pending: deque[RewardRequest] = deque()
        self.reserved: list[RewardRequest] = []  # sent first once ready: a retried item and those queued behind it
        self.last_progress = time.monotonic()  # when its current item's clock started
        self.fed = False  # whether it has been sent any item

    @property
    def idle(self) -> bool:
        """Ready for a chunk: loaded, and nothing pending."""
        return self.ready and self.loading is None and not self.pending

    def deadline(self, timeout_s: float, load_timeout_s: float) -> float | None:
        """When it overruns: its current load's limit, or its current item's; None when it is idle."""
        if self.loading is not None:
            return self.since + load_timeout_s
        if self.pending:
            return self.last_progress + timeout_s
        return None

    def load_overrun(self, load_timeout_s: float) -> RewardLoadError:
        return RewardLoadError(f"reward worker {self.number} did not finish loading {self.loading} within "
                               f"rewards.load_timeout_s={load_timeout_s:g} s. Raise rewards.load_timeout_s if loading "
                               "it legitimately takes longer (a large model on a cold machine).")

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
        self.conn.send(chunk)

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(Stop())
            self.process.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class Workers:
    """The pool's workers, all loading the same rewards."""

    def __init__(self):
        self.loads: list[RewardLoad] = []
        self.all: list[WorkerProcess] = []
        self.recycled = 0  # workers replaced for their memory

    def __iter__(self):
        return iter(list(self.all))

    def __bool__(self) -> bool:
        return bool(self.all)

    def start(self, count: int, loads: Sequence[RewardLoad]) -> None:
        """Launch workers up to `count`, each loading `loads`."""
        self.loads = list(loads)
        self.all += [WorkerProcess(len(self.all) + i + 1, self.loads) for i in range(count - len(self.all))]

    def replace(self, worker: WorkerProcess) -> WorkerProcess:
        """Kill `worker` and start a fresh one in its place (same number, same loads)."""
        worker.kill()
        fresh = WorkerProcess(worker.number, self.loads)
        self.all[self.all.index(worker)] = fresh
        return fresh

    def recycled_if_grown(self, worker: WorkerProcess, max_memory_bytes: float) -> bool:
        """Replace an idle `worker` whose resident memory grew past `max_memory_bytes` (rewards.worker_max_memory_mb:
        a leaking reward); whether it was. A fresh worker already over the limit is a ConfigError: replacing it
        would start the same one for ever."""
        held = worker.resident_bytes()
        if held <= max_memory_bytes:
            return False
        limit_mb = max_memory_bytes / 2**20
        if not worker.fed:
            raise ConfigError(
                f"reward worker {worker.number} holds {held / 2**20:.0f} MB right after loading its rewards, "
                f"before scoring anything: above rewards.worker_max_memory_mb={limit_mb:g} MB, so every fresh "
                f"worker would be replaced at once. Raise rewards.worker_max_memory_mb well above "
                f"{held / 2**20:.0f} MB.")
        self.recycled += 1
        notice_recycled(worker.number, limit_mb, self.recycled)
        self.replace(worker)
        return True

    def describe(self, queued: int) -> str:
        """What each worker is doing, for the watchdog's stall line (`queued`: items waiting for a worker)."""
        now = time.monotonic()
        parts, idle = [], 0
        for w in self.all:
            if w.loading is not None:
                parts.append(f"reward worker {w.number}: loading {w.loading} for {now - w.since:.0f} s")
            elif w.pending:
                parts.append(f"reward worker {w.number}: scoring an item of {w.pending[0].name} for "
                             f"{now - w.last_progress:.0f} s")
            else:
                idle += 1
        return "; ".join(parts + [f"{idle} reward worker(s) idle, {queued} item(s) queued"])

    def close(self) -> None:
        for w in self.all:
            w.stop()
        self.all.clear()
