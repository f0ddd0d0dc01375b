"""A run never stalls in silence: a reward that is slow to import trains without a timeout and its load time is said
once; a reward that never answers is named while the run waits, the run stops with an error that says which setting
to change, and the metrics keep the timeouts; a SIGTERM during such a wait ends the run within a bounded time with
the last finished step's checkpoint, from which the run resumes exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from conftest import FAST, ROOT, merge
from safetensors.torch import load_file

from rlvr.config import build_config
from rlvr.training.checkpoint import checkpoint_damage, list_checkpoints
from rlvr.training.trainer import Trainer

STEP_SAMPLES = FAST["data"]["prompts_per_step"] * FAST["rollout"]["samples_per_prompt"]


def _rows(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _train(recipe: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "rlvr", "train", str(recipe), *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_a_reward_slower_to_import_than_its_item_limit_trains_without_a_timeout(tmp_path, capsys):
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(3.0)  # three times rewards.timeout_s\n\n"
                                      "def length(prompt, completion, **fields):\n    return float(len(completion))\n")
    cfg = build_config(merge(FAST, {
        "steps": 2, "rewards": {"timeout_s": 1.0, "functions": [{"function": "task"},
                                                                {"function": f"{tmp_path}/slow.py:length"}]},
        "tracking": {"output_dir": str(tmp_path / "run"), "console": True}}))
    Trainer(cfg).fit()
    rows = _rows(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["reward/length/timeouts"] == r["reward/length/crashes"] == 0
        assert r["reward_pool/restarts"] == r["reward_pool/timeouts"] == 0
    said = capsys.readouterr().out
    assert said.count("reward functions loaded in the reward workers") == 1
    loaded = said.split("reward functions loaded in the reward workers: ")[1].splitlines()[0]
    seconds = float(loaded.split(f"'length' ({tmp_path}/slow.py:length) in ")[1].split(" s")[0])
    assert seconds >= 3.0


NEVER = textwrap.dedent(
    """
    import os, time

    def never(prompt, completion, **fields):
        time.sleep(10**6)

    def hangs_from_step_2(prompt, completion, **fields):
        # every call after the first step's when the marker file exists (a reward worker that never answers)
        with open({calls!r}, "a") as f:
            f.write("x")
        if os.path.exists({marker!r}) and os.path.getsize({calls!r}) > {step_samples}:
            time.sleep(10**6)
        return float(len(completion))
    """
)


@pytest.fixture
def never_file(tmp_path):
    path = tmp_path / "never.py"
    path.write_text(NEVER.format(calls=str(tmp_path / "calls.txt"), marker=str(tmp_path / "hang"),
                                 step_samples=STEP_SAMPLES))
    return path


def test_a_reward_that_never_answers_is_named_while_waiting_then_stops_the_run(tmp_path, never_file):
    run = tmp_path / "run"
    recipe = tmp_path / "never.yaml"
    recipe.write_text(json.dumps(merge(FAST, {
        "rewards": {"timeout_s": 6.0, "num_workers": 2, "max_timeouts_in_a_row": 2,
                    "functions": [{"function": "task"}, {"function": f"{never_file}:never"}]},
        "tracking": {"output_dir": str(run), "stall_warning_s": 1.5}})))
    t = time.monotonic()
    proc = _train(recipe)
    _, err = proc.communicate(timeout=180)
    elapsed = time.monotonic() - t
    assert proc.returncode == 2, err
    assert elapsed < 120, f"took {elapsed:.0f} s to stop"
    # while it waited: what for, and since when
    stalls = [line for line in err.splitlines() if "no progress for" in line and "scoring an item of 'never'" in line]
    assert stalls and "(since " in stalls[0] and "reward worker" in stalls[0], err
    # the timeouts as they happened, then the error naming the reward, the limit, the times and the setting
    assert "an item timed out after 6" in err
    assert "2 items in a row timed out at rewards.timeout_s=6 s" in err and "never.py:never" in err
    assert "Raise rewards.timeout_s" in err and "Traceback" not in err
    rows = _rows(run)
    assert [r["step"] for r in rows] == [1] and rows[0]["reward_pool/timeouts"] >= 2


def test_sigterm_while_waiting_on_a_hung_reward_stops_with_the_last_steps_checkpoint_and_resumes_exactly(
        tmp_path, never_file):
    base = merge(FAST, {"steps": 3, "checkpoint": {"every_steps": 0, "stop_wait_s": 1.0},
                        "rewards": {"timeout_s": 600, "functions": [{"function": "task"},
                                                                    {"function": f"{never_file}:hangs_from_step_2"}]},
                        "tracking": {"stall_warning_s": 1.0}})
    recipes = {}
    for name in ("straight", "interrupted"):
        recipes[name] = tmp_path / f"{name}.yaml"
        recipes[name].write_text(json.dumps(merge(base, {"tracking": {"output_dir": str(tmp_path / name)}})))
    run, calls = tmp_path / "interrupted", tmp_path / "calls.txt"
    (tmp_path / "hang").touch()
    proc = _train(recipes["interrupted"])
    deadline = time.monotonic() + 300
    while not (calls.exists() and calls.stat().st_size > STEP_SAMPLES) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    # step 2's reward worker is hung (its first call of step 2 has begun)
    assert [r["step"] for r in _rows(run)] == [1]
    os.killpg(proc.pid, signal.SIGTERM)
    t = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - t < 30
    assert proc.returncode == 143, err
    assert "interrupted while waiting for rewards" in err and "step 1 is the last finished step" in err, err
    assert "Traceback" not in err
    # no periodic checkpoints: the given-up step's run wrote step 1's from the state it had when step 1 ended
    assert [c.name for c in list_checkpoints(run / "checkpoints")] == ["step-0000001"]
    assert checkpoint_damage(run / "checkpoints" / "step-0000001") is None
    assert [r["step"] for r in _rows(run)] == [1]

    (tmp_path / "hang").unlink()
    for proc in (_train(recipes["interrupted"], "--resume", "auto"), _train(recipes["straight"])):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    final = {name: list_checkpoints(tmp_path / name / "checkpoints")[-1] for name in recipes}
    assert final["interrupted"].name == final["straight"].name == "step-0000003"
    a, b = (load_file(final[name] / "model.safetensors") for name in recipes)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    for ra, rb in zip(_rows(tmp_path / "straight"), _rows(run), strict=True):
        assert ra["reward/mean"] == rb["reward/mean"] and ra["actor/loss"] == rb["actor/loss"]
