"""Ctrl-C (SIGINT) or SIGTERM lets the current step finish, writes a checkpoint and exits 130 / 143 saying how
to continue; `--resume auto` then ends with exactly the parameters of an uninterrupted run. The same signal again
within REPEAT_WINDOW_S (`timeout -s INT` sends it to the process and then to its group; torchrun forwarding a
terminal's Ctrl-C does the same) is the same request; one after the window aborts, with nothing partial written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from conftest import FAST, ROOT, FakeClock, merge
from safetensors.torch import load_file

from rlvr.cancellation import Cancellation, WaitAbandoned
from rlvr.training.checkpoint import list_checkpoints
from rlvr.training.interrupts import REPEAT_WINDOW_S, StopRequests

STEPS = 4
STEP_SAMPLES = FAST["data"]["prompts_per_step"] * FAST["rollout"]["samples_per_prompt"]
REWARD = """\
import os, time

def length(prompt, completion, **fields):
    # records each call; from step 2 on, waits while the file `hold` exists
    with open({calls!r}, "a") as f:
        f.write("x")
    while os.path.getsize({calls!r}) > {step_samples} and os.path.exists({hold!r}):
        time.sleep(0.05)
    time.sleep(0.05)  # slow enough that a step takes a while
    return float(len(completion))
"""


def _env() -> dict[str, str]:
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "OMP_NUM_THREADS": "1"}


def _train(recipe: Path, *args: str, under: tuple[str, ...] = ()) -> subprocess.Popen:
    # Its own session, like a terminal's foreground job: the test signals the whole process group, as Ctrl-C does.
    return subprocess.Popen([*under, sys.executable, "-m", "rlvr", "train", str(recipe), *args], cwd=ROOT,
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _rows(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _recipe(directory: Path, name: str, **sections) -> Path:
    """A run of STEPS steps (no periodic checkpoints) in directory/name, scored by REWARD (its calls recorded in
    directory/calls.txt; step 2 on hold while directory/hold exists)."""
    reward = directory / "reward.py"
    reward.write_text(REWARD.format(calls=str(directory / "calls.txt"), hold=str(directory / "hold"),
                                    step_samples=STEP_SAMPLES))
    recipe = directory / f"{name}.yaml"
    recipe.write_text(json.dumps(merge(FAST, merge({
        "steps": STEPS, "rewards": {"functions": [{"function": f"{reward}:length"}]},
        "checkpoint": {"every_steps": 0}, "tracking": {"output_dir": str(directory / name)}}, sections))))
    return recipe


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    """An uninterrupted run, which every interrupted and resumed run must end equal to."""
    directory = tmp_path_factory.mktemp("straight")
    proc = _train(_recipe(directory, "straight"))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return directory / "straight"


@pytest.fixture
def recipe(tmp_path) -> Path:
    return _recipe(tmp_path, "interrupted")


def _start_mid_step_2(recipe: Path, under: tuple[str, ...] = ()) -> subprocess.Popen:
    """A run started and followed until step 1 is logged and step 2's rewards are being scored."""
    run, calls = Path(json.loads(recipe.read_text())["tracking"]["output_dir"]), recipe.parent / "calls.txt"
    proc = _train(recipe, under=under)
    deadline = time.time() + 300
    while len(_rows(run)) < 1 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    while calls.stat().st_size <= STEP_SAMPLES and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None and len(_rows(run)) == 1, "the signal should land inside step 2"
    return proc


