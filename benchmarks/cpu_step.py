"""CPU step time: rlvr's Trainer vs TRL's GRPOTrainer on the same tiny model and the same prompts.

One step on both sides = P arithmetic prompts x G samples, generate up to L new tokens at temperature 1,
score with exact match, one forward/backward over the whole batch, one AdamW update (beta=0: no
reference model). Both sides load identical weights from one temp directory, run with 2 torch
threads, and skip `--warmup` steps; we report the median (and min) seconds per step, completion
tokens/s, and TRL/rlvr median s/step (>1 means rlvr is faster). Run it on an otherwise idle machine:
with 2 threads, any other CPU load makes single steps several times slower.

Completion length is equal on both sides: generation is fixed-length through min_new_tokens = max_new_tokens
(rlvr's `rollout.min_new_tokens`, TRL's `generation_kwargs={"min_new_tokens": L}`); we print mean
completion tokens per sequence and completion tokens/s for each side to show it.

Run:  .venv/bin/python benchmarks/cpu_step.py            (defaults: 8 steps, 16 prompts x 8, 16 tokens)
      .venv/bin/python benchmarks/cpu_step.py --steps 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from rlvr.config import TinyModelConfig, build_config
from rlvr.curriculum import MixtureSampler
from rlvr.models.loading import build_tiny_model, save_pretrained, train_tokenizer
from rlvr.tasks import make_task
from rlvr.tasks.arithmetic import parse_int

SEED = 0
TASK_ARGS = {"max_operand": 99, "operators": "+"}


def make_model_dir(args, root: Path) -> Path:
    task = make_task("arithmetic", SEED, TASK_ARGS)
    tok = train_tokenizer(list(task.corpus()), args.vocab)
    spec = TinyModelConfig(architecture="llama", hidden_size=args.hidden, num_layers=args.layers, num_heads=args.heads,
                           intermediate_size=args.intermediate, vocab_size=args.vocab)
    model = build_tiny_model(spec, tok, SEED)
    path = root / "model"
    save_pretrained(model, tok, path)
    return path


def prompt_texts(n_steps: int, per_step: int) -> list[str]:
    """The prompts rlvr's Trainer draws, in order (same task, seed and sampler)."""
    sampler = MixtureSampler([make_task("arithmetic", SEED, TASK_ARGS)], [1.0], SEED)
    return [p.prompt for _ in range(n_steps) for _, p in sampler.next_batch(per_step)]


def run_rlvr(args, model_dir: Path, root: Path) -> tuple[list[float], list[float]]:
    from rlvr.training.trainer import Trainer

    out = root / "rlvr"
    batch = args.prompts * args.samples
    cfg = build_config({
        "seed": SEED,
        "steps": args.warmup + args.steps,
        "model": {"name": str(model_dir)},
        "data": {"tasks": [{"name": "arithmetic", "args": TASK_ARGS}], "prompts_per_step": args.prompts},
        "rollout": {"samples_per_prompt": args.samples, "max_new_tokens": args.max_new_tokens,
                    "min_new_tokens": args.max_new_tokens, "temperature": 1.0,
                    "batch_size": batch},
        "optim": {"lr": 1e-5, "micro_batch_size": batch},
        "rewards": {"num_workers": 1},
        "tracking": {"output_dir": str(out), "console": False, "tensorboard": "off"},
        "checkpoint": {"every_steps": 0},
    })
    Trainer(cfg).fit()  # the final checkpoint is written after the last step, outside perf/step_s
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = sorted((r for r in rows if "perf/step_s" in r), key=lambda r: r["step"])[args.warmup:]
    return [r["perf/step_s"] for r in rows], [r["response_length/mean"] for r in rows]


def exact_match(prompts, completions, **_) -> list[float]:
    """1.0 when the completion starts with the right sum of the prompt 'a+b='."""
    out = []
    for p, c in zip(prompts, completions):
        a, b = p.rstrip("=").split("+")
        out.append(float(parse_int(c) == int(a) + int(b)))
    return out


