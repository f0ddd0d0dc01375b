"""Training on a noisy verifier (`rewards.noise_correction`, Cai et al. 2025, arXiv 2510.00915): the quickstart with
a share of the verifier's verdicts flipped each way, uncorrected and with the backward and forward corrections,
next to the clean run, over seeds; held-out greedy accuracy after RL and each noisy run's distance from the clean.
Accuracies are those of the SFT model and the final checkpoint scored afterwards by a fresh evaluator (clean
verdicts), not the runs' own eval/accuracy.

Every variant of a seed starts from that seed's one SFT model and differs only in `rewards.noise_correction`. The
estimator is `reinforce` with the constant baseline `algorithm.reward_baseline` (default 0): under the quickstart's
`grpo` both corrections vanish in the group z-score, under `rloo`/`dr_grpo` forward (a shift) vanishes and backward
is only a scale; a fixed baseline is where both act (docs/rewards.md, "When a correction changes training").

    .venv/bin/python benchmarks/noisy_rewards.py [--seeds 0 1 2] [--steps 500] [--rate 0.2]
        [--output runs/noisy_rewards] [--set KEY=VALUE ...] [--plot PNG]

Each run writes OUTPUT/seedS/VARIANT/result.json and is skipped when that exists, so seeds can run in parallel
invocations on one OUTPUT (a variant another invocation is training is left to it); the table covers every
finished run there. A seed whose OUTPUT/seedS/sft holds a model starts from it (e.g. the quickstart's own SFT
model of that seed) instead of training one.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rlvr.config import load_config
from rlvr.quickstart import RECIPE, evaluate_checkpoint
from rlvr.training.setup import output_dir_holder
from rlvr.training.sft import accuracy_stop, run_sft
from rlvr.training.trainer import Trainer

VARIANTS = ("clean", "noisy", "backward", "forward")


def noise_overrides(variant: str, rate: float, seed: int) -> list[str]:
    """`rewards.noise_correction` for a variant: none, or `rate` flips each way with no/backward/forward correction
    at the known rates."""
    if variant == "clean":
        return []
    method = "none" if variant == "noisy" else variant
    return [f"rewards.noise_correction.inject={{false_positive_rate: {rate}, false_negative_rate: {rate}, "
            f"seed: {seed}}}", f"rewards.noise_correction.method={method}",
            f"rewards.noise_correction.false_positive_rate={rate}",
            f"rewards.noise_correction.false_negative_rate={rate}"]


@functools.cache
def clean_accuracy(model: Path, seed: int, common: tuple[str, ...]) -> float:
    """Greedy held-out accuracy of a model, scored by a fresh evaluator (rlvr eval's: no noise channel), on the
    recipe's held-out problems; once per model (a seed's variants share their SFT start)."""
    cfg = load_config(RECIPE, [f"seed={seed}", *common])
    return evaluate_checkpoint(cfg, str(model), cfg.eval.num_problems)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--rate", type=float, default=0.2, help="false-positive = false-negative rate injected")
    ap.add_argument("--output", default="runs/noisy_rewards")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="more config overrides for every run (e.g. algorithm.reward_baseline=0.5)")
    ap.add_argument("--plot", default=None, help="PNG of held-out accuracy per variant and seed")
    args = ap.parse_args()
    out = Path(args.output)
    common = [f"steps={args.steps}", "algorithm.advantage=reinforce", f"eval.every_steps={args.steps}",
              *args.overrides]
    for seed in args.seeds:
        base = [f"seed={seed}", *common]
        sft_dir = out / f"seed{seed}" / "sft"
        if not (sft_dir / "config.json").exists():
            sft_cfg = load_config(RECIPE, [*base, f"tracking.output_dir={out / f'seed{seed}'}",
                                           f"sft.output_dir={sft_dir}"])
            run_sft(sft_cfg, accuracy_stop(sft_cfg))
        for variant in VARIANTS:
            run_dir = out / f"seed{seed}" / variant
            if (run_dir / "result.json").exists():  # done by an earlier (or a parallel) invocation
                continue
            if holder := output_dir_holder(run_dir):  # a parallel invocation is training it: never delete it
                print(f"{run_dir}: in progress elsewhere ({holder}), skipped")
                continue
            shutil.rmtree(run_dir, ignore_errors=True)
            cfg = load_config(RECIPE, [*base, f"model.name={sft_dir}", f"tracking.output_dir={run_dir}",
                                       *noise_overrides(variant, args.rate, seed)])
            start = time.perf_counter()
            Trainer(cfg).fit()
            (run_dir / "result.json").write_text(json.dumps(
                {"seed": seed, "variant": variant, "seconds": round(time.perf_counter() - start, 1),
                 "args": vars(args)}, indent=2))
    rows = []
    for path in sorted(out.glob("seed*/*/result.json")):
        row = json.loads(path.read_text())
        if "clean_eval" not in row:  # scored once, by a clean evaluator
            final = sorted((path.parent / "checkpoints").glob("step-*"))[-1]
            row["accuracy_before"], row["accuracy_after"] = (clean_accuracy(model, row["seed"], tuple(common))
                                                             for model in (path.parent.parent / "sft", final))
            row["clean_eval"] = True
            path.write_text(json.dumps(row, indent=2))
        rows.append(row)
    print_table(rows, args)
    if args.plot:
        plot_variants(rows, args, Path(args.plot))


def finished(rows: list[dict]) -> tuple[dict[tuple[int, str], float], list[int]]:
    """Held-out accuracy after RL by (seed, variant), and the seeds whose every variant has finished."""
    acc = {(r["seed"], r["variant"]): r["accuracy_after"] for r in rows}
    return acc, sorted({r["seed"] for r in rows if all((r["seed"], v) in acc for v in VARIANTS)})


def print_table(rows: list[dict], args: argparse.Namespace) -> None:
    """Held-out accuracy after RL per seed and variant, each noisy run's |distance| from the clean run, means."""
    acc, seeds = finished(rows)
    table = Table(title=f"Quickstart, reinforce, {args.steps} steps, {args.rate:.0%} of verdicts flipped each way: "
                        "held-out greedy accuracy after RL (|distance from clean|)")
    for col in ("seed", "after SFT", *VARIANTS):
        table.add_column(col, justify="right")
    start = {r["seed"]: r["accuracy_before"] for r in rows}
    for seed in seeds:
        clean = acc[seed, "clean"]
        table.add_row(str(seed), f"{100 * start[seed]:.1f}%", f"{100 * clean:.1f}%",
                      *(f"{100 * acc[seed, v]:.1f}% ({100 * abs(acc[seed, v] - clean):.1f})" for v in VARIANTS[1:]))
    if seeds:
        def mean(values) -> str:
            return f"{100 * statistics.mean(values):.1f}"

        table.add_row("mean", f"{mean(start[s] for s in seeds)}%", f"{mean(acc[s, 'clean'] for s in seeds)}%",
                      *(f"{mean(acc[s, v] for s in seeds)}% ({mean(abs(acc[s, v] - acc[s, 'clean']) for s in seeds)})"
                        for v in VARIANTS[1:]))
    Console().print(table)
    seconds = [r["seconds"] for r in rows]
    print(f"{len(rows)} RL runs, {min(seconds):.0f}-{max(seconds):.0f} s each; results {args.output}/seed*/*/result.json")


