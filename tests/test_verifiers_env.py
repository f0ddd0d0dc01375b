"""verifiers (PrimeIntellect, >= 0.4, its v1 API) environments played against the endpoint over the policy: the
task's rewards are the reward, each logged as a term; a rollout verifiers records as failed is a failed episode."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_episodes import RecordingEngine, tiny_chat_policy

from rlvr.config import TaskConfig
from rlvr.envs import make_tasks
from rlvr.errors import ConfigError
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout import SamplingParams
from rlvr.rollout.episodes import EpisodeRunner

pytest.importorskip("verifiers.v1", reason="the verifiers extra: pip install 'rlvr[verifiers]'")

def documented_taskset() -> str:
    """The taskset of docs/environments.md's "verifiers" section, as written."""
    section = (Path(__file__).parents[1] / "docs" / "environments.md").read_text().split("## verifiers")[1]
    return re.findall(r"```python\n(.*?)```", section, re.DOTALL)[0]


@pytest.fixture
def say_taskset(tmp_path, monkeypatch):
    (tmp_path / "rlvr_test_say_taskset.py").write_text(documented_taskset())
    monkeypatch.syspath_prepend(str(tmp_path))
    return "rlvr_test_say_taskset"


def test_a_verifiers_taskset_trains_through_the_endpoint_with_its_rewards_as_terms(say_taskset):
    model, tok = tiny_chat_policy()
    [task] = make_tasks([TaskConfig(name="verifiers", args={"taskset": say_taskset, "eval_size": 1})], 0)
    assert (task.size("train"), task.size("eval"), task.problem("eval", 0).answer) == (19, 1, "19")
    engine = RecordingEngine(model, tok)
    runner = EpisodeRunner(engine, PromptEncoder(tok))
    prompts, groups = runner.generate([(task, task.problem("train", 0))], SamplingParams(n=2, max_new_tokens=6))
    sampled = [c for _, outs in engine.calls for group in outs for c in group]
    for e in groups[0]:
        assert "episode_error" not in e.fields, e.fields
        metrics = e.fields["episode_metrics"]
        # the weighted sum of the task's rewards, each logged as its own term
        assert e.fields["episode_reward"] == metrics["vf_replied"] + 0.5 * metrics["vf_said_answer"]
        assert metrics["calls"] == 1.0 and e.policy_mask.count(True) > 0
        assert [t for t, m in zip(e.token_ids, e.policy_mask) if m] in sampled  # what the engine sampled
    assert "ay 0." in tok.decode(prompts[0])  # the task's prompt (the tiny tokenizer has no capital S)
    assert runner.agents.metrics["endpoint/calls"] == 2


def test_an_unknown_taskset_is_a_config_error():
    with pytest.raises(ConfigError, match="args.taskset='no_such_taskset': verifiers could not load it"):
        make_tasks([TaskConfig(name="verifiers", args={"taskset": "no_such_taskset"})], 0)
