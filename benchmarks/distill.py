"""On-policy distillation against its baselines, from the same student and the same teacher (issue 56).

The student is the base model of recipes/smollm2_addition.yaml; the teacher is a stronger model with its tokenizer
(e.g. that recipe's trained checkpoint: --teacher runs/smollm2_addition). Four arms, each `--steps` steps of
prompts_per_step x samples_per_prompt sequences from the student start, per seed:

  rl        GRPO on the verifier alone (the addition recipe)
  sft       SFT on teacher samples (off-policy distillation): the teacher samples samples_per_prompt completions
            (temperature 1) for each of the first steps x prompts_per_step training prompts; `rlvr sft` trains on them
            one batch of prompts_per_step x samples_per_prompt per step, in segments of --eval-every steps, each
            continued from the last (AdamW's moments restart per segment), so it is evaluated as often as the others
  distill   on-policy distillation alone (algorithm.advantage=distill)
  mix       GRPO plus the teacher's term (algorithm.distill_weight=--mix-weight)

Measured: held-out greedy accuracy (the task's verifier on eval problems: the reward of the rl and mix arms, not
read by sft or distill; each final model's answers are read again by an exact check written apart from it) against
steps and against training seconds (evaluation excluded; the sft arm's seconds include loading and saving
the model once per segment and, in the summary, its share of the teacher's sampling: sampling seconds x step / steps),
the teacher's own accuracy, and the reverse KL to the teacher on held-out prompts (mean log p_student - log p_teacher
per sampled token, the student's samples drawn alike for every arm) of the start and of each arm's final model.
Accuracy at equal wall time is read from each arm's curve at the shortest arm's total seconds.

    python -m benchmarks.distill --teacher runs/smollm2_addition [--seeds 0 1 2] [--steps 30] [--output runs/distill]
    python -m benchmarks.distill --summary [--output runs/distill]   # the table and plot of every finished seed
    python -m benchmarks.distill --summary --check-finals           # + the exact check of seeds finished before it
    python -m benchmarks.distill --teacher DIR --steps 2 --eval-every 1 --eval-problems 10 --kl-prompts 4 \\
        --prompts-per-step 2 --samples 4 --max-new-tokens 48       # a smoke run: minutes on a CPU

A stopped benchmark loses little: each arm's result is written when it finishes (OUTPUT/seedS/ARM/arm.json) and
skipped when started again; an RL arm cut short resumes from its last checkpoint (one every --eval-every steps,
exact), the SFT arm from its last finished segment. Seeds can run in parallel processes (one --seeds each); the
summary reads every OUTPUT/seed*/result.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks.common import has_checkpoints, mean_sd  # noqa: E402
from benchmarks.real_model import exact_correct  # noqa: E402  (the exact check, apart from every verifier)
from rlvr.assembly import build_engine, build_tasks, load_saved_model  # noqa: E402
from rlvr.config import RunConfig, load_config  # noqa: E402
from rlvr.evaluation.evaluate import eval_completion_rows, eval_settings, evaluate_model  # noqa: E402
from rlvr.quickstart import evaluate_checkpoint  # noqa: E402
from rlvr.rollout import SamplingParams  # noqa: E402
from rlvr.training.checkpoint import list_checkpoints  # noqa: E402
from rlvr.training.sft import run_sft  # noqa: E402
from rlvr.training.teacher import held_out_reverse_kl, teacher_source  # noqa: E402
from rlvr.training.trainer import Trainer  # noqa: E402

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "smollm2_addition.yaml"
ARMS = ("rl", "sft", "distill", "mix")
PERCENT = "{:.1f}%".format


def base_overrides(args, seed: int, out: Path) -> list[str]:
    return [f"seed={seed}", f"steps={args.steps}", f"data.prompts_per_step={args.prompts_per_step}",
            f"rollout.samples_per_prompt={args.samples}", f"rollout.max_new_tokens={args.max_new_tokens}",
            f"eval.every_steps={args.eval_every}", f"eval.num_problems={args.eval_problems}", "eval.log_completions=0",
            f"checkpoint.every_steps={args.eval_every}", "checkpoint.keep_last=1", "tracking.report=false",
            "tracking.log_completions_every=0", f"tracking.output_dir={out}"]


def arm_overrides(arm: str, teacher: str, mix_weight: float) -> list[str]:
    return {"rl": ["algorithm.advantage=grpo"],
            "distill": [f"teacher={{name: '{teacher}'}}", "algorithm.advantage=distill"],
            "mix": [f"teacher={{name: '{teacher}'}}", "algorithm.advantage=grpo",
                    f"algorithm.distill_weight={mix_weight}"]}[arm]


def curve(run_dir: Path) -> list[dict]:
    """(step, training seconds so far, held-out accuracy) at each evaluation of a run's metrics.jsonl."""
    seconds, points = 0.0, []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        seconds += row.get("perf/step_s", 0.0) - row.get("perf/eval_s", 0.0)
        if row.get("eval/accuracy") is not None:
            points.append({"step": row["step"], "seconds": round(seconds, 1), "accuracy": row["eval/accuracy"]})
    return points


