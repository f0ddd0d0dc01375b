"""Shaping rewards: the format reward and gate, LASER's length step, Kimi's group length reward."""

from __future__ import annotations

import pytest

from rlvr.rewards.pool import RewardPool, RewardRequest
from rlvr.rewards.shaping import format_reward, gated, group_length_reward, laser_bonus

EXACT = "rlvr.tasks.dataset:exact_match"
TAGGED = "<think>2 and 2 make 4</think>\n<answer>4</answer>"


def exploding_reward(prompt: str, completion: str, **_) -> float:
    raise AssertionError("the gate must not call the inner reward when the format fails")


def is_exactly(prompt: str, completion: str, answer: str, **_) -> float:
    """1 only when the text handed over is the answer and nothing else (exact_match reads <answer> tags itself)."""
    return float(completion == answer)


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
    assert gated("", "just 4", verifier_score=1.0, inner=f"{__file__}:exploding_reward") == 0.0
    assert gated("", "just 4", verifier_score=1.0) == 0.0


def test_gate_passes_the_verdict_or_calls_the_inner_reward_on_the_answer_alone():
    assert gated("", TAGGED, verifier_score=1.0) == 1.0  # no second verification: the verdict passes the gate
    assert gated("", TAGGED, verifier_score=0.0) == 0.0
    assert gated("", TAGGED, verifier_score=0.0, inner=f"{__file__}:is_exactly", answer="4") == 0.0  # the whole completion
    assert gated("", TAGGED, verifier_score=0.0, inner=f"{__file__}:is_exactly", answer="4", answer_only=True) == 1.0
    assert gated("", TAGGED, verifier_score=0.0, inner=EXACT, answer="4") == 1.0  # exact_match reads the tag itself
    assert gated("", TAGGED, verifier_score=0.0, inner=f"{__file__}:answer_length", answer_only=True) == 1.0
    with pytest.raises(ValueError, match="answer_only=True needs `inner`"):
        gated("", TAGGED, verifier_score=1.0, answer_only=True)


def test_gate_runs_in_the_worker_pool():
    spec = "rlvr.rewards.shaping:gated"
    fields = {"inner": EXACT, "answer": "4", "answer_only": True, "verifier_score": 0.0}
    with RewardPool(num_workers=1, timeout_s=10) as pool:
        pool.start()
        out = pool.score([RewardRequest(0, spec, "", TAGGED, fields), RewardRequest(1, spec, "", "4", fields)])
    assert (out[0].status, out[0].value) == ("ok", 1.0)
    assert (out[1].status, out[1].value) == ("ok", 0.0)


def test_laser_bonus_goes_only_to_correct_answers_within_the_target():
    def bonus(score: float, tokens: int) -> float:
        return laser_bonus("", "", verifier_score=score, completion_tokens=tokens, target_tokens=100)

    assert (bonus(1.0, 100), bonus(1.0, 101), bonus(0.0, 10), bonus(0.5, 10)) == (1.0, 0.0, 0.0, 0.0)


def kimi(scores: list[float], lengths: list[int], among: str = "all") -> list[float]:
    return group_length_reward([""] * len(scores), [""] * len(scores), verifier_score=scores,
                               completion_tokens=lengths, among=among)


def test_group_length_reward_is_kimis_lambda_over_the_group():
    # lengths 10..50: lambda = 0.5, 0.25, 0, -0.25, -0.5; wrong answers keep only min(0, lambda)
    assert kimi([1, 1, 0, 1, 0], [10, 20, 30, 40, 50]) == pytest.approx([0.5, 0.25, 0.0, -0.25, -0.5])
    assert kimi([0, 1, 1, 1, 1], [10, 20, 30, 40, 50]) == pytest.approx([0.0, 0.25, 0.0, -0.25, -0.5])
    assert kimi([1, 0, 1], [7, 7, 7]) == [0.0, 0.0, 0.0]  # no spread, no length reward


def test_group_length_reward_among_correct_ranks_only_the_correct_answers():
    # bounds from the correct answers (20 and 40); wrong answers get nothing whatever their length
    assert kimi([0, 1, 1, 1, 0], [5, 20, 30, 40, 90], among="correct") == pytest.approx([0.0, 0.5, 0.0, -0.5, 0.0])
    assert kimi([0, 0], [5, 90], among="correct") == [0.0, 0.0]


def test_tool_call_reward_pays_an_episode_whose_every_call_worked():
    from rlvr.config import EnvConfig
    from rlvr.envs.task import EnvTask
    from rlvr.rewards.shaping import tool_call_reward
    from rlvr.tasks import make_task

    task = EnvTask(make_task("arithmetic", 0, {"max_operand": 9, "operators": "*"}),
                   EnvConfig(name="tools", args={"tools": ["calculator"], "call_format": "tags"}))

    def played(*turns: str) -> dict:
        env = task.make_env(task.problem("train", 0))
        for turn in turns:
            env.step(turn)
        return env.metrics()

    assert tool_call_reward("", "6", episode_metrics=played("<calculator>2*3</calculator>", "6")) == 1.0
    assert tool_call_reward("", "6", episode_metrics=played("6")) == 0.0  # answered without a call
    broken = played("<calculator>2*3</calculator>", "<calculator>two times</calculator>", "6")
    assert broken["tool_calls"] == 2 and tool_call_reward("", "6", episode_metrics=broken) == 0.0  # one call failed
    with pytest.raises(ValueError, match="episodes of the `tools` environment"):
        tool_call_reward("", "6", episode_metrics={"attempts": 1})
