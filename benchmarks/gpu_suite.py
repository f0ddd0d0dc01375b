"""The GPU suite, part by part: each part runs in its own process group under its own time limit and is killed whole
(its children too) when it overruns, so one hung part never costs the others; each writes its log as it goes
(`OUT/<part>.txt`, and its JSON where it has one), and the suite ends with one line per part, killed parts included
(`OUT/summary.txt`), then packs OUT into `OUT/gpu-results.tgz` (a device lease returns at most 8 files).

--cpu rehearses the suite on a CPU: every part runs its CPU mode (gpu_step.py and gpu_generate.py at a small shape,
the GPU tests skipping, a quickstart of 2 RL steps) or exits with its no-CUDA message; tests/test_gpu_rehearsal.py
runs it in `make test`, so the code a GPU run depends on has run before a GPU is spent on it.

Run:  python benchmarks/gpu_suite.py [--cpu] [--out DIR] [step generate sampling tests quickstart]
      (benchmarks/run_gpu_suite.sh installs the wheels the GPU image lacks first, then runs this)
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

GRACE_S = 10.0  # after SIGTERM, how long a part's processes get before SIGKILL


@dataclass
class Part:
    name: str
    limit_s: float
    command: list[str]


@dataclass
class Outcome:
    name: str
    seconds: float
    code: int | None  # None: killed at its limit

    def line(self, limit_s: float) -> str:
        status = (f"killed at its {limit_s:g} s limit (with its process group)" if self.code is None else
                  "ok" if self.code == 0 else f"exit {self.code}")
        return f"{self.name:<14} {status:<48} {self.seconds:7.1f} s"


def parts(out: Path, cpu: bool) -> list[Part]:
    """What the GPU run measures (issue 29's figures), or its CPU rehearsal."""
    py = [sys.executable]
    if cpu:
        step = py + ["benchmarks/gpu_step.py", "--cpu", "--steps", "2", "--warmup", "0", "--micro-batch", "8",
                     "--no-compile-layers", "--side-timeout", "400", "--profile", str(out),
                     "--json", str(out / "gpu_step.json")]
        # the sides the GPU run measures that need no compiler (compilation is rehearsed by the slow tests)
        generate = py + ["benchmarks/gpu_generate.py", "--cpu", "--skip", "hf", "dynamic", "compiled",
                         "static-generate", "--json", str(out / "gpu_generate.json"), "--profile", str(out)]
        quickstart = py + ["-m", "rlvr", "quickstart", "--output", str(out / "quickstart"), "steps=2",
                           "sft.num_examples=64", "sft.epochs=1", "eval.num_problems=20", "eval.every_steps=2",
                           "data.prompts_per_step=4", "rollout.samples_per_prompt=4"]
        return [Part("gpu_step", 600, step), Part("gpu_generate", 300, generate),
                Part("sampling_step", 120, py + ["benchmarks/sampling_step.py", "--rows", "16", "--reps", "2"]),
                Part("gpu_tests", 300, py + ["-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                                             "tests/test_static_engine_gpu.py"]),
                Part("quickstart", 300, quickstart)]
    # rlvr at 32-sequence micro-batches (with the resume check and a profiled fifth step), TRL, rlvr at 16, rlvr at
    # 32 with its update through compiled decoder layers (model.compile_layers)
    step = py + ["benchmarks/gpu_step.py", "--steps", "4", "--warmup", "1", "--micro-batch", "32", "16",
                 "--compile-training", "--side-timeout", "110", "--profile", str(out),
                 "--json", str(out / "gpu_step.json")]
    # the hf engine and transformers' dynamic-cache generate were measured once (docs/results.md): 5x slower, 70 s
    generate = py + ["benchmarks/gpu_generate.py", "--skip", "hf", "dynamic", "--json", str(out / "gpu_generate.json"),
                     "--profile", str(out)]
    # 30 RL steps after the SFT (the whole quickstart's 500 did not fit in the first run's 55 s)
    quickstart = py + ["-m", "rlvr", "quickstart", "--output", str(out / "quickstart"), "steps=30"]
    return [Part("gpu_step", 300, step), Part("gpu_generate", 100, generate),
            Part("sampling_step", 20, py + ["benchmarks/sampling_step.py"]),
            Part("gpu_tests", 60, py + ["-m", "pytest", "-q", "-s", "-m", "gpu", "-p", "no:cacheprovider",
                                        "--continue-on-collection-errors", "tests"]),
            Part("quickstart", 90, quickstart)]


def run_part(part: Part, log: Path) -> Outcome:
    """Run `part` in a new session (its own process group), its output to the screen and to `log` line by line; at
    its limit, SIGTERM to the whole group, then SIGKILL after GRACE_S."""
    start = time.monotonic()
    print(f"=== {part.name} (at most {part.limit_s:g} s): {' '.join(part.command)}", flush=True)
    with open(log, "w") as sink:
        proc = subprocess.Popen(part.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, text=True, errors="replace")

        def copy() -> None:
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                sink.write(line)
                sink.flush()

        reader = threading.Thread(target=copy, daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=part.limit_s)
        except subprocess.TimeoutExpired:
            code = None
            message = f"=== {part.name}: past its {part.limit_s:g} s limit; killing its process group\n"
            print(message, end="", flush=True)
            sink.write(message)
            kill_group(proc)
        # a process outside the group that still holds the pipe (a reward worker in its own session dies within a
        # second of its parent) must not hold the suite
        reader.join(timeout=GRACE_S)
    outcome = Outcome(part.name, time.monotonic() - start, code)
    print(f"=== {outcome.line(part.limit_s)}", flush=True)
    return outcome


def kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the part's process group, SIGKILL to what is left of it after GRACE_S."""
    for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:  # the leader is gone; anything it left in the group goes too
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return


def run_suite(chosen: list[Part], out: Path) -> list[Outcome]:
    """Every part in turn (one hung part is killed and the next runs); the summary printed and in summary.txt."""
    out.mkdir(parents=True, exist_ok=True)
    outcomes = [run_part(part, out / f"{part.name}.txt") for part in chosen]
    limits = {p.name: p.limit_s for p in chosen}
    summary = "\n".join(o.line(limits[o.name]) for o in outcomes)
    (out / "summary.txt").write_text(summary + "\n")
    print(f"=== summary\n{summary}", flush=True)
    return outcomes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("parts", nargs="*", default=[], help="step, generate, sampling, tests, quickstart (default: all)")
    ap.add_argument("--cpu", action="store_true", help="the CPU rehearsal")
    ap.add_argument("--out", default="gpu-results")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    names = {"step": "gpu_step", "generate": "gpu_generate", "sampling": "sampling_step", "tests": "gpu_tests",
             "quickstart": "quickstart"}
    unknown = [p for p in args.parts if p not in names]
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    wanted = {names[p] for p in args.parts} or set(names.values())
    outcomes = run_suite([p for p in parts(out, args.cpu) if p.name in wanted], out)
    with tarfile.open(out.parent / "gpu-results.tgz", "w:gz") as tar:
        tar.add(out, arcname=".")
    (out.parent / "gpu-results.tgz").replace(out / "gpu-results.tgz")
    sys.exit(0 if all(o.code == 0 for o in outcomes) else 1)


if __name__ == "__main__":
    main()
