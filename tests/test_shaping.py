"""Shaping rewards: the format reward and gate, LASER's length step, the correct-only length penalty."""

from __future__ import annotations

import pytest

from rlvr.rewards.pool import RewardPool, RewardRequest
from rlvr.rewards.shaping import correct_length_penalty, format_reward, gated, laser_reward

EXACT = "rlvr.tasks.dataset:exact_match"
TAGGED = "<think>2 and 2 make 4</think>\n<answer>4</answer>"


def exploding_reward(prompt: str, completion: str, **_) -> float:
    raise AssertionError("the gate must not call the inner reward when the format fails")


def answer_length(prompt: str, completion: str, **_) -> dict:
    return {"score": 1.0, "chars": float(len(completion))}


@pytest.mark.parametrize("completion, expected", [
    (TAGGED, 1.0),
    ("  " + TAGGED + "\n", 1.0),
    ("<think>4</think>", 0.0),  # no answer block
    ("<answer>4</answer><think>x</think>", 0.0),  # wrong order
    ("Sure! " + TAGGED, 0.0),  # text outside the tags
    ("<think>a</think><think>b</think><answer>4</answer>", 0.0),  # two reasoning blocks
])
def test_format_reward_wants_exactly_one_think_then_one_answer(completion, expected):
    assert format_reward("", completion) == expected


def test_format_reward_takes_a_prefix_and_a_custom_pattern():
    assert format_reward("", "2 and 2</think><answer>4</answer>") == 0.0
    assert format_reward("", "2 and 2</think><answer>4</answer>", prefix="<think>") == 1.0
    assert format_reward("", "Result: 4", pattern=r"Result: \d+") == 1.0
    assert format_reward("", "Result: four", pattern=r"Result: \d+") == 0.0


def test_gate_zeroes_the_inner_reward_without_calling_it_when_the_format_fails():
    assert gated("", "just 4", inner=f"{__file__}:exploding_reward") == 0.0


def test_gate_passes_fields_and_optionally_only_the_answer_to_the_inner_reward():
    assert gated("", TAGGED, inner=EXACT, answer="4") == 0.0  # the whole completion is not '4'
    assert gated("", TAGGED, inner=EXACT, answer="4", answer_only=True) == 1.0
    assert gated("", TAGGED, inner=f"{__file__}:answer_length", answer_only=True) == 1.0  # dict -> its score


def test_gate_runs_in_the_worker_pool():
    spec = "rlvr.rewards.shaping:gated"
    fields = {"inner": EXACT, "answer": "4", "answer_only": True}
    with RewardPool(num_workers=1, timeout_s=10) as pool:
        out = pool.score([RewardRequest(0, spec, "", TAGGED, fields), RewardRequest(1, spec, "", "4", fields)])
    assert (out[0].status, out[0].value) == ("ok", 1.0)
    assert (out[1].status, out[1].value) == ("ok", 0.0)


def test_laser_adds_a_step_bonus_only_to_correct_answers_within_the_target():
    kw = {"verifier": EXACT, "answer": "4", "target_tokens": 100}
    assert laser_reward("", "4", completion_tokens=100, **kw) == {"score": 1.5, "correct": 1.0, "length_bonus": 0.5}
    assert laser_reward("", "4", completion_tokens=101, **kw)["score"] == 1.0
    assert laser_reward("", "5", completion_tokens=10, **kw)["score"] == 0.0
    assert laser_reward("", "4", completion_tokens=10, bonus=0.2, **kw)["score"] == pytest.approx(1.2)


def test_correct_length_penalty_prefers_shorter_correct_answers():
    kw = {"verifier": EXACT, "answer": "4", "max_new_tokens": 100}
    short, long = (correct_length_penalty("", "4", completion_tokens=n, **kw)["score"] for n in (10, 90))
    assert short > long > 0.5
    assert correct_length_penalty("", "4", completion_tokens=0, **kw)["score"] == pytest.approx(1.25)
    assert correct_length_penalty("", "4", completion_tokens=100, **kw)["score"] == pytest.approx(0.75)


def test_wrong_answers_only_lose_for_length_kimi_style_or_not_at_all():
    kw = {"verifier": EXACT, "answer": "4", "max_new_tokens": 100}
    assert correct_length_penalty("", "5", completion_tokens=10, **kw)["score"] == 0.0  # min(0, lambda) = 0
    assert correct_length_penalty("", "5", completion_tokens=100, **kw)["score"] == pytest.approx(-0.25)
    assert correct_length_penalty("", "5", completion_tokens=100, penalize_wrong=False, **kw)["score"] == 0.0
