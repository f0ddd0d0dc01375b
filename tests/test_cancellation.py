"""A stop request ends only the waits of an abandonable region, and only after its grace (time is a fake clock the
tests move); the reward pool's wait polls the cancellation it was given."""

from __future__ import annotations

import pytest
from conftest import FakeClock

from rlvr.cancellation import Cancellation, WaitAbandoned
from rlvr.rewards.pool import RewardPool, RewardRequest


def test_a_stop_request_ends_only_abandonable_waits_and_only_after_its_grace():
    clock = FakeClock()
    stop = Cancellation(clock)
    stop.check("rewards")  # no stop requested
    stop.request(10.0)
    with stop.abandonable():
        stop.check("rewards")  # within the grace
        clock.advance(9.5)
        stop.check("rewards")
        clock.advance(0.5)
        with pytest.raises(WaitAbandoned, match="stopped while waiting for rewards"):
            stop.check(lambda: "rewards")
    stop.check("the evaluation")  # outside an abandonable region a wait goes on
    with stop.abandonable(enabled=False):
        stop.check("rewards")
    stop.clear()
    with stop.abandonable():
        stop.check("rewards")


def test_the_reward_pool_gives_up_its_wait_through_the_cancellation_it_was_given(tmp_path):
    (tmp_path / "hangs.py").write_text("import time\n\ndef hangs(prompt, completion, **fields):\n"
                                       "    time.sleep(10**6)\n")
    stop = Cancellation()
    with RewardPool(num_workers=1, timeout_s=600, cancellation=stop) as pool:
        pool.start()
        pool.wait_ready()
        stop.request(0.0)
        with stop.abandonable(), pytest.raises(WaitAbandoned, match="rewards: reward worker 1: "):
            pool.score([RewardRequest(0, f"{tmp_path}/hangs.py:hangs", "p", "c", {})])
