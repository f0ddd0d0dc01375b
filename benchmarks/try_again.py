"""Does second-attempt success rise when training with 'try again' feedback? (docs/results.md)

SFT on try-again conversations (recipes/try_again.yaml): most answer right at once; in a fraction (--retry-frac)
a wrong first answer (context only, not trained on) hears "Incorrect. Try again." and the right answer follows, so
the model knows the shape of a second attempt; then GRPO on try-again episodes. Every 25 steps (step 0 included)
the trainer plays 16 episodes on each of 200 held-out problems and logs eval/episode/first_attempt_success,
eval/episode/second_attempt_success (among episodes wrong at the first attempt) and eval/episode/repeated_answer
(among episodes with a second attempt: an answer restated). The training episodes' own per-step figures (8 x 8
episodes, 10-40 of them wrong at first) are too few to show a trend; these held-out ones are 3,200 episodes each.
This script prints start and end per seed, plots the held-out curves to try_again.png under --out, and compares
the SFT and final models' second attempts with answering afresh (does the model revise, or only answer again?).
--credits trains each seed's one SFT model once per credit assignment (`episode`: the episode reward's advantage on
every token, GRPO; or an `algorithm.turn_credit`), seed by seed; a run's SFT model under --out is reused, so a
later call with other credits and the same --out, seeds and overrides trains from the same start. The plot and
curves.json cover every run under --out (--plot-only redraws them, e.g. after runs side by side).

    python benchmarks/try_again.py  # seeds 0 1 2
    python benchmarks/try_again.py --seeds 0 --steps 300 data.tasks.0.env.args.discount=0.5  # an ablation
    python benchmarks/try_again.py --credits episode turn_baseline gigpo  # turn-level credit, same SFT starts
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path

from rlvr.config import load_config
from rlvr.envs import make_tasks
from rlvr.evaluation.evaluate import eval_settings, evaluate_model
from rlvr.training.sft import run_sft
from rlvr.training.trainer import Trainer

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "try_again.yaml"
KEYS = {"first_attempt_success": "eval/episode/first_attempt_success",
        "second_attempt_success": "eval/episode/second_attempt_success",
        "repeated_answer": "eval/episode/repeated_answer",
        "success_within_3": "eval/avg@16"}
TITLES = {"first_attempt_success": "first-attempt success",
          "second_attempt_success": "second-attempt success\n(episodes wrong at the first attempt)",
          "repeated_answer": "an earlier wrong answer repeated\n(episodes with a second attempt)",
          "success_within_3": "success within 3 attempts"}


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


def sft_model(seed: int, root: Path, steps: int | None, retry_frac: float, overrides: list[str]) -> Path:
    """The seed's SFT model under root/seed<seed>/sft, trained on its try-again demonstrations unless already there."""
    out = root / f"seed{seed}"
    sft_dir = out / "sft"
    if (sft_dir / "config.json").exists():
        return sft_dir
    out.mkdir(parents=True, exist_ok=True)
    base = _base(seed, steps, overrides)
    demos = out / "demonstrations.jsonl"
    write_demonstrations(load_config(RECIPE, base), demos, retry_frac)
    return Path(run_sft(load_config(RECIPE, [*base, f"tracking.output_dir={out}", f"sft.output_dir={sft_dir}",
                                             f"sft.data_file={demos}", "sft.messages_column=messages"])))


def run(seed: int, credit: str, root: Path, steps: int | None, retry_frac: float, overrides: list[str],
        resume: bool = False) -> list[dict]:
    """GRPO from the seed's SFT model with one credit assignment (or, with `resume`, on from the run's latest
    checkpoint); prints the SFT and final models' second attempts against answering afresh, returns the run's
    metrics rows."""
    sft_dir = sft_model(seed, root, steps, retry_frac, overrides)
    out = root / f"seed{seed}" / credit
    if not resume:
        shutil.rmtree(out, ignore_errors=True)
    credit_override = [] if credit == "episode" else [f"algorithm.turn_credit={credit}"]
    rl_cfg = load_config(RECIPE, [*_base(seed, steps, overrides), *credit_override, f"model.name={sft_dir}",
                                  f"tracking.output_dir={out / 'rl'}"])
    Trainer(rl_cfg, resume="auto" if resume else None).fit()
    final = sorted((out / "rl" / "checkpoints").glob("step-*"))[-1]
    revision = {name: second_attempt_against_resampling(evaluate_model(rl_cfg, str(path), eval_settings(rl_cfg)))
                for name, path in (("sft", sft_dir), ("final", final))}
    print(json.dumps({"seed": seed, "credit": credit, "second_attempt": revision}), flush=True)
    return metrics_rows(out)


def _base(seed: int, steps: int | None, overrides: list[str]) -> list[str]:
    return [*overrides, f"seed={seed}", *([f"steps={steps}"] if steps else [])]