def run_trl(args, model_dir: Path, root: Path) -> tuple[list[float], list[float]]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, a, s, c, **k):
            self.t = time.perf_counter()

        def on_step_end(self, a, s, c, **k):
            times.append(time.perf_counter() - self.t)

    n = args.warmup + args.steps
    L = args.max_new_tokens
    ds = Dataset.from_dict({"prompt": prompt_texts(n, args.prompts)})
    cfg = GRPOConfig(
        output_dir=str(root / "trl"), use_cpu=True, bf16=False, report_to="none", save_strategy="no",
        seed=SEED, max_steps=n, logging_steps=1, disable_tqdm=True, learning_rate=1e-5,
        # one optimizer step = one generation of P x G completions, one forward/backward over all of them
        per_device_train_batch_size=args.prompts * args.samples, gradient_accumulation_steps=1,
        steps_per_generation=1, num_iterations=1, num_generations=args.samples, shuffle_dataset=False,
        gradient_checkpointing=False, beta=0.0, temperature=1.0,
        max_completion_length=L, generation_kwargs={"min_new_tokens": L},
    )
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(model_dir)
    trainer = GRPOTrainer(model=model, reward_funcs=exact_match, args=cfg, train_dataset=ds, processing_class=tok,
                          callbacks=[Timer()])
    trainer.remove_callback(PrinterCallback)  # no per-step dicts on stdout
    trainer.train()
    lengths = [r["completions/mean_length"] for r in trainer.state.log_history if "completions/mean_length" in r]
    return times[args.warmup:], lengths[args.warmup:]


def summarize(times: list[float], lengths: list[float], batch: int) -> dict:
    tokens = statistics.mean(lengths) * batch
    med = statistics.median(times)
    return {"median_step_s": round(med, 4), "mean_step_s": round(statistics.mean(times), 4),
            "min_step_s": round(min(times), 4),
            "mean_completion_tokens": round(statistics.mean(lengths), 3),
            "completion_tokens_per_step": round(tokens, 1), "completion_tokens_per_s": round(tokens / med, 1),
            "step_s": [round(t, 4) for t in times]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8, help="timed steps per side")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before them")
    ap.add_argument("--prompts", type=int, default=16, help="prompts per step (P)")
    ap.add_argument("--samples", type=int, default=8, help="samples per prompt (G)")
    ap.add_argument("--max-new-tokens", type=int, default=16, help="completion length (L)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=64, help="target tokenizer vocabulary (quickstart: 64)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    batch = args.prompts * args.samples

    with tempfile.TemporaryDirectory(prefix="cpu_step_") as tmp:
        root = Path(tmp)
        model_dir = make_model_dir(args, root)
        rlvr = summarize(*run_rlvr(args, model_dir, root), batch)
        trl = summarize(*run_trl(args, model_dir, root), batch)

    ratio = trl["median_step_s"] / rlvr["median_step_s"]
    print(f"\nP={args.prompts} prompts x G={args.samples} samples, L={args.max_new_tokens} new tokens, "
          f"{args.steps} timed steps after {args.warmup} warm-up, {torch.get_num_threads()} threads")
    print(f"{'side':<6}{'median s/step':>15}{'mean s/step':>13}{'min s/step':>12}{'compl. tok/seq':>16}"
          f"{'compl. tok/s':>14}")
    for name, r in (("rlvr", rlvr), ("trl", trl)):
        print(f"{name:<6}{r['median_step_s']:>15.3f}{r['mean_step_s']:>13.3f}{r['min_step_s']:>12.3f}"
              f"{r['mean_completion_tokens']:>16.2f}"
              f"{r['completion_tokens_per_s']:>14.1f}")
    print(f"TRL/rlvr s/step: {ratio:.2f}x (>1 means rlvr is faster)")
    print(json.dumps({"args": vars(args), "rlvr": rlvr, "trl": trl, "trl_over_rlvr_step_s": round(ratio, 3),
                      "trl_over_rlvr_tokens_per_s": round(trl["completion_tokens_per_s"] /
                                                          rlvr["completion_tokens_per_s"], 3)}))


if __name__ == "__main__":
    main()
