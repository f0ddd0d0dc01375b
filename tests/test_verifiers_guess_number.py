"""Guess-the-number written as a verifiers taskset (rlvr.envs.verifiers_guess_number) plays the native game: the
same problems, and on the same replies the same messages, rewards, metrics and tokens.

Not the same samples: the native runner samples a group's first turns together from the group's generator, an agent
episode (verifiers' rollout through the endpoint) every turn from its own stream, so the two draw different replies
from the same seeds. What follows the replies is compared: each verifiers episode's replies replayed through the
native game and rlvr's own chat rendering give its messages, reward, success, metrics and token ids exactly."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import PROMPT, assert_policy_runs_were_sampled, guess_number_policy
from test_episodes import RecordingEngine

pytest.importorskip("verifiers.v1", reason="the verifiers extra: pip install 'rlvr[verifiers]'")

from rlvr.config import EnvConfig, TaskConfig  # noqa: E402
from rlvr.envs import make_tasks  # noqa: E402
from rlvr.envs.guess_number import GuessNumberEnvironment  # noqa: E402
from rlvr.envs.render import ChatRenderer  # noqa: E402
from rlvr.envs.task import EnvTask  # noqa: E402
from rlvr.models.prompts import PromptEncoder  # noqa: E402
from rlvr.rollout import SamplingParams, group_generator  # noqa: E402
from rlvr.rollout.episodes import EpisodeRunner  # noqa: E402
from rlvr.tasks import make_task  # noqa: E402

RULES = "Guess my number."
TURNS = 3


def verifiers_game(seed: int = 0):
    [task] = make_tasks([TaskConfig(name="verifiers", args={
        "taskset": "rlvr.envs.verifiers_guess_number", "eval_taskset_args": {"split": "eval"},
        "taskset_args": {"high": 20, "eval_size": 40, "prompt": PROMPT, "max_turns": TURNS}})], seed)
    return task


def native_game(seed: int = 0):
    return EnvTask(make_task("guess_number", seed, {"high": 20, "eval_size": 40, "prompt": PROMPT}),
                   EnvConfig(name="guess_number", max_turns=TURNS, max_tokens=400))


def test_the_taskset_holds_the_native_problems_of_each_seed_and_split():
    for seed in (0, 1):
        mine, theirs = verifiers_game(seed), native_game(seed)
        assert (mine.size("train"), mine.size("eval")) == (None, 40) == (theirs.size("train"), theirs.size("eval"))
        for split, count in (("train", 30), ("eval", 40)):
            for i in range(count):
                a, b = mine.problem(split, i), theirs.problem(split, i)
                assert (a.prompt, a.answer) == (b.prompt, b.answer), (seed, split, i)
    assert [verifiers_game(0).problem("train", i).answer for i in range(8)] != \
        [verifiers_game(1).problem("train", i).answer for i in range(8)]  # the run's seed reaches the taskset


def replay(episode, secret: str, renderer: ChatRenderer, prompt_len: int, tok):
    """The native game and rlvr's rendering on this episode's replies: (messages, token ids, policy mask, game)."""
    game = GuessNumberEnvironment(native_game().problem("train", 0), native_game())
    game.secret = int(secret)
    ids, mask, messages = [], [], []
    runs, start = [], 0
    for i in range(1, len(episode.policy_mask) + 1):  # the sampled turns: runs of policy tokens
        if i == len(episode.policy_mask) or episode.policy_mask[i] != episode.policy_mask[start]:
            if episode.policy_mask[start]:
                runs.append(episode.token_ids[start:i])
            start = i
    for turn, sampled in enumerate(runs, 1):
        text = tok.decode(sampled, skip_special_tokens=True)
        ids += sampled
        mask += [True] * len(sampled)
        messages.append({"role": "assistant", "content": text})
        step = game.step(text)
        if step.done or turn == TURNS:
            break
        reply = renderer.continuation(step.messages, sampled)
        ids += reply
        mask += [False] * len(reply)
        messages += step.messages
    return messages, ids, mask, game


def test_verifiers_episodes_are_the_native_game_on_their_replies():
    model, tok = guess_number_policy()
    task = verifiers_game()
    engine = RecordingEngine(model, tok)
    runner = EpisodeRunner(engine, PromptEncoder(tok, system_prompt=RULES))
    work = [(task, task.problem("train", i)) for i in range(3)]
    gens = [group_generator(torch.device("cpu"), 5, g) for g in range(len(work))]
    prompts, groups = runner.generate(work, SamplingParams(n=2, max_new_tokens=3), gens)
    native_prompts, _ = EpisodeRunner(engine, PromptEncoder(tok, system_prompt=RULES)).generate(
        [(native_game(), native_game().problem("train", i)) for i in range(3)], SamplingParams(n=1, max_new_tokens=3))
    assert prompts == native_prompts  # data.system_prompt and the opening, rendered alike
    sampled = {}
    for calls, outs in engine.calls:
        for p, group in zip(calls, outs):
            sampled.setdefault(tuple(p), []).extend(group)
    replies = []
    for prompt, (_, problem), group in zip(prompts, work, groups):
        for ep in group:
            assert "episode_error" not in ep.fields, ep.fields["episode_error"]
            messages, ids, mask, game = replay(ep, problem.answer, runner.renderer, len(prompt), tok)
            opening = [{"role": "system", "content": RULES}, {"role": "user", "content": problem.prompt}]
            assert ep.messages[:2] == opening
            assert ep.messages[2:] == messages
            assert (ep.token_ids, ep.policy_mask) == (ids, mask)
            assert_policy_runs_were_sampled(prompt, ep.token_ids, ep.policy_mask, sampled)
            assert (ep.reward, ep.success) == (float(game.found), game.found)
            metrics = ep.fields["episode_metrics"]
            assert metrics["vf_success"] == ep.reward and metrics["segments"] == 1.0  # one token-exact segment
            for name, value in game.metrics().items():
                assert metrics[name] == value or math.isnan(metrics[name]) and math.isnan(value), name
            replies += [m["content"] for m in messages if m["role"] == "user"]
    assert "Reply with a number." in replies and {"higher", "lower"} & set(replies)  # both kinds of reply


def test_the_shipped_recipe_is_the_native_one_with_the_verifiers_game():
    from pathlib import Path

    from rlvr.config import load_config

    recipes = Path(__file__).resolve().parents[1] / "recipes"
    mine, theirs = (load_config(recipes / f"smollm2_guess_number{name}.yaml", []) for name in ("_verifiers", ""))
    a, b = mine.model_dump(), theirs.model_dump()
    for cfg in (a, b):
        cfg["data"].pop("tasks"), cfg["tracking"].pop("output_dir")
    assert a == b
    [task], [native] = make_tasks(mine.data.tasks, mine.seed), make_tasks(theirs.data.tasks, theirs.seed)
    assert task.config.name == "verifiers" and task.task.taskset_args["max_turns"] == native.config.max_turns
    for split, count in (("train", 8), ("eval", 40)):
        assert [task.problem(split, i).answer for i in range(count)] == \
            [native.problem(split, i).answer for i in range(count)]
