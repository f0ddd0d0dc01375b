"""The calculator task as an agent program against the native tool environment, on SmolLM2-135M-Instruct
(recipes/smollm2_agent_calculator.yaml against recipes/smollm2_tool_use.yaml; issue 53's real-model evidence).

    python -m benchmarks.real_agent_tools train --arm format --seeds 0 1 2 [--output runs/real_agent_tools]
    python -m benchmarks.real_tool_use train --arm format --seeds 0 1 2      # the native arm, if not run yet
    python -m benchmarks.real_agent_tools summary --arm format [--native runs/real_tool_use] [--plot PNG]

Arms as the native benchmark's: `rl` (the verifier alone: the recipe's `agent`) and `format` (plus 0.5 for an
episode whose calls were all well formed: `agent_with_call_reward`). `train` runs the agent recipe seed by seed
(resumable: a stopped seed continues from its last checkpoint) into OUTPUT/ARM/seedN. `summary` prints, per
evaluation step, the held-out greedy episodes' exact accuracy (benchmarks/real_model.py's exact check on the last
assistant turn, apart from the reward) as mean ± sd over seeds for the agent arm and the native arm of the same
name, and the agent runs' time figures from metrics.jsonl (benchmarks.common.time_figures: ms per call, calls per
engine batch, the share of generation wall time outside the engine, seconds per step). The endpoint's
overhead against a direct engine call on the same prompts: benchmarks/endpoint_overhead.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, commit, has_checkpoints, mean_sd, save_figure, time_figures, train_resumably
from benchmarks.real_model import eval_curve

RECIPE = ROOT / "recipes" / "smollm2_agent_calculator.yaml"
AGENT = ROOT / "recipes" / "data" / "calculator_agent.py"
ARMS = {"rl": "agent", "format": "agent_with_call_reward"}  # arm -> the agent function


def train(args) -> None:
    out = Path(args.output) / args.arm
    out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        if (out / f"seed{seed}.json").is_file():
            print(f"seed {seed}: finished earlier, kept ({out / f'seed{seed}.json'})")
            continue
        run_dir, t0, resumed = out / f"seed{seed}", time.perf_counter(), has_checkpoints(out / f"seed{seed}")
        settings = [f"seed={seed}", f"data.tasks.0.env.args.function={AGENT}:{ARMS[args.arm]}", *args.set]
        seconds = train_resumably([str(RECIPE), *settings], run_dir, out / f"seed{seed}.log")
        result = {"arm": args.arm, "seed": seed, "commit": commit(), "resumed": resumed, "rl_seconds": seconds,
                  "wall_seconds": time.perf_counter() - t0, "evals": eval_curve(run_dir)}
        (out / f"seed{seed}.json").write_text(json.dumps(result, indent=1))


def seed_curves(arm_dir: Path, finished_only: bool = True) -> dict[str, list[tuple[int, float]]]:
    """Seed -> its (step, held-out exact accuracy) points; only the seeds that finished (seedN.json) unless told."""
    return {run_dir.name: [(p["step"], p["exact"]) for p in eval_curve(run_dir)]
            for run_dir in sorted(arm_dir.glob("seed[0-9]"))
            if not finished_only or run_dir.with_suffix(".json").is_file()}


def plot(arms: dict[str, Path], path: Path) -> None:
    """Held-out exact accuracy against steps, each arm's seeds thin and their mean thick."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for (label, arm_dir), color in zip(arms.items(), ("tab:green", "tab:blue")):
        runs = seed_curves(arm_dir)
        if not runs:
            continue
        for points in runs.values():
            ax.plot(*zip(*[(s, 100 * v) for s, v in points]), color=color, alpha=0.3)
        means = curves(arm_dir)
        ax.plot(sorted(means), [100 * sum(means[s]) / len(means[s]) for s in sorted(means)], color=color,
                marker="o", linewidth=2, label=f"{label}, mean of {len(runs)} seeds")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("held-out exact accuracy (%), greedy")
    save_figure(fig, path, title="SmolLM2-135M-Instruct, the calculator task (thin: seeds)", panels=[ax])


def curves(arm_dir: Path) -> dict[int, list[float]]:
    """Step -> the finished seeds' held-out exact accuracy."""
    by_step: dict[int, list[float]] = {}
    for points in seed_curves(arm_dir).values():
        for step, exact in points:
            by_step.setdefault(step, []).append(exact)
    return by_step


def summary(args) -> None:
    mine, theirs = Path(args.output) / args.arm, Path(args.native) / args.arm
    agent, native = curves(mine), curves(theirs)
    pct = lambda v: f"{100 * v:.0f}%"  # noqa: E731
    print(f"arm {args.arm}\n\n| step | agent program (exact) | native tools env (exact) |\n|---|---|---|")
    for step in sorted(set(agent) | set(native)):
        print(f"| {step} | {mean_sd(agent.get(step, []), pct)} | {mean_sd(native.get(step, []), pct)} |")
    for name, points in seed_curves(mine, finished_only=False).items():
        finished = (mine / f"{name}.json").is_file()
        print(f"{name}{'' if finished else ' (not finished)'}: " + " / ".join(f"{pct(v)}" for _, v in points) +
              " (steps " + ", ".join(str(step) for step, _ in points) + ")")
    for run_dir in sorted(mine.glob("seed[0-9]")):
        figures = time_figures(run_dir)
        if "call_ms" in figures:
            print(f"{run_dir.name}: {figures['call_ms']:.0f} ms per call (latency: the engine and the wait for its batch), "
                  f"{figures['calls_per_batch']:.1f} calls per engine batch, "
                  f"{100 * figures['outside_engine_share']:.1f}% of generation wall time outside the engine, "
                  f"{figures['step_s']:.1f} s per training step")
    if args.plot:
        plot({f"agent program (OpenAI client, tools), {args.arm}": mine,
              f"native tool environment, {args.arm}": theirs}, Path(args.plot))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--arm", choices=list(ARMS), required=True)
    t.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    t.add_argument("--output", default="runs/real_agent_tools")
    t.add_argument("--set", nargs="*", default=[], help="more recipe overrides")
    m = sub.add_parser("summary")
    m.add_argument("--arm", choices=list(ARMS), required=True)
    m.add_argument("--output", default="runs/real_agent_tools")
    m.add_argument("--native", default="runs/real_tool_use", help="benchmarks.real_tool_use's --output")
    m.add_argument("--plot", default=None)
    args = parser.parse_args()
    {"train": train, "summary": summary}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
