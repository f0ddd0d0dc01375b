"""Evidence on the real model for hint scaffolding, process credit and tree rollouts (docs/credit.md), each against
its baseline, SmolLM2-135M-Instruct on a CPU, several seeds, every held-out figure by an exact check written apart
from the training rewards.

    python -m benchmarks.credit hints   [--seeds 0 1 2] [--output runs/credit_hints]   # GRPO vs GRPO + hints
    python -m benchmarks.credit process [--seeds 0 1 2] [--output runs/credit_process] # outcome vs process sum / min
    python -m benchmarks.credit tree    [--seeds 0 1 2] [--output runs/credit_tree]    # independent vs tree samples
    python -m benchmarks.credit summary EXPERIMENT [--output DIR] [--plot PNG] [--reuse-from runs/credit_process]
    python -m benchmarks.credit probe {add3,chain} [--problems 16] [--hints none:0 response:0.87 prompt:1.0 ...]

Each arm of each seed is one `rlvr train` run (niced, one thread, one at a time), skipped when its folder already
holds a finished run (so an interrupted benchmark resumes where it stopped). The runs:

- `hints`: 3-digit addition asked as a chat question (the base model's groups mostly all fail), the dataset's
  solution column (`a + b = c`) the hint source; GRPO against GRPO with `data.hints`. Figures: the all-fail fraction
  of the groups sampled without hints (groups/all_fail_frac) over steps, and held-out greedy accuracy, no hints.
- `process`: the arithmetic_chain task; GRPO on the outcome against process credit with the arithmetic step
  checker, sum form and min form. Figures: held-out final-answer accuracy, the rate of completions that pad
  (more true equations than the chain has operations), held out and in training, and true equations per held-out
  completion.
- `tree`: the arithmetic_chain task with the static engine, 8 samples per prompt either way; independent samples
  (GRPO) against tree rollouts (the tree estimator). Figures: decoded tokens per completion (the engine's count) and
  held-out accuracy against wall time, and generation seconds per step.

`probe` samples the base model (8 samples per problem, temperature 1, the static engine) on the first held-out
problems of a task, without a hint and with hints of the given placement and fraction of the reference solution
(as data.hints would show them), and prints pass@1, pass@8 and the all-fail fraction by the task's verifier.

The exact check: the completion's last non-empty \\boxed{} if it holds an integer, else its last integer, equals the
reference (benchmarks/reward_hacking.py's plain reading; no rlvr verifier involved). Padding is counted by a regular
expression of its own (`true_equations`), not by the arithmetic_steps reward.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, commit, first_last_steps, load_average
from benchmarks.reward_hacking import plain_answer
from rlvr.tracking.jsonl import read_jsonl

MODEL = "smollm2-135m-instruct"

COMMON = ["model.name=smollm2-135m-instruct", "model.dtype=float32", "data.prompts_per_step=4",
          "rollout.samples_per_prompt=8", "rollout.temperature=1.0", "algorithm.policy_loss=ppo_clip",
          "algorithm.loss_aggregation=token-mean", "algorithm.kl_coef=0.0", "optim.lr=1e-5", "optim.micro_batch_size=8",
          "optim.grad_clip=1.0", "rewards.num_workers=1", "rewards.timeout_s=120", "checkpoint.every_steps=0",
          "checkpoint.keep_last=1", "tracking.log_completions_every=1", "tracking.log_completions_groups=4",
          "tracking.report=false"]

EXPERIMENTS = {
    "hints": {
        "steps": 16, "eval_every": 8, "eval_problems": 40,
        "base": ["data.tasks=[{name: dataset, args: {path: DATA, solution_column: solution, eval_size: 40, "
                 "verifier: 'rlvr.verifiers.math:math_score'}}]", "rollout.engine=static", "rollout.max_new_tokens=48"],
        "arms": {"grpo": [],
                 "hints": ["data.hints={placement: response, initial_fraction: 0.85, gain: 0.2, max_rounds: 2}"]},
    },
    "process": {
        "steps": 16, "eval_every": 8, "eval_problems": 40,
        "base": ["data.tasks=[{name: arithmetic_chain, args: {steps: 2, max_operand: 20, max_multiplier: 5, "
                 "eval_size: 40}}]", "rollout.engine=static", "rollout.max_new_tokens=80"],
        "arms": {"outcome": [],
                 "process_sum": ["rewards.step_reward={function: arithmetic_steps}", "algorithm.advantage=process_sum"],
                 "process_min": ["rewards.step_reward={function: arithmetic_steps}", "algorithm.advantage=process_min"]},
    },
    "tree": {
        "steps": 16, "eval_every": 8, "eval_problems": 40,
        "base": ["data.tasks=[{name: arithmetic_chain, args: {steps: 2, max_operand: 20, max_multiplier: 5, "
                 "eval_size: 40}}]", "rollout.engine=static", "rollout.max_new_tokens=80"],
        # the independent arm is the process experiment's outcome arm (the same runs), read from its folder
        "reuse": {"independent": "outcome"},
        "arms": {"tree": ["rollout.tree={segment_tokens: 12, branch_factor: 2, roots: 2, fork_fraction: 0.5}",
                          "algorithm.advantage=tree"]},
    },
}


# where the tree experiment finds the runs it shares with the process experiment (its `reuse` arms)
REUSE_FROM = {"default": "runs/credit_process", "help": "where the tree experiment finds the process experiment's runs"}


def write_addition(path: Path, n: int = 1050, seed: int = 43) -> None:
    """3-digit additions as chat questions with a boxed answer; the solution column is the plain equation."""
    rng = random.Random(seed)
    seen, rows = set(), []
    while len(rows) < n:
        a, b = rng.randint(100, 999), rng.randint(100, 999)
        if (a, b) in seen:
            continue
        seen.add((a, b))
        rows.append({"prompt": f"What is {a} + {b}? Put the final answer in \\boxed{{}}.", "answer": str(a + b),
                     "solution": f"{a} + {b} = {a + b}"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def exact_correct(completion: str, reference: str) -> bool:
    """The exact check: the last non-empty box holding an integer, else the last integer, is the reference."""
    return plain_answer(completion) == str(reference).strip()


EQUATION = re.compile(r"(\d+)\s*([-+*×x])\s*(\d+)\s*=\s*(\d+)")
APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "×": lambda a, b: a * b,
         "x": lambda a, b: a * b}


def true_equations(completion: str) -> int:
    """How many `a op b = c` equations of the completion hold (counted apart from the arithmetic_steps reward)."""
    return sum(APPLY[op](int(a), int(b)) == int(c) for a, op, b, c in EQUATION.findall(completion))


def pads(completion: str, operations: int) -> bool:
    """A completion pads when it writes more true equations than the chain has operations."""
    return true_equations(completion) > operations


def operations_of(uid: str) -> int:
    """The operations of an arithmetic_chain problem, from its uid ('7+5*3' has 2)."""
    return len(re.findall(r"[-+*]", uid))


def train(run_dir: Path, overrides: list[str], log: Path) -> float:
    """One `rlvr train` run, niced, one thread; its wall seconds. A failure stops the benchmark with the log's end."""
    command = ["nice", "-n", "15", sys.executable, "-m", "rlvr", "train", *overrides,
               f"tracking.output_dir={run_dir}"]
    t0 = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                               env={**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    if code != 0:
        raise SystemExit(f"{' '.join(command)} failed ({code}); last lines of {log}:\n" +
                         "\n".join(log.read_text().splitlines()[-20:]))
    return time.perf_counter() - t0


def evaluations(run_dir: Path) -> list[dict]:
    """Per held-out evaluation: step, exact-check accuracy, the verifier's, and (for chains) the padding rate."""
    by_step: dict[int, dict[str, dict]] = {}
    for row in read_jsonl(run_dir / "eval_completions.jsonl"):
        by_step.setdefault(row["step"], {})[row["uid"]] = row
    out = []
    for step, rows in sorted(by_step.items()):
        rows = list(rows.values())
        point = {"step": step, "problems": len(rows),
                 "exact": sum(exact_correct(r["completion"], r["reference"]) for r in rows) / len(rows),
                 "verifier": sum(r["correct"] for r in rows) / len(rows)}
        if all(re.fullmatch(r"\d+([-+*]\d+)+", r["uid"]) for r in rows):
            point["pad"] = sum(pads(r["completion"], operations_of(r["uid"])) for r in rows) / len(rows)
            point["equations"] = statistics.mean(true_equations(r["completion"]) for r in rows)
        out.append(point)
    return out


def training_curve(run_dir: Path) -> list[dict]:
    """Per step: the metrics the comparisons read, and the padding rate of the logged training completions."""
    logged: dict[int, list[dict]] = {}
    for row in read_jsonl(run_dir / "completions.jsonl"):
        logged.setdefault(row["step"], []).append(row)
    curve = []
    for row in read_jsonl(run_dir / "metrics.jsonl"):
        if "perf/step_s" not in row:
            continue
        point = {k: row[k] for k in ("step", "accuracy", "groups/all_fail_frac", "perf/step_s", "perf/gen_s",
                                     "rollout/decoded_tokens_per_completion", "response_length/mean",
                                     "hints/hinted_frac", "hints/fraction_mean", "process/spans_per_sample") if k in row}
        rows = logged.get(row["step"], [])
        if rows and all(re.fullmatch(r"\d+([-+*]\d+)+", r["uid"]) for r in rows):
            point["pad"] = sum(pads(r["completion"], operations_of(r["uid"])) for r in rows) / len(rows)
        curve.append(point)
    return curve


def probe(args) -> None:
    """Base-model pass rates on a task's held-out problems, without and with hints (see the module docstring)."""
    import torch

    from rlvr.config import ModelConfig
    from rlvr.curriculum.hints import hint_prefix
    from rlvr.models.loading import load_model, load_tokenizer, model_source
    from rlvr.models.prompts import PromptEncoder
    from rlvr.rewards.loading import resolve_function
    from rlvr.rollout import SamplingParams, make_engine
    from rlvr.rollout.hints import HINT_PLACEMENTS, after_prefix
    from rlvr.tasks import make_task

    torch.set_num_threads(1)
    torch.manual_seed(0)
    out = Path(args.output or "runs/credit_probe")
    out.mkdir(parents=True, exist_ok=True)
    if args.task == "add3":
        write_addition(out / "addition3.jsonl")
        task = make_task("dataset", 0, {"path": str(out / "addition3.jsonl"), "solution_column": "solution",
                                        "eval_size": 50, "verifier": "rlvr.verifiers.math:math_score"})
    else:
        task = make_task("arithmetic_chain", 0, {"steps": 2, "max_operand": 20, "max_multiplier": 5, "eval_size": 50})
    source = model_source(ModelConfig(name=MODEL))
    tokenizer, model = load_tokenizer(source), load_model(ModelConfig(name=MODEL, dtype="float32"), name=source)
    encode, engine = PromptEncoder(tokenizer), make_engine("static", model, tokenizer, 256)
    verify = resolve_function(task.verifier)
    problems = [task.problem("eval", i) for i in range(args.problems)]
    template = "Hint: a correct solution begins with:\n{hint}"
    print(f"{args.task}: {args.problems} held-out problems x 8 samples, commit {commit()}, load {load_average()}")
    print("| hint | pass@1 | pass@8 | all-fail groups | mean length | seconds |")
    print("|---|---|---|---|---|---|")
    for spec in args.hints:
        placement, fraction = spec.split(":")
        t0 = time.perf_counter()
        hinted = [HINT_PLACEMENTS.get(placement)(p, encode(p.prompt), hint_prefix(p.solution, float(fraction)), encode,
                                                 template) if placement != "none" else None for p in problems]
        prompts = [h.sample_ids if h else encode(p.prompt) for p, h in zip(problems, hinted)]
        groups = engine.generate(prompts, SamplingParams(n=8, temperature=1.0, max_new_tokens=args.max_new_tokens))
        passed, lengths = [], []
        for p, h, group in zip(problems, hinted, groups):
            group = [after_prefix(h.prefix_ids if h else [], c, tokenizer) for c in group]
            passed.append([float(verify(p.prompt, c.text, p.answer, truncated=c.truncated)) >= 1 for c in group])
            lengths += [c.policy_tokens for c in group]
        print(f"| {spec} | {100 * sum(map(sum, passed)) / (8 * len(passed)):.1f}% | "
              f"{100 * sum(map(any, passed)) / len(passed):.0f}% | {100 * sum(not any(x) for x in passed) / len(passed):.0f}% "
              f"| {statistics.mean(lengths):.1f} | {time.perf_counter() - t0:.0f} |", flush=True)


def run_experiment(name: str, args) -> None:
    spec = EXPERIMENTS[name]
    out = Path(args.output or f"runs/credit_{name}")
    out.mkdir(parents=True, exist_ok=True)
    data = out / "addition3.jsonl"
    if name == "hints" and not data.exists():
        write_addition(data)
    base = [*COMMON, f"steps={spec['steps']}", f"eval.every_steps={spec['eval_every']}",
            f"eval.num_problems={spec['eval_problems']}", f"eval.log_completions={spec['eval_problems']}",
            *(o.replace("DATA", str(data.resolve())) for o in spec["base"])]
    for seed in args.seeds:
        for arm, extra in spec["arms"].items():
            if args.arms and arm not in args.arms:
                continue
            run_dir = out / f"{arm}_seed{seed}"
            result = out / f"{arm}_seed{seed}.json"
            if result.exists():
                print(f"{arm} seed {seed}: done before ({result})")
                continue
            load, at = load_average(), commit()
            seconds = train(run_dir, [f"seed={seed}", *base, *extra, *args.set], out / f"{arm}_seed{seed}.log")
            record = {"experiment": name, "arm": arm, "seed": seed, "commit": at, "wall_seconds": seconds,
                      "load_before": load, "load_after": load_average(), "overrides": [*base, *extra, *args.set],
                      "evaluations": evaluations(run_dir), "training": training_curve(run_dir)}
            result.write_text(json.dumps(record, indent=1))
            last = record["evaluations"][-1]
            print(f"{arm} seed {seed}: {seconds / 60:.1f} min (load {load} -> {record['load_after']}), held-out exact "
                  f"{100 * record['evaluations'][0]['exact']:.0f}% -> {100 * last['exact']:.0f}%", flush=True)
    for arm, other in spec.get("reuse", {}).items():  # runs shared with another experiment, copied under this arm
        source = Path(args.reuse_from)
        for seed in args.seeds:
            found = source / f"{other}_seed{seed}.json"
            if found.exists() and not (out / f"{arm}_seed{seed}.json").exists():
                (out / f"{arm}_seed{seed}.json").write_text(found.read_text().replace(f'"arm": "{other}"', f'"arm": "{arm}"'))
    summary(argparse.Namespace(experiment=name, output=str(out), plot=args.plot, reuse_from=args.reuse_from))


def mean_sd(values: list[float], scale: float = 100.0, digits: int = 1) -> str:
    if not values:
        return "-"
    m = statistics.mean(values) * scale
    return f"{m:.{digits}f}" + (f" ± {statistics.stdev(values) * scale:.{digits}f}" if len(values) > 1 else "")


def held_out_exact(runs: list[dict]) -> list[str]:
    """Mean ± sd over seeds of the exact check's held-out accuracy at each evaluation of an arm's runs."""
    return [mean_sd([r["evaluations"][i]["exact"] for r in runs], digits=0) for i in range(len(runs[0]["evaluations"]))]


def summary(args) -> None:
    out = Path(args.output or f"runs/credit_{args.experiment}")
    records = [json.loads(p.read_text()) for p in sorted(out.glob("*_seed*.json"))]
    if not records:
        raise SystemExit(f"no finished runs under {out}")
    reused = EXPERIMENTS[args.experiment].get("reuse", {})
    for r in records:  # read the figures again from the run's own logs where its folder is here
        folder = (Path(args.reuse_from) / f"{reused[r['arm']]}_seed{r['seed']}"
                  if r["arm"] in reused else out / f"{r['arm']}_seed{r['seed']}")
        if (folder / "eval_completions.jsonl").is_file():
            r["evaluations"], r["training"] = evaluations(folder), training_curve(folder)
    arms = list(dict.fromkeys(r["arm"] for r in records))
    by_arm = {arm: sorted((r for r in records if r["arm"] == arm), key=lambda r: r["seed"]) for arm in arms}
    print(f"\n{args.experiment}: {out} (commits {', '.join(sorted({r['commit'] for r in records}))}; seeds "
          f"{sorted({r['seed'] for r in records})}); mean ± sd over seeds")
    if args.experiment == "hints":
        print("\n| arm | seeds | held-out exact: base -> 8 -> 16 | all-fail groups, steps 1-5 | steps 12-16 | hinted "
              "samples trained | minutes per run |")
        print("|---|---|---|---|---|---|---|")
        for arm, rs in by_arm.items():
            evals = held_out_exact(rs)
            windows = [first_last_steps(r["training"], 5) for r in rs]
            early = [statistics.mean(p["groups/all_fail_frac"] for p in first) for first, _ in windows]
            late = [statistics.mean(p["groups/all_fail_frac"] for p in last) for _, last in windows]
            hinted = [statistics.mean(p.get("hints/hinted_frac", 0.0) for p in r["training"]) for r in rs]
            print(f"| {arm} | {len(rs)} | {' -> '.join(evals)} | {mean_sd(early)}% | {mean_sd(late)}% | "
                  f"{mean_sd(hinted)}% | {mean_sd([r['wall_seconds'] / 60 for r in rs], 1, 1)} |")
    elif args.experiment == "process":
        print("\n| arm | seeds | held-out exact: base -> 8 -> 16 | held-out padding: base -> 16 | true equations per "
              "held-out completion: base -> 16 | training padding, steps 12-16 | minutes per run |")
        print("|---|---|---|---|---|---|---|")
        for arm, rs in by_arm.items():
            evals = held_out_exact(rs)
            pad = [mean_sd([r["evaluations"][i]["pad"] for r in rs], digits=0) for i in (0, -1)]
            equations = [mean_sd([r["evaluations"][i]["equations"] for r in rs], 1, 1) for i in (0, -1)]
            train_pad = [statistics.mean(p.get("pad", 0.0) for p in first_last_steps(r["training"], 5)[1]) for r in rs]
            print(f"| {arm} | {len(rs)} | {' -> '.join(evals)} | {' -> '.join(pad)}% | {' -> '.join(equations)} | "
                  f"{mean_sd(train_pad)}% | {mean_sd([r['wall_seconds'] / 60 for r in rs], 1, 1)} |")
    else:
        print("\n| arm | seeds | decoded tokens per completion | completion length | held-out exact: base -> 8 -> "
              "16 | generation seconds per step | training seconds per step | minutes per run |")
        print("|---|---|---|---|---|---|---|---|")
        for arm, rs in by_arm.items():
            decoded = [statistics.mean(p["rollout/decoded_tokens_per_completion"] for p in r["training"]) for r in rs]
            length = [statistics.mean(p["response_length/mean"] for p in r["training"]) for r in rs]
            evals = held_out_exact(rs)
            step_s = [statistics.mean(p["perf/step_s"] for p in r["training"]) for r in rs]
            gen_s = [statistics.mean(p["perf/gen_s"] for p in r["training"]) for r in rs]
            print(f"| {arm} | {len(rs)} | {mean_sd(decoded, 1)} | {mean_sd(length, 1)} | {' -> '.join(evals)} | "
                  f"{mean_sd(gen_s, 1)} | {mean_sd(step_s, 1)} | {mean_sd([r['wall_seconds'] / 60 for r in rs], 1, 1)} |")
    for r in records:
        print(f"  {r['arm']} seed {r['seed']}: {r['wall_seconds'] / 60:.1f} min, load {r['load_before']} -> "
              f"{r['load_after']}")
    if args.plot:
        plot(args.experiment, by_arm, Path(args.plot))


def plot(experiment: str, by_arm: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = ("tab:blue", "tab:orange", "tab:green", "tab:red")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    left, right = axes
    for (arm, rs), color in zip(by_arm.items(), colors):
        for k, r in enumerate(rs):
            label = arm if k == 0 else None
            if experiment == "tree":  # accuracy against the run's wall time at each evaluation
                elapsed, times = 0.0, {0: 0.0}
                for p in r["training"]:
                    elapsed += p["perf/step_s"]
                    times[p["step"]] = elapsed / 60
                left.plot([times[e["step"]] for e in r["evaluations"]], [100 * e["exact"] for e in r["evaluations"]],
                          color=color, marker="o", alpha=0.8, label=label)
                right.plot([p["step"] for p in r["training"]],
                           [p["rollout/decoded_tokens_per_completion"] for p in r["training"]], color=color, alpha=0.8,
                           label=label)
            else:
                left.plot([e["step"] for e in r["evaluations"]], [100 * e["exact"] for e in r["evaluations"]],
                          color=color, marker="o", alpha=0.8, label=label)
                key = "groups/all_fail_frac" if experiment == "hints" else "pad"
                right.plot([p["step"] for p in r["training"]], [100 * p.get(key, 0.0) for p in r["training"]],
                           color=color, alpha=0.8, label=label)
    left.set_xlabel("minutes of training steps (shared CPU)" if experiment == "tree" else "step")
    left.set_ylabel("held-out greedy accuracy, exact check (%)")
    right.set_xlabel("step")
    right.set_ylabel({"hints": "groups whose 8 samples all fail (%), no hints",
                      "process": "training completions that pad (%)",
                      "tree": "decoded tokens per completion"}[experiment])
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"SmolLM2-135M-Instruct on a CPU: {experiment} (each line one seed)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in EXPERIMENTS:
        p = sub.add_parser(name)
        p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
        p.add_argument("--arms", nargs="+", help="only these arms")
        p.add_argument("--output")
        p.add_argument("--plot")
        p.add_argument("--set", nargs="*", default=[], help="more overrides for every run")
        p.add_argument("--reuse-from", **REUSE_FROM)
    p = sub.add_parser("probe")
    p.add_argument("task", choices=["add3", "chain"])
    p.add_argument("--problems", type=int, default=16)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--hints", nargs="+", default=["none:0"])
    p.add_argument("--output")
    s = sub.add_parser("summary")
    s.add_argument("experiment", choices=list(EXPERIMENTS))
    s.add_argument("--output")
    s.add_argument("--plot")
    s.add_argument("--reuse-from", **REUSE_FROM)
    args = parser.parse_args()
    if args.command == "summary":
        summary(args)
    elif args.command == "probe":
        probe(args)
    else:
        run_experiment(args.command, args)


if __name__ == "__main__":
    main()
