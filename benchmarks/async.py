"""Synchronous vs asynchronous training (rollout.max_staleness 1 and 2), side by side in one run.

Two workloads:
- quickstart: the quickstart task and model (2-digit addition, llama 128 x 4), SFT-warmed once, then the same
  number of GRPO steps in each mode from the same start; held-out greedy accuracy every --eval-every steps. We
  report the wall time until held-out accuracy first reaches the target (default: the synchronous run's final
  accuracy), and trained samples/s over the whole run.
- code: stdin/stdout programs scored by running them in the sandbox (the code_io task, 3 cases per problem): a slow
  verifier, where scoring overlapped with generation and generation ahead of training should matter most. The tiny
  model writes no correct programs, so only throughput is compared (trained samples/s).
- episodes: an environment task, 'try again' episodes (recipes/try_again.yaml: 2-digit addition, up to 3 attempts,
  8 prompts x 8 episodes per step) with turn-level credit (algorithm.turn_credit=turn_baseline), from the recipe's
  untrained tiny model or --episode-model (an SFT-warmed one: benchmarks/try_again.py leaves one per seed under
  <its --out>/seed<N>/sft); episodes vary in length, so generating ahead should pay. Reported: trained samples
  (episodes) per second and the training episodes' accuracy (success within 3 attempts) per step and its mean.

Asynchronous runs use --workers rollout worker processes and TIS correction (algorithm.rollout_correction=tis);
everything else is the synchronous recipe. The figures are only as quiet as the machine: we print the load average
before and after each run, and the CPU time used per trained sample (trainer, rollout and reward workers): on a
machine shared with other jobs, a run with more processes gets a larger share of the cores, so a wall-time gain
with equal CPU per sample is partly that share.

Run:  .venv/bin/python benchmarks/async.py                       (quickstart 60 steps + code 12 + episodes 12)
      .venv/bin/python benchmarks/async.py --steps 30 --code-steps 6 --modes 0,1
      .venv/bin/python benchmarks/async.py --only episodes --episode-steps 20 --modes 0,1
      .venv/bin/python benchmarks/async.py --only episodes --episode-model runs/try_again_bench/seed0/sft
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import time
from pathlib import Path

from rlvr.config import load_config
from rlvr.quickstart import RECIPE

TRY_AGAIN = Path(__file__).resolve().parent.parent / "recipes" / "try_again.yaml"

CODE_PROBLEMS = [  # (statement, function of the input lines -> expected output)
    ("Read two integers a and b on one line and print a + b.", lambda a, b: a + b),
    ("Read two integers a and b on one line and print a * b.", lambda a, b: a * b),
    ("Read two integers a and b on one line and print the larger one.", max),
    ("Read two integers a and b on one line and print a - b.", lambda a, b: a - b),
]


def write_code_problems(path: Path, count: int = 64) -> None:
    rows = []
    for i in range(count):
        statement, fn = CODE_PROBLEMS[i % len(CODE_PROBLEMS)]
        cases = [(i + j, 2 * j + 1) for j in range(3)]
        rows.append({"id": f"p{i}", "prompt": f"{statement} ```python\n",
                     "tests": [{"input": f"{a} {b}\n", "output": f"{fn(a, b)}\n"} for a, b in cases]})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have exited (rollout and reward workers, once closed)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def train(recipe, overrides: list[str]) -> tuple[list[dict], float, float]:
    """(metrics rows, wall seconds, CPU seconds) of one run, from the first step to the workers' exit."""
    from rlvr.training.trainer import Trainer

    cfg = load_config(recipe, overrides)
    shutil.rmtree(cfg.tracking.output_dir, ignore_errors=True)
    trainer = Trainer(cfg)
    start, cpu = time.perf_counter(), cpu_seconds()
    trainer.fit()
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    rows = [json.loads(line) for line in (Path(cfg.tracking.output_dir) / "metrics.jsonl").read_text().splitlines()]
    return rows, wall, cpu


