"""Data-parallel training under torchrun: N processes train exactly like one, and checkpoints do not depend on the
number of processes (docs/scaling.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT
from safetensors.torch import load_file

from rlvr.config import build_config
from rlvr.distributed import shard
from rlvr.errors import ConfigError
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.rollout import SamplingParams, group_generator, make_engine
from rlvr.training.checkpoint import list_checkpoints, load_state
from rlvr.training.trainer import check_data_parallel

# The quickstart's task and algorithm on a smaller model, with a length reward so every group has reward variance
# from the first step (the untrained model never adds correctly) and two mini-batches per step.
QUICK = ["model.tiny.hidden_size=32", "model.tiny.num_layers=2", "model.tiny.num_heads=2",
         "model.tiny.intermediate_size=64", "model.tiny.vocab_size=48", "data.prompts_per_step=4",
         "rollout.samples_per_prompt=4", "rollout.seed_per_group=true", "optim.lr=1e-2", "optim.micro_batch_size=4",
         "optim.mini_batches=2", "eval.every_steps=0", "checkpoint.every_steps=5", "tracking.console=false",
         "tracking.tensorboard='off'", "rewards.timeout_s=10"]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "OMP_NUM_THREADS": "1"}


def train(out: Path, *args: str, procs: int = 1, steps: int = 10, resume: str | None = None) -> None:
    """`rlvr train recipes/quickstart.yaml` in one process, or under torchrun with `procs` processes (gloo)."""
    launcher = [sys.executable, "-m", "rlvr"] if procs == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={procs}", "-m", "rlvr"]
    command = [*launcher, "train", "recipes/quickstart.yaml", *QUICK, f"steps={steps}", f"tracking.output_dir={out}",
               *args, *(["--resume", resume] if resume else [])]
    proc = subprocess.run(command, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]


def weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    return load_file(checkpoint / "model.safetensors")


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def rows_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, length_reward_file):
    """The same 10 steps in one process and in two (checkpoints at steps 5 and 10)."""
    root = tmp_path_factory.mktemp("dp")
    reward = f"rewards.functions=[{{function: task}}, {{function: '{length_reward_file}'}}]"
    train(root / "one", reward)
    train(root / "two", reward, procs=2)
    return root, reward


@pytest.fixture(scope="module")
def length_reward_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("reward") / "length_reward.py"
    path.write_text("def length(prompt, completion, **fields):\n    return float(len(completion))\n")
    return f"{path}:length"


def test_two_processes_train_the_same_parameters_as_one(runs):
    root, _ = runs
    one, two = (list_checkpoints(root / name / "checkpoints")[-1] for name in ("one", "two"))
    assert one.name == two.name == "step-0000010"
    initial = weights(root / "one" / "initial-model")
    assert max_difference(weights(one), initial) > 1e-2, "training did not move the weights"
    assert max_difference(weights(one), weights(two)) < 1e-5
    # Rank 0 alone logs, one row per step, with the globally reduced figures.
    a, b = rows_of(root / "one"), rows_of(root / "two")
    assert [r["step"] for r in b] == list(range(1, 11))
    for x, y in zip(a, b):
        for key in ("reward/mean", "accuracy", "actor/loss", "actor/grad_norm", "actor/entropy", "tokens/selected_frac"):
            assert y[key] == pytest.approx(x[key], rel=1e-4, abs=1e-6), (x["step"], key)


def test_a_two_process_checkpoint_resumes_in_one_process(runs):
    root, reward = runs
    saved = list_checkpoints(root / "two" / "checkpoints")[0]
    assert saved.name == "step-0000005" and load_state(saved)["step"] == 5
    train(root / "resumed", reward, resume=str(saved))
    rows = rows_of(root / "resumed")
    assert [r["step"] for r in rows] == [6, 7, 8, 9, 10]  # continued from step 5, no step repeated or skipped
    final = list_checkpoints(root / "resumed" / "checkpoints")[-1]
    assert load_state(final)["step"] == 10
    # The continuation is the uninterrupted run's: step counter, weights, optimizer moments and sampler all carried.
    straight = list_checkpoints(root / "one" / "checkpoints")[-1]
    assert max_difference(weights(final), weights(straight)) < 1e-5
    for x, y in zip(rows_of(root / "one")[5:], rows):
        assert y["actor/loss"] == pytest.approx(x["actor/loss"], rel=1e-4, abs=1e-6), x["step"]


def test_settings_a_data_parallel_run_cannot_honour_are_named(fast_config):
    for extra, strategy, field in [({"data": {"prompts_per_step": 3}}, "ddp", "data.prompts_per_step=3"),
                                   ({"rollout": {"seed_per_group": False}}, "ddp", "rollout.seed_per_group"),
                                   ({"optim": {"mini_batches": 2}}, "fsdp2", "optim.mini_batches")]:
        cfg = build_config(fast_config(**extra))
        check_data_parallel(cfg, strategy, world=1)  # one process: anything goes
        with pytest.raises(ConfigError, match=field):
            check_data_parallel(cfg, strategy, world=2)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_batch_whitening_matches_across_processes_and_strategies(tmp_path, length_reward_file, strategy):
    """REINFORCE++-baseline whitens advantages over the whole step's batch: the statistics are global whichever
    rank generated a group. Also on: DAPO dynamic sampling (rounds decided on every rank's groups), KL to a
    (sharded) reference in the reward, evaluation keeping the best model. fsdp2 runs here on CPUs over gloo
    (fully_shard, sum reduce-scatter)."""
    args = [f"rewards.functions=[{{function: task}}, {{function: '{length_reward_file}'}}]",
            "algorithm.advantage=reinforce_pp_baseline", "optim.mini_batches=1", "checkpoint.every_steps=0",
            "data.filter=dynamic_sampling", "algorithm.kl_coef=0.1", "algorithm.kl_placement=reward",
            "eval.every_steps=2", "eval.num_problems=8", "eval.best_metric=eval/accuracy"]
    train(tmp_path / "one", *args, steps=4)
    train(tmp_path / "two", *args, f"distributed.strategy={strategy}", procs=2, steps=4)
    one, two = (list_checkpoints(tmp_path / name / "checkpoints")[-1] for name in ("one", "two"))
    assert max_difference(weights(one), weights(two)) < 1e-5
    assert (tmp_path / "two" / "best" / "model.safetensors").is_file()
    for x, y in zip(rows_of(tmp_path / "one"), rows_of(tmp_path / "two")):
        for key in [k for k in ("sampling/rounds", "actor/kl_ref", "eval/accuracy") if x.get(k) is not None]:
            assert y.get(key) == pytest.approx(x.get(key), rel=1e-4, abs=1e-6), (x["step"], key)
    # A sharded checkpoint resumes in one process under the other strategy's layout (full, name-keyed state).
    train(tmp_path / "two", *args, steps=5, resume="auto")
    assert load_state(list_checkpoints(tmp_path / "two" / "checkpoints")[-1])["step"] == 5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_fsdp2_trains_the_quickstart_model_on_a_gpu(tmp_path, length_reward_file):
    """A group of one over NCCL. The untrained model scores 0 on the task, so a length reward gives the groups the
    reward spread without which no parameter moves."""
    out = tmp_path / "fsdp2"
    proc = subprocess.run([sys.executable, "-m", "rlvr", "train", "recipes/quickstart.yaml", "steps=3",
                           f"rewards.functions=[{{function: task}}, {{function: '{length_reward_file}'}}]",
                           "eval.every_steps=0", "distributed.strategy=fsdp2", f"tracking.output_dir={out}",
                           "tracking.console=false"], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = rows_of(out)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert all(r["actor/grad_norm"] is not None for r in rows)
    assert all(r["perf/gen_peak_mem_gib"] > 0 and r["perf/train_peak_mem_gib"] > 0 for r in rows)
    final = list_checkpoints(out / "checkpoints")[-1]
    assert max_difference(weights(final), weights(out / "initial-model")) > 0


def test_shards_keep_groups_whole_and_cover_every_group(monkeypatch):
    import rlvr.distributed as d

    monkeypatch.setattr(d, "world_size", lambda: 3)
    blocks = []
    for r in range(3):
        monkeypatch.setattr(d, "rank", lambda r=r: r)
        blocks.append(list(shard(8)))
    assert blocks == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_a_group_samples_the_same_completions_whichever_batch_it_is_in():
    tok = train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40)
    from rlvr.config import TinyModelConfig

    model = build_tiny_model(TinyModelConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32), tok, 0)
    engine = make_engine("hf", model, tok, 64)
    params = SamplingParams(n=4, max_new_tokens=6)
    prompts = [tok("1+2=").input_ids, tok("13+4=").input_ids]
    cpu = torch.device("cpu")
    together = engine.generate(prompts, params, [group_generator(cpu, 0, 1, 0, g) for g in range(2)])
    torch.manual_seed(123)  # the global stream plays no part
    alone = engine.generate(prompts[1:], params, [group_generator(cpu, 0, 1, 0, 1)])
    assert [c.token_ids for c in together[1]] == [c.token_ids for c in alone[0]]
    other_step = engine.generate(prompts[1:], params, [group_generator(cpu, 0, 2, 0, 1)])
    assert [c.token_ids for c in other_step[0]] != [c.token_ids for c in alone[0]]


@pytest.mark.slow
def test_episodes_train_the_same_under_two_processes_as_in_one(tmp_path):
    """Multi-turn episodes (try again) are played per rank and gathered like single-turn groups."""
    task = ("data.tasks=[{name: arithmetic, args: {max_operand: 99}, env: {name: try_again, max_turns: 3, "
            "max_tokens: 24}}]")
    train(tmp_path / "one", task, procs=1, steps=3)
    train(tmp_path / "two", task, procs=2, steps=3)
    one, two = (list_checkpoints(tmp_path / name / "checkpoints")[-1] for name in ("one", "two"))
    assert max_difference(weights(one), weights(two)) < 1e-5
    a, b = rows_of(tmp_path / "one"), rows_of(tmp_path / "two")
    for x, y in zip(a, b):
        for key in ("reward/mean", "reward/verifier/turns", "actor/loss"):
            assert y[key] == pytest.approx(x[key], rel=1e-4, abs=1e-6), (x["step"], key)
