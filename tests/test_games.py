"""Games played as episodes: FrozenLake (legal moves, the grid it answers with, solvable held-out maps, token-exact
episodes) and guess-the-number's feedback measures."""

from __future__ import annotations

import math
import time

import pytest
import torch

from rlvr.config import RunConfig, TinyModelConfig
from rlvr.envs import make_tasks
from rlvr.envs.frozen_lake import EDGE, INVALID, RULES, distances_to_goal, parse_lake, render, score
from rlvr.envs.task import EnvTask
from rlvr.errors import ConfigError
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout import SamplingParams
from rlvr.rollout.base import Completion
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.tasks.base import Problem
from rlvr.training.batch import RolloutBatch

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
# S at the top left, a hole right of it, the goal at the bottom right.
LAKE = "SHF/FFF/HFG"


def game(name: str, seed: int = 0, env: dict | None = None, **args) -> EnvTask:
    entry = {"name": name, "args": args, **({"env": {"name": name, **env}} if env else {})}
    (task,) = make_tasks(RunConfig.model_validate({"data": {"tasks": [entry]}}).data.tasks, seed)
    assert isinstance(task, EnvTask)  # the game names its own environment
    return task


def lake_problem(lake: str = LAKE) -> Problem:
    rows = parse_lake(lake)
    return Problem(uid="lake", prompt=f"{RULES}\n\n{render(rows, (0, 0))}", answer=lake)


def lake_env(lake: str = LAKE):
    return game("frozen_lake", size=3).make_env(lake_problem(lake))


def test_moves_follow_the_grid_and_the_reply_is_the_grid_after_the_move():
    env = lake_env()
    reply = env.step("I will go Down, then right")  # the first move named counts
    assert not reply.done and reply.messages == [{"role": "user", "content": "_ O _\nP _ _\nO _ G"}]
    reply = env.step("left")  # off the lake: the player stays, and is told so
    assert reply.messages[0]["content"] == f"{EDGE}\n_ O _\nP _ _\nO _ G"
    assert env.step("jump!").messages == [{"role": "user", "content": INVALID}]  # no move named: nothing moves
    assert env.step("RIGHT").messages[0]["content"] == "_ O _\n_ P _\nO _ G"
    assert env.step("Down").messages[0]["content"] == "_ O _\n_ _ _\nO P G"
    assert env.step("Right").done and env.outcome().success and env.outcome().reward == 1.0
    metrics = env.metrics()
    assert metrics["moves"] == 5 and metrics["invalid_moves"] == 1 and metrics["fell"] == 0.0
    assert metrics["closer"] == pytest.approx(4 / 5)  # every move but the one off the edge got closer
    assert metrics["moves_to_success"] == 5.0 and metrics["shortest"] == 4.0


def test_a_hole_ends_the_episode_as_a_failure():
    env = lake_env()
    assert env.step("Right").done  # into the hole right of the start
    assert not env.outcome().success and env.outcome().reward == 0.0
    metrics = env.metrics()
    assert metrics["fell"] == 1.0 and metrics["closer"] == 0.0 and math.isnan(metrics["moves_to_success"])
    assert math.isnan(lake_env().metrics()["closer"])  # no move yet: outside the population


def test_maps_are_solvable_deterministic_and_held_out():
    task = game("frozen_lake", size=4, hole_fraction=0.3, min_distance=3, eval_size=20)
    held_out = {task.problem("eval", i).answer for i in range(20)}
    for split in ("train", "eval"):
        for i in range(20):
            p = task.problem(split, i)
            rows = parse_lake(p.answer)
            start = next((r, c) for r, row in enumerate(rows) for c, x in enumerate(row) if x == "S")
            assert distances_to_goal(rows)[start] >= 3  # the goal is reachable, at least 3 moves away
            assert p.prompt == f"{RULES}\n\n{render(rows, start)}" and p == task.problem(split, i)
            assert split == "eval" or p.answer not in held_out
    other = game("frozen_lake", seed=1, size=4, hole_fraction=0.3, min_distance=3, eval_size=20)
    assert [other.problem("train", i).answer for i in range(20)] != [task.problem("train", i).answer for i in range(20)]
    assert [other.problem("eval", i).answer for i in range(20)] == [task.problem("eval", i).answer for i in range(20)]