def rl_arm(cfg: RunConfig) -> dict:
    """Train (or resume from its last checkpoint, exactly) one RL arm; {"curve", "final"} (the final model)."""
    out = Path(cfg.tracking.output_dir)
    Trainer(cfg, resume="auto" if has_checkpoints(out) else None).fit()
    return {"curve": curve(out), "final": str(list_checkpoints(out / "checkpoints")[-1])}


def finished_arm(out: Path, train: Callable[[], dict]) -> dict:
    """An arm's result ({"curve", "final", ...}) from OUT/arm.json when it finished before, else `train()`'s, saved."""
    path = out / "arm.json"
    if path.is_file():
        print(f"{out}: finished before, read from {path.name}", flush=True)
        return json.loads(path.read_text())
    result = train()
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    return result


def teacher_samples(cfg: RunConfig, teacher: str, prompts: int, path: Path) -> float:
    """samples_per_prompt completions of the teacher (temperature as the recipe) for the first `prompts` training
    problems, written as SFT pairs to `path`; returns the seconds it took."""
    t = time.perf_counter()
    tokenizer, model, encode = load_saved_model(cfg, teacher)
    engine = build_engine(cfg, model, tokenizer)
    task = build_tasks(cfg)[0]
    problems = [task.problem("train", i) for i in range(prompts)]
    params = SamplingParams(n=cfg.rollout.samples_per_prompt, temperature=cfg.rollout.temperature,
                            max_new_tokens=cfg.rollout.max_new_tokens)
    with path.open("w") as f:
        for start in range(0, len(problems), 8):
            chunk = problems[start : start + 8]
            for problem, group in zip(chunk, engine.generate([encode(p.prompt) for p in chunk], params)):
                for c in group:
                    f.write(json.dumps({"prompt": problem.prompt, "completion": c.text}) + "\n")
    return time.perf_counter() - t


def sft_arm(args, cfg: RunConfig, teacher: str, out: Path, base: list[str]) -> dict:
    """SFT on teacher samples in segments of eval_every steps, each evaluated; a segment that finished before (its
    point in OUT/points.jsonl) is not trained again. {"curve", "final", "teacher_sampling_s"}."""
    out.mkdir(parents=True, exist_ok=True)
    per_step = args.prompts_per_step * args.samples
    samples, sampling = out / "teacher_samples.jsonl", out / "teacher_sampling.json"
    if not sampling.is_file():
        print(f"sampling the teacher: {args.samples} completions for each of {args.steps * args.prompts_per_step} "
              "training prompts", flush=True)
        sampling.write_text(json.dumps({"seconds": teacher_samples(cfg, teacher, args.steps * args.prompts_per_step,
                                                                   samples)}))
    rows = samples.read_text().splitlines()
    points_file = out / "points.jsonl"
    points = [json.loads(line) for line in points_file.read_text().splitlines()] if points_file.is_file() else []
    if not points:
        points = [{"step": 0, "seconds": 0.0, "accuracy": evaluate_checkpoint(cfg, cfg.model.name, args.eval_problems),
                   "model": cfg.model.name}]
        points_file.write_text(json.dumps(points[0]) + "\n")
    for first in range(points[-1]["step"], args.steps, args.eval_every):
        steps = min(args.eval_every, args.steps - first)
        segment = out / f"segment-{first + steps:04d}.jsonl"
        segment.write_text("\n".join(rows[first * per_step : (first + steps) * per_step]) + "\n")
        seg_cfg = load_config(RECIPE, [*base, f"model.name={points[-1]['model']}", f"sft.data_file={segment}",
                                       "sft.epochs=1", f"sft.batch_size={per_step}", f"sft.lr={cfg.optim.lr}",
                                       f"sft.micro_batch_size={cfg.optim.micro_batch_size}",
                                       f"sft.output_dir={out / f'step-{first + steps:04d}'}"])
        t = time.perf_counter()
        model = str(run_sft(seg_cfg))
        points.append({"step": first + steps, "seconds": round(points[-1]["seconds"] + time.perf_counter() - t, 1),
                       "accuracy": evaluate_checkpoint(cfg, model, args.eval_problems), "model": model})
        with points_file.open("a") as f:
            f.write(json.dumps(points[-1]) + "\n")
        print(f"sft step {points[-1]['step']}: held-out accuracy {points[-1]['accuracy']:.0%}", flush=True)
    return {"curve": [{k: p[k] for k in ("step", "seconds", "accuracy")} for p in points],
            "final": points[-1]["model"], "teacher_sampling_s": round(json.loads(sampling.read_text())["seconds"], 1)}


