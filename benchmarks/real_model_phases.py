"""Where a real model's training step spends its time on this machine: SmolLM2-135M-Instruct (model.name=
smollm2-135m-instruct, `make install`) in rlvr's Trainer, each phase timed by wrapping the Trainer's own parts
(nothing in the loop changes): generation (the rollout engine), reward scoring (the worker pool), the old-logprob
pass (a no-gradient forward over the batch; run by the loop only with ppo_epochs > 1 or mini_batches > 1, timed
here once per step on the side), forward+backward (accumulate_gradients), the optimizer step (gradient clipping
and AdamW over 134.5M float32 parameters), and the rest of the step. The first step is a warm-up and is reported apart. Then AdamW
alone on the model's parameters: torch's default (foreach), per-parameter, and fused.

    python benchmarks/real_model_phases.py [--prompts 4] [--samples 8] [--tokens 96] [--steps 3]

Prints one line per step and a table of the means over the steps after the first. Figures depend on the machine
and on what else runs on it; they are not a test."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

PROMPT_ROWS = 40


def chat_rows(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        a, b = 11 + 7 * i % 80, 23 + 13 * i % 70
        rows.append({"prompt": [{"role": "user", "content": f"What is {a} + {b}?"}], "answer": str(a + b)})
    return rows


def timed(fn, bucket: str, times: dict[str, float]):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            times[bucket] += time.perf_counter() - t0

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    import rlvr.training.trainer as trainer_module
    from rlvr.config import build_config
    from rlvr.training.trainer import Trainer

    work = Path(tempfile.mkdtemp(prefix="rlvr-real-phases-"))
    data = work / "problems.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in chat_rows(PROMPT_ROWS)))
    cfg = build_config({
        "seed": 0, "steps": args.steps, "model": {"name": "smollm2-135m-instruct"},
        "data": {"tasks": [{"name": "math", "args": {"path": str(data), "prompt_column": "prompt"}}],
                 "prompts_per_step": args.prompts, "system_prompt": "Put the final answer in \\boxed{}."},
        "rollout": {"samples_per_prompt": args.samples, "max_new_tokens": args.tokens},
        "optim": {"lr": 1e-6, "micro_batch_size": 8},
        "rewards": {"num_workers": 1},
        "tracking": {"output_dir": str(work / "run"), "console": False, "tensorboard": "off", "report": False,
                     "log_completions_every": 0},
    })
    t0 = time.perf_counter()
    trainer = Trainer(cfg)
    print(f"Trainer built in {time.perf_counter() - t0:.1f} s (model from the GGUF cache; threads {args.threads})")

    times: dict[str, float] = defaultdict(float)
    trainer.engine.generate = timed(trainer.engine.generate, "generation", times)
    trainer.composer.score = timed(trainer.composer.score, "verifier", times)
    trainer_module.step_if_finite = timed(trainer_module.step_if_finite, "optimizer", times)  # clip + AdamW step
    trainer_module.accumulate_gradients = timed(trainer_module.accumulate_gradients, "forward+backward", times)
    update = trainer.update

    def update_with_old_logprobs(batch):
        t = time.perf_counter()
        trainer._logprobs(trainer.model, batch)
        times["old-logprob pass (side)"] += time.perf_counter() - t
        return update(batch)

    trainer.update = update_with_old_logprobs
    per_step: list[dict[str, float]] = []  # each step's phase sums
    collect = trainer.collector.collect

    def collect_and_snapshot(step):
        if any(times.values()):  # the previous step's phases
            per_step.append(dict(times))
            times.clear()
        return collect(step)

    trainer.collector.collect = collect_and_snapshot
    trainer.fit()
    per_step.append(dict(times))
    step_rows = [json.loads(line) for line in (Path(cfg.tracking.output_dir) / "metrics.jsonl").read_text().splitlines()]
    step_s = [r["perf/step_s"] for r in step_rows if r.get("step", 0) > 0]
    names = ["generation", "verifier", "forward+backward", "optimizer", "old-logprob pass (side)"]
    for i, (phases, total) in enumerate(zip(per_step, step_s), 1):
        side = phases.get("old-logprob pass (side)", 0.0)
        parts = "  ".join(f"{n} {phases.get(n, 0.0):.1f}" for n in names)
        print(f"step {i}{' (warm-up)' if i == 1 else ''}: step {total - side:.1f} s  {parts}")
    later = list(zip(per_step, step_s))[1:] or list(zip(per_step, step_s))
    print(f"\nmeans over steps {2 if len(per_step) > 1 else 1}-{len(per_step)}: "
          f"{args.prompts} prompts x {args.samples} samples x up to {args.tokens} new tokens")
    step_mean = sum(t - p.get("old-logprob pass (side)", 0.0) for p, t in later) / len(later)
    print("| phase | seconds | share of the step |\n|---|---|---|")
    for n in names[:4]:
        value = sum(p.get(n, 0.0) for p, _ in later) / len(later)
        print(f"| {n} | {value:.2f} | {100 * value / step_mean:.0f}% |")
    rest = step_mean - sum(sum(p.get(n, 0.0) for n in names[:4]) for p, _ in later) / len(later)
    print(f"| rest (batch, advantages, logging) | {rest:.2f} | {100 * rest / step_mean:.0f}% |")
    print(f"| step | {step_mean:.2f} | 100% |")
    side = sum(p.get("old-logprob pass (side)", 0.0) for p, _ in later) / len(later)
    print(f"| old-logprob pass (not in this step: ppo_epochs=1) | {side:.2f} | +{100 * side / step_mean:.0f}% |")
    tokens = [r["response_length/mean"] for r in step_rows if r.get("step", 0) > 1]
    if tokens:
        print(f"mean completion length {sum(tokens) / len(tokens):.1f} tokens")

    params = [p for p in trainer.model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    print("\nAdamW alone over the model's parameters (3rd of 3 steps; the first allocate the state):")
    for label, kwargs in (("foreach (torch default)", {}), ("per-parameter (foreach=False)", {"foreach": False}),
                          ("fused=True", {"fused": True})):
        opt = torch.optim.AdamW(params, lr=1e-9, **kwargs)
        spans = []
        for _ in range(3):
            t = time.perf_counter()
            opt.step()
            spans.append(time.perf_counter() - t)
        print(f"  {label:32s} " + "  ".join(f"{s:.2f} s" for s in spans))
        del opt


if __name__ == "__main__":
    main()