def _process_state(pid: int) -> str:
    """What the kernel says a process is doing (its state and what it waits in), for a failure's message."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        return "; ".join([*(line for line in status if line.startswith(("State", "SigBlk", "SigIgn", "SigCgt"))),
                          "wchan " + Path(f"/proc/{pid}/wchan").read_text()])
    except OSError as e:
        return f"unknown ({e})"


def _interrupt_mid_step_2(recipe: Path, *signals: int, apart_s: float = 0.0) -> subprocess.CompletedProcess:
    proc = _start_mid_step_2(recipe)
    for i, signum in enumerate(signals):
        if i:
            time.sleep(apart_s)
        os.killpg(proc.pid, signum)
    _, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)


def _assert_stopped_after_step_2(done: subprocess.CompletedProcess, run: Path, code: int = 130) -> None:
    assert done.returncode == code, done.stderr
    assert "interrupted at step 2; continue with --resume auto" in done.stderr
    assert "Traceback" not in done.stderr and "aborted" not in done.stderr
    assert [c.name for c in list_checkpoints(run / "checkpoints")] == ["step-0000002"]
    assert [r["step"] for r in _rows(run)] == [1, 2]  # the step in flight was finished and logged


def _assert_resumes_exactly(recipe: Path, run: Path, straight: Path) -> None:
    proc = _train(recipe, "--resume", "auto")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    final = {name: list_checkpoints(path / "checkpoints")[-1] for name, path in [("run", run), ("straight", straight)]}
    assert final["run"].name == final["straight"].name == f"step-{STEPS:07d}"
    a, b = (load_file(final[name] / "model.safetensors") for name in ("straight", "run"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [r["step"] for r in _rows(run)] == list(range(1, STEPS + 1))
    for ra, rb in zip(_rows(straight), _rows(run), strict=True):
        assert ra["reward/mean"] == rb["reward/mean"] and ra["actor/loss"] == rb["actor/loss"]


def test_sigint_mid_step_checkpoints_and_resume_auto_is_exact(recipe, straight, tmp_path):
    done = _interrupt_mid_step_2(recipe, signal.SIGINT)
    run = tmp_path / "interrupted"
    _assert_stopped_after_step_2(done, run)
    step_2 = _rows(run)[1]  # its rewards were all scored: the signal did not reach the reward workers
    assert step_2["reward/length/crashes"] == step_2["reward/length/timeouts"] == step_2["reward/length/errors"] == 0
    _assert_resumes_exactly(recipe, run, straight)


def test_two_sigints_50_ms_apart_are_one_request_the_run_checkpoints_and_resumes_exactly(recipe, straight, tmp_path):
    done = _interrupt_mid_step_2(recipe, signal.SIGINT, signal.SIGINT, apart_s=0.05)
    _assert_stopped_after_step_2(done, tmp_path / "interrupted")
    _assert_resumes_exactly(recipe, tmp_path / "interrupted", straight)


@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils' timeout")
def test_a_run_under_timeout_s_int_checkpoints_and_resumes_exactly(recipe, straight, tmp_path):
    # `timeout` ends a command by sending the signal to it and then to its process group: the run gets it twice.
    # Its timer is a SIGALRM to itself; sending that at the moment the test chooses fires it mid-step 2.
    proc = _start_mid_step_2(recipe, under=("timeout", "--preserve-status", "-s", "INT", "600"))
    os.kill(proc.pid, signal.SIGALRM)
    _, err = proc.communicate(timeout=120)
    _assert_stopped_after_step_2(subprocess.CompletedProcess(proc.args, proc.returncode, "", err),
                                 tmp_path / "interrupted")
    _assert_resumes_exactly(recipe, tmp_path / "interrupted", straight)


def test_sigterm_exits_143_after_its_checkpoint(recipe, tmp_path):
    done = _interrupt_mid_step_2(recipe, signal.SIGTERM)
    _assert_stopped_after_step_2(done, tmp_path / "interrupted", code=143)


def test_a_second_sigint_after_the_window_aborts_with_nothing_partial_written(tmp_path):
    recipe = _recipe(tmp_path, "interrupted", rewards={"timeout_s": 600}, checkpoint={"stop_wait_s": 600})
    (tmp_path / "hold").touch()  # step 2 waits on its rewards until the test is done
    try:
        proc = _start_mid_step_2(recipe)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: [lines.append(line) for line in proc.stderr], daemon=True)
        reader.start()
        os.killpg(proc.pid, signal.SIGINT)
        deadline = time.monotonic() + 120
        while not any("finishing the current step" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.01)
        said = f"send it again more than {REPEAT_WINDOW_S:g} s from now; a repeat sooner is this same request"
        assert any(said in line for line in lines), (lines, proc.poll(), _process_state(proc.pid))
        time.sleep(REPEAT_WINDOW_S + 0.5)  # after the window, measured from when the first was handled
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        (tmp_path / "hold").unlink()
    err = "".join(lines)
    assert proc.returncode == 130, err
    assert "aborted (interrupted outside a training step, or a second time)" in err and "Traceback" not in err
    run = tmp_path / "interrupted"
    assert not (run / "checkpoints").exists() or not any((run / "checkpoints").iterdir())  # no step-*, no .tmp-*
    assert [r["step"] for r in _rows(run)] == [1]


def test_a_repeat_within_the_window_is_the_same_request_and_a_later_signal_aborts():
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN in a job started in the background
    clock = FakeClock()
    stop = StopRequests(Cancellation(clock), wait_s=10.0, clock=clock).install()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)  # the handler runs in the main thread at the next bytecode
        assert stop.signum == signal.SIGINT and stop.requested()
        clock.advance(REPEAT_WINDOW_S)
        os.kill(os.getpid(), signal.SIGINT)  # the same request: nothing raised
        time.sleep(0.01)
        with stop.cancellation.abandonable():  # the request gave waits their 10 s
            clock.advance(10.0 - REPEAT_WINDOW_S)
            with pytest.raises(WaitAbandoned):
                stop.cancellation.check("rewards")
        clock.advance(0.5)  # 10.5 s after the first signal
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
    finally:
        stop.restore()
    assert signal.getsignal(signal.SIGINT) == before  # the handler the process had is back
    with stop.cancellation.abandonable():
        stop.cancellation.check("rewards")  # restored: no stop request left


def test_a_sigint_blocked_by_the_launching_process_still_reaches_the_handler():
    # A mask is inherited across fork and exec, and by every thread: a launcher that blocks SIGINT would leave Ctrl-C
    # pending unseen in a process whose threads all block it.
    script = """
import os, signal, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
from rlvr.cancellation import Cancellation
from rlvr.training.interrupts import StopRequests
stop = StopRequests(Cancellation()).install()
os.kill(os.getpid(), signal.SIGINT)
time.sleep(0.1)
stop.restore()
print(stop.signum == signal.SIGINT, signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set()))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["True", "True"], done.stderr  # handled; the launcher's mask back after restore
