"""The watchdog: a wait with no progress is named in one line after the configured silence, again only when the
silence has doubled; progress resets it; notices are rate-limited and say how many were held back. Time is a fake
clock the tests move."""

from __future__ import annotations

import threading
import time

from conftest import FakeClock

from rlvr.watchdog import Notices, Watchdog


def test_a_silent_wait_is_named_once_after_the_threshold_then_when_the_silence_doubles():
    clock, lines = FakeClock(), []
    watch = Watchdog(clock)
    with watch.watch(10.0, lines.append), watch.waiting(lambda: "reward worker 2: loading reward.py"):
        for seconds, expected in [(9.5, 0),  # not yet silent long enough
                                  (0.5, 1),  # 10 s: one line; the next is due when the silence has doubled
                                  (9.5, 1), (0.5, 2),  # 20 s: the second line (the third is due at 40 s)
                                  (19.5, 2), (0.5, 3)]:
            clock.advance(seconds)
            watch.look()
            watch.look()  # a second look at the same time prints nothing more
            assert len(lines) == expected, (clock.now, lines)
        assert "no progress for 10 s" in lines[0] and "reward worker 2: loading reward.py (for 10 s)" in lines[0]
        assert "no progress for 20 s" in lines[1] and "(since " in lines[1]
    clock.advance(100)
    watch.look()
    assert len(lines) == 3  # leaving the watch ends the warnings


def test_progress_keeps_the_watchdog_quiet():
    clock, lines = FakeClock(), []
    watch = Watchdog(clock)
    with watch.watch(10.0, lines.append), watch.waiting("generation"):
        for _ in range(12):
            clock.advance(9.0)
            watch.look()
            watch.progress()
        assert lines == []
        clock.advance(10.0)
        watch.look()
        assert len(lines) == 1 and "no progress for 10 s" in lines[0]


def test_the_watching_thread_looks_by_itself_and_stops_with_the_watch():
    clock, lines = FakeClock(), []
    watch = Watchdog(clock)
    with watch.watch(1.0, lines.append), watch.waiting("rewards"):
        clock.advance(5.0)  # the thread wakes every 0.25 s of real time
        deadline = time.monotonic() + 30
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(lines) == 1 and "waiting for rewards (for 5 s)" in lines[0]
    assert not any(t.name == "rlvr-watchdog" for t in threading.enumerate())


def test_the_stall_line_lists_every_open_wait_and_survives_a_failing_description():
    clock = FakeClock()
    watch = Watchdog(clock)

    def broken() -> str:
        raise KeyError("gone")

    with watch.waiting("step 3's rollout"):
        clock.advance(7.0)
        with watch.waiting(broken):
            clock.advance(2.0)
            line = watch.stall_line()
    assert "step 3's rollout (for 9 s)" in line and "could not describe the wait: KeyError" in line
    assert "no wait is open" in watch.stall_line()


def test_notices_are_rate_limited_per_key_and_count_what_was_held_back():
    clock, lines = FakeClock(), []
    notices = Notices(lines.append, clock)
    for i in range(5):
        notices.notice("timeout", f"timeout {i}", every_s=10)
        clock.advance(1.0)
    notices.notice("crash", "crash 0", every_s=10)
    clock.advance(4.9)  # 9.9 s after the first timeout notice: still held back
    notices.notice("timeout", "timeout 5", every_s=10)
    clock.advance(0.2)
    notices.notice("timeout", "timeout 6", every_s=10)
    assert lines == ["timeout 0", "crash 0", "timeout 6 (5 more like it since the last notice)"]


def test_notices_go_where_the_watch_prints():
    watch, lines = Watchdog(FakeClock()), []
    notices = Notices(watch.say)
    with watch.watch(0, lines.append):
        notices.notice("crash", "a reward worker died")
    assert lines == ["a reward worker died"]
