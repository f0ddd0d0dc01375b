"""Rollout workers as Ray actors (cluster.ray_address): weights arrive by broadcast, an episode task trains within
the staleness bound, and a killed actor is replaced with nothing trained twice. A local Ray cluster of 3 CPUs is
started by the test."""

from __future__ import annotations

import json

import pytest
import torch

ray = pytest.importorskip("ray", reason="Ray rollout workers need the 'ray' extra")

from conftest import local_ray_cluster  # noqa: E402

from rlvr.config import build_config  # noqa: E402
from rlvr.rollout.ray_workers import RayActorProcess  # noqa: E402
from rlvr.training.trainer import Trainer  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray():
    with local_ray_cluster(num_cpus=3):
        yield


def test_killed_ray_actor_is_replaced_and_nothing_is_trained_twice(fast_config, local_ray):
    tasks = [{"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10}},
             {"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10}, "label": "episodes",
              "env": {"name": "try_again", "max_turns": 2, "max_tokens": 24}}]
    cfg = build_config(fast_config(steps=4, rollout={"max_staleness": 1, "batch_size": 4, "num_workers": 2},
                                   data={"tasks": tasks}, cluster={"ray_address": "auto"},
                                   rewards={"backend": "local"}))
    trainer = Trainer(cfg)
    collector = trainer.collector
    assert all(isinstance(w.process, RayActorProcess) for w in collector.workers)
    trained, killed = [], []
    collect, top_up = collector.collect, collector._top_up

    def recording(step):
        out = collect(step)
        trained.extend(out.trained)
        if step == 1:  # every actor holds exactly the trainer's weights after a broadcast
            collector._publish(step)
            expected = trainer.model.state_dict()
            for index in range(2):
                version, weights = collector.worker_weights(index)
                assert version == step and all(torch.equal(weights[k], expected[k]) for k in expected)
        return out

    def top_up_then_kill():
        """At step 2, right after new jobs were sent: kill an actor with jobs outstanding."""
        top_up()
        busy = [w for w in collector.workers if w.outstanding]
        if len(trained) == cfg.data.prompts_per_step and not killed and busy:
            killed.append(set(busy[0].outstanding))
            ray.kill(busy[0].process.actor, no_restart=True)

    collector.collect, collector._top_up = recording, top_up_then_kill
    trainer.fit()
    assert killed
    rows = [json.loads(line) for line in (trainer.out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and rows[-1]["async/worker_restarts"] == 1
    assert rows[-1]["async/regenerated_groups"] >= len(killed[0])
    assert len(trained) == 16 and len({id(g) for g in trained}) == 16
    assert max(r["policy/staleness_max"] for r in rows) <= 1
    assert any(g.source == 1 and g.completions[0].turns >= 1 for g in trained)  # episodes ran on the actors