def mode_overrides(k: int, workers: int) -> list[str]:
    if k == 0:
        return ["rollout.max_staleness=0"]
    return [f"rollout.max_staleness={k}", f"rollout.num_workers={workers}", "algorithm.rollout_correction=tis"]


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def quickstart(args, out: Path, modes: list[int]) -> dict:
    from rlvr.training.sft import run_sft

    sft_cfg = load_config(RECIPE, [f"tracking.output_dir={out / 'sft-run'}", f"sft.output_dir={out / 'sft'}",
                                   f"sft.epochs={args.sft_epochs}"])
    sft_dir = out / "sft"
    if not (sft_dir / "config.json").is_file():
        run_sft(sft_cfg)
    results = {}
    for k in modes:
        before = load()
        rows, wall, cpu = train(RECIPE, [f"model.name={sft_dir}", f"tracking.output_dir={out / f'qs-k{k}'}",
                                    f"steps={args.steps}", f"eval.every_steps={args.eval_every}",
                                    "tracking.console=false", *mode_overrides(k, args.workers)])
        elapsed, curve = 0.0, []
        for r in rows:
            elapsed += r.get("perf/step_s", 0.0)
            if r.get("eval/accuracy") is not None:
                curve.append((r["step"], elapsed, r["eval/accuracy"]))
        samples = sum(1 for r in rows if r["step"] > 0) * 32 * 8
        results[k] = {"wall_s": wall, "samples_per_s": samples / wall, "curve": curve, "load": f"{before} -> {load()}",
                      "staleness_mean": _mean(rows, "policy/staleness_mean"), "cpu_ms_per_sample": 1e3 * cpu / samples}
        print(f"  quickstart k={k}: {wall:.0f} s, final acc {curve[-1][2]:.3f}, load {results[k]['load']}",
              flush=True)
    target = args.target if args.target is not None else results[modes[0]]["curve"][-1][2]
    for res in results.values():
        res["time_to_target_s"] = next((t for _, t, acc in res["curve"] if acc >= target), None)
    return {"target": target, "modes": results}


def code(args, out: Path, modes: list[int]) -> dict:
    path = out / "code_problems.jsonl"
    write_code_problems(path)
    recipe = out / "code.yaml"
    recipe.write_text(json.dumps({
        "seed": 0, "steps": args.code_steps,
        "model": {"name": "tiny", "tiny": {"hidden_size": 64, "num_layers": 2, "num_heads": 2,
                                           "intermediate_size": 256, "vocab_size": 128}},
        "data": {"tasks": [{"name": "code_io", "args": {"path": str(path), "eval_size": 8}}],
                 "prompts_per_step": 8},
        "rollout": {"samples_per_prompt": 4, "max_new_tokens": 24},
        "optim": {"lr": 1e-4, "micro_batch_size": 32},
        "rewards": {"num_workers": 1, "timeout_s": 10},
        "tracking": {"console": False},
    }))
    results = {}
    for k in modes:
        before = load()
        rows, wall, cpu = train(recipe, [f"tracking.output_dir={out / f'code-k{k}'}", *mode_overrides(k, args.workers)])
        samples = len(rows) * 8 * 4
        results[k] = {"wall_s": wall, "samples_per_s": samples / wall, "load": f"{before} -> {load()}",
                      "staleness_mean": _mean(rows, "policy/staleness_mean"), "cpu_ms_per_sample": 1e3 * cpu / samples}
        print(f"  code k={k}: {wall:.0f} s, load {results[k]['load']}", flush=True)
    return {"modes": results}


def episodes(args, out: Path, modes: list[int]) -> dict:
    results = {}
    for k in modes:
        before = load()
        start = [f"model.name={args.episode_model}"] if args.episode_model else []
        rows, wall, cpu = train(TRY_AGAIN, [*start, f"tracking.output_dir={out / f'episodes-k{k}'}",
                                            f"steps={args.episode_steps}", "eval.every_steps=0",
                                            "algorithm.turn_credit=turn_baseline", *mode_overrides(k, args.workers)])
        trained = [r for r in rows if r["step"] > 0]
        samples = len(trained) * 8 * 8
        results[k] = {"wall_s": wall, "samples_per_s": samples / wall, "load": f"{before} -> {load()}",
                      "staleness_mean": _mean(rows, "policy/staleness_mean"), "cpu_ms_per_sample": 1e3 * cpu / samples,
                      "accuracy": [round(r["accuracy"], 3) for r in trained],
                      "turns": _mean(rows, "reward/verifier/turns")}
        print(f"  episodes k={k}: {wall:.0f} s, load {results[k]['load']}", flush=True)
    return {"modes": results}


