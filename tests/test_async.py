"""The asynchronous pipeline: policy versions, the staleness bound, weight broadcast, a killed rollout worker; and
the synchronous loop with scoring overlapped with generation."""

import json
import os
import signal
from dataclasses import replace

import pytest
import torch

from rlvr.config import build_config
from rlvr.errors import ConfigError
from rlvr.rollout.workers import AsyncCollector
from rlvr.training.trainer import Trainer


def _rows(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _params(trainer):
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


def test_overlapped_scoring_keeps_the_synchronous_loop_exact(fast_config, tmp_path):
    """max_staleness=0 is the synchronous loop: scoring each engine batch while the next is generated (batch_size 4
    = one group per engine batch) trains exactly the parameters that scoring after the last batch does (one batch
    of 256), and every sample is stamped with the version that generated it (staleness 0)."""
    runs = {}
    for batch_size in (4, 256):
        cfg = build_config(fast_config(steps=3, rollout={"batch_size": batch_size},
                                       tracking={"output_dir": str(tmp_path / f"b{batch_size}")}))
        trainer = Trainer(cfg)
        trainer.fit()
        runs[batch_size] = _params(trainer)
        rows = _rows(tmp_path / f"b{batch_size}")
        assert [r["policy/staleness_max"] for r in rows] == [0, 0, 0]
        assert [r["policy/version"] for r in rows] == [0, 1, 2]
    assert runs[4].keys() == runs[256].keys()
    assert all(torch.equal(runs[4][k], runs[256][k]) for k in runs[4])


@pytest.mark.parametrize("k", [1, 2])
def test_no_trained_sample_is_older_than_max_staleness(fast_config, k, capsys):
    cfg = build_config(fast_config(steps=5, rollout={"max_staleness": k, "batch_size": 4},
                                   algorithm={"rollout_correction": "tis"}))
    trainer = Trainer(cfg)
    assert isinstance(trainer.collector, AsyncCollector)
    seen = []
    collect = trainer.collector.collect

    def recording(step):
        out = collect(step)
        seen.append((step, [g.version for g in out.trained]))
        return out

    trainer.collector.collect = recording
    trainer.fit()
    ages = [step - 1 - v for step, versions in seen for v in versions]
    assert [step for step, _ in seen] == [1, 2, 3, 4, 5]
    assert all(len(versions) == cfg.data.prompts_per_step for _, versions in seen)
    assert min(ages) >= 0 and max(ages) <= k
    assert max(ages) == k  # the pipeline really runs ahead (a bound that is never approached proves nothing)
    rows = _rows(trainer.out)
    assert [r["policy/staleness_max"] for r in rows] == [max(step - 1 - v for v in vs) for step, vs in seen]
    assert all("rollout_corr/weight" in r and "rollout_corr/ratio_p50" in r for r in rows)
    if k == 1:  # a resume restarts the pipeline from the checkpoint's weights, and says so
        resumed = Trainer(build_config({**cfg.model_dump(mode="json"), "steps": 6}), resume="auto")
        resumed.fit()
        assert "restarts from the checkpoint's weights" in capsys.readouterr().err
        assert _rows(trainer.out)[-1]["step"] == 6 and _rows(trainer.out)[-1]["policy/staleness_max"] == 0


def test_broadcast_gives_workers_bit_identical_weights(fast_config, length_reward):
    """Workers build their policy without initialising it; everything they hold arrives by broadcast."""
    cfg = build_config(fast_config(rollout={"max_staleness": 1, "num_workers": 2, "batch_size": 4},
                                   rewards={"functions": [{"function": length_reward}]}))
    trainer = Trainer(cfg)
    initial = _params(trainer)
    try:
        for _ in range(2):  # two steps by hand (fit() would close the workers at its end)
            trainer.step += 1
            batch, _ = trainer.rollout()
            trainer.update(batch)
        trainer.collector._publish(trainer.step)
        expected = trainer.model.state_dict()
        assert any(not torch.equal(initial[k], v) for k, v in expected.items())  # the weights did move
        for index in range(2):
            version, weights = trainer.collector.worker_weights(index)
            assert version == trainer.step
            assert weights.keys() == expected.keys()
            assert all(torch.equal(weights[k], expected[k]) for k in expected)
        # A group too old for the next step is dropped and its prompt generated again, never trained.
        collector, step = trainer.collector, trainer.step + 1
        fresh = collector._next_group(step)
        stale = replace(fresh, version=step - 3)
        dropped = collector.counts["dropped_stale"]
        with collector.lock:
            collector.ready.append(stale)
        picked = collector._next_group(step)
        assert picked is not stale and step - 1 - picked.version <= 1
        assert collector.counts["dropped_stale"] > dropped and stale not in collector.ready
    finally:
        trainer.collector.close()
        trainer.pool.close()


def test_killed_worker_is_replaced_and_nothing_is_trained_twice(fast_config):
    cfg = build_config(fast_config(steps=4, rollout={"max_staleness": 1, "batch_size": 4}))
    trainer = Trainer(cfg)
    collector = trainer.collector
    trained, killed = [], []
    collect, top_up = collector.collect, collector._top_up

    def recording(step):
        out = collect(step)
        trained.extend(out.trained)
        return out

    def top_up_then_kill():
        """At step 2, right after new jobs were sent (behind a weight update, so not finished): kill the worker."""
        top_up()
        worker = collector.workers[0]
        if len(trained) == cfg.data.prompts_per_step and not killed and worker.outstanding:
            killed.append(set(worker.outstanding))
            os.kill(worker.process.pid, signal.SIGKILL)

    collector.collect, collector._top_up = recording, top_up_then_kill
    trainer.fit()
    assert killed
    rows = _rows(trainer.out)
    assert len(rows) == 4 and rows[-1]["async/worker_restarts"] == 1
    assert rows[-1]["async/regenerated_groups"] >= len(killed[0])
    assert len(trained) == 16 and len({id(g) for g in trained}) == 16
    assert max(r["policy/staleness_max"] for r in rows) <= 1
    # A late answer for a job already received (a dead worker's) is dropped: nothing is scored or trained twice.
    scoring, ready = collector.scoring, len(collector.ready)
    with collector.lock:
        collector._receive(collector.workers[0], ("done", 0, 0, [trained[0].prompt_ids], [trained[0].completions]))
    assert (collector.scoring, len(collector.ready)) == (scoring, ready)


def test_async_refuses_what_it_cannot_do(fast_config):
    cfg = build_config(fast_config(rollout={"max_staleness": 1}, model={"lora": {"r": 4}}))
    with pytest.raises(ConfigError, match="lora"):
        Trainer(cfg)


def test_episodes_train_asynchronously_no_older_than_max_staleness(fast_config):
    """Environment tasks in the asynchronous pipeline: workers play whole episodes with one policy version, and no
    trained episode was started by weights more than max_staleness updates old (a plain task shares the steps)."""
    from rlvr.rollout.episodes import Episode

    k = 1
    tasks = [{"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10},
              "env": {"name": "try_again", "max_turns": 3, "max_tokens": 24}},
             {"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10}, "label": "plain"}]
    cfg = build_config(fast_config(steps=4, rollout={"max_staleness": k, "batch_size": 4},
                                   data={"tasks": tasks}, algorithm={"turn_credit": "turn_baseline"}))
    trainer = Trainer(cfg)
    seen = []
    collect = trainer.collector.collect

    def recording(step):
        out = collect(step)
        seen.append((step, out.trained))
        return out

    trainer.collector.collect = recording
    trainer.fit()
    episodes = [(step, g) for step, groups in seen for g in groups if isinstance(g.completions[0], Episode)]
    assert episodes and any(c.turns > 1 for _, g in episodes for c in g.completions)
    ages = [step - 1 - g.version for step, groups in seen for g in groups]
    assert min(ages) >= 0 and max(ages) <= k
    assert max(step - 1 - g.version for step, g in episodes) == k  # episodes do run ahead of the trainer
    for _, g in episodes:  # a worker's episode: its prompt is the rendered opening, its turns recorded
        assert all(c.policy_mask is not None and len(c.turn_starts) == c.turns for c in g.completions)
    rows = _rows(trainer.out)
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and max(r["policy/staleness_max"] for r in rows) <= k
