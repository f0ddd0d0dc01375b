"""Where the time goes on the real model's episodes: per-phase seconds of GRPO steps on SmolLM2-135M-Instruct for a
single-turn task, tool episodes and game episodes, with the KV cache kept across turns, re-encoded every turn, and
with asynchronous episodes (docs/results.md, "Where the time goes on the real model's episodes").

    python -m benchmarks.episode_phases [--workloads addition tool_use guess_number] [--modes kept reencode async]
                                        [--steps 4] [--tool-model DIR]

Workloads (each its recipe, evaluation and checkpoints off, `--steps` steps):
- addition: recipes/smollm2_addition.yaml, single-turn chat completions (the kept cache does not apply);
- tool_use: recipes/smollm2_tool_use.yaml with a model that calls the calculator (--tool-model: by default the
  4-demonstration SFT model of benchmarks/real_tool_use.py's sft arm), episodes of 2-3 turns;
- guess_number: recipes/smollm2_guess_number.yaml, games of up to 5 short turns.
Modes: `kept` (the static engine keeps each episode's cache across turns, the default), `reencode` (the same engine
prefilling the whole conversation at every turn), `async` (rollout.max_staleness=1: one rollout worker process
generates the next step's episodes while the trainer updates).

Each (workload, mode) runs in a fresh process (`--one`), one torch thread, the same seed. Per step, from the
Trainer's own metrics: generation (perf/gen_s less the environment and reward waits; with async it is the time the
trainer waited for the worker), environment (perf/env_s: opening, stepping and rendering replies, the final
verdict), reward (perf/reward_wait_s), update (perf/train_s: forward+backward and the optimizer step), the rest,
and the step; plus the trainer process's CPU seconds per step (on a shared machine the CPU seconds are steadier
than the wall clock; the async worker's CPU is not in them). Means over the steps after the first (a warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, commit, load_average

RECIPES = {"addition": "smollm2_addition", "tool_use": "smollm2_tool_use", "guess_number": "smollm2_guess_number"}
PHASES = ("generation", "environment", "reward", "update", "rest", "step", "cpu")


def default_tool_model() -> str:
    return str(ROOT / "runs" / "real_tool_use" / "sft" / "seed0-sft")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def one(workload: str, mode: str, steps: int, tool_model: str, out: Path) -> dict:
    """One (workload, mode) run in this process; its per-step phases."""
    import torch

    torch.set_num_threads(1)
    from rlvr.config import load_config
    from rlvr.training.trainer import Trainer

    overrides = [f"steps={steps}", "eval.every_steps=0", "checkpoint.every_steps=0", f"tracking.output_dir={out}",
                 "tracking.log_completions_every=0", "tracking.tensorboard=off", "tracking.report=false"]
    if workload == "tool_use":
        overrides.append(f"model.name={tool_model}")
    if mode == "async":
        overrides += ["rollout.max_staleness=1", "rollout.num_workers=1"]
    cfg = load_config(ROOT / "recipes" / f"{RECIPES[workload]}.yaml", overrides)
    trainer = Trainer(cfg)
    if mode == "reencode":
        trainer.engine.keep_turns = False
    cpu_marks: list[float] = []
    train_step = trainer.train_step

    def timed_step(*args, **kwargs):
        start = cpu_seconds()
        result = train_step(*args, **kwargs)
        cpu_marks.append(cpu_seconds() - start)
        return result

    trainer.train_step = timed_step
    trainer.fit()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "perf/step_s" in r]
    steps_out = []
    for r, cpu in zip(rows, cpu_marks):
        env, reward = r.get("perf/env_s", 0.0), r.get("perf/reward_wait_s", 0.0)
        generation = r["perf/gen_s"] - env - reward
        update = r["perf/train_s"]
        steps_out.append({"generation": generation, "environment": env, "reward": reward, "update": update,
                          "rest": r["perf/step_s"] - r["perf/gen_s"] - update, "step": r["perf/step_s"], "cpu": cpu,
                          "policy_tokens": r.get("response_length/mean"), "turns": r.get("reward/verifier/turns")})
    return {"workload": workload, "mode": mode, "steps": steps_out}


def table(results: list[dict]) -> str:
    lines = ["| workload | mode | generation | environment | reward | update | rest | step | trainer CPU s | turns |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        later = r["steps"][1:] or r["steps"]
        mean = {k: statistics.mean(s[k] for s in later) for k in PHASES}
        turns = [s["turns"] for s in later if s["turns"] is not None]
        shown = f"{statistics.mean(turns):.2f}" if turns else "1"
        lines.append(f"| {r['workload']} | {r['mode']} | " + " | ".join(f"{mean[k]:.1f}" for k in PHASES) +
                     f" | {shown} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", choices=list(RECIPES), default=list(RECIPES))
    parser.add_argument("--modes", nargs="+", choices=["kept", "reencode", "async"], default=["kept", "reencode", "async"])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--tool-model", default=None)
    parser.add_argument("--output", default="runs/episode_phases")
    parser.add_argument("--one", nargs=2, metavar=("WORKLOAD", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = Path(args.output)
    tool_model = args.tool_model or default_tool_model()
    if args.one:
        workload, mode = args.one
        result = one(workload, mode, args.steps, tool_model, out / f"{workload}-{mode}")
        print("RESULT " + json.dumps(result))
        return
    results = []
    for workload in args.workloads:
        for mode in args.modes:
            if workload == "addition" and mode == "reencode":
                continue  # single-turn: nothing is kept across turns
            load, t0 = load_average(), time.perf_counter()
            proc = subprocess.run([sys.executable, __file__, "--one", workload, mode, "--steps", str(args.steps),
                                   "--tool-model", tool_model, "--output", str(out)], capture_output=True, text=True,
                                  cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
            found = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
            if proc.returncode or not found:
                raise SystemExit(f"{workload} {mode} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
            result = {**json.loads(found[0][7:]), "load_before": load, "load_after": load_average(),
                      "wall_s": time.perf_counter() - t0}
            results.append(result)
            print(f"{workload} {mode}: {result['wall_s']:.0f} s (load {load} -> {load_average()})", flush=True)
            for i, s in enumerate(result["steps"], 1):
                print(f"  step {i}: " + "  ".join(f"{k} {s[k]:.1f}" for k in PHASES), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "phases.json").write_text(json.dumps({"commit": commit(), "results": results}, indent=2))
    print(f"\ncommit {commit()}; seconds per step, mean over steps 2-{args.steps}\n")
    print(table(results))


if __name__ == "__main__":
    main()
