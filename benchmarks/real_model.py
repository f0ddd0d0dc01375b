"""A real model, end to end: SmolLM2-135M-Instruct trained by the recipe recipes/smollm2_addition.yaml, held-out
accuracy by the training verifier and by an exact check written apart from it; and rlvr against TRL's
GRPOTrainer on the same model, prompts, sampling and algorithm settings.

    python benchmarks/real_model.py recipe [--seeds 0 1 2] [--output runs/real_model] [--plot PNG]
    python benchmarks/real_model.py summary [--output runs/real_model] [--plot PNG]
    python benchmarks/real_model.py summary --output RUNS_A RUNS_B ... --labels A B ... --plot PNG
    python benchmarks/real_model.py trl [--seeds 0 1 2] [--steps 10] [--output runs/real_model_trl]
    python benchmarks/real_model.py trl-summary --output TRL_RUNS_A TRL_RUNS_B ...
    python benchmarks/real_model.py replies --output RUNS_A RUNS_B ... [--window 5]

`recipe` trains each seed with `rlvr train recipes/smollm2_addition.yaml seed=S` and reads the run's
eval_completions.jsonl (every held-out greedy completion of every evaluation, eval.log_completions): per
evaluation, the verifier's accuracy (the run's own verdicts) and the exact check's (`exact_correct` below: the
last non-empty \\boxed{} if it holds an integer, else the last integer in the completion, equals the reference;
no expression is evaluated, nothing of rlvr's verifiers is used). Writes OUTPUT/seedS.json per seed and prints the
table over every seed there (`summary` prints it again, e.g. after seeds run in separate invocations): the mean
over seeds, the wall time per run, and the curves (--plot).

`trl` runs, per seed, `steps` GRPO steps with rlvr (the recipe, evaluation off; or, with --reuse, the recipe's
own run, whose first `steps` steps and evaluation at `steps` are read) and then with TRL's GRPOTrainer
fed the prompts rlvr drew at each step, in the same order (shuffle_dataset=False), with the same sampling
(temperature 1, no top-k/top-p, the same new-token limit), the same algorithm (4 prompts x 8 samples, group
standardised advantages, PPO clip 0.2 with one on-policy update per step, token-mean loss as TRL's "dapo", no KL,
AdamW lr 1e-5 constant, gradient clip 1.0, micro-batches of 8) and the same reward (rlvr's math verifier called in
TRL's process). TRL generates with its default path (transformers `generate`). Seconds per step: rlvr's
perf/step_s; for TRL the time between the ends of consecutive optimizer steps (the first from the start of
training). Then `rlvr eval` scores the base model and the final models on the recipe's 100 held-out problems
(greedy, the evaluation code the recipe's runs use), by the verifier and by the exact check. Runs alternate rlvr,
TRL per seed, so both see the same load.

`replies` reads the sampled training replies each seed's run logged (completions.jsonl, every reply with
tracking.log_completions_groups covering the step): in the first and the last `window` steps, the share the exact
check finds right and, in the last, the mean reward of the right, the wrong and the refused replies (those
`rlvr.rewards.judge.refusal` with the judge's default defences would refuse: no final answer, a restated question,
talk of the grading), whether or not the run itself applied the defences: does the reward pull toward a master key?
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from reward_hacking import plain_answer  # the exact check of issue 24's study, apart from every verifier

from rlvr.tracking.jsonl import read_jsonl

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "smollm2_addition.yaml"


WORD_VALUES = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen".split())} | {w: 10 * i for i, w in enumerate(
        "twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}


def words_number(text: str) -> str | None:
    """A reference key written in words, as digits ('one hundred forty-three' -> '143'); None if it is not one."""
    total = 0
    for word in text.lower().replace("-", " ").split():
        if word == "hundred" and 0 < total < 10:
            total *= 100
        elif word in WORD_VALUES:
            total += WORD_VALUES[word]
        else:
            return None
    return str(total)


def exact_correct(completion: str, reference: str) -> bool:
    """The exact check: the completion's last non-empty box if it holds an integer, else its last integer, is the
    reference (a key in words read as its number; no expression evaluated, nothing of rlvr's verifiers used)."""
    reference = str(reference).strip()
    return plain_answer(completion) == (reference if reference.isdigit() else words_number(reference))


def mean_sd(values: list[float | None], show) -> str:
    """Mean ± sample sd over seeds, each written by `show` (the sd without a sign; 0 for one seed); seeds without
    the figure (None, NaN) are skipped; '-' when none has it."""
    values = [v for v in values if v is not None and v == v]
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{show(statistics.mean(values))} ± {show(sd).lstrip('+')}"


def run_minutes(result: dict) -> str:
    """A benchmark run's wall minutes for a table; a resumed run's cover only the invocation that finished it."""
    return f"{result['wall_seconds'] / 60:.0f}" + (" (resumed: last part only)" if result.get("resumed") else "")


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def rlvr_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlvr", *args]


def sample_episodes(recipe: Path, overrides: list[str], problems: int, samples: int) -> tuple[list, float, float]:
    """The base model's episodes on a recipe's first `problems` held-out problems, `samples` each, with the recipe's
    prompt, sampling and environment (static engine, one generator seed per problem): [(problem, episode)], the
    sampling temperature, and the seconds they took."""
    import torch

    from rlvr.config import load_config
    from rlvr.envs import make_tasks
    from rlvr.models.loading import load_model, load_tokenizer
    from rlvr.models.prompts import PromptEncoder
    from rlvr.rollout import SamplingParams, make_engine
    from rlvr.rollout.episodes import EpisodeRunner

    torch.set_num_threads(1)
    cfg = load_config(recipe, overrides)
    task = make_tasks(cfg.data.tasks, cfg.seed)[0]
    tokenizer = load_tokenizer(cfg.model.name)
    model = load_model(cfg.model).eval()
    encode = PromptEncoder(tokenizer, cfg.model.chat_template, cfg.data.system_prompt, cfg.data.max_prompt_tokens)
    runner = EpisodeRunner(make_engine("static", model, tokenizer, cfg.rollout.batch_size), encode)
    work = [(task, task.problem("eval", i)) for i in range(problems)]
    params = SamplingParams(n=samples, temperature=cfg.rollout.temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                            stop=cfg.rollout.stop)
    t0 = time.perf_counter()
    with torch.no_grad():
        _, groups = runner.generate(work, params, [torch.Generator().manual_seed(i) for i in range(len(work))])
    seconds = time.perf_counter() - t0
    return [(p, e) for (_, p), group in zip(work, groups) for e in group], cfg.rollout.temperature, seconds


def run(command: list[str], log: Path, append: bool = False) -> float:
    """Run a command with its output to `log` (appended to it with `append`); its wall seconds. A failure stops the
    benchmark and shows the log's end."""
    t0 = time.perf_counter()
    with log.open("a" if append else "w") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    if code != 0:
        raise SystemExit(f"{' '.join(command)} failed ({code}); last lines of {log}:\n" +
                         "\n".join(log.read_text().splitlines()[-20:]))
    return time.perf_counter() - t0


def has_checkpoints(run_dir: Path) -> bool:
    """Whether a run stopped after writing a checkpoint (train_resumably then resumes it)."""
    return (run_dir / "checkpoints").is_dir()


def train_resumably(arguments: list[str], run_dir: Path, log: Path) -> float:
    """`rlvr train ARGUMENTS` of one benchmark run that a stop does not lose: a checkpoint every 10 steps (only the
    last kept: a series of seeds of a 135M model would otherwise hold 3 GB a run), and a run directory that already
    holds one resumes from its last (`--resume auto`, exact), so starting the benchmark again continues where it
    stopped. This invocation's wall seconds."""
    resume = has_checkpoints(run_dir)
    command = rlvr_command("train", *arguments, f"tracking.output_dir={run_dir}", "checkpoint.every_steps=10",
                           "checkpoint.keep_last=1")
    if resume:
        print(f"{run_dir}: resuming from its last checkpoint", flush=True)
    return run(command + (["--resume", "auto"] if resume else []), log, append=resume)


# ---------------------------------------------------------------------------------------------------- recipe


def eval_curve(run_dir: Path) -> list[dict]:
    """Per evaluation of a run: step, the verifier's accuracy and the exact check's, over its logged problems."""
    by_step: dict[int, dict[str, dict]] = {}
    for row in read_jsonl(run_dir / "eval_completions.jsonl"):  # a row written again (a restart) replaces its twin
        by_step.setdefault(row["step"], {})[row["uid"]] = row
    by_step = {step: list(rows.values()) for step, rows in by_step.items()}
    return [{"step": step, "problems": len(rows),
             "verifier": sum(r["correct"] for r in rows) / len(rows),
             "exact": sum(exact_correct(r["completion"], r["reference"]) for r in rows) / len(rows),
             "paid_not_exact": sum(r["correct"] and not exact_correct(r["completion"], r["reference"]) for r in rows)}
            for step, rows in sorted(by_step.items())]


def recipe(args) -> None:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in args.seeds:
        run_dir = out / f"seed{seed}"
        load = load_average()
        seconds = run(rlvr_command("train", str(RECIPE), f"seed={seed}", f"tracking.output_dir={run_dir}",
                                   *args.set), out / f"seed{seed}.log")
        curve = eval_curve(run_dir)
        results.append({"seed": seed, "wall_seconds": seconds, "load_before": load, "load_after": load_average(),
                        "curve": curve})
        print(f"seed {seed}: {seconds / 60:.1f} min (load {load} -> {load_average()})")
        for point in curve:
            print(f"  step {point['step']:>3}: verifier {100 * point['verifier']:5.1f}%  exact "
                  f"{100 * point['exact']:5.1f}%  paid but not exact {point['paid_not_exact']}")
        (out / f"seed{seed}.json").write_text(json.dumps({"commit": commit(), **results[-1]}, indent=2))
    summary(argparse.Namespace(output=[args.output], labels=None, plot=args.plot))


def summary(args) -> None:
    """The table and plot over every seed run so far under each --output (seeds may be run by separate
    invocations); with several outputs (runs of the recipe with different rewards, say) one table each and a plot
    of their exact-check curves side by side."""
    labels = args.labels or args.output
    if len(labels) != len(args.output):
        raise SystemExit(f"summary: {len(args.output)} --output folders but {len(labels)} --labels")
    runs = {}
    for label, output in zip(labels, args.output):
        results = sorted((json.loads(p.read_text()) for p in Path(output).glob("seed*.json")), key=lambda r: r["seed"])
        if not results:
            raise SystemExit(f"summary: no seedS.json under {output} (run `recipe --output {output}` first)")
        print(f"\n{label} ({output})")
        summarize_recipe(results)
        runs[label] = results
    if args.plot and len(runs) == 1:
        plot_recipe(next(iter(runs.values())), Path(args.plot))
    elif args.plot:
        plot_comparison(runs, Path(args.plot))


def summarize_recipe(results: list[dict]) -> None:
    print("\n| seed | verifier: base -> final | exact check: base -> final | gain (exact) | minutes |")
    print("|---|---|---|---|---|")
    gains = {"verifier": [], "exact": []}
    for r in results:
        first, last = r["curve"][0], r["curve"][-1]
        for key in gains:
            gains[key].append(last[key] - first[key])
        print(f"| {r['seed']} | {100 * first['verifier']:.0f}% -> {100 * last['verifier']:.0f}% | "
              f"{100 * first['exact']:.0f}% -> {100 * last['exact']:.0f}% | "
              f"{100 * (last['exact'] - first['exact']):+.0f} | {r['wall_seconds'] / 60:.1f} |")
    for key, values in gains.items():
        spread = f" (sd {100 * statistics.stdev(values):.1f})" if len(values) > 1 else ""
        print(f"mean gain by the {key}: {100 * statistics.mean(values):+.1f} points{spread}")


def plot_recipe(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4))
    for r, color in zip(results, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")):
        steps = [p["step"] for p in r["curve"]]
        ax.plot(steps, [100 * p["verifier"] for p in r["curve"]], color=color, marker="o",
                label=f"seed {r['seed']}: training verifier")
        ax.plot(steps, [100 * p["exact"] for p in r["curve"]], color=color, marker="x", linestyle="--",
                label=f"seed {r['seed']}: exact check")
    save_curves(fig, ax, "held-out greedy accuracy (%), 100 problems", 7, path)


def plot_comparison(runs: dict[str, list[dict]], path: Path) -> None:
    """Exact-check held-out accuracy of several sets of runs: each seed thin, the mean over seeds bold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4))
    for (label, results), color in zip(runs.items(), ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        for r in results:
            ax.plot([p["step"] for p in r["curve"]], [100 * p["exact"] for p in r["curve"]], color=color,
                    alpha=0.35, linewidth=1)
        steps = sorted({p["step"] for r in results for p in r["curve"]})
        means = [statistics.mean(100 * p["exact"] for r in results for p in r["curve"] if p["step"] == s)
                 for s in steps]
        ax.plot(steps, means, color=color, marker="o", linewidth=2.2, label=f"{label} (mean of {len(results)} seeds)")
    save_curves(fig, ax, "held-out greedy accuracy (%), exact check", 8, path)


def save_curves(fig, ax, ylabel: str, legend_size: int, path: Path) -> None:
    """The recipe's accuracy-over-steps axes, labelled, and the figure written to `path`."""
    ax.set_xlabel("GRPO step")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 100)
    ax.set_title("SmolLM2-135M-Instruct, recipes/smollm2_addition.yaml (CPU)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend_size, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def train_arguments(commands, arms: list[str], output: str) -> None:
    """The `train` command of a benchmark with arms: --arm, --seeds, --steps, --output, --set."""
    t = commands.add_parser("train")
    t.add_argument("--arm", choices=arms, required=True)
    t.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    t.add_argument("--steps", type=int, default=None)
    t.add_argument("--output", default=output)
    t.add_argument("--set", nargs="*", default=[], help="more recipe overrides")


def summary_arguments(commands, output: str):
    """The `summary` command of a benchmark: --output (the runs' folder), --plot (a PNG to write)."""
    m = commands.add_parser("summary")
    m.add_argument("--output", default=output)
    m.add_argument("--plot", default=None)
    return m


def save_figure(fig, title: str, path: Path, panels=()) -> None:
    """A figure of panels, titled and written to `path`; `panels` get a grid and their legend."""
    for ax in panels:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


# ------------------------------------------------------------------------------------------------------- trl


def rlvr_prompts(run_dir: Path, steps: int, per_step: int) -> list[dict]:
    """The prompts rlvr trained on, step by step (completions.jsonl logs every group), with their references."""
    rows = read_jsonl(run_dir / "completions.jsonl")
    seen, ordered = set(), []
    for row in (r for r in rows if 1 <= r["step"] <= steps):
        key = (row["step"], row["uid"])
        if key not in seen:
            seen.add(key)
            ordered.append({"step": row["step"], "prompt": row["prompt"], "answer": str(row["reference"])})
    if len(ordered) != steps * per_step:
        raise SystemExit(f"{run_dir}: expected {steps * per_step} logged prompts, found {len(ordered)}")
    return ordered


def train_trl(prompts: list[dict], seed: int, steps: int, out: Path, max_new_tokens: int) -> list[float]:
    """TRL's GRPOTrainer on the same prompts and settings; seconds per optimizer step."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlvr.config import ModelConfig
    from rlvr.models.loading import model_source
    from rlvr.verifiers.math import math_score

    source = model_source(ModelConfig(name="smollm2-135m-instruct"))
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    eos = tokenizer.eos_token_id

    def reward(prompts, completions, completion_ids, answer, **_):
        scores = []
        for prompt, completion, ids, ref in zip(prompts, completions, completion_ids, answer):
            truncated = len(ids) >= max_new_tokens and ids[-1] != eos
            verdict = math_score(prompt[-1]["content"], completion[-1]["content"], ref, truncated=truncated)
            scores.append(float(verdict))
        return scores

    data = Dataset.from_list([{"prompt": [{"role": "user", "content": p["prompt"]}], "answer": p["answer"]}
                              for p in prompts])
    config = GRPOConfig(
        output_dir=str(out), seed=seed, max_steps=steps, use_cpu=True, bf16=False, learning_rate=1e-5,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.999,
        max_grad_norm=1.0, per_device_train_batch_size=8, gradient_accumulation_steps=4, num_generations=8,
        max_completion_length=max_new_tokens, temperature=1.0, top_p=1.0, top_k=0, beta=0.0, epsilon=0.2,
        num_iterations=1, loss_type="dapo", scale_rewards="group", shuffle_dataset=False, logging_steps=1,
        save_strategy="no", report_to=[], dataloader_num_workers=0, disable_tqdm=True,
    )
    ends: list[float] = []

    class StepClock(TrainerCallback):
        def on_train_begin(self, *_, **__):
            ends.append(time.perf_counter())

        def on_step_end(self, *_, **__):
            ends.append(time.perf_counter())

    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=data,
                          processing_class=tokenizer, callbacks=[StepClock()])
    trainer.train()
    trainer.save_model(str(out / "final"))
    tokenizer.save_pretrained(str(out / "final"))
    return [b - a for a, b in zip(ends, ends[1:])]


def eval_models(models: dict[str, Path], out: Path) -> dict[str, dict]:
    """`rlvr eval` of several models on the recipe's held-out problems, greedy, completions kept: accuracy by
    the verifier and by the exact check."""
    run(rlvr_command("eval", *map(str, models.values()), "--recipe", str(RECIPE), "--samples", "0",
                     "--keep-completions", "1", "--labels", ",".join(models), "--output", str(out)),
        out.with_suffix(".log"))
    data = json.loads((out / "eval.json").read_text())
    results = {}
    for name, entry in zip(models, data["models"]):
        problems = entry["problems"]
        results[name] = {
            "verifier": sum(bool(p["completions"][0]["correct"]) for p in problems) / len(problems),
            "exact": sum(exact_correct(p["completions"][0]["text"], p["reference"]) for p in problems) / len(problems),
            "problems": len(problems)}
    return results


def rlvr_side(args, seed: int, out: Path) -> tuple[Path, list[float], dict | None]:
    """rlvr's run of `seed` for the comparison: the recipe's own run under --reuse (its first `steps` steps; a step's
    evaluation time is taken out of its seconds), else `steps` steps trained here with evaluation off. Returns the
    run, its seconds per step, and its held-out accuracy at `steps` when the run evaluated there."""
    if args.reuse:
        run_dir = Path(args.reuse) / f"seed{seed}"
        curve = {p["step"]: p for p in eval_curve(run_dir)}
        if args.steps not in curve:
            raise SystemExit(f"{run_dir} has no evaluation at step {args.steps} (it has {sorted(curve)})")
        accuracy = {k: curve[args.steps][k] for k in ("verifier", "exact")}
    else:
        run_dir, accuracy = out / f"rlvr-seed{seed}", None
        run(rlvr_command("train", str(RECIPE), f"seed={seed}", f"steps={args.steps}", "eval.every_steps=0",
                         f"checkpoint.every_steps={args.steps}", f"tracking.output_dir={run_dir}",
                         "tracking.report=false"), out / f"rlvr-seed{seed}.log")
    rows = {r["step"]: r for r in read_jsonl(run_dir / "metrics.jsonl") if 1 <= r["step"] <= args.steps}
    return run_dir, [r["perf/step_s"] - r.get("perf/eval_s", 0.0) for r in rows.values()], accuracy


def trl(args) -> None:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for seed in args.seeds:
        load = load_average()
        rlvr_dir, rlvr_steps, rlvr_accuracy = rlvr_side(args, seed, out)
        prompts = rlvr_prompts(rlvr_dir, args.steps, 4)
        trl_steps = train_trl(prompts, seed, args.steps, out / f"trl-seed{seed}", 96)
        models = {"trl": out / f"trl-seed{seed}" / "final"}
        if rlvr_accuracy is None:
            models["rlvr"] = sorted((rlvr_dir / "checkpoints").glob("step-*"))[-1]
        if not rows:
            from rlvr.config import ModelConfig
            from rlvr.models.loading import model_source

            models["base"] = Path(model_source(ModelConfig(name="smollm2-135m-instruct")))
        accuracy = eval_models(models, out / f"eval-seed{seed}")
        if rlvr_accuracy is not None:
            accuracy["rlvr"] = rlvr_accuracy
        row = {"seed": seed, "steps": args.steps, "rlvr_run": str(rlvr_dir), "load_before": load,
               "load_after": load_average(), "rlvr_step_s": rlvr_steps, "trl_step_s": trl_steps,
               "accuracy": accuracy}
        rows.append(row)
        print(f"seed {seed}: median s/step rlvr {statistics.median(rlvr_steps):.1f}, TRL "
              f"{statistics.median(trl_steps):.1f} (TRL / rlvr "
              f"{statistics.median(trl_steps) / statistics.median(rlvr_steps):.2f}x); "
              + "  ".join(f"{k}: verifier {100 * v['verifier']:.0f}% exact {100 * v['exact']:.0f}%"
                          for k, v in accuracy.items()) + f"  (load {load} -> {load_average()})")
        (out / "results.json").write_text(json.dumps({"commit": commit(), "rows": rows}, indent=2))
    summarize_trl(rows)


def summarize_trl(rows: list[dict]) -> None:
    base = rows[0]["accuracy"].get("base")
    print(f"\n| seed | rlvr s/step (median) | TRL s/step (median) | TRL / rlvr | rlvr verifier / exact | "
          f"TRL verifier / exact | after {rows[0]['steps']} steps |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for r in rows:
        a, b = statistics.median(r["rlvr_step_s"]), statistics.median(r["trl_step_s"])
        ratios.append(b / a)
        acc = r["accuracy"]
        print(f"| {r['seed']} | {a:.1f} | {b:.1f} | {b / a:.2f}x | {100 * acc['rlvr']['verifier']:.0f}% / "
              f"{100 * acc['rlvr']['exact']:.0f}% | {100 * acc['trl']['verifier']:.0f}% / "
              f"{100 * acc['trl']['exact']:.0f}% | |")
    if base:
        print(f"base model: verifier {100 * base['verifier']:.0f}%, exact {100 * base['exact']:.0f}%")
    for side in ("rlvr", "trl"):
        print(f"{side}: mean held-out exact accuracy "
              f"{100 * statistics.mean(r['accuracy'][side]['exact'] for r in rows):.1f}%")
    if len(rows) > 1:
        paired = [100 * (r["accuracy"]["rlvr"]["exact"] - r["accuracy"]["trl"]["exact"]) for r in rows]
        sd = statistics.stdev(paired)
        print(f"rlvr - TRL, paired by seed: mean {statistics.mean(paired):+.1f} points, sd {sd:.1f}, standard error "
              f"{sd / len(paired) ** 0.5:.1f} ({len(paired)} seeds; rlvr ahead on "
              f"{sum(d > 0 for d in paired)}, even on {sum(d == 0 for d in paired)})")
    print(f"TRL / rlvr median seconds per step: {statistics.mean(ratios):.2f}x (mean over seeds)")


def trl_summary(args) -> None:
    """summarize_trl over the seeds of several `trl` invocations (their OUTPUT/results.json)."""
    rows = []
    for output in args.output:
        results = Path(output) / "results.json"
        if not results.exists():
            raise SystemExit(f"trl-summary: no {results} (run `trl --output {output}` first)")
        rows += json.loads(results.read_text())["rows"]
    summarize_trl(sorted(rows, key=lambda r: r["seed"]))


def replies(args) -> None:
    from rlvr.config.rewards import JudgeSettings
    from rlvr.rewards.judge import refusal

    defences = JudgeSettings(model="unused", reads="answer")
    print("| run | seed | right, first -> last steps | refused, last steps | mean reward, last steps: right / wrong / "
          "refused |")
    print("|---|---|---|---|---|")
    for output in args.output:
        for log in sorted(Path(output).glob("seed*/completions.jsonl")):
            rows = read_jsonl(log)
            last_step = max(r["step"] for r in rows)
            first = [exact_correct(r["completion"], r["reference"]) for r in rows if r["step"] <= args.window]
            last = [r for r in rows if r["step"] > last_step - args.window]
            rewards: dict[str, list[float]] = {"right": [], "wrong": [], "refused": []}  # a right reply may be refused
            for r in last:
                right = exact_correct(r["completion"], r["reference"])
                refused = refusal(defences, r["prompt"], r["reference"], r["completion"]) is not None
                if right or not refused:
                    rewards["right" if right else "wrong"].append(r["reward"])
                if refused:
                    rewards["refused"].append(r["reward"])
            means = " / ".join(f"{statistics.mean(v):.2f}" if v else "-" for v in rewards.values())
            print(f"| {output} | {log.parent.name.removeprefix('seed')} | {100 * sum(first) / len(first):.0f}% -> "
                  f"{100 * len(rewards['right']) / len(last):.0f}% | {len(rewards['refused'])}/{len(last)} | {means} |")


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("recipe", help="the recipe over seeds, verifier and exact check per evaluation")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--output", default="runs/real_model")
    p.add_argument("--plot", default=None, help="PNG of the curves")
    p.add_argument("--set", nargs="*", default=[], help="extra key=value overrides for rlvr train")
    p = sub.add_parser("summary", help="the table (and plot) over the seeds `recipe` wrote under --output")
    p.add_argument("--output", nargs="+", default=["runs/real_model"], help="one or more OUTPUTs of `recipe`")
    p.add_argument("--labels", nargs="+", default=None, help="a name per --output for the tables and the plot")
    p.add_argument("--plot", default=None, help="PNG of the curves")
    p = sub.add_parser("trl", help="rlvr against TRL's GRPOTrainer, side by side")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--output", default="runs/real_model_trl")
    p.add_argument("--reuse", default=None, help="the recipe's runs (OUTPUT of `recipe`): compare with their first "
                   "--steps steps and their evaluation there instead of training rlvr again")
    p = sub.add_parser("trl-summary", help="the `trl` table over the seeds of several invocations")
    p.add_argument("--output", nargs="+", required=True, help="OUTPUTs of `trl`")
    p = sub.add_parser("replies", help="right and refused training replies and their rewards, first and last steps")
    p.add_argument("--output", nargs="+", required=True, help="one or more OUTPUTs of `recipe`")
    p.add_argument("--window", type=int, default=5, help="steps at the start and at the end")
    args = parser.parse_args()
    {"recipe": recipe, "summary": summary, "trl": trl, "trl-summary": trl_summary, "replies": replies}[args.command](args)


if __name__ == "__main__":
    main()
