"""The quickstart over several seeds: SFT start, RL end, gain and wall time per seed, mean and spread, and a plot.

One seed at a time (each run uses the whole machine), so the seconds are comparable between seeds.

    .venv/bin/python benchmarks/quickstart_seeds.py [--seeds 0 1 2 3 4] [--output runs/quickstart_seeds]
        [--plot docs/img/quickstart_seeds.png]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rlvr.quickstart import run_quickstart


def load_average() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def plot(rows: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = [r["seed"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for r in rows:
        ax.annotate("", xy=(r["seed"], 100 * r["accuracy_after_rl"]), xytext=(r["seed"], 100 * r["accuracy_after_sft"]),
                    arrowprops={"arrowstyle": "->", "color": "grey"})
    ax.scatter(seeds, [100 * r["accuracy_after_sft"] for r in rows], label="after SFT (stops at 45% held-out)",
               color="tab:blue", zorder=3)
    ax.scatter(seeds, [100 * r["accuracy_after_rl"] for r in rows], label="after 500 GRPO steps (verifier only)",
               color="tab:orange", zorder=3)
    ax.axhspan(30, 65, color="tab:blue", alpha=0.08, label="SFT start band asked for (30-65%)")
    ax.set_xticks(seeds)
    ax.set_xlabel("seed")
    ax.set_ylabel("held-out greedy accuracy (%), 200 problems")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--output", default="runs/quickstart_seeds")
    ap.add_argument("--plot", default=None, help="PNG path (default: <output>/quickstart_seeds.png)")
    args = ap.parse_args()
    out = Path(args.output)
    rows = []
    for seed in args.seeds:
        before = load_average()
        summary = run_quickstart(seed=seed, output_dir=str(out / f"seed{seed}"))
        rows.append({k: summary[k] for k in ("seed", "accuracy_after_sft", "accuracy_after_rl", "wall_seconds",
                                             "sft_steps", "sft_held_out_accuracy")}
                    | {"load_before": before, "load_after": load_average()})
        (out / "seeds.json").write_text(json.dumps({"commit": commit(), "rows": rows}, indent=2))
    table = Table(title=f"rlvr quickstart over seeds (commit {commit()})")
    for col in ("seed", "after SFT", "after GRPO", "gain", "SFT steps", "seconds", "load (1/5/15 min) after"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r["seed"]), f"{100 * r['accuracy_after_sft']:.1f}%", f"{100 * r['accuracy_after_rl']:.1f}%",
                      f"+{100 * (r['accuracy_after_rl'] - r['accuracy_after_sft']):.1f}", str(r["sft_steps"]),
                      f"{r['wall_seconds']:.0f}", r["load_after"])
    for name, key in (("after SFT", "accuracy_after_sft"), ("after GRPO", "accuracy_after_rl")):
        values = [100 * r[key] for r in rows]
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        table.caption = (table.caption or "") + f"{name}: mean {statistics.mean(values):.1f}%, sd {spread:.1f}, " \
                        f"range {min(values):.1f}-{max(values):.1f}. "
    Console().print(table)
    path = plot(rows, Path(args.plot) if args.plot else out / "quickstart_seeds.png",
                f"rlvr quickstart, seeds {args.seeds[0]}-{args.seeds[-1]} (commit {commit()})")
    print(f"table {out / 'seeds.json'}; plot {path}")


if __name__ == "__main__":
    main()
