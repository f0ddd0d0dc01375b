"""The quickstart, end to end on a CPU: build a tokenizer and a tiny model, SFT-warm it on a few
demonstrations, run GRPO on fresh prompts with only the verifier, and compare held-out accuracy."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rlvr.config import RECIPES, RunConfig, load_config
from rlvr.evaluation.evaluate import eval_settings, evaluate_model
from rlvr.tracking.jsonl import read_jsonl
from rlvr.watchdog import WATCH

RECIPE = RECIPES / "quickstart.yaml"


def evaluate_checkpoint(cfg: RunConfig, model_dir: str, num_problems: int) -> float:
    """Greedy held-out accuracy of a saved model on the config's tasks."""
    settings = replace(eval_settings(cfg), num_problems=num_problems, samples=0, ks=[])
    with WATCH.watch(cfg.tracking.stall_warning_s):
        return evaluate_model(cfg, model_dir, settings).summary(with_ci=False)["greedy"]["value"]


def run_quickstart(seed: int = 0, output_dir: str = "runs/quickstart", overrides: list[str] | None = None,
                   recipe: str | Path = RECIPE) -> dict:
    from rlvr.reporting.plotting import plot_rl_curves
    from rlvr.training.sft import accuracy_stop, run_sft
    from rlvr.training.trainer import Trainer

    start = time.perf_counter()
    console = Console()
    out = Path(output_dir)
    shutil.rmtree(out, ignore_errors=True)  # the quickstart owns its output directory: every run starts clean
    base = [f"seed={seed}", *(overrides or [])]
    sft_cfg = load_config(recipe, [*base, f"tracking.output_dir={out}", f"sft.output_dir={out / 'sft'}"])
    stop = accuracy_stop(sft_cfg)  # the recipe's sft.stop_at_accuracy: every seed starts RL at one level
    until = f" until {stop.target:.0%} held-out accuracy" if stop else ""
    console.rule(f"[bold]1/3 tokenizer, tiny model, SFT on demonstrations{until} (at most {sft_cfg.sft.epochs} epochs)")
    sft_dir = run_sft(sft_cfg, stop)
    console.rule("[bold]2/3 GRPO on fresh prompts (verifier reward only)")
    rl_cfg = load_config(recipe, [*base, f"model.name={sft_dir}", f"tracking.output_dir={out / 'rl'}"])
    Trainer(rl_cfg).fit()
    console.rule("[bold]3/3 results")
    rows = read_jsonl(out / "rl" / "metrics.jsonl")
    evals = [(r["step"], r["eval/accuracy"]) for r in rows if r.get("eval/accuracy") is not None]
    summary = {
        "accuracy_after_sft": evals[0][1],
        "accuracy_after_rl": evals[-1][1],
        "rl_steps": rl_cfg.steps,
        "wall_seconds": round(time.perf_counter() - start, 1),
        "seed": seed,
        "eval_problems": rl_cfg.eval.num_problems,
        "sft_demonstrations": sft_cfg.sft.num_examples,
        "sft_target": sft_cfg.sft.stop_at_accuracy,
        "sft_steps": stop.history[-1][0] if stop and stop.history else 0,
        "sft_held_out_accuracy": stop.history[-1][1] if stop and stop.history else None,
        "sft_model": str(sft_dir),
        "rl_model": str(sorted((out / "rl" / "checkpoints").glob("step-*"))[-1]),
        "accuracy_curve": evals,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    plot = plot_rl_curves(rows, out / "rl_curves.png", f"rlvr quickstart (seed {seed}): GRPO after SFT")
    table = Table(title="Held-out greedy accuracy")
    for col in ("stage", "accuracy", "problems"):
        table.add_column(col)
    table.add_row("after SFT", f"{100 * summary['accuracy_after_sft']:.1f}%", str(rl_cfg.eval.num_problems))
    table.add_row(f"after RL ({rl_cfg.steps} steps)", f"{100 * summary['accuracy_after_rl']:.1f}%",
                  str(rl_cfg.eval.num_problems))
    console.print(table)
    console.print(f"wall time {summary['wall_seconds']} s; summary {out / 'summary.json'}; plot {plot}")
    return summary