def reverse_kl_of(cfg: RunConfig, student_dir: str, teacher_model, prompts: list, args) -> float:
    tokenizer, model, _ = load_saved_model(cfg, student_dir)
    params = SamplingParams(n=args.samples, temperature=1.0, max_new_tokens=cfg.rollout.max_new_tokens)
    return held_out_reverse_kl(build_engine(cfg, model, tokenizer), teacher_model, prompts, params,
                               tokenizer.pad_token_id, seed=10_000)


def checked_answers(cfg: RunConfig, model_dir: str, problems: int) -> dict:
    """A final model's greedy held-out answers read twice: by the task's verifier (the accuracy of the curves) and
    by the exact check written apart from it (benchmarks.real_model.exact_correct); `disputes`: answers they part on."""
    settings = replace(eval_settings(cfg), num_problems=problems, samples=0, ks=[], keep_completions=1)
    rows = eval_completion_rows(0, evaluate_model(cfg, model_dir, settings).results)
    exact = [exact_correct(r["completion"], r["reference"]) for r in rows]
    return {"problems": len(rows), "verifier": sum(r["correct"] for r in rows) / len(rows),
            "exact": sum(exact) / len(rows), "disputes": sum(r["correct"] != e for r, e in zip(rows, exact))}


def check_finals(args, result: dict) -> dict:
    """result["final_check"]: checked_answers of the teacher and of each arm's final model still on disk (a model
    removed since is named and left out)."""
    cfg = load_config(RECIPE, base_overrides(args, result["seed"], Path(args.output) / f"seed{result['seed']}" / "common"))
    checks = dict(result.get("final_check", {}))
    for arm, model in {"teacher": result["teacher"], **result["final_model"]}.items():
        if arm in checks:
            continue
        if not Path(model).exists():
            print(f"seed {result['seed']} {arm}: {model} is no longer on disk; its final answers are not checked")
            continue
        checks[arm] = checked_answers(cfg, model, args.eval_problems)
        print(f"seed {result['seed']} {arm}: {checks[arm]}", flush=True)
    return {**result, "final_check": checks}


def train_arm(args, seed: int, arm: str) -> dict:
    """One arm of one seed, trained here (or read back when it finished before)."""
    out = Path(args.output) / f"seed{seed}"
    teacher = teacher_source(args.teacher)
    base = base_overrides(args, seed, out / "common")
    if arm == "sft":
        return finished_arm(out / "sft", lambda: sft_arm(args, load_config(RECIPE, base), teacher, out / "sft", base))
    arm_cfg = load_config(RECIPE, [*base_overrides(args, seed, out / arm), *arm_overrides(arm, teacher, args.mix_weight)])
    return finished_arm(out / arm, lambda: rl_arm(arm_cfg))


def arm_in_subprocess(args, seed: int, arm: str) -> dict:
    """An arm trained in a process of its own, so that what one arm's trainer, models and evaluations hold is given
    back before the next (in one process the four arms grew to 10 GB and were killed for memory)."""
    path = Path(args.output) / f"seed{seed}" / arm / "arm.json"
    if not path.is_file():
        print(f"== seed {seed}, arm {arm}: {args.steps} steps in a process of its own ==", flush=True)
        options = [f"--{name.replace('_', '-')}={getattr(args, name)}" for name in
                   ("teacher", "steps", "eval_every", "eval_problems", "kl_prompts", "prompts_per_step", "samples",
                    "max_new_tokens", "mix_weight", "output")]
        subprocess.run([sys.executable, "-m", "benchmarks.distill", *options, "--seeds", str(seed), "--arms", arm,
                        "--arm-only"], check=True)
    return json.loads(path.read_text())