def test_bad_maps_and_arguments_are_refused():
    with pytest.raises(ValueError, match="not a FrozenLake map"):
        parse_lake("SFF/FG")
    with pytest.raises(ValueError, match="one S and one G"):
        parse_lake("SFF/FFF/FFF")
    with pytest.raises(ConfigError, match="data.tasks\\[\\].args.*min_distance"):
        game("frozen_lake", size=3, min_distance=9)


def test_a_whole_plan_in_one_turn_is_judged_by_walking_it():
    assert score("", "Down, Right, Right, Down", answer=LAKE) == 1.0
    assert score("", "down right down right", answer=LAKE) == 1.0
    assert score("", "Right Down Down Right", answer=LAKE) == 0.0  # the hole first
    assert score("", "Down Right", answer=LAKE) == 0.0  # not there yet
    assert score("", "no idea", answer=LAKE) == 0.0


def chat_game_tokenizer(task: EnvTask):
    tok = train_tokenizer(list(task.corpus(50)) + ["user assistant Up Down Left Right"], 160)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token = "<|im_end|>"
    tok.chat_template = CHATML
    return tok


class ScriptedPolicy:
    """The engine contract (prompts in, n continuations each out) with the turns written in advance: each call
    continues every episode with its next scripted turn (its token ids and the end token), logprob 0. It stands for
    a policy that plays moves, which a tiny random model never does; the episode runner around it is under test."""

    def __init__(self, tok, turns: list[str]):
        self.tok, self.turns, self.calls = tok, turns, 0

    def generate(self, prompts, params, generators=None):
        ids = self.tok(self.turns[self.calls], add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id]
        self.calls += 1
        return [[Completion(list(ids), self.turns[self.calls - 1], [0.0] * len(ids), False)
                 for _ in range(params.n)] for _ in prompts]


def test_an_episode_is_the_templates_rendering_of_its_moves_and_grids():
    task = game("frozen_lake", env={"max_turns": 6, "max_tokens": 300}, size=3)
    problem = lake_problem()
    tok = chat_game_tokenizer(task)
    runner = EpisodeRunner(ScriptedPolicy(tok, ["Down", "fly", "Right", "Down", "Right"]), PromptEncoder(tok))
    (prompt,), ((episode,),) = runner.play([(task, problem)], SamplingParams(n=1, max_new_tokens=8))
    assert episode.success and episode.turns == 5
    assert [m["content"] for m in episode.messages[1::2]] == [
        "_ O _\nP _ _\nO _ G", INVALID, "_ O _\n_ P _\nO _ G", "_ O _\n_ _ _\nO P G"]
    conversation = [{"role": "user", "content": problem.prompt}, *episode.messages]
    # The ids decode to the whole conversation as the template renders it (the last end token is the model's).
    rendered = tok.apply_chat_template(conversation, tokenize=False)
    assert tok.decode(prompt + episode.token_ids) + "\n" == rendered
    # Policy tokens are exactly the moves and their end tokens; every grid and template token is the environment's.
    policy = [t for t, mine in zip(episode.token_ids, episode.policy_mask) if mine]
    assert tok.decode(policy) == "Down<|im_end|>fly<|im_end|>Right<|im_end|>Down<|im_end|>Right<|im_end|>"
    # GiGPO's anchor states: where the player stands before each turn (the invalid reply left it in place)
    assert episode.anchors == [(0, 0), (1, 0), (1, 0), (1, 1), (2, 1)]


