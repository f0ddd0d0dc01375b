"""Model calls from many concurrent episodes in one engine batch.

Each call (prompt ids, sampling parameters, its episode's generator, its episode) is queued with a future. One thread
takes the first pending call and collects more until the batch holds `batch_size` sequences or:

- when the batcher knows the episodes that may still call (`open` / `finish`, from the endpoint of a run's agent
  episodes): every live episode has a call waiting, since no other call will come before these are answered; or
  the straggler limit after the first call: the longer of `max_wait_s` and a quarter of the mean engine call so
  far. A straggler (busy in its own environment: a tool, a slow parser, a hung program until its episode limit)
  thus delays a batch by at most a fraction of the engine call its call would otherwise cost. Calls from concurrent
  episodes arrive spread out (each episode's thread parses its answer and renders its next request under the GIL):
  a fixed short wait split 32 episodes' turns into two engine calls of about 15 each.
- otherwise (`rlvr serve`, where callers come and go): while calls keep coming, until none came for `wait_s` (a few
  milliseconds), or `max_wait_s` after the first.

It then calls the engine once per set of equal sampling parameters among them (the engine takes one set per call);
each call's future gets its n completions. The engine is used by this thread alone while it runs. The sizes of the
engine calls (calls and sequences) are kept for the metrics (`endpoint/batch_calls_mean`, ...).
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch

from rlvr.rollout.base import Completion, RolloutEngine, SamplingParams


@dataclass
class PendingCall:
    prompt: list[int]
    params: SamplingParams
    generator: torch.Generator | None
    episode: str | None = None
    future: Future = field(default_factory=Future)


class CallBatcher:
    """Queues calls and answers them in engine batches (see the module's docstring)."""

    STRAGGLER_SHARE = 0.25  # of the mean engine call: how long a batch may wait for a live episode's call

    def __init__(self, engine: RolloutEngine, batch_size: int | None = None, wait_s: float = 0.005,
                 max_wait_s: float = 0.05, per_episode: bool = False):
        self.engine, self.wait_s, self.max_wait_s = engine, wait_s, max_wait_s
        # per_episode: the episodes that may still call; None: callers unknown (`rlvr serve`)
        self.live: set[str] | None = set() if per_episode else None
        self.lock = threading.Lock()
        self.batch_size = batch_size or getattr(engine, "batch_size", 64)
        self.pending: queue.Queue[PendingCall | None] = queue.Queue()
        self.batch_calls: list[int] = []  # calls per engine call
        self.batch_sequences: list[int] = []  # sequences (calls x n) per engine call
        self.engine_s = 0.0
        self.thread = threading.Thread(target=self._run, daemon=True, name="rlvr-call-batcher")
        self.thread.start()

    def open(self, episode: str) -> None:
        """An episode that may call from now on."""
        with self.lock:
            self.live.add(episode)

    def finish(self, episode: str) -> None:
        """An episode that will not call again."""
        with self.lock:
            self.live.discard(episode)

    def submit(self, prompt: list[int], params: SamplingParams, generator: torch.Generator | None = None,
               episode: str | None = None) -> Future:
        """A future of the call's `params.n` completions (`episode`: the caller's, for the per-episode wait)."""
        call = PendingCall(prompt, params, generator, episode)
        self.pending.put(call)
        return call.future

    def close(self) -> None:
        self.pending.put(None)
        self.thread.join(timeout=60)

    def _collect(self, first: PendingCall) -> tuple[list[PendingCall], bool]:
        if self.live is None:
            return self._collect_while_coming(first)
        return self._collect_live(first)

    def _collect_while_coming(self, first: PendingCall) -> tuple[list[PendingCall], bool]:
        batch, sequences = [first], first.params.n
        last = time.monotonic() + self.max_wait_s
        while sequences < self.batch_size and (left := min(self.wait_s, last - time.monotonic())) > 0:
            try:
                call = self.pending.get(timeout=left)
            except queue.Empty:
                break
            if call is None:
                return batch, True
            batch.append(call)
            sequences += call.params.n
        return batch, False

    def _collect_live(self, first: PendingCall) -> tuple[list[PendingCall], bool]:
        batch, sequences, waiting = [first], first.params.n, {first.episode}
        mean_engine_s = self.engine_s / len(self.batch_calls) if self.batch_calls else 0.0
        last = time.monotonic() + max(self.max_wait_s, self.STRAGGLER_SHARE * mean_engine_s)
        while sequences < self.batch_size and (left := last - time.monotonic()) > 0:
            with self.lock:
                if set(self.live) <= waiting:
                    break
            try:  # polled: an episode that ends without calling again releases the batch without a call
                call = self.pending.get(timeout=min(left, 0.01))
            except queue.Empty:
                continue
            if call is None:
                return batch, True
            batch.append(call)
            sequences += call.params.n
            waiting.add(call.episode)
        return batch, False

    def _run(self) -> None:
        closing = False
        while not closing:
            first = self.pending.get()
            if first is None:
                return
            batch, closing = self._collect(first)
            groups: dict[tuple, list[PendingCall]] = {}
            for call in batch:  # the engine takes one set of sampling parameters (and all or no generators)
                groups.setdefault((repr(call.params), call.generator is None), []).append(call)
            for calls in groups.values():
                self._generate(calls)

    def _generate(self, calls: list[PendingCall]) -> None:
        t0 = time.perf_counter()
        try:
            gens = None if calls[0].generator is None else [c.generator for c in calls]
            out: list[list[Completion]] = self.engine.generate([c.prompt for c in calls], calls[0].params, gens)
        except Exception as e:  # every caller hears of it; the batcher goes on
            for c in calls:
                c.future.set_exception(e)
            return
        finally:
            self.engine_s += time.perf_counter() - t0
        self.batch_calls.append(len(calls))
        self.batch_sequences.append(sum(c.params.n for c in calls))
        for c, completions in zip(calls, out):
            c.future.set_result(completions)

    def metrics(self) -> dict[str, float]:
        """Engine calls made and their mean and largest sizes (calls, sequences)."""
        if not self.batch_calls:
            return {}
        return {"endpoint/engine_calls": float(len(self.batch_calls)),
                "endpoint/batch_calls_mean": sum(self.batch_calls) / len(self.batch_calls),
                "endpoint/batch_calls_max": float(max(self.batch_calls)),
                "endpoint/batch_sequences_mean": sum(self.batch_sequences) / len(self.batch_sequences),
                "endpoint/engine_s": self.engine_s}