def one_seed(args, seed: int) -> dict:
    out = Path(args.output) / f"seed{seed}"
    teacher = teacher_source(args.teacher)
    cfg = load_config(RECIPE, base_overrides(args, seed, out / "common"))
    result = {"seed": seed, "teacher": teacher, "curves": {}, "final_model": {}}
    for arm in args.arms:
        arm_result = arm_in_subprocess(args, seed, arm)
        if arm == "sft":
            result["sft_teacher_sampling_s"] = arm_result["teacher_sampling_s"]
        result["curves"][arm], result["final_model"][arm] = arm_result["curve"], arm_result["final"]
    result = check_finals(args, result)
    result["teacher_accuracy"] = result["final_check"]["teacher"]["verifier"]
    print(f"seed {seed}: the reverse KL to the teacher on {args.kl_prompts} held-out prompts, of the start and of "
          "each arm's final model", flush=True)
    _, teacher_model, encode = load_saved_model(cfg, teacher)
    task = build_tasks(cfg)[0]
    prompts = [encode(task.problem("eval", i).prompt) for i in range(args.kl_prompts)]
    result["reverse_kl"] = {"start": reverse_kl_of(cfg, cfg.model.name, teacher_model, prompts, args)}
    for arm, final in result["final_model"].items():
        result["reverse_kl"][arm] = reverse_kl_of(cfg, final, teacher_model, prompts, args)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    return result


def charged_curves(result: dict) -> dict[str, list[dict]]:
    """Each arm's curve against the seconds it cost: the sft arm's points also carry their share of the teacher's
    sampling (sampling seconds x step / last step), which off-policy distillation pays before it trains."""
    curves = dict(result["curves"])
    if "sft" in curves and result.get("sft_teacher_sampling_s"):
        last = curves["sft"][-1]["step"]
        curves["sft"] = [{**p, "seconds": p["seconds"] + result["sft_teacher_sampling_s"] * p["step"] / last}
                         for p in curves["sft"]]
    return curves


def at_seconds(points: list[dict], budget: float) -> dict:
    """The last evaluation within `budget` training seconds."""
    return [p for p in points if p["seconds"] <= budget + 1e-6][-1]


def plot(results: list[dict], path: Path) -> None:
    fig, (ax_s, ax_t) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = dict(zip(ARMS, ("tab:blue", "tab:orange", "tab:green", "tab:red")))
    for r in results:
        for arm, points in charged_curves(r).items():
            for ax, x in ((ax_s, "step"), (ax_t, "seconds")):
                ax.plot([p[x] for p in points], [100 * p["accuracy"] for p in points], marker="o", markersize=3,
                        color=colors[arm], alpha=0.35 if ax is ax_s else 0.8, lw=1,
                        label=arm if r is results[0] and ax is ax_t else None)
    for arm in results[0]["curves"]:  # the mean over seeds, against steps (seeds share the evaluation steps)
        points = [r["curves"][arm] for r in results]
        ax_s.plot([p["step"] for p in points[0]], [100 * sum(c[i]["accuracy"] for c in points) / len(points)
                                                   for i in range(len(points[0]))],
                  marker="o", color=colors[arm], lw=2.5, label=f"{arm} (mean; thin: each seed)")
    for r in results:
        for ax in (ax_s, ax_t):
            ax.axhline(100 * r["teacher_accuracy"], color="gray", ls="--", lw=1,
                       label="teacher (each seed's evaluation)" if r is results[0] else None)
    ax_s.set(xlabel="step", ylabel="held-out greedy accuracy (%)", title="against steps")
    ax_t.set(xlabel="training seconds (evaluation excluded; sft with its teacher sampling)", title="against wall time")
    for ax in (ax_s, ax_t):
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize="small")
    fig.suptitle(f"On-policy distillation vs baselines ({len(results)} seed(s))")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def steps_to_teacher(points: list[dict], teacher: float) -> int | None:
    """The first evaluated step whose held-out accuracy reaches the teacher's (None: not within the run)."""
    return next((p["step"] for p in points if p["accuracy"] >= teacher), None)


