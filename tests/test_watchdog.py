"""The watchdog: a wait with no progress is named in one line after the configured silence, again only when the
silence has doubled; progress resets it; notices are rate-limited and say how many were held back; a stop request
ends only abandonable waits, and only after its grace."""

from __future__ import annotations

import time

import pytest

from rlvr.watchdog import WaitAbandoned, Watchdog


def test_a_silent_wait_is_named_once_after_the_threshold_then_when_the_silence_doubles():
    watch, lines = Watchdog(), []
    with watch.watch(1.0, lines.append), watch.waiting(lambda: "reward worker 2: loading reward.py"):
        time.sleep(0.6)
        assert lines == []  # not yet silent long enough
        time.sleep(1.0)  # ~1.6 s: one line (the next is due at ~2 s, when 1 s of silence has doubled)
        assert len(lines) == 1
        assert "no progress for" in lines[0] and "reward worker 2: loading reward.py (for" in lines[0]
        time.sleep(1.2)  # ~2.8 s: the second line came at ~2 s; the third is due at ~4 s
        assert len(lines) == 2
    assert len(lines) == 2  # leaving the watch stops the thread


def test_progress_keeps_the_watchdog_quiet():
    watch, lines = Watchdog(), []
    with watch.watch(0.3, lines.append), watch.waiting("generation"):
        for _ in range(12):
            time.sleep(0.05)
            watch.progress()
    assert lines == []


def test_the_stall_line_lists_every_open_wait_and_survives_a_failing_description():
    watch = Watchdog()

    def broken() -> str:
        raise KeyError("gone")

    with watch.waiting("step 3's rollout"), watch.waiting(broken):
        line = watch.stall_line()
    assert "step 3's rollout (for 0 s)" in line and "could not describe the wait: KeyError" in line
    assert "no wait is open" in watch.stall_line()


def test_notices_are_rate_limited_per_key_and_count_what_was_held_back():
    watch, lines = Watchdog(), []
    with watch.watch(0, lines.append):
        for i in range(5):
            watch.notice("timeout", f"timeout {i}", every_s=0.3)
        watch.notice("crash", "crash 0", every_s=0.3)
        time.sleep(0.35)
        watch.notice("timeout", "timeout 5", every_s=0.3)
    assert lines == ["timeout 0", "crash 0", "timeout 5 (4 more like it since the last notice)"]


def test_a_stop_request_ends_only_abandonable_waits_and_only_after_its_grace():
    watch = Watchdog()
    watch.check_stop("rewards")  # no stop requested
    watch.request_stop(0.3)
    with watch.abandonable():
        watch.check_stop("rewards")  # within the grace
        time.sleep(0.35)
        with pytest.raises(WaitAbandoned, match="stopped while waiting for rewards"):
            watch.check_stop(lambda: "rewards")
    watch.check_stop("the evaluation")  # outside an abandonable region a wait goes on
    with watch.abandonable(enabled=False):
        watch.check_stop("rewards")
    watch.clear_stop()
    with watch.abandonable():
        watch.check_stop("rewards")
