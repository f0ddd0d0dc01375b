"""Does second-attempt success rise when training with 'try again' feedback? (docs/results.md)

SFT on try-again conversations (recipes/try_again.yaml): most answer right at once; in a fraction (--retry-frac)
a wrong first answer (context only, not trained on) hears "Incorrect. Try again." and the right answer follows, so
the model knows the shape of a second attempt; then GRPO on try-again episodes. Per step the training log holds
reward/verifier/first_attempt_success (mean over episodes) and reward/verifier/second_attempt_success (mean over
episodes wrong at the first attempt); this script plots both, smoothed, per seed, to try_again.png under --out.

    python benchmarks/try_again.py  # seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
from pathlib import Path

from rlvr.config import load_config
from rlvr.sft import run_sft
from rlvr.tasks import make_tasks
from rlvr.trainer import Trainer

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "try_again.yaml"
KEYS = {"first_attempt_success": "reward/verifier/first_attempt_success",
        "second_attempt_success": "reward/verifier/second_attempt_success"}


def write_demonstrations(cfg, path: Path, retry_frac: float) -> None:
    """Try-again conversations for the task's train stream at seed + 1; a wrong first answer is off by 1 to 10."""
    task = make_tasks(cfg.data.tasks, cfg.seed + cfg.sft.seed_offset)[0]
    feedback = cfg.data.tasks[0].env.args.get("feedback", "Incorrect. Try again.")
    rng = random.Random(cfg.seed)
    rows = []
    for i in range(cfg.sft.num_examples):
        p = task.problem("train", i)
        messages = [{"role": "user", "content": p.prompt}]
        if rng.random() < retry_frac:
            wrong = int(p.answer) + rng.choice([-1, 1]) * rng.randint(1, 10)
            messages += [{"role": "assistant", "content": str(wrong), "train": False},  # context, not a target
                         {"role": "user", "content": feedback}]
        rows.append({"messages": messages + [{"role": "assistant", "content": p.answer}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def run(seed: int, root: Path, steps: int | None, retry_frac: float) -> list[dict]:
    out = root / f"seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    base = [f"seed={seed}", *([f"steps={steps}"] if steps else [])]
    demos = out / "demonstrations.jsonl"
    write_demonstrations(load_config(RECIPE, base), demos, retry_frac)
    sft_dir = run_sft(load_config(RECIPE, [*base, f"tracking.output_dir={out}", f"sft.output_dir={out / 'sft'}",
                                           f"sft.data_file={demos}", "sft.messages_column=messages"]))
    Trainer(load_config(RECIPE, [*base, f"model.name={sft_dir}", f"tracking.output_dir={out / 'rl'}"])).fit()
    return [json.loads(line) for line in (out / "rl" / "metrics.jsonl").read_text().splitlines() if line.strip()]


def smooth(values: list[float], window: int) -> list[float]:
    out = []
    for i in range(len(values)):
        part = [v for v in values[max(0, i - window + 1) : i + 1] if not math.isnan(v)]
        out.append(sum(part) / len(part) if part else float("nan"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--window", type=int, default=15, help="moving-average window in steps")
    parser.add_argument("--retry-frac", type=float, default=0.3, help="demonstrations with a wrong first answer")
    parser.add_argument("--out", default="runs/try_again_bench")
    args = parser.parse_args()
    root = Path(args.out)
    curves = {}
    for seed in args.seeds:
        rows = [r for r in run(seed, root, args.steps, args.retry_frac) if KEYS["first_attempt_success"] in r]
        # a step with no wrong first answer logs second_attempt_success as NaN, which metrics.jsonl writes as null
        curves[seed] = {name: [_number(r.get(key)) for r in rows] for name, key in KEYS.items()}
        curves[seed]["attempts"] = [r["reward/verifier/attempts"] for r in rows]
        head, tail = slice(0, args.window), slice(-args.window, None)
        print(json.dumps({"seed": seed, **{f"{name}_{where}": round(_mean(v[part]), 3)
                                           for name, v in curves[seed].items()
                                           for where, part in (("first_steps", head), ("last_steps", tail))}}))
    (root / "curves.json").write_text(json.dumps(curves))
    plot(curves, args.window, root / "try_again.png")
    print(f"plot: {root / 'try_again.png'}")


def plot(curves: dict, window: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    top = 0.0
    for ax, name in zip(axes, KEYS):
        for seed, c in curves.items():
            line = smooth(c[name], window)
            top = max([top, *(v for v in line if not math.isnan(v))])
            ax.plot(range(1, len(line) + 1), line, label=f"seed {seed}")
        ax.set_title(name.replace("_", " ") + (" (among wrong first answers)" if name.startswith("second") else ""))
        ax.set_xlabel("GRPO step")
    axes[0].set_ylim(0, min(1.0, top * 1.2 + 0.02))
    axes[0].set_ylabel(f"training episodes, {window}-step moving mean")
    axes[0].legend()
    fig.suptitle("'Try again' episodes (3 attempts), tiny model, 2-digit addition")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _number(value: float | None) -> float:
    return float("nan") if value is None else value


def _mean(values: list[float]) -> float:
    part = [v for v in values if not math.isnan(v)]
    return sum(part) / len(part) if part else float("nan")


if __name__ == "__main__":
    main()
