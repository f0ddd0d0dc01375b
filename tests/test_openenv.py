"""OpenEnv environments (env: openenv) in process, served by rlvr with OpenEnv's app factory, and at a base URL:
the same episodes as the native game, token-exact; the action parse; the failures of a server and of a schema."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest
import torch
from conftest import (
    PROMPT,
    assert_policy_runs_were_sampled,
    assert_rollout_logprobs_match_a_full_forward,
    guess_number_policy,
)

pytest.importorskip("openenv.core", reason="OpenEnv is not installed: pip install 'rlvr[openenv]' (make install does)")

from openenv.core.env_server import Action  # noqa: E402
from pydantic import ConfigDict  # noqa: E402

from rlvr.config import EnvConfig, RunConfig  # noqa: E402
from rlvr.envs.openenv_adapter import ActionSchema, InvalidAction, Server, observation_text  # noqa: E402
from rlvr.envs.openenv_guess_number import GuessAction, GuessNumberEnvironment, GuessObservation  # noqa: E402
from rlvr.envs.task import EnvTask  # noqa: E402
from rlvr.errors import ConfigError, RlvrError  # noqa: E402
from rlvr.models.prompts import PromptEncoder  # noqa: E402
from rlvr.rollout import SamplingParams, group_generator  # noqa: E402
from rlvr.rollout.episodes import EpisodeRunner  # noqa: E402
from rlvr.rollout.hf import HFRolloutEngine  # noqa: E402
from rlvr.tasks import make_task  # noqa: E402
from rlvr.training.batch import RolloutBatch  # noqa: E402

GAME = "rlvr.envs.openenv_guess_number:GuessNumberEnvironment"


def openenv_args(**more) -> dict:
    return {"environment": GAME, "env_args": {"high": 20}, "reset_fields": {"secret": "answer"},
            "invalid_action": "Reply with a number.", **more}


def game(env: str = "openenv", **args) -> EnvTask:
    task = make_task("guess_number", 0, {"high": 20, "prompt": PROMPT})
    return EnvTask(task, EnvConfig(name=env, max_turns=4, max_tokens=40, args=args))


@pytest.fixture(scope="module")
def policy():
    return guess_number_policy()


def play(policy, task: EnvTask, problems: int = 3, n: int = 4):
    model, tok = policy
    calls: dict[tuple[int, ...], list[list[int]]] = {}

    class Recording(HFRolloutEngine):
        def generate(self, prompts, params, generators=None):
            out = super().generate(prompts, params, generators)
            for p, group in zip(prompts, out):
                calls.setdefault(tuple(p), []).extend(c.token_ids for c in group)
            return out

    runner = EpisodeRunner(Recording(model, tok), PromptEncoder(tok))
    work = [(task, task.problem("train", i)) for i in range(problems)]
    gens = [group_generator(torch.device("cpu"), 5, g) for g in range(problems)]
    prompts, groups = runner.play(work, SamplingParams(n=n, max_new_tokens=3), gens)
    return prompts, groups, calls


def test_in_process_and_served_play_the_native_games_token_for_token(policy):
    native = play(policy, game("guess_number"))
    in_process = play(policy, game(**openenv_args()))
    served = play(policy, game(**openenv_args(mode="served")))
    for prompts, groups, _ in (in_process, served):
        assert prompts == native[0]
        for mine, theirs in zip(sum(groups, []), sum(native[1], [])):
            assert (mine.token_ids, mine.policy_mask, mine.messages) == \
                (theirs.token_ids, theirs.policy_mask, theirs.messages)
            assert (mine.reward, mine.success) == (theirs.reward, theirs.success)
    replies = [m["content"] for ep in sum(served[1], []) for m in ep.messages if m["role"] == "user"]
    assert "Reply with a number." in replies and {"higher", "lower"} & set(replies)  # valid and unparsable replies
    for ep, twin in zip(sum(served[1], []), sum(native[1], [])):  # each stepped turn without a number is counted
        stepped = int(twin.fields["episode_metrics"]["guesses"])  # the native game's count of turns it answered
        turns = [m["content"] for m in ep.messages if m["role"] == "assistant"][:stepped]
        no_number = sum(re.search(r"\d", t) is None for t in turns)
        assert ep.fields["episode_metrics"]["invalid_actions"] == no_number


def test_served_episodes_are_token_exact_and_environment_tokens_masked(policy):
    model, tok = policy
    prompts, groups, calls = play(policy, game(**openenv_args(mode="served")))
    batch = RolloutBatch.from_completions(prompts, groups, tok.pad_token_id, [{}] * len(groups))
    row = 0
    for prompt, group in zip(prompts, groups):
        for ep in group:
            real = batch.attention_mask[row].bool()
            assert batch.input_ids[row][real].tolist() == prompt + ep.token_ids
            assert batch.completion_mask[row, : len(ep.token_ids)].bool().tolist() == ep.policy_mask
            assert_policy_runs_were_sampled(prompt, ep.token_ids, ep.policy_mask, calls)
            row += 1
    assert_rollout_logprobs_match_a_full_forward(model, batch)


class MoveAction(Action):
    direction: str
    steps: int = 1


class Blob:
    pass


class BlobAction(Action):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    blob: Blob


def test_a_reply_becomes_an_action_by_the_schema():
    guess = ActionSchema.of_model(GuessAction)
    assert guess.parse("7") == {"guess": 7}
    assert guess.parse("I think it is 12.") == {"guess": 12}
    assert guess.parse('Sure: ```json\n{"guess": 3}\n```') == {"guess": 3}
    for bad, why in (("no idea", "no integer"), ('{"guess": "many"}', "guess"), ('{"number": 3}', "missing guess")):
        with pytest.raises(InvalidAction, match=why):
            guess.parse(bad)
    move = ActionSchema.of_model(MoveAction)
    assert move.parse('{"direction": "left", "steps": 2}') == {"direction": "left", "steps": 2}
    with pytest.raises(InvalidAction, match="no JSON object"):
        move.parse("left")  # two fields: a JSON object only
    assert "JSON object" in move.expected and "direction" in move.expected


def test_observations_render_as_one_message():
    assert observation_text({"message": "higher"}, None) == "higher"  # the only field
    assert observation_text({"board": [[0, 1]], "turn": "x"}, None) == '{"board": [[0, 1]], "turn": "x"}'
    assert observation_text({"board": [[0, 1]], "turn": "x"}, "turn") == "x"
    with pytest.raises(RlvrError, match="no field 'grid'.*board, turn"):
        observation_text({"board": [[0, 1]], "turn": "x"}, "grid")
    env = game(**openenv_args(opening="prompt")).make_env(make_task("guess_number", 0, {"high": 20}).problem("eval", 0))
    assert env.reset() == [{"role": "user", "content": "Guess my number from 1 to 20."}]  # the problem's own prompt


def test_an_action_schema_rlvr_cannot_parse_into_is_named_at_start():
    with pytest.raises(ConfigError, match="BlobAction field 'blob'.*no JSON form"):
        game(**openenv_args(action="test_openenv:BlobAction"))
    with pytest.raises(ConfigError, match="exactly one of.*environment.*base_url"):
        game(reset_fields={})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_down_at_start_and_a_port_in_use_are_named():
    port = free_port()
    with pytest.raises(ConfigError, match=f"No OpenEnv server answers at http://127.0.0.1:{port}.*Start it"):
        game(base_url=f"http://127.0.0.1:{port}")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        with pytest.raises(ConfigError, match=f"127.0.0.1:{taken}.*env.args.port"):
            game(**openenv_args(mode="served", port=taken))
    with pytest.raises(ConfigError, match="SingleSessionGuess does not declare SUPPORTS_CONCURRENT_SESSIONS"):
        game(**openenv_args(environment="test_openenv:SingleSessionGuess", mode="served"))


class SingleSessionGuess(GuessNumberEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = False


class SlowGuessEnvironment(GuessNumberEnvironment):
    """Hangs on a guess of 13."""

    def step(self, action, timeout_s=None, **kwargs):
        if action.guess == 13:
            time.sleep(3.0)
        return super().step(action)


def test_a_server_that_hangs_or_dies_fails_the_episode_and_the_rollout_goes_on(caplog):
    task = game(**openenv_args(environment="test_openenv:SlowGuessEnvironment", action=None, mode="served",
                               step_timeout_s=0.5, max_consecutive_failures=3))
    problem = task.problem("train", 0)
    hung, other = task.make_envs(problem, 2)
    hung.reset(), other.reset()
    start = time.monotonic()
    assert hung.step("13").done and time.monotonic() - start < 2.5  # its limit, 0.5 s, not the 3 s hang
    assert hung.outcome().reward == 0.0 and hung.metrics()["env_failed"] == 1.0
    assert re.search(r"OpenEnv episode failed \(\d+ so far, 1 in a row\): step: no answer within 0.5 s", caplog.text)
    assert other.step(problem.answer).done and other.outcome().success  # the other episode goes on
    hung.close(), other.close()
    # A server that dies: every episode on it fails, and enough in a row stop the run with the cause.
    server = Server(GuessNumberEnvironment, GuessNumberEnvironment, GuessAction, GuessObservation, 0, 8)
    task = game(base_url=server.base_url, reset_fields={"secret": "answer"}, max_consecutive_failures=2)
    envs = task.make_envs(problem, 2)
    for env in envs:
        env.reset()
    assert envs[0].step('{"guess": "many"}').messages[0]["content"].startswith("Invalid action (Server error")
    server.server.should_exit = True
    server.thread.join(10)
    assert envs[0].step("4").done and envs[0].metrics()["env_failed"] == 1.0
    with pytest.raises(RlvrError, match=re.escape(f"2 OpenEnv episodes in a row failed ({server.base_url})")):
        envs[1].step("4")


def test_the_docs_example_trains_through_the_trainer(fast_config, tmp_path):
    import math

    import yaml

    from rlvr.training.trainer import Trainer

    text = (Path(__file__).parent.parent / "docs" / "environments.md").read_text()
    section = text.split("## OpenEnv", 1)[1].split("\n## ", 1)[0]
    example = yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))
    config = {**fast_config(**example), "steps": 1}  # the example as written, for one step
    config["tracking"]["output_dir"] = str(tmp_path / "run")
    trainer = Trainer(RunConfig.model_validate(config))
    batch, metrics = trainer.rollout()
    env_tokens = (batch.attention_mask[:, -batch.completion_width :] > 0) & (batch.completion_mask == 0)
    assert env_tokens.any() and (batch.loss_mask[env_tokens] == 0).all()
    assert "reward/verifier/invalid_actions" in metrics and metrics["reward/verifier/env_failed"] == 0
    assert math.isfinite(trainer.update(batch)["actor/loss"])
    trainer.pool.close()
