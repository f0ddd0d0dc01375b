"""The GPU run rehearsed on the CPU before a GPU is spent on it: the suite runs every part in its CPU mode (gpu_step.py
and gpu_generate.py at a small shape with the same config keys, reward file and worker count, the static engine,
resume and the profiled step), and a part that hangs is killed with its whole process group while the next part
runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from gpu_suite import Part, run_suite  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
       "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def test_the_gpu_suite_rehearses_every_part_on_the_cpu(tmp_path):
    out = tmp_path / "gpu-results"
    done = subprocess.run(["bash", "benchmarks/run_gpu_suite.sh", "--cpu"], cwd=ROOT, capture_output=True, text=True,
                          env={**ENV, "PYTHON": sys.executable, "OUT": str(out)}, timeout=1500)
    summary = (out / "summary.txt").read_text().splitlines()
    assert done.returncode == 0, done.stdout[-4000:]
    assert [line.split()[0] for line in summary] == ["gpu_step", "gpu_generate", "sampling_step", "gpu_tests",
                                                     "quickstart"]
    assert all(line.split()[1] == "ok" for line in summary), summary
    assert (out / "gpu-results.tgz").stat().st_size > 0
    assert "commit" in (out / "env.txt").read_text()

    step = json.loads((out / "gpu_step.json").read_text())["results"]
    rlvr, trl = step["rlvr mb=8"], step["trl"]
    assert rlvr["engine"] == "StaticCacheEngine" and len(rlvr["step_s"]) == 2 and len(trl["step_s"]) == 2
    assert rlvr["reward_timeouts"] == 0  # the reward file imports torch and transformers: loaded, not timed
    assert rlvr["resumed_from_step"] == 3 and rlvr["last_step"] == 4  # 2 timed steps, the profiled one, 1 resumed
    assert set(rlvr["profiles"]) == {"rollout", "update"}
    assert (out / "rlvr_mb8_rollout.txt").exists() and (out / "rlvr_mb8_update.txt").exists()
    log = (out / "gpu_step.txt").read_text()
    assert "train step 1/3" in log and "trl step 2:" in log  # each side says each step's time as it finishes

    generate = json.loads((out / "gpu_generate.json").read_text())
    assert "rlvr static engine" in generate["results"]
    assert generate["parity"]["greedy_rows_identical"] == 1.0 and generate["parity"]["logprob_diff_max"] < 1e-4
    assert (out / "profile_static.txt").exists()
    assert json.loads((out / "quickstart" / "summary.json").read_text())


def test_without_cuda_or_cpu_mode_the_gpu_benchmarks_say_how_to_rehearse(monkeypatch, capsys):
    import torch
    from gpu_shapes import require_cuda

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    require_cuda("benchmarks/gpu_step.py", cpu=True)  # the rehearsal goes on
    with pytest.raises(SystemExit) as stopped:
        require_cuda("benchmarks/gpu_step.py")
    assert "needs a CUDA GPU" in str(stopped.value) and "benchmarks/gpu_step.py --cpu" in str(stopped.value)


HANGS = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # like a trainer finishing its step on a first SIGTERM
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                          "signal.SIG_IGN); time.sleep(600)"])
open(sys.argv[1], "w").write(str(child.pid))
print("started", flush=True)
time.sleep(600)
"""


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie left to a pid 1 that does not reap is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_part_that_hangs_is_killed_with_its_process_group_and_the_next_part_runs(tmp_path):
    pid_file = tmp_path / "child.pid"
    parts = [Part("hangs", 2, [sys.executable, "-c", HANGS, str(pid_file)]),
             Part("next", 60, [sys.executable, "-c", "print('the next part ran')"])]
    t = time.monotonic()
    outcomes = run_suite(parts, tmp_path / "out")
    assert time.monotonic() - t < 45
    assert [o.code for o in outcomes] == [None, 0]
    assert not running(int(pid_file.read_text()))  # the part's child went with its group (SIGKILL: it ignored SIGTERM)
    assert "started" in (tmp_path / "out" / "hangs.txt").read_text()
    assert "the next part ran" in (tmp_path / "out" / "next.txt").read_text()
    summary = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert "killed at its 2 s limit" in summary[0] and summary[1].split()[:2] == ["next", "ok"]


def test_the_wheels_for_the_gpu_image_are_installed_for_its_run_and_left_alone_by_the_rehearsal(tmp_path):
    """.whl holds wheels built for the GPU image's Python (docs/engines.md): the CPU rehearsal runs on this machine's
    packages whatever that folder holds, and a GPU run whose wheels will not install stops at once saying so."""
    for name in ("benchmarks", "rlvr"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".whl").mkdir()
    (tmp_path / ".whl" / "elsewhere-1.0-cp399-cp399-manylinux_2_17_x86_64.whl").write_bytes(b"not this machine's")
    env = {**ENV, "PYTHON": sys.executable}
    rehearsal = subprocess.run(["bash", "benchmarks/run_gpu_suite.sh", "--cpu", "sampling"], cwd=tmp_path, text=True,
                               capture_output=True, env={**env, "OUT": str(tmp_path / "rehearsal")}, timeout=600)
    assert rehearsal.returncode == 0, rehearsal.stdout[-3000:] + rehearsal.stderr[-3000:]
    assert (tmp_path / "rehearsal" / "summary.txt").read_text().split()[:2] == ["sampling_step", "ok"]
    gpu_run = subprocess.run(["bash", "benchmarks/run_gpu_suite.sh", "sampling"], cwd=tmp_path, text=True,
                             capture_output=True, env={**env, "OUT": str(tmp_path / "gpu")}, timeout=120)
    assert gpu_run.returncode == 1 and "refill .whl as docs/engines.md says" in gpu_run.stderr
    assert not (tmp_path / "gpu" / "summary.txt").exists()
