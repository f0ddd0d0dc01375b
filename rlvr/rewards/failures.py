"""The failure budget: a reward that cannot be computed (it raised, returned NaN/inf/None/a string, timed out or
killed its worker) scores 0 for that sample, and the run goes on only while such failures stay rare. A reward
that fails on every sample of a step, or on more than `rewards.max_failure_rate` of its last
`rewards.failure_window` samples, stops the run with an error naming it and its first error, instead of
training on zeros. `max_failure_rate: 1` tolerates every failure."""

from __future__ import annotations

from collections import Counter, deque

from rlvr.errors import RlvrError

MIN_SAMPLES = 32  # the rate is judged once this many samples (or a whole window, if smaller) were scored


class RewardFailure(RlvrError):
    """A reward failed too often for the run to go on."""


class RewardLoadError(RewardFailure):
    """A reward function could not be loaded in a reward worker (its import raised, or took longer than
    rewards.load_timeout_s): the run stops at start rather than scoring every sample 0."""


class RewardTimeoutLoop(RewardFailure):
    """One reward's items keep timing out on fresh workers: the time limit is too short for it, or it hangs."""


class PoolClosed(RlvrError):
    """The reward pool was closed while a scoring was waiting on it (the run is ending)."""


class FailureBudget:
    """Per reward function: failures in a sliding window of samples, and totals for the end-of-run summary."""

    def __init__(self, max_failure_rate: float = 0.1, window: int = 256):
        self.max_failure_rate, self.window = max_failure_rate, window
        self.recent: dict[str, deque[bool]] = {}  # name -> failed?, one per sample, newest last
        self.totals: dict[str, Counter] = {}  # name -> Counter(samples=, error=, timeout=, crash=)
        self.first_errors: dict[str, str] = {}

    def record(self, samples: int, failures: dict[str, Counter], first_errors: dict[str, str]) -> None:
        """Count one step's scoring (`samples` samples; per reward, failures by kind; each reward's first error),
        then raise RewardFailure if a reward is over budget."""
        for name, kinds in failures.items():
            failed = sum(kinds.values())
            recent = self.recent.setdefault(name, deque(maxlen=self.window))
            recent.extend([True] * failed + [False] * (samples - failed))
            self.totals.setdefault(name, Counter()).update({"samples": samples, **kinds})
            if name in first_errors:
                self.first_errors.setdefault(name, first_errors[name])
            rate = sum(recent) / len(recent) if recent else 0.0
            judged = len(recent) >= min(self.window, MIN_SAMPLES)
            if self.max_failure_rate < 1 and ((samples and failed == samples) or
                                               (judged and rate > self.max_failure_rate)):
                scope = (f"every one of this step's {samples} samples" if failed == samples else
                         f"{sum(recent)} of its last {len(recent)} samples ({rate:.0%})")
                raise RewardFailure(
                    f"reward '{name}' failed on {scope}, over the budget rewards.max_failure_rate="
                    f"{self.max_failure_rate:g} (window {self.window} samples); stopping rather than training on "
                    f"zeros. First error: {self.first_errors.get(name, 'unknown')}. Fix the reward, or raise "
                    "rewards.max_failure_rate to tolerate failures.")

    def summary(self) -> str:
        """One line: failed samples per reward over the run, by kind."""
        parts = []
        for name, total in self.totals.items():
            kinds = ", ".join(f"{kind} {total[kind]}" for kind in ("error", "timeout", "crash") if total[kind])
            failed = total["error"] + total["timeout"] + total["crash"]
            parts.append(f"{name} {failed}/{total['samples']}" + (f" ({kinds})" if kinds else ""))
        return "reward failures: " + ("; ".join(parts) if parts else "none scored")
