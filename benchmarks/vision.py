"""Vision-language RLVR on a CPU: a tiny VLM learns to ground and to count shapes.

For each seed and task: build a tiny Idefics3/SmolVLM-style model (rlvr.models.tiny_vlm) from configs, SFT-warm it on
a few hundred demonstrations of one question of the shapes task family (rlvr.tasks.shapes), then run GRPO on fresh
prompts with the task's verifier as the only reward (IoU for grounding, exact count for counting). Held-out greedy
mean IoU (grounding) and accuracy (counting) on the task's fixed held-out set, after SFT and after GRPO.

The settings (SETTINGS, TASK_ARGS) and why (each found by short seed-0 runs, listed in docs/results.md):
- the whole model trains (model.freeze_vision false): the tiny vision tower is random, and frozen it leaves the
  decoder features it does not learn to read in a few hundred steps; SFT then ends at the answer prior (always "0",
  or one fixed box whatever the image), and GRPO has nothing to sharpen;
- easy scenes: one shape to box; shapes of one colour to count (shapes.colours=1): with several shapes or colours the
  tiny model must bind the question's word to an image token, which it did not learn within the budget;
- counting's SFT stops at 50% held-out exact match (sft.stop_at_accuracy), grounding's after 15 epochs, so GRPO starts
  from partial skill;
- sampling temperature 0.7: at 1.0 most of a partly trained model's samples are malformed, the group rewards are
  mostly format noise, and held-out counting fell.

    nice -n 19 .venv/bin/python benchmarks/vision.py [--seeds 0 1 2] [--tasks ground count] [--jobs 2]

Prints a table and a JSON line (with each run's training reward and zero-std group fraction per step); --plot writes
the figure (docs/img/vision.png).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from rlvr.config import build_config
from rlvr.models.loading import load_model, load_processor
from rlvr.models.prompts import prompt_text
from rlvr.models.tiny_vlm import build_tiny_vlm
from rlvr.models.vision import VisionPromptEncoder
from rlvr.rewards.loading import resolve_function
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.tasks import make_task
from rlvr.training.sft import run_sft
from rlvr.training.trainer import Trainer

IMAGE_SIZE = 32
TASK_ARGS = {"ground": {"question": "ground", "coordinates": "pixel", "min_shapes": 1, "max_shapes": 1},
             "count": {"question": "count", "min_shapes": 1, "max_shapes": 4, "colours": 1}}
# Completion budget: the longest answer and its EOS, with room to spare ("[19, 17, 32, 30]" is 16 tokens of the
# tiny tokenizer, one per digit: a budget of 16 truncated every two-digit box, and a truncated answer scores 0).
NEW_TOKENS = {"ground": 20, "count": 3}


# Per task: the SFT warm-up (demonstrations, epochs) and GRPO (steps, learning rate, sampling temperature).
# sft_stop: end SFT once greedy exact-match accuracy on held-out demonstrations reaches it (sft.stop_at_accuracy), so
# GRPO starts every seed from the same partial skill; None: all the epochs (a box is rarely exactly right).
SETTINGS = {"ground": {"sft_examples": 300, "sft_epochs": 15, "sft_stop": None, "steps": 100, "lr": 1e-4,
                       "temperature": 0.7},
            "count": {"sft_examples": 300, "sft_epochs": 15, "sft_stop": 0.5, "steps": 100, "lr": 3e-4,
                      "temperature": 0.7}}


def task_config(question: str, seed: int, out: Path, eval_size: int, settings: dict, **extra) -> dict:
    """The run's config. The vision tower trains too (model.freeze_vision false): the tiny tower is random, and frozen
    it gives the decoder features it cannot learn to read in this budget (a pretrained tower already sees)."""
    args = {**TASK_ARGS[question], "image_size": IMAGE_SIZE, "eval_size": eval_size}
    base = {
        "seed": seed, "steps": settings["steps"],
        "model": {"freeze_vision": False},
        "data": {"tasks": [{"name": "shapes", "args": args}], "prompts_per_step": 8, "max_prompt_tokens": 128},
        "rollout": {"samples_per_prompt": 8, "max_new_tokens": NEW_TOKENS[question],
                    "temperature": settings["temperature"]},
        "algorithm": {"advantage": "grpo"},
        "optim": {"lr": settings["lr"], "micro_batch_size": 64},
        "rewards": {"num_workers": 1, "timeout_s": 10},
        "sft": {"num_examples": settings["sft_examples"], "epochs": settings["sft_epochs"], "lr": 2e-3,
                "batch_size": 32, "stop_at_accuracy": settings["sft_stop"], "check_every": 5, "held_out": 100},
        "eval": {"every_steps": 0},
        "checkpoint": {"every_steps": 1000},
        "tracking": {"console": False, "tensorboard": "off", "report": False, "output_dir": str(out)},
    }
    for key, value in extra.items():
        section, _, name = key.partition(".")
        base[section] = {**base[section], name: value} if name else {**base[section], **value}
    return base


@torch.no_grad()
def held_out_score(model_dir: Path, question: str, eval_size: int) -> float:
    """Mean verifier score of the greedy completions on the held-out set: mean IoU (ground), accuracy (count)."""
    task = make_task("shapes", 0, {**TASK_ARGS[question], "image_size": IMAGE_SIZE, "eval_size": eval_size})
    model = load_model(build_config({"model": {"name": str(model_dir)}}).model, name=str(model_dir)).eval()
    processor = load_processor(str(model_dir))
    encode = VisionPromptEncoder(processor, max_tokens=128)
    problems = [task.problem("eval", i) for i in range(eval_size)]
    engine = HFRolloutEngine(model, processor.tokenizer, batch_size=64)
    out = engine.generate([encode(p.prompt) for p in problems],
                          SamplingParams(greedy=True, max_new_tokens=NEW_TOKENS[question]))
    verify = resolve_function(task.verifier)
    scores = [float(verify(p.prompt, g[0].text, answer=p.answer, truncated=g[0].truncated))
              for p, g in zip(problems, out)]
    return sum(scores) / len(scores)


def one_run(seed: int, question: str, out: Path, eval_size: int, settings: dict) -> dict:
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    task = make_task("shapes", seed, {**TASK_ARGS[question], "image_size": IMAGE_SIZE})
    texts = [prompt_text(task.problem("train", i).prompt) for i in range(200)] + ["0123456789 [ ] , ."]
    model, processor = build_tiny_vlm(texts, seed=seed, image_size=IMAGE_SIZE, hidden_size=64, num_layers=2)
    base = out / "base"
    model.save_pretrained(base)
    processor.save_pretrained(base)
    sft_dir = run_sft(build_config(task_config(question, seed, out / "sft-run", eval_size, settings, **{
        "model": {"name": str(base)}, "sft.output_dir": str(out / "sft")})))
    sft_s = time.perf_counter() - t0
    before = held_out_score(sft_dir, question, eval_size)
    t1 = time.perf_counter()
    Trainer(build_config(task_config(question, seed, out / "grpo", eval_size, settings,
                                     model={"name": str(sft_dir)}))).fit()
    grpo_s = time.perf_counter() - t1
    final = sorted((out / "grpo" / "checkpoints").glob("step-*"))[-1]
    after = held_out_score(final, question, eval_size)
    steps = [json.loads(line) for line in (out / "grpo" / "metrics.jsonl").read_text().splitlines()]
    row = {"seed": seed, "task": question, "after_sft": before, "after_grpo": after, "sft_s": round(sft_s, 1),
           "grpo_s": round(grpo_s, 1), "grpo_steps": settings["steps"],
           "train_reward": [round(m["reward/mean"], 3) for m in steps if "reward/mean" in m],
           "zero_std_groups": [m["groups/zero_std_frac"] for m in steps if "groups/zero_std_frac" in m]}
    print(json.dumps({k: v for k, v in row.items() if k not in ("train_reward", "zero_std_groups")}), flush=True)
    return row


def plot(rows: list[dict], path: Path) -> None:
    """Top: held-out score after SFT and after GRPO per seed; bottom: the GRPO training reward per step (a moving
    mean over 10 steps; sampled at the run's temperature, so below the greedy held-out score)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = plt.subplots(2, len(tasks), figsize=(4.8 * len(tasks), 6.4), squeeze=False)
    for col, question in enumerate(tasks):
        label = "held-out mean IoU" if question == "ground" else "held-out accuracy"
        top, bottom = axes[0][col], axes[1][col]
        for r in (r for r in rows if r["task"] == question):
            line, = top.plot([0, 1], [r["after_sft"], r["after_grpo"]], marker="o", label=f"seed {r['seed']}")
            reward = torch.tensor(r["train_reward"])
            window = min(10, len(reward))
            smooth = reward.unfold(0, window, 1).mean(-1)
            bottom.plot(range(window, len(reward) + 1), smooth, color=line.get_color(), label=f"seed {r['seed']}")
        top.set(xticks=[0, 1], xticklabels=["after SFT", "after GRPO"], xlim=(-0.3, 1.3), ylabel=label,
                title="grounding (IoU reward)" if question == "ground" else "counting (exact-count reward)")
        bottom.set(xlabel="GRPO step", ylabel="training reward (10-step mean)")
        for ax in (top, bottom):
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
    fig.suptitle("Tiny VLM, shapes tasks: SFT warm-up, then GRPO")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tasks", nargs="+", default=["ground", "count"], choices=list(TASK_ARGS))
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps per run (default: per task, SETTINGS)")
    parser.add_argument("--lr", type=float, default=None, help="GRPO learning rate (default: per task)")
    parser.add_argument("--temperature", type=float, default=None, help="GRPO sampling temperature (default: per task)")
    parser.add_argument("--sft-stop", type=float, default=None, help="SFT's held-out exact-match stop (per task)")
    parser.add_argument("--sft-examples", type=int, default=None, help="demonstrations for the SFT warm-up")
    parser.add_argument("--sft-epochs", type=int, default=None)
    parser.add_argument("--eval-size", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, each in its own process of one thread")
    parser.add_argument("--output", default="runs/vision")
    parser.add_argument("--plot", default=None, help="write the figure here (e.g. docs/img/vision.png)")
    args = parser.parse_args()
    given = {"steps": args.steps, "lr": args.lr, "temperature": args.temperature, "sft_stop": args.sft_stop,
             "sft_examples": args.sft_examples, "sft_epochs": args.sft_epochs}
    runs = [(seed, question, Path(args.output) / f"{question}-seed{seed}", args.eval_size,
             {**SETTINGS[question], **{k: v for k, v in given.items() if v is not None}})
            for seed in args.seeds for question in args.tasks]
    start = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = list(pool.map(one_run, *zip(*runs)))
    else:
        rows = [one_run(*run) for run in runs]
    total = time.perf_counter() - start
    print(f"\n{'task':8} {'seed':>4} {'after SFT':>10} {'after GRPO':>11} {'change':>8} {'SFT s':>7} {'GRPO s':>7}")
    for r in rows:
        print(f"{r['task']:8} {r['seed']:>4} {r['after_sft']:>10.3f} {r['after_grpo']:>11.3f} "
              f"{r['after_grpo'] - r['after_sft']:>+8.3f} {r['sft_s']:>7.0f} {r['grpo_s']:>7.0f}")
    print(f"total {total:.0f} s wall, {args.jobs} run(s) at once")
    if args.plot:
        plot(rows, Path(args.plot))
    print(json.dumps({"rows": rows, "total_s": round(total, 1), "jobs": args.jobs}))


if __name__ == "__main__":
    main()
