"""Same start, same wall time: GRPO on fresh prompts vs. continued SFT on the same demonstrations.

For each seed: SFT-warm the quickstart's tiny model on its fixed demonstrations (the shared start),
then (a) run the quickstart's GRPO and time it, (b) continue SFT on the same demonstrations for
exactly that wall time. Report held-out greedy accuracy of the start and of both branches.

    .venv/bin/python benchmarks/rl_vs_sft.py [--seeds 0 1 2] [--steps N] [--output runs/rl_vs_sft]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rlvr.config import load_config
from rlvr.quickstart import RECIPE, evaluate_checkpoint
from rlvr.training.sft import run_sft
from rlvr.training.trainer import Trainer


def one_seed(seed: int, out: Path, eval_problems: int, steps: int | None) -> dict:
    # sft.epochs=30: the fixed-epoch SFT start these figures were measured with (the quickstart now stops SFT at a
    # held-out accuracy target instead).
    base = [f"seed={seed}", "tracking.console=false", "sft.epochs=30", "sft.stop_at_accuracy=null", *([f"steps={steps}"] if steps else [])]
    start_dir = run_sft(load_config(RECIPE, [*base, f"sft.output_dir={out / 'start'}"]))
    rl_cfg = load_config(RECIPE, [*base, f"model.name={start_dir}", f"tracking.output_dir={out / 'rl'}",
                                  "eval.every_steps=0"])
    t0 = time.perf_counter()
    Trainer(rl_cfg).fit()
    budget = time.perf_counter() - t0
    rl_dir = sorted((out / "rl" / "checkpoints").glob("step-*"))[-1]
    sft_cfg = load_config(RECIPE, [*base, f"model.name={start_dir}", f"sft.output_dir={out / 'more_sft'}",
                                   f"sft.time_budget_s={budget}", "sft.epochs=100000"])
    t0 = time.perf_counter()
    more_sft_dir = run_sft(sft_cfg)
    sft_seconds = time.perf_counter() - t0
    cfg = load_config(RECIPE, base)
    return {
        "seed": seed,
        "start": evaluate_checkpoint(cfg, str(start_dir), eval_problems),
        "grpo": evaluate_checkpoint(cfg, str(rl_dir), eval_problems),
        "more_sft": evaluate_checkpoint(cfg, str(more_sft_dir), eval_problems),
        "grpo_seconds": round(budget, 1),
        "more_sft_seconds": round(sft_seconds, 1),
        "grpo_steps": rl_cfg.steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--output", default="runs/rl_vs_sft")
    parser.add_argument("--eval-problems", type=int, default=200)
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the quickstart's)")
    args = parser.parse_args()
    results = [one_seed(s, Path(args.output) / f"seed{s}", args.eval_problems, args.steps) for s in args.seeds]
    table = Table(title="Held-out greedy accuracy: same start, same wall time")
    for col in ("seed", "after SFT (start)", "+ GRPO, fresh prompts", "+ more SFT, same demos", "seconds each"):
        table.add_column(col)
    for r in results:
        table.add_row(str(r["seed"]), f"{100 * r['start']:.1f}%", f"{100 * r['grpo']:.1f}%",
                      f"{100 * r['more_sft']:.1f}%", f"{r['grpo_seconds']} / {r['more_sft_seconds']}")
    mean = {k: sum(r[k] for r in results) / len(results) for k in ("start", "grpo", "more_sft")}
    table.add_row("mean", *(f"{100 * mean[k]:.1f}%" for k in ("start", "grpo", "more_sft")), "")
    Console().print(table)
    print(json.dumps({"results": results, "mean": mean}))


if __name__ == "__main__":
    main()