def print_summary(results: list[dict]) -> None:
    """Per seed: each arm's held-out accuracy at every evaluation, its training seconds (charged_curves), its accuracy
    at the shortest arm's seconds, the first step at the teacher's accuracy and its reverse KL to the teacher; then
    means ± sd over the seeds (the count shown; steps to the teacher over the seeds that reached it)."""
    arms = list(results[0]["curves"])
    steps = [p["step"] for p in results[0]["curves"][arms[0]]]
    table = Table(title="On-policy distillation vs baselines: held-out greedy accuracy (the verifier)")
    for col in ("seed", "arm", *(f"step {s}" for s in steps), "train s", "at equal time", "steps to teacher",
                "reverse KL"):
        table.add_column(col)
    rows: dict[str, list[dict]] = {arm: [] for arm in (*arms, "start", "teacher")}
    for r in results:
        curves = charged_curves(r)
        budget = min(points[-1]["seconds"] for points in curves.values())
        for arm, points in curves.items():
            row = {"acc": [p["accuracy"] for p in points], "s": points[-1]["seconds"],
                   "equal": at_seconds(points, budget)["accuracy"], "kl": r["reverse_kl"][arm],
                   "to_teacher": steps_to_teacher(points, r["teacher_accuracy"])}
            rows[arm].append(row)
            table.add_row(str(r["seed"]), arm, *(f"{100 * a:.0f}%" for a in row["acc"]), f"{row['s']:.0f}",
                          f"{100 * row['equal']:.0f}% ({budget:.0f} s)", str(row["to_teacher"] or "-"),
                          f"{row['kl']:.3f}")
        rows["start"].append({"kl": r["reverse_kl"]["start"]})
        table.add_row(str(r["seed"]), "start", *[""] * (len(steps) + 3), f"{r['reverse_kl']['start']:.3f}")
        rows["teacher"].append({"acc": r["teacher_accuracy"]})
        table.add_row(str(r["seed"]), "teacher", f"{100 * r['teacher_accuracy']:.0f}%", *[""] * (len(steps) + 2), "0")
    n = len(results)
    for arm in arms:
        acc = [[100 * row["acc"][i] for row in rows[arm]] for i in range(len(steps))]
        reached = [row["to_teacher"] for row in rows[arm] if row["to_teacher"] is not None]
        table.add_row(f"mean ± sd ({n})", arm, *(mean_sd(a, PERCENT) for a in acc),
                      mean_sd([row["s"] for row in rows[arm]], "{:.0f}".format),
                      mean_sd([100 * row["equal"] for row in rows[arm]], PERCENT),
                      (f"{mean_sd(reached, '{:.0f}'.format)} " if reached else "") + f"({len(reached)} of {n} seeds)",
                      mean_sd([row["kl"] for row in rows[arm]], "{:.3f}".format))
    table.add_row(f"mean ± sd ({n})", "start", *[""] * (len(steps) + 3),
                  mean_sd([row["kl"] for row in rows["start"]], "{:.3f}".format))
    table.add_row(f"mean ± sd ({n})", "teacher", mean_sd([100 * row["acc"] for row in rows["teacher"]], PERCENT),
                  *[""] * (len(steps) + 2), "0")
    Console(width=200).print(table)
    if any("final_check" in r for r in results):
        check = Table(title="Final models' greedy held-out answers: the verifier against the exact check")
        for col in ("seed", "model", "problems", "verifier", "exact check", "disputes"):
            check.add_column(col)
        for r in results:
            for arm, c in r.get("final_check", {}).items():
                check.add_row(str(r["seed"]), arm, str(c["problems"]), f"{100 * c['verifier']:.0f}%",
                              f"{100 * c['exact']:.0f}%", str(c["disputes"]))
        Console(width=200).print(check)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", help="the teacher: a model directory or a run's output directory")
    parser.add_argument("--summary", action="store_true", help="only the table and plot of every finished seed")
    parser.add_argument("--check-finals", action="store_true",
                        help="with --summary: read the final models of finished seeds by the exact check too "
                             "(done at the end of every seed since; for seeds that finished before)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--eval-problems", type=int, default=100)
    parser.add_argument("--kl-prompts", type=int, default=20, help="held-out prompts of the reverse KL")
    parser.add_argument("--prompts-per-step", type=int, default=4)
    parser.add_argument("--samples", type=int, default=8, help="samples per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--mix-weight", type=float, default=0.5)
    parser.add_argument("--output", default="runs/distill")
    parser.add_argument("--plot", help="where the plot goes (default OUTPUT/distill.png)")
    parser.add_argument("--arm-only", action="store_true", help=argparse.SUPPRESS)  # one arm, in its own process
    args = parser.parse_args()
    if args.check_finals and not args.summary:
        parser.error("--check-finals goes with --summary (a benchmark run checks its final models by itself)")
    output = Path(args.output)
    if args.arm_only:
        for seed in args.seeds:
            for arm in args.arms:
                train_arm(args, seed, arm)
        return
    if args.summary:
        results = [json.loads(p.read_text()) for p in sorted(output.glob("seed*/result.json"))]
        if not results:
            parser.error(f"no finished seed under {output} (OUTPUT/seedS/result.json): run the benchmark first")
        if args.check_finals:
            results = [check_finals(args, r) for r in results]
            for r in results:
                (output / f"seed{r['seed']}" / "result.json").write_text(json.dumps(r, indent=1))
    elif not args.teacher:
        parser.error("--teacher is required to train (or --summary to read finished seeds)")
    else:
        results = [one_seed(args, s) for s in args.seeds]
    print_summary(results)
    path = Path(args.plot) if args.plot else output / "distill.png"
    plot(results, path)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