def metrics_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "rl" / "metrics.jsonl").read_text().splitlines() if line.strip()]


def curve(rows: list[dict]) -> dict[str, list[float]]:
    rows = [r for r in rows if KEYS["second_attempt_success"] in r]
    return {"step": [r["step"] for r in rows], **{name: [_number(r.get(key)) for r in rows] for name, key in KEYS.items()}}


def second_attempt_against_resampling(run) -> dict[str, float]:
    """Second-attempt success among episodes wrong at first, against what answering the problem afresh would
    give: for each problem, its first-attempt success rate weighted by its wrong first attempts. A model that
    learned to revise (use the feedback, not repeat itself) beats the fresh answer; one that merely answers again
    matches it."""
    wrong = fresh = 0.0
    for r in run.results:
        total, count = r.episode_sums["first_attempt_success"]
        wrong += count - total
        fresh += (count - total) * total / count
    second, reached = map(sum, zip(*(r.episode_sums.get("second_attempt_success", (0.0, 0)) for r in run.results)))
    return {"second_attempt_success": round(second / reached, 3), "answering_afresh": round(fresh / wrong, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--retry-frac", type=float, default=0.3, help="demonstrations with a wrong first answer")
    parser.add_argument("--credits", nargs="+", default=["episode"],
                        help="'episode' (GRPO's episode advantage on every token) or algorithm.turn_credit values")
    parser.add_argument("--out", default="runs/try_again_bench")
    parser.add_argument("--plot-only", action="store_true", help="only plot the runs already under --out")
    parser.add_argument("--resume", action="store_true",
                        help="continue each run under --out from its latest checkpoint (e.g. one stopped by SIGTERM)")
    parser.add_argument("overrides", nargs="*", help="recipe overrides, e.g. data.tasks.0.env.args.discount=0.7")
    args = parser.parse_args()
    root = Path(args.out)
    for credit in args.credits:
        if credit != "episode":  # fail before any training on a misspelt name
            load_config(RECIPE, [*args.overrides, f"algorithm.turn_credit={credit}"])
    for seed in [] if args.plot_only else args.seeds:
        for credit in args.credits:
            c = curve(run(seed, credit, root, args.steps, args.retry_frac, args.overrides, args.resume))
            print(json.dumps({"seed": seed, "credit": credit, **summary(c)}), flush=True)
    curves: dict[str, dict[int, dict]] = {}  # credit -> seed -> held-out curve, every run under --out
    for metrics in sorted(root.glob("seed*/*/rl/metrics.jsonl")):
        run_dir = metrics.parent.parent
        curves.setdefault(run_dir.name, {})[int(run_dir.parent.name.removeprefix("seed"))] = curve(metrics_rows(run_dir))
    (root / "curves.json").write_text(json.dumps(curves))
    plot(curves, root / "try_again.png")
    print(f"plot: {root / 'try_again.png'}")


def summary(curve: dict, last: int = 3) -> dict[str, float]:
    """Each metric at the first evaluation (step 0) and its mean over the last `last` evaluations."""
    steps = curve["step"]
    return {f"{name}_{where}": round(value, 3) for name in KEYS for where, value in (
        (f"step_{steps[0]}", curve[name][0]),
        (f"steps_{steps[-last]}-{steps[-1]}", sum(curve[name][-last:]) / last))}


def plot(curves: dict[str, dict[int, dict]], path: Path) -> None:
    """One colour per credit assignment: thin lines per seed, a thick line for the mean of its seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, grid = plt.subplots(2, 2, figsize=(10, 7.5))
    axes = grid.flatten()
    for ax, name in zip(axes, KEYS):
        top = 0.0
        for colour, (credit, runs) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], curves.items()):
            for c in runs.values():
                ax.plot(c["step"], c[name], color=colour, linewidth=0.6, alpha=0.35)
                top = max([top, *(v for v in c[name] if v == v)])  # NaN: no episode
            steps = [c["step"] for c in runs.values()]
            if all(s == steps[0] for s in steps):
                mean = [sum(c[name][i] for c in runs.values()) / len(runs) for i in range(len(steps[0]))]
                ax.plot(steps[0], mean, color=colour, linewidth=2, label=f"{credit}: mean of {len(runs)} seed(s)")
        ax.set_title(TITLES[name], fontsize=10)
        ax.set_xlabel("GRPO step")
        ax.set_ylim(0, min(1.0, 1.15 * top))
        ax.grid(alpha=0.3)
    for ax in grid[:, 0]:
        ax.set_ylabel("held-out episodes (200 problems x 16)")
    axes[0].legend(fontsize=8)
    fig.suptitle("'Try again' (3 attempts): tiny model, 2-digit addition, held-out evaluation every 25 steps\n"
                 "thin: one seed; thick: mean of seeds", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _number(value: float | None) -> float:
    return float("nan") if value is None else value


if __name__ == "__main__":
    main()