def test_sampled_frozen_lake_episodes_are_trained_on_their_sampled_ids():
    task = game("frozen_lake", env={"max_turns": 3, "max_tokens": 200}, size=3, eval_size=4)
    tok = chat_game_tokenizer(task)
    torch.manual_seed(0)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), tok, 0)
    engine = HFRolloutEngine(model.eval(), tok)
    runner = EpisodeRunner(engine, PromptEncoder(tok))
    work = [(task, task.problem("train", i)) for i in range(2)]
    prompts, groups = runner.play(work, SamplingParams(n=3, max_new_tokens=6))
    batch = RolloutBatch.from_completions(prompts, groups, tok.pad_token_id, [{}] * len(groups))
    row, multi_turn = 0, 0
    for prompt, group in zip(prompts, groups):
        for ep in group:
            real = batch.attention_mask[row].bool()
            assert batch.input_ids[row][real].tolist() == prompt + ep.token_ids
            assert batch.completion_mask[row, : len(ep.token_ids)].bool().tolist() == ep.policy_mask
            multi_turn += ep.turns > 1
            row += 1
    assert multi_turn  # random moves (or none) got the environment's reply and another turn


def test_guess_the_number_measures_whether_guesses_use_the_replies():
    task = game("guess_number", high=100, prompt="Pick a number from 1 to {high}; I answer higher or lower.")
    problem = task.problem("train", 0)
    assert problem.prompt == "Pick a number from 1 to 100; I answer higher or lower."
    problem.answer = "40"
    env = task.make_env(problem)
    for guess, reply in (("50", "lower"), ("I say 60", "lower"), ("30", "higher"), ("hm", "Reply with a number."),
                         ("30", "higher"), ("45", "lower")):
        assert env.step(guess).messages[0]["content"] == reply
    assert env.step("40").done and env.outcome().success
    metrics = env.metrics()
    # Later guesses: 60 (above a 'lower' 50: no), 30 (yes), 30 again (not above the 30 answered 'higher': no),
    # 45 (above 30, below 50 and 60: yes), 40 (yes)
    assert metrics["consistent"] == pytest.approx(3 / 5) and metrics["repeated"] == pytest.approx(1 / 5)
    assert metrics["guesses"] == 7 and metrics["guesses_to_success"] == 7.0
    once = task.make_env(problem)
    once.step("10")
    assert math.isnan(once.metrics()["consistent"]) and math.isnan(once.metrics()["guesses_to_success"])
    with pytest.raises(ConfigError, match="prompt must name the range"):
        game("guess_number", prompt="Guess my number.")


@pytest.mark.parametrize("name", ["smollm2_tool_use", "smollm2_guess_number", "smollm2_frozen_lake"])
def test_the_real_model_agent_recipes_build_their_episode_tasks(name):
    from pathlib import Path

    from rlvr.config import load_config

    cfg = load_config(Path(__file__).resolve().parent.parent / "recipes" / f"{name}.yaml", [])
    (task,) = make_tasks(cfg.data.tasks, cfg.seed)
    assert isinstance(task, EnvTask) and cfg.model.name == "smollm2-135m-instruct"
    env = task.make_env(task.problem("eval", 0))
    if name == "smollm2_tool_use":  # the tool is taught by the system prompt alone, with one example call
        assert cfg.data.system_prompt.count("<calculator>") == 2 and cfg.rollout.stop == ["</calculator>"]
        assert env.step("<calculator>12*34</calculator>").messages[0]["content"] == "408"


def test_the_runner_counts_the_seconds_spent_in_environments(monkeypatch):
    from rlvr.envs.frozen_lake import FrozenLakeEnvironment

    task = game("frozen_lake", env={"max_turns": 6, "max_tokens": 300}, size=3)
    tok = chat_game_tokenizer(task)
    step = FrozenLakeEnvironment.step

    def slow_step(self, text):
        time.sleep(0.05)
        return step(self, text)

    monkeypatch.setattr(FrozenLakeEnvironment, "step", slow_step)
    runner = EpisodeRunner(ScriptedPolicy(tok, ["Down", "fly", "Right", "Down", "Right"]), PromptEncoder(tok))
    started = time.perf_counter()
    runner.play([(task, lake_problem())], SamplingParams(n=2, max_new_tokens=8))
    # 2 episodes x 5 turns x 50 ms in the environment, and the whole play took longer than that
    assert 0.5 <= runner.env_s <= time.perf_counter() - started
