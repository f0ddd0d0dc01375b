"""Collecting a step as registered stages (rlvr.rollout.stages): a registered stage is built from the config and
tasks, called at its hooks in order, generates through the collector's one generation path, and its figures reach
the step's metrics; the asynchronous collector refuses a stage it cannot run, naming the setting and the fix."""

from __future__ import annotations

import inspect
import re
from collections import Counter

import pytest
import torch

import rlvr.rollout.collect
from rlvr.config import build_config
from rlvr.curriculum import CurriculumStats
from rlvr.curriculum.filters import KeepAll
from rlvr.errors import ConfigError
from rlvr.rewards.composite import Scored
from rlvr.rollout.base import Completion, SamplingParams
from rlvr.rollout.collect import make_collector
from rlvr.rollout.stages import COLLECTION_STAGES, CollectionStage, register_stage
from rlvr.rollout.steps import Group
from rlvr.rollout.workers import AsyncCollector
from rlvr.tasks import Problem, make_task
from rlvr.training.trainer import Trainer


class ProbeStage(CollectionStage):
    """Records its hooks; adds one follow-up group per step generated through `draft.generate`."""

    calls: list[tuple] = []

    @classmethod
    def configured(cls, setup):
        return cls() if any(task.label == "stage_probe" for task in setup.tasks) else None

    def after_round(self, draft, round_index, groups):
        self.calls.append(("after_round", draft.step, round_index, len(groups)))
        return groups

    def after_choice(self, draft, trained):
        self.calls.append(("after_choice", draft.step, len(trained)))
        extra, scored = draft.generate(("probe",), [(trained[0].source, trained[0].problem)])
        draft.generated += extra
        draft.scorings.append(scored)
        return trained + extra

    def metrics(self, trained):
        self.calls.append(("metrics", len(trained)))
        return {"probe/trained_groups": len(trained)}


@pytest.fixture
def probe_stage(monkeypatch):
    monkeypatch.setattr(COLLECTION_STAGES, "_items", dict(COLLECTION_STAGES._items))  # the registry as it was after
    register_stage("probe")(ProbeStage)
    ProbeStage.calls = []
    return ProbeStage


def test_a_registered_stage_is_called_at_its_hooks_in_order(fast_config, probe_stage):
    cfg = build_config(fast_config(data={"tasks": [{"name": "arithmetic", "label": "stage_probe",
                                                    "args": {"max_operand": 9}}],
                                         "filter": {"name": "dynamic_sampling"}, "max_sampling_rounds": 2}))
    trainer = Trainer(cfg)
    try:
        assert [stage.name for stage in trainer.collector.stages] == ["probe", "roles"]
        trainer.step = 1
        batch, metrics = trainer.rollout()
    finally:
        trainer.pool.close()
    rounds = metrics["sampling/rounds"]
    assert probe_stage.calls == ([("after_round", 1, r, 4) for r in range(rounds)]
                                 + [("after_choice", 1, 4), ("metrics", 5)])
    assert metrics["probe/trained_groups"] == 5 and len(trainer.last_groups) == 5
    extra = trainer.last_groups[-1]
    assert extra.problem is trainer.last_groups[0].problem and batch.scores.shape[0] == 5 * 4
    # the added group is part of what the step generated: its samples count in the step's scored samples
    assert metrics["sampling/wasted_frac"] == pytest.approx(1 - 5 / (4 * rounds + 1))


def test_the_async_collector_refuses_hints_naming_the_setting_and_the_fix(fast_config):
    cfg = build_config(fast_config(data={"hints": {}}, rollout={"max_staleness": 1}))
    tasks = [make_task("arithmetic", 0, {})]
    with pytest.raises(ConfigError, match=re.escape("data.hints adds the 'hints' stage") + ".*" +
                       re.escape("Set rollout.max_staleness=0, or run without it")):
        make_collector(1, data=cfg.data, tasks=tasks, stats=CurriculumStats(1), params=SamplingParams())


def test_the_async_collector_refuses_a_task_that_derives_problems(fast_config):
    cfg = build_config(fast_config(rollout={"max_staleness": 1}))
    tasks = [make_task("arithmetic", 0, {}), make_task("absolute_zero", 0, {})]
    with pytest.raises(ConfigError, match=re.escape("task absolute_zero (it derives follow-up problems) adds the "
                                                    "'follow_ups' stage") + ".*max_staleness=0"):
        make_collector(1, data=cfg.data, tasks=tasks, stats=CurriculumStats(2), params=SamplingParams())


def test_a_task_still_setting_self_play_is_told_the_new_name():
    from rlvr.tasks.base import Task

    with pytest.raises(TypeError, match="now called derives_problems"):
        type("OldTask", (Task,), {"self_play": True})


def test_the_collector_names_no_mechanism():
    source = inspect.getsource(rlvr.rollout.collect).lower()
    for word in ("hint", "self_play", "self-play", "follow", "role", *COLLECTION_STAGES.names()):
        assert word not in source, word


def test_the_async_collector_runs_the_stages_it_supports_at_their_hooks(probe_stage):
    """The asynchronous collector's loop with its workers stood in for: every received group is a round of its own."""

    class AsyncProbe(ProbeStage):
        supports_async = True

        def after_choice(self, draft, trained):
            assert draft.generate is None  # the workers generate
            self.calls.append(("after_choice", draft.step, len(trained)))
            return trained

    def received(step):
        scored = Scored(torch.ones(2), {}, torch.ones(2, dtype=torch.bool), {"verifier": Counter()}, {}, {})
        return Group(0, Problem("p", "q", role="solver"), [1], [Completion([2], "a", [0.0], False) for _ in range(2)],
                     scored, step - 1)

    collector = AsyncCollector.__new__(AsyncCollector)
    collector.published, collector.last_collected, collector.counts = (0, []), None, {}
    collector.filter, collector.prompts_per_step, collector.max_rounds = KeepAll(), 3, 1
    collector.stages = [AsyncProbe()]
    collector._publish = lambda version: None
    collector._next_group = received
    step = collector.collect(2)
    assert AsyncProbe.calls == [("after_round", 2, 0, 1), ("after_round", 2, 1, 1), ("after_round", 2, 2, 1),
                                ("after_choice", 2, 3), ("metrics", 3)]
    assert step.metrics["probe/trained_groups"] == 3 and len(step.scored.total) == 6
    assert {c.role for g in step.trained for c in g.completions} == {"solver"}  # resolved from the problem
