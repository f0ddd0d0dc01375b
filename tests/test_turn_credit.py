"""Turn-level credit: the formulas on hand-computed episodes, the turn layout the episode runner records, and
single-turn runs bit-identical with turn credit on."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr.algorithms import AdvantageInputs, compute_advantages
from rlvr.algorithms.turn_credit import (
    TURN_CREDIT,
    TurnInputs,
    keyed_normalize,
    step_group_metrics,
    turn_returns,
    turn_token_advantages,
)
from rlvr.config import AlgorithmConfig, RunConfig
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout import SamplingParams
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.training.batch import RolloutBatch
from rlvr.training.trainer import Trainer
from tests.test_episodes import chat_policy, env_task  # noqa: F401  (the fixture)


def cfg(**kw) -> AlgorithmConfig:
    return AlgorithmConfig(advantage_epsilon=0.0, **kw)


def turns(rewards: list[list[float]], groups: list[int], anchors: list[list[str]] | None = None) -> TurnInputs:
    """Episodes given by their turn rewards; each turn is one token (token t of a row is its turn t)."""
    width = max(map(len, rewards))
    r = torch.zeros(len(rewards), width, dtype=torch.float64)
    mask = torch.zeros(len(rewards), width)
    token_turns = torch.full((len(rewards), width), -1)
    for e, row in enumerate(rewards):
        r[e, : len(row)] = torch.tensor(row)
        mask[e, : len(row)] = 1
        token_turns[e, : len(row)] = torch.arange(len(row))
    return TurnInputs(torch.arange(len(rewards)), r, mask, torch.tensor(groups), token_turns,
                      anchors or [["open"] * len(row) for row in rewards])


def test_turn_returns_discount_from_each_turn_on():
    inp = turns([[1.0, 0.0, 2.0], [0.0, 4.0]], [0, 0])
    g = turn_returns(inp.rewards, inp.turn_mask, 0.5)
    # G_2 = 2; G_1 = 0 + 0.5 * 2 = 1; G_0 = 1 + 0.5 * 1 = 1.5. Second episode: G_1 = 4, G_0 = 2; nothing past it.
    assert g.tolist() == [[1.5, 1.0, 2.0], [2.0, 4.0, 0.0]]


def test_returns_credit_gives_each_turn_its_return_against_the_episode_baseline():
    inp = turns([[1.0, 0.0, 2.0], [0.0, 4.0]], [0, 0])
    adv = TURN_CREDIT.get("returns")(inp, cfg(turn_gamma=0.5))
    # Episode returns G_0 = 1.5 and 2: mean 1.75, std (N-1) = sqrt(2 * 0.25**2) = 0.35355.
    std = math.sqrt(2 * 0.25**2)
    expected = [[(1.5 - 1.75) / std, (1.0 - 1.75) / std, (2.0 - 1.75) / std], [(2 - 1.75) / std, (4 - 1.75) / std, 0]]
    assert torch.allclose(adv, torch.tensor(expected, dtype=adv.dtype))


def test_turn_baseline_compares_each_turn_with_the_same_turn_of_the_other_episodes():
    # One prompt, three episodes: solved at once (1); solved at the second attempt (0.5); never (0, 0, 0).
    # Another prompt: one episode of one turn (a singleton: no baseline, no credit).
    inp = turns([[1.0], [0.0, 0.5], [0.0, 0.0, 0.0], [1.0]], [0, 0, 0, 1])
    adv = TURN_CREDIT.get("turn_baseline")(inp, cfg())
    # Turn 0: returns 1, 0.5, 0 -> mean 0.5, std 0.5 -> 1, 0, -1. Turn 1: 0.5, 0 -> mean 0.25, std 0.35355 ->
    # +-0.70711. Turn 2: only the third episode reached it -> 0.
    s = 1 / math.sqrt(2)
    expected = [[1, 0, 0], [0, s, 0], [-1, -s, 0], [0, 0, 0]]
    assert torch.allclose(adv, torch.tensor(expected, dtype=adv.dtype), atol=1e-12)


def test_gigpo_adds_anchor_state_step_groups_to_the_episode_advantage():
    # Three episodes of one prompt. Turns after the same observation ("wrong") form one step group across turn
    # indices; a state seen once ("hint") is a step group of one (A^S = 0).
    inp = turns([[1.0], [0.0, 1.0], [0.0, 0.0, 0.0]], [0, 0, 0],
                anchors=[["open"], ["open", "wrong"], ["open", "wrong", "hint"]])
    adv = TURN_CREDIT.get("gigpo")(inp, cfg(turn_gamma=0.5, gigpo_step_weight=2.0))
    # Episode level on R = sum of rewards: 1, 1, 0 -> mean 2/3, std sqrt(1/3).
    sd = math.sqrt(1 / 3)
    ep = [(1 - 2 / 3) / sd, (1 - 2 / 3) / sd, (0 - 2 / 3) / sd]
    # Returns (gamma 0.5): [1], [0.5, 1], [0, 0, 0]. Step group "open": 1, 0.5, 0 -> mean 0.5, std 0.5 -> 1, 0, -1.
    # Step group "wrong": episode 2 turn 1 (1) and episode 3 turn 1 (0) -> mean 0.5, std 0.70711 -> +-0.70711.
    s = 1 / math.sqrt(2)
    expected = [[ep[0] + 2 * 1, 0, 0], [ep[1] + 0, ep[1] + 2 * s, 0], [ep[2] - 2, ep[2] - 2 * s, ep[2]]]
    assert torch.allclose(adv, torch.tensor(expected, dtype=adv.dtype), atol=1e-12)


def test_keyed_normalize_and_token_broadcast():
    values = torch.tensor([1.0, 3.0, 5.0, 7.0])
    out = keyed_normalize(values, ["a", "b", "a", "c"], unbiased=False, eps=0.0)
    assert out.tolist() == [-1.0, 0.0, 1.0, 0.0]
    per_turn = torch.tensor([[0.5, -2.0]])
    token_turns = torch.tensor([[0, 0, -1, -1, 1, -1]])
    assert turn_token_advantages(per_turn, token_turns).tolist() == [[0.5, 0.5, 0.0, 0.0, -2.0, 0.0]]


def test_single_turn_episodes_with_returns_credit_are_grpo_exactly():
    scores = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0])
    mask = torch.ones(5, 3)
    inp = turns([[s] for s in scores.tolist()], [0, 0, 0, 1, 1])
    inp.token_turns = torch.zeros(5, 3, dtype=torch.long)
    inp.rewards = inp.rewards.float()
    plain = AdvantageInputs(scores=scores, group_ids=inp.group_ids, mask=mask)
    grpo, _ = compute_advantages(plain, AlgorithmConfig())
    credited, _ = compute_advantages(AdvantageInputs(scores=scores, group_ids=inp.group_ids, mask=mask, turns=inp),
                                     AlgorithmConfig(turn_credit="returns"))
    assert torch.equal(grpo, credited)


def test_turn_baseline_is_grpo_when_every_episode_plays_the_same_turns_with_the_reward_at_the_end():
    # The tool-use shape (docs/results.md): every episode calls the tool and answers, 2 turns, outcome on the last.
    # Every turn's return is the score and every turn index holds the whole group, so the per-turn baseline is
    # GRPO's: turn credit changes nothing there (it does once episode lengths differ).
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    groups = [0, 0, 0, 0, 1, 1, 1, 1]
    inp = turns([[0.0, s] for s in scores.tolist()], groups)
    inp.rewards = inp.rewards.float()
    grpo, _ = compute_advantages(AdvantageInputs(scores=scores, group_ids=inp.group_ids, mask=torch.ones(8, 2)),
                                 AlgorithmConfig())
    per_turn = TURN_CREDIT.get("turn_baseline")(inp, AlgorithmConfig())
    assert torch.allclose(per_turn, grpo, atol=1e-6)
    # Scores 1, 0, 0, 1 again, but two episodes end after one turn: GRPO gives the second turns +-0.866 (std over
    # 4 episodes); the per-turn baseline compares the two second turns alone, +-0.707.
    unequal = turns([[0.0, 1.0], [0.0], [0.0, 0.0], [1.0]], [0, 0, 0, 0])
    s = 1 / math.sqrt(2)
    assert torch.allclose(TURN_CREDIT.get("turn_baseline")(unequal, AlgorithmConfig())[:, 1],
                          torch.tensor([s, 0.0, -s, 0.0], dtype=torch.float64), atol=1e-6)


def test_episode_runner_records_turns_and_the_trainer_reads_them(chat_policy):  # noqa: F811
    from rlvr.training.advantages import episode_turns

    model, tok = chat_policy
    runner = EpisodeRunner(HFRolloutEngine(model, tok), PromptEncoder(tok))
    task = env_task("try_again", max_turns=3, max_tokens=40, args={"attempts": 3})
    work = [(task, task.problem("train", i)) for i in range(2)]
    prompts, groups = runner.play(work, SamplingParams(n=3, max_new_tokens=4))
    flat = [c for g in groups for c in g]
    assert any(c.turns > 1 for c in flat)
    batch = RolloutBatch.from_completions(prompts, groups, tok.pad_token_id, [{}, {}])
    batch.scores = torch.tensor([c.reward for c in flat]) + 0.25  # shaping on top of the episode reward
    inp = episode_turns(flat, batch)
    assert inp.rows.tolist() == list(range(6))
    assert torch.allclose(inp.rewards.sum(-1), batch.scores)  # the rest of the score sits on the last turn
    for e, c in enumerate(flat):
        assert len(c.turn_starts) == len(c.anchors) == len(c.turn_rewards) == c.turns
        assert c.anchors[0] == flat[e // 3 * 3].anchors[0]  # the group's opening
        opening = json.loads(c.anchors[0])
        for t, anchor in enumerate(c.anchors):  # the whole conversation before turn t, never its last reply alone
            assert json.loads(anchor) == opening + c.messages[: 2 * t]
        policy = torch.tensor(c.policy_mask)
        tt = inp.token_turns[e, : len(c.token_ids)]
        assert ((tt >= 0) == policy).all() and (inp.token_turns[e, len(c.token_ids):] == -1).all()
        for t, start in enumerate(c.turn_starts):  # turn t's sampled tokens start at its start
            assert tt[start] == t
        assert tt[policy].tolist() == sorted(tt[policy].tolist())


def test_single_turn_task_trains_bit_identically_with_turn_credit_on(fast_config, tmp_path):
    params = {}
    for turn_credit in (None, "gigpo"):
        trainer = Trainer(RunConfig.model_validate(fast_config(
            steps=2, algorithm={"turn_credit": turn_credit}, tracking={"output_dir": str(tmp_path / str(turn_credit))})))
        trainer.fit()
        params[turn_credit] = trainer.model.state_dict()
    assert all(torch.equal(params[None][k], params["gigpo"][k]) for k in params[None])


@pytest.mark.parametrize("credit", ["turn_baseline", "gigpo"])
def test_an_environment_task_trains_with_turn_credit(fast_config, credit):
    task = {"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10},
            "env": {"name": "try_again", "max_turns": 3, "max_tokens": 24}}
    trainer = Trainer(RunConfig.model_validate(fast_config(data={"tasks": [task]}, steps=1,
                                                           algorithm={"turn_credit": credit})))
    batch, metrics = trainer.rollout()
    if credit == "gigpo":  # the step groups it formed are logged: at least the group's first turns share one
        assert metrics["credit/step_group_size_max"] >= 2 and 0 <= metrics["credit/singleton_step_groups"] < 1
    else:
        assert not any(k.startswith("credit/") for k in metrics)
    env_tokens = (batch.attention_mask[:, -batch.completion_width:] > 0) & (batch.completion_mask == 0)
    assert (batch.advantages[env_tokens] == 0).all()
    assert math.isfinite(trainer.update(batch)["actor/loss"])
    trainer.pool.close()


def guess_env(secret: int = 15):
    from rlvr.envs.guess_number import GuessNumberEnvironment, GuessNumberTask
    from rlvr.tasks.base import Problem

    task = GuessNumberTask(high=20)
    return GuessNumberEnvironment(Problem(uid="g", prompt=task.prompt.format(high=20), answer=str(secret)), task)


def test_anchor_states_never_collapse_different_histories_into_one_state():
    """GiGPO's anchor state is the environment state a turn starts from: two turns that heard the same reply after
    different play are different states (the last reply alone would make them one step group)."""
    from rlvr.envs.try_again import TryAgainEnvironment

    opening = [{"role": "user", "content": "What is 2 + 2?"}]
    said = [{"role": "assistant", "content": "5"}, {"role": "user", "content": "Incorrect. Try again."}]
    other = [{"role": "assistant", "content": "3"}, {"role": "user", "content": "Incorrect. Try again."}]
    key = TryAgainEnvironment.state_key  # an environment without its own: the default, the whole history
    assert key(None, opening + said) != key(None, opening + other)
    assert key(None, opening + said) == key(None, [dict(m) for m in opening + said])
    # guess-the-number names its state exactly: the interval the replies leave open
    a, b = guess_env(), guess_env()
    a.step("5"), b.step("9")  # both hear "higher"
    assert a.state_key([]) == (6, 20) and b.state_key([]) == (10, 20)
    a.step("9"), b.step("5")  # ... and reach one state by two paths: one step group
    assert a.state_key([]) == b.state_key([]) == (10, 20)
    b.step("17")  # "lower"
    assert b.state_key([]) == (10, 16)


def test_step_group_metrics_count_the_groups_gigpo_formed():
    inp = turns([[0.0, 1.0], [0.0, 0.0], [1.0]], [0, 0, 1], anchors=[["o", "x"], ["o", "y"], ["o"]])
    # group 0: its two first turns share "o", "x" and "y" are alone; group 1: one turn
    assert step_group_metrics(inp) == {"credit/step_group_size_mean": 5 / 4, "credit/step_group_size_max": 2.0,
                                       "credit/singleton_step_groups": 3 / 4}
