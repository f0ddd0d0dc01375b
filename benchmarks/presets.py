"""Presets side by side on the quickstart: held-out accuracy against RL step, several seeds each.

For each seed the quickstart's tiny model is SFT-warmed once (the shared start); each preset then runs
GRPO-family RL from that start with the quickstart's settings (only `algorithm.preset` differs, plus
what the preset implies) and is evaluated on the same held-out problems every `--eval-every` steps.
Writes a table (Markdown and JSON) and a PNG of mean held-out accuracy against step.

    .venv/bin/python benchmarks/presets.py [--presets grpo dapo ...] [--seeds 0 1 2] [--steps 150]
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
from rlvr.quickstart import RECIPE  # noqa: E402
from rlvr.training.sft import run_sft  # noqa: E402
from rlvr.training.trainer import Trainer  # noqa: E402

DEFAULT = ["grpo", "dr_grpo", "dapo", "gspo", "w_reinforce", "forking_tokens", "ngrpo"]


def accuracy_curve(run_dir: Path) -> list[tuple[int, float]]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [(r["step"], r["eval/accuracy"]) for r in rows if r.get("eval/accuracy") is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=DEFAULT)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--output", default="runs/presets")
    parser.add_argument("--start", help="reuse SFT models, e.g. 'runs/qs{seed}/sft' (the quickstart's, same recipe)")
    args = parser.parse_args()
    out = Path(args.output)
    curves: dict[str, list[list[tuple[int, float]]]] = {p: [] for p in args.presets}
    for seed in args.seeds:
        base = [f"seed={seed}", "tracking.console=false", f"steps={args.steps}", f"eval.every_steps={args.eval_every}"]
        if args.start:  # an SFT model the quickstart already made with this recipe and seed
            start = args.start.format(seed=seed)
        else:
            start = run_sft(load_config(RECIPE, [*base, "sft.epochs=30", "sft.stop_at_accuracy=null",  # the fixed-epoch start of docs/results.md
                                                 f"sft.output_dir={out / f'seed{seed}' / 'start'}"]))
        for preset in args.presets:
            run_dir = out / f"seed{seed}" / preset
            cfg = load_config(RECIPE, [*base, f"model.name={start}", f"tracking.output_dir={run_dir}",
                                       f"algorithm={{preset: {preset}}}"])
            Trainer(cfg).fit()
            curves[preset].append(accuracy_curve(run_dir))
            print(f"seed {seed} {preset}: {curves[preset][-1][0][1]:.3f} -> {curves[preset][-1][-1][1]:.3f}", flush=True)

    results = {}
    for preset, runs in curves.items():
        finals = [run[-1][1] for run in runs]
        results[preset] = {"start": statistics.mean(run[0][1] for run in runs), "final_mean": statistics.mean(finals),
                           "final_std": statistics.stdev(finals) if len(finals) > 1 else 0.0, "finals": finals}
    lines = [f"| preset | after SFT | after {args.steps} RL steps (mean ± sd over {len(args.seeds)} seeds) | per seed |",
             "|---|---|---|---|"]
    for preset, r in results.items():
        per_seed = ", ".join(f"{100 * f:.1f}" for f in r["finals"])
        lines.append(f"| {preset} | {100 * r['start']:.1f}% | {100 * r['final_mean']:.1f}% ± {100 * r['final_std']:.1f} "
                     f"| {per_seed} |")
    table = "\n".join(lines)
    print(table)
    (out / "presets.md").write_text(table + "\n")
    (out / "presets.json").write_text(json.dumps({"args": vars(args), "results": results, "curves": curves}))

    fig, ax = plt.subplots(figsize=(8, 5))
    for preset, runs in curves.items():
        steps = [s for s, _ in runs[0]]
        mean = [100 * statistics.mean(run[i][1] for run in runs) for i in range(len(steps))]
        ax.plot(steps, mean, marker="o", label=preset)
    ax.set(xlabel="RL step", ylabel="held-out greedy accuracy (%)", ylim=(0, 100),
           title=f"Quickstart task: presets from the same SFT start (mean of {len(args.seeds)} seeds)")
    ax.grid(alpha=0.3)
    ax.legend(title="algorithm.preset")
    fig.tight_layout()
    fig.savefig(out / "presets.png", dpi=120)
    print(f"wrote {out / 'presets.md'}, {out / 'presets.png'}")


if __name__ == "__main__":
    main()
