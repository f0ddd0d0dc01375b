"""Acceptance: a run SIGKILLed at random points (mid-step, and deliberately inside every phase of a checkpoint
write), resumed with --resume auto after each kill, ends with exactly the parameters of an uninterrupted run,
and no checkpoint on disk is ever unreadable."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import FAST, ROOT, merge
from kill_runner import PHASES
from safetensors.torch import load_file

from rlvr.training.checkpoint import checkpoint_damage, list_checkpoints, load_state


def _env() -> dict[str, str]:
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "OMP_NUM_THREADS": "1"}


def _start(recipe: Path, resume: bool, kill_at: tuple[str, int] | None = None) -> subprocess.Popen:
    runner = [str(ROOT / "tests" / "kill_runner.py"), kill_at[0], str(kill_at[1])] if kill_at else ["-m", "rlvr"]
    args = [sys.executable, *runner, "train", str(recipe), *(["--resume", "auto"] if resume else [])]
    return subprocess.Popen(args, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _newest_step(checkpoints: Path) -> int:
    found = list_checkpoints(checkpoints)
    return int(found[-1].name.split("-")[1]) if found else 0


def _assert_every_checkpoint_loads(checkpoints: Path, after: str) -> None:
    for path in list_checkpoints(checkpoints):
        assert checkpoint_damage(path) is None, f"after {after}: {checkpoint_damage(path)}"
        assert load_file(path / "model.safetensors"), after
        assert load_state(path)["step"] == int(path.name.split("-")[1]), after


def _timed_kill(recipe: Path, checkpoints: Path, rng: random.Random) -> str:
    """Start (or resume) the run, wait for one new checkpoint, then SIGKILL it a random moment later."""
    before = _newest_step(checkpoints)
    proc = _start(recipe, resume=before > 0)
    deadline = time.time() + 300
    while _newest_step(checkpoints) <= before and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    delay = rng.uniform(0, 0.3)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"the run ended before the kill (rc {proc.returncode}): {err}"
    return f"a kill {delay:.2f}s after step {before + 1}'s checkpoint"


def _kill_in_checkpoint(recipe: Path, checkpoints: Path, rng: random.Random) -> str:
    """Resume the run and let it SIGKILL itself right after a random phase of its first or second save."""
    phase, nth = rng.choice(PHASES), rng.randint(1, 2)
    proc = _start(recipe, resume=_newest_step(checkpoints) > 0, kill_at=(phase, nth))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, f"the run ended before the kill (rc {proc.returncode}): {err}"
    return f"a kill after {phase} #{nth}"


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _kill_and_resume(tmp_path: Path, kills: int, steps: int, seed: int) -> None:
    base = merge(FAST, {"steps": steps, "data": {"prompts_per_step": 2}, "rollout": {"samples_per_prompt": 2},
                        "checkpoint": {"every_steps": 1, "keep_last": 2}})
    recipes = {}
    for name in ("straight", "killed"):
        recipes[name] = tmp_path / f"{name}.yaml"
        recipes[name].write_text(json.dumps(merge(base, {"tracking": {"output_dir": str(tmp_path / name)}})))
    checkpoints = tmp_path / "killed" / "checkpoints"

    rng = random.Random(seed)
    plan = [_timed_kill, _kill_in_checkpoint] * (kills // 2) + [_timed_kill] * (kills % 2)
    rng.shuffle(plan)
    for kill in plan:
        what = kill(recipes["killed"], checkpoints, rng)
        _assert_every_checkpoint_loads(checkpoints, what)
    assert _newest_step(checkpoints) < steps, "every kill should land before the run's end"
    for name, resume in (("killed", True), ("straight", False)):
        proc = _start(recipes[name], resume)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err

    final = {name: list_checkpoints(tmp_path / name / "checkpoints")[-1] for name in recipes}
    assert final["killed"].name == final["straight"].name == f"step-{steps:07d}"
    a, b = (load_file(final[name] / "model.safetensors") for name in ("straight", "killed"))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), "resumed parameters differ from the uninterrupted run's"
    rows_a, rows_b = _rows(tmp_path / "straight"), _rows(tmp_path / "killed")
    assert [r["step"] for r in rows_b] == list(range(1, steps + 1))  # one row per step, none torn or repeated
    for ra, rb in zip(rows_a, rows_b):
        assert ra["reward/mean"] == rb["reward/mean"] and ra["actor/loss"] == rb["actor/loss"], ra["step"]


def test_four_kills_mid_step_and_mid_checkpoint_then_resume_is_exact(tmp_path):
    _kill_and_resume(tmp_path, kills=4, steps=24, seed=1)


@pytest.mark.slow
def test_twenty_random_kills_then_resume_is_exact(tmp_path):
    _kill_and_resume(tmp_path, kills=20, steps=120, seed=2)
