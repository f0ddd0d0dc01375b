"""Samplers and group filters side by side on a mixture of three reasoning-gym tasks of different difficulty.

For each seed the quickstart-scale model is SFT-warmed once on `recipes/curriculum.yaml` (the shared start).
Each setup then runs RL from that start with the recipe's settings; only `data.sampler` and `data.filter`
differ. Every run is evaluated on the same held-out problems (100 per task) every `eval.every_steps` steps.
The target accuracy is fixed for the whole benchmark: the mean held-out accuracy of the SFT starts plus
`--gain`. The script reports the steps and the wall time each setup needed to reach it (wall time is the sum of
step times, evaluations included), and the final accuracy, overall and per task. It writes a Markdown table,
JSON, and a PNG of held-out accuracy against step and against wall time.

    .venv/bin/python benchmarks/curriculum.py [--seeds 0 1 2] [--steps 120] [--gain 0.08] [--output runs/curriculum]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rlvr.config import load_config  # noqa: E402
from rlvr.training.sft import run_sft  # noqa: E402
from rlvr.training.trainer import Trainer  # noqa: E402

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "curriculum.yaml"
SETUPS = {  # name -> overrides
    "uniform": ["data.sampler=uniform", "data.filter=none"],
    "difficulty filter": ["data.sampler=uniform", "data.filter={name: pass_rate, args: {low: 0.25, high: 0.75}}"],
    "dynamic sampling": ["data.sampler=uniform", "data.filter=dynamic_sampling"],
    "UCB (DUMP)": ["data.sampler={name: ucb, args: {c: 1.0, temperature: 0.1}}", "data.filter=none"],
}


def curve(run_dir: Path) -> list[dict]:
    """(step, wall seconds so far, held-out accuracy overall and per task) at every evaluation."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    points, wall = [], 0.0
    for r in rows:
        wall += r.get("perf/step_s") or 0.0
        if r.get("eval/accuracy") is not None:
            per_task = {k.split("/")[1]: v for k, v in r.items() if k.startswith("eval/") and k.endswith("/accuracy")
                        and k.count("/") == 2}
            points.append({"step": r["step"], "wall_s": wall, "accuracy": r["eval/accuracy"], "per_task": per_task})
    return points


def first_reaching(points: list[dict], target: float) -> dict | None:
    return next((p for p in points if p["accuracy"] >= target), None)


def mean_sd(values: list[float]) -> str:
    if not values:
        return "—"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.0f} ± {sd:.0f}" if max(values) > 1.5 else \
        f"{100 * statistics.mean(values):.1f}% ± {100 * sd:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--gain", type=float, default=0.08, help="target = mean SFT-start accuracy + gain")
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=list(SETUPS))
    parser.add_argument("--output", default="runs/curriculum")
    args = parser.parse_args()
    out = Path(args.output)
    curves: dict[str, list[list[dict]]] = {name: [] for name in args.setups}
    for seed in args.seeds:
        base = [f"seed={seed}", "tracking.console=false", f"steps={args.steps}"]
        start = run_sft(load_config(RECIPE, [*base, f"sft.output_dir={out / f'seed{seed}' / 'start'}"]))
        for name in args.setups:
            run_dir = out / f"seed{seed}" / name.split()[0].lower()
            cfg = load_config(RECIPE, [*base, f"model.name={start}", f"tracking.output_dir={run_dir}", *SETUPS[name]])
            Trainer(cfg).fit()
            curves[name].append(curve(run_dir))
            c = curves[name][-1]
            print(f"seed {seed} {name}: {c[0]['accuracy']:.3f} -> {c[-1]['accuracy']:.3f} in {c[-1]['wall_s']:.0f} s",
                  flush=True)

    starts = [runs[0]["accuracy"] for runs_of_setup in curves.values() for runs in runs_of_setup]
    target = statistics.mean(starts) + args.gain
    tasks = list(next(iter(curves.values()))[0][-1]["per_task"])
    results = {}
    for name, runs in curves.items():
        hits = [first_reaching(run, target) for run in runs]
        results[name] = {
            "reached": sum(h is not None for h in hits), "runs": len(runs),
            "steps_to_target": [h["step"] for h in hits if h], "wall_s_to_target": [h["wall_s"] for h in hits if h],
            "final": [run[-1]["accuracy"] for run in runs], "total_wall_s": [run[-1]["wall_s"] for run in runs],
            "final_per_task": {t: [run[-1]["per_task"][t] for run in runs] for t in tasks},
        }
    header = (f"| setup | reached {100 * target:.1f}% | steps to target | wall s to target | final accuracy | "
              + " | ".join(f"final {t}" for t in tasks) + " | total wall s |")
    lines = [header, "|" + "---|" * (6 + len(tasks))]
    for name, r in results.items():
        lines.append(f"| {name} | {r['reached']}/{r['runs']} | {mean_sd(r['steps_to_target'])} | "
                     f"{mean_sd(r['wall_s_to_target'])} | {mean_sd(r['final'])} | "
                     + " | ".join(mean_sd(r["final_per_task"][t]) for t in tasks)
                     + f" | {mean_sd(r['total_wall_s'])} |")
    table = "\n".join(lines)
    summary = (f"SFT start: {100 * statistics.mean(starts):.1f}% held-out accuracy (mean over seeds); target "
               f"{100 * target:.1f}%; {args.steps} RL steps; seeds {args.seeds}; means ± sd over seeds, "
               f"'steps/wall to target' over the seeds that reached it.")
    print(summary)
    print(table)
    out.mkdir(parents=True, exist_ok=True)
    (out / "curriculum.md").write_text(summary + "\n\n" + table + "\n")
    (out / "curriculum.json").write_text(json.dumps({"args": vars(args), "target": target, "results": results,
                                                     "curves": curves}, indent=1))
    plot(curves, target, out / "curriculum.png")
    print(f"wrote {out / 'curriculum.md'}, {out / 'curriculum.json'}, {out / 'curriculum.png'}")


def plot(curves: dict[str, list[list[dict]]], target: float, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for name, runs in curves.items():
        n = min(len(run) for run in runs)
        accuracy = [100 * statistics.mean(run[i]["accuracy"] for run in runs) for i in range(n)]
        axes[0].plot([runs[0][i]["step"] for i in range(n)], accuracy, marker="o", markersize=3, label=name)
        axes[1].plot([statistics.mean(run[i]["wall_s"] for run in runs) for i in range(n)], accuracy, marker="o",
                     markersize=3, label=name)
    for ax, xlabel in zip(axes, ("RL step", "wall time (s, mean over seeds)")):
        ax.axhline(100 * target, color="gray", linestyle="--", linewidth=1, label=f"target {100 * target:.1f}%")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("held-out greedy accuracy (%, mean over seeds)")
    axes[0].legend()
    fig.suptitle(f"Samplers and filters on a 3-task reasoning-gym mixture ({len(next(iter(curves.values())))} seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