def plot_variants(rows: list[dict], args: argparse.Namespace, path: Path) -> None:
    """Held-out accuracy after RL of each variant: one bar per seed, the mean over seeds as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fractions, seeds = finished(rows)
    acc = {key: 100 * value for key, value in fractions.items()}
    width = 0.8 / len(seeds)
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    for k, seed in enumerate(seeds):
        ax.bar([i - 0.4 + (k + 0.5) * width for i in range(len(VARIANTS))], [acc[seed, v] for v in VARIANTS],
               width, alpha=0.75, label=f"seed {seed}")
    for i, v in enumerate(VARIANTS):
        ax.hlines(statistics.mean(acc[s, v] for s in seeds), i - 0.42, i + 0.42, color="black", linewidth=2)
    ax.set_xticks(range(len(VARIANTS)), ["clean", "noisy,\nuncorrected", "backward", "forward"])
    ax.set_ylabel("held-out greedy accuracy after RL (%)")
    low = min(acc.values())
    ax.set_ylim(max(0, low - 15), 100)
    extra = ", ".join(args.overrides)
    ax.set_title(f"Quickstart, reinforce{', ' + extra if extra else ''}, {args.steps} steps, "
                 f"{args.rate:.0%} of verdicts flipped each way\n(bars: seeds, black: their mean)", fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