def _mean(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else float("nan")


def report(qs: dict | None, cd: dict | None, ep: dict | None, modes: list[int]) -> None:
    base = modes[0]
    if qs:
        print(f"\nquickstart: target held-out accuracy {qs['target']:.3f}")
        print(f"{'mode':<16}{'wall s':>8}{'to target s':>13}{'samples/s':>11}{'x sync':>8}{'CPU ms/sample':>15}"
              f"{'final acc':>11}{'staleness':>11}")
        for k, r in qs["modes"].items():
            ratio = r["samples_per_s"] / qs["modes"][base]["samples_per_s"]
            to_target = f"{r['time_to_target_s']:.0f}" if r["time_to_target_s"] is not None else "not reached"
            print(f"{'sync' if k == 0 else f'max_staleness={k}':<16}{r['wall_s']:>8.0f}{to_target:>13}"
                  f"{r['samples_per_s']:>11.1f}{ratio:>8.2f}{r['cpu_ms_per_sample']:>15.1f}{r['curve'][-1][2]:>11.3f}"
                  f"{r['staleness_mean']:>11.2f}")
    if cd:
        print("\ncode (sandboxed stdin/stdout tests)")
        print(f"{'mode':<16}{'wall s':>8}{'samples/s':>11}{'x sync':>8}{'CPU ms/sample':>15}{'staleness':>11}")
        for k, r in cd["modes"].items():
            ratio = r["samples_per_s"] / cd["modes"][base]["samples_per_s"]
            print(f"{'sync' if k == 0 else f'max_staleness={k}':<16}{r['wall_s']:>8.0f}{r['samples_per_s']:>11.2f}"
                  f"{ratio:>8.2f}{r['cpu_ms_per_sample']:>15.1f}{r['staleness_mean']:>11.2f}")
    if ep:
        print("\nepisodes ('try again', up to 3 turns; accuracy: training episodes solved within 3 attempts, per step)")
        print(f"{'mode':<16}{'wall s':>8}{'samples/s':>11}{'x sync':>8}{'CPU ms/sample':>15}{'staleness':>11}"
              f"{'turns':>7}{'mean acc':>10}{'x sync':>8}  accuracy per step")
        for k, r in ep["modes"].items():
            ratio = r["samples_per_s"] / ep["modes"][base]["samples_per_s"]
            acc, base_acc = (sum(m["accuracy"]) / len(m["accuracy"]) for m in (r, ep["modes"][base]))
            acc_ratio = f"{acc / base_acc:>8.2f}" if base_acc else f"{'-':>8}"
            print(f"{'sync' if k == 0 else f'max_staleness={k}':<16}{r['wall_s']:>8.0f}{r['samples_per_s']:>11.2f}"
                  f"{ratio:>8.2f}{r['cpu_ms_per_sample']:>15.1f}{r['staleness_mean']:>11.2f}{r['turns']:>7.2f}"
                  f"{acc:>10.3f}{acc_ratio}  {' '.join(f'{a:.2f}' for a in r['accuracy'])}")


def plot(qs: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for k, r in qs["modes"].items():
        ax.plot([t for _, t, _ in r["curve"]], [a for _, _, a in r["curve"]], marker="o",
                label="synchronous" if k == 0 else f"max_staleness={k}")
    ax.axhline(qs["target"], color="grey", linestyle=":", label="target")
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("held-out accuracy (greedy)")
    ax.set_title("quickstart task: accuracy vs wall time, 2-core CPU")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--sft-epochs", type=int, default=10)
    parser.add_argument("--code-steps", type=int, default=12)
    parser.add_argument("--modes", default="0,1,2", help="max_staleness values; the first is the baseline")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--target", type=float, default=None)
    parser.add_argument("--episode-steps", type=int, default=12)
    parser.add_argument("--episode-model", default=None,
                        help="the episodes workload's start model (default: the recipe's untrained tiny model)")
    parser.add_argument("--only", choices=["quickstart", "code", "episodes"], nargs="+",
                        default=["quickstart", "code", "episodes"], help="the workloads to run")
    parser.add_argument("--output", default="runs/bench-async")
    args = parser.parse_args()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    modes = [int(k) for k in args.modes.split(",")]
    print(f"cpus {os.cpu_count()}, load average {load()}", flush=True)
    qs = quickstart(args, out, modes) if "quickstart" in args.only else None
    cd = code(args, out, modes) if "code" in args.only else None
    ep = episodes(args, out, modes) if "episodes" in args.only else None
    report(qs, cd, ep, modes)
    (out / "results.json").write_text(json.dumps({"quickstart": qs, "code": cd, "episodes": ep}, indent=2))
    if qs:
        plot(qs, out / "async.png")
        print(f"plot: {out / 'async.png'}")


if __name__ == "__main__":
    main()
