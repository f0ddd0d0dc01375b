"""What the real-model benchmarks share (benchmarks/real_model.py, real_games.py, real_tool_use.py, self_play.py,
credit.py, episode_phases.py): the runs (`rlvr train` resumably, one command's log, the checkout's commit and the
machine's load), the base model's sampled episodes, and the tables: figures over seeds as mean ± sd with the number
of seeds that have the figure, and trend windows by step number. The baselines printed beside the claims are
computed by rlvr.evaluation.baselines."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------------- runs


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def commit() -> str:
    """The checkout's short commit, recorded with every run's figures ('unknown' outside a git checkout)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def rlvr_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlvr", *args]


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


def run_minutes(result: dict) -> str:
    """A benchmark run's wall minutes for a table; a resumed run's cover only the invocation that finished it."""
    return f"{result['wall_seconds'] / 60:.0f}" + (" (resumed: last part only)" if result.get("resumed") else "")


def time_figures(run_dir: Path) -> dict[str, float]:
    """Where a run's training steps spent their time, as means over the steps logged without an evaluation:
    seconds per step, the environment's share of it (perf/env_s), and for runs whose episodes call the model through
    the OpenAI-compatible endpoint (agent programs, verifiers) the latency of a call (ms, the engine and the wait for
    its batch included), the calls per engine batch, and the share of the generation phase's wall time outside the
    engine's calls ((perf/gen_s - endpoint/engine_s) / perf/gen_s: the agents' own code, the harness, HTTP, the call
    batcher's waits)."""
    from rlvr.tracking.jsonl import read_jsonl

    rows = [r for r in read_jsonl(run_dir / "metrics.jsonl") if "perf/step_s" in r and "eval/accuracy" not in r]
    if not rows:
        return {}
    out = {"step_s": mean(r["perf/step_s"] for r in rows),
           "env_share": mean(r.get("perf/env_s", 0.0) / r["perf/step_s"] for r in rows)}
    called = [r for r in rows if r.get("endpoint/calls")]
    if called:
        out |= {"call_ms": mean(r["endpoint/call_ms_mean"] for r in called),
                "calls_per_batch": mean(r["endpoint/batch_calls_mean"] for r in called),
                "outside_engine_share": mean(max(0.0, r["perf/gen_s"] - r["endpoint/engine_s"]) / r["perf/gen_s"]
                                             for r in called)}
    return out


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


# ---------------------------------------------------------------------------------------------------- figures


def present(values: Iterable[float | None]) -> list[float]:
    """The figures that exist: None and NaN (a seed without the figure) left out."""
    return [v for v in values if v is not None and v == v]


def mean(values: Iterable[float | None]) -> float:
    """The mean of the figures that exist; NaN when none does."""
    kept = present(values)
    return sum(kept) / len(kept) if kept else float("nan")


def mean_sd(values: list[float | None], show: Callable[[float], str]) -> str:
    """Mean ± sample sd over seeds, each written by `show` (the sd without a sign; 0 for one seed). Seeds without the
    figure (None, NaN) are left out and the cell says so: '(2 of 3 seeds)'; '-' when none has it."""
    kept = present(values)
    if not kept:
        return "-"
    sd = statistics.stdev(kept) if len(kept) > 1 else 0.0
    count = f" ({len(kept)} of {len(values)} seeds)" if len(kept) < len(values) else ""
    return f"{show(statistics.mean(kept))} ± {show(sd).lstrip('+')}{count}"


def step_windows(last_step: int, size: int) -> tuple[range, range]:
    """The first and the last `size` training steps of a run of `last_step` steps, by step number (steps 1..size
    and last_step-size+1..last_step); they never overlap, so a run too short for two is an error."""
    if last_step < 2 * size:
        raise ValueError(f"a run of {last_step} steps has no two windows of {size} steps that do not overlap")
    return range(1, size + 1), range(last_step - size + 1, last_step + 1)


def window_mean(points: Iterable[tuple[int, float]], steps: range) -> float:
    """The mean of a per-step figure over the steps of a window (a step without the figure is left out, never
    replaced by a step outside the window); NaN when no step of the window has it."""
    return mean(v for s, v in points if s in steps)


def first_last_steps(rows: list[dict], size: int) -> tuple[list[dict], list[dict]]:
    """A run's per-step rows (each with its "step") in its first and its last `size` steps by step number
    (`step_windows` over the last step logged)."""
    first, last = step_windows(max(r["step"] for r in rows), size)
    return [r for r in rows if r["step"] in first], [r for r in rows if r["step"] in last]


def cell(value, fmt: str) -> str:
    """One seed's figure: a number, or a (start, end) pair written 'start -> end'."""
    if isinstance(value, tuple):
        return " -> ".join(cell(v, fmt) for v in value)
    return "n/a" if value is None or value != value else format(value, fmt)


def spread(values: list, fmt: str) -> str:
    """The seeds' mean ± sample sd of one column (per side of a 'start -> end' pair), by `mean_sd`."""
    if isinstance(values[0], tuple):
        return " -> ".join(spread([v[i] for v in values], fmt) for i in range(len(values[0])))
    return mean_sd(values, lambda v: format(v, fmt))


def save_figure(fig, path: Path, *, title: str | None = None, panels=(), dpi: int = 100) -> None:
    """Write a matplotlib figure to `path` (its folder made) and say so; with `title`, titled and laid out tight;
    `panels` get a grid and their legend."""
    for ax in panels:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if title is not None:
        fig.suptitle(title)
        fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
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
