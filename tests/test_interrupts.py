"""Ctrl-C (SIGINT) or SIGTERM lets the current step finish, writes a checkpoint and exits 130 / 143 saying how
to continue; `--resume auto` then ends with exactly the parameters of an uninterrupted run. A second signal
aborts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import FAST, ROOT, merge
from safetensors.torch import load_file

from rlvr.training.checkpoint import list_checkpoints
from rlvr.training.interrupts import StopRequests

STEPS = 4


def _env() -> dict[str, str]:
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "OMP_NUM_THREADS": "1"}


def _train(recipe: Path, *args: str) -> subprocess.Popen:
    # Its own session, like a terminal's foreground job: the test signals the whole process group, as Ctrl-C does.
    return subprocess.Popen([sys.executable, "-m", "rlvr", "train", str(recipe), *args], cwd=ROOT, env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _rows(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def recipes(tmp_path):
    """Two identical runs (no periodic checkpoints) with a reward that records each call, slow enough that a
    step takes a while."""
    calls = tmp_path / "calls.txt"
    reward = tmp_path / "reward.py"
    reward.write_text("import time\n"
                      "def length(prompt, completion, **fields):\n"
                      f"    with open({str(calls)!r}, 'a') as f:\n"
                      "        f.write('x')\n"
                      "    time.sleep(0.05)\n"
                      "    return float(len(completion))\n")
    base = merge(FAST, {"steps": STEPS, "rewards": {"functions": [{"function": f"{reward}:length"}]},
                        "checkpoint": {"every_steps": 0}})
    paths = {}
    for name in ("straight", "interrupted"):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(json.dumps(merge(base, {"tracking": {"output_dir": str(tmp_path / name)}})))
    return paths, calls


def _interrupt_mid_step_2(recipe: Path, calls: Path, signum: int) -> subprocess.CompletedProcess:
    run = Path(json.loads(recipe.read_text())["tracking"]["output_dir"])
    proc = _train(recipe)
    deadline = time.time() + 300
    while len(_rows(run)) < 1 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    scored = calls.stat().st_size
    while calls.stat().st_size <= scored and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)  # step 2's rewards are being scored
    assert len(_rows(run)) == 1, "the signal should land inside step 2"
    os.killpg(proc.pid, signum)
    _, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)


def test_sigint_mid_step_checkpoints_and_resume_auto_is_exact(recipes, tmp_path):
    paths, calls = recipes
    done = _interrupt_mid_step_2(paths["interrupted"], calls, signal.SIGINT)
    assert done.returncode == 130, done.stderr
    assert "interrupted at step 2; continue with --resume auto" in done.stderr
    assert "Traceback" not in done.stderr
    run = tmp_path / "interrupted"
    assert [c.name for c in list_checkpoints(run / "checkpoints")] == ["step-0000002"]
    assert [r["step"] for r in _rows(run)] == [1, 2]  # the step in flight was finished and logged
    step_2 = _rows(run)[1]  # its rewards were all scored: the signal did not reach the reward workers
    assert step_2["reward/length/crashes"] == step_2["reward/length/timeouts"] == step_2["reward/length/errors"] == 0

    resumed = _train(paths["interrupted"], "--resume", "auto")
    straight = _train(paths["straight"])
    for proc in (resumed, straight):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    final = {name: list_checkpoints(tmp_path / name / "checkpoints")[-1] for name in paths}
    assert final["interrupted"].name == final["straight"].name == f"step-{STEPS:07d}"
    a, b = (load_file(final[name] / "model.safetensors") for name in ("straight", "interrupted"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [r["step"] for r in _rows(run)] == list(range(1, STEPS + 1))
    for ra, rb in zip(_rows(tmp_path / "straight"), _rows(run)):
        assert ra["reward/mean"] == rb["reward/mean"] and ra["actor/loss"] == rb["actor/loss"]


def test_sigterm_exits_143_after_its_checkpoint(recipes, tmp_path):
    paths, calls = recipes
    done = _interrupt_mid_step_2(paths["interrupted"], calls, signal.SIGTERM)
    assert done.returncode == 143, done.stderr
    assert "interrupted at step 2; continue with --resume auto" in done.stderr
    assert list_checkpoints(tmp_path / "interrupted" / "checkpoints")[-1].name == "step-0000002"


def test_a_second_signal_aborts():
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN in a job started in the background
    stop = StopRequests().install()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)  # the handler runs in the main thread at the next bytecode
        assert stop.signum == signal.SIGINT and stop.requested()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
    finally:
        stop.restore()
    assert signal.getsignal(signal.SIGINT) == before  # the handler the process had is back
