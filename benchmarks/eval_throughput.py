"""Throughput of `rlvr eval`'s generation: completions/s and completion tokens/s, side by side with transformers'
`generate(num_return_sequences=N)` on the same model, prompts and batch, and with one completion per call.

Both sides sample N completions for each of P held-out arithmetic prompts at temperature 1 with no top-k/top-p,
`--batch` sequences per call (rlvr's rollout.batch_size: batch // N prompts at a time), and at most L new tokens;
with random weights (the default model) EOS is banned until L (min_new_tokens = L), so both sides do the same
work, and a trained --model stops at its own EOS. Tokens are counted up to each completion's first EOS. "rlvr eval" is the whole
evaluation path (engine + verifier + answer grouping) and its engine time alone; "hf generate" is the model's
own `generate`, left-padded the same way, timed around the calls. Default model: the quickstart's architecture
(llama, hidden 128, 4 layers, 64-token vocabulary) with random weights, or --model DIR (e.g. the quickstart's
SFT checkpoint). Run on an otherwise idle machine; threads default to 1.

Run:  .venv/bin/python benchmarks/eval_throughput.py                 (P=64 prompts x N=64, L=6, batch 256)
      .venv/bin/python benchmarks/eval_throughput.py --model runs/quickstart/sft --samples 256
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from rlvr.config import TinyModelConfig, build_config
from rlvr.evaluation.evaluate import eval_problems, eval_settings, evaluate_model
from rlvr.models.loading import build_tiny_model, save_pretrained, train_tokenizer
from rlvr.tasks import make_task

TASK = {"name": "arithmetic", "args": {"max_operand": 99, "operators": "+", "eval_size": 200}}


def make_model_dir(root: Path) -> Path:
    task = make_task(TASK["name"], 0, TASK["args"])
    tokenizer = train_tokenizer(list(task.corpus()), 64)
    spec = TinyModelConfig(architecture="llama", hidden_size=128, num_layers=4, num_heads=4, intermediate_size=512,
                           vocab_size=64)
    path = root / "model"
    save_pretrained(build_tiny_model(spec, tokenizer, 0), tokenizer, path)
    return path


def run_rlvr(args, model_dir: str) -> dict:
    cfg = build_config({"model": {"name": model_dir}, "data": {"tasks": [TASK]}, "rewards": {"num_workers": 1},
                        "rollout": {"max_new_tokens": args.max_new_tokens,
                                    "batch_size": args.batch, "temperature": 1.0}})
    settings = replace(eval_settings(cfg), num_problems=args.prompts, samples=args.samples, ks=[1, args.samples],
                       greedy=False, min_new_tokens=args.min_new_tokens)
    t0 = time.perf_counter()
    run = evaluate_model(cfg, model_dir, settings)
    wall = time.perf_counter() - t0
    tokens = sum(r.tokens for r in run.results)
    return {"completions": run.completions, "tokens": tokens, "engine_s": run.generation_s, "eval_s": wall,
            "completions_per_s": run.completions / run.generation_s, "tokens_per_s": tokens / run.generation_s,
            "eval_completions_per_s": run.completions / wall}


def run_hf_generate(args, model_dir: str, prompts_per_call: int, one_at_a_time: bool = False) -> dict:
    """transformers' generate over the prompts, `prompts_per_call` at a time with num_return_sequences=N; or,
    one_at_a_time, a call per completion (on the first --single-prompts prompts only: it is slow)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    texts = [p.prompt for p in eval_problems(make_task(TASK["name"], 0, TASK["args"]), args.prompts)]
    calls = [(texts[i : i + prompts_per_call], args.samples) for i in range(0, len(texts), prompts_per_call)]
    if one_at_a_time:
        calls = [([text], 1) for text in texts[: args.single_prompts] for _ in range(args.samples)]
    completions, tokens, seconds = 0, 0, 0.0
    for chunk, per_prompt in calls:
        batch = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(**batch, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                 num_return_sequences=per_prompt, max_new_tokens=args.max_new_tokens,
                                 min_new_tokens=args.min_new_tokens, pad_token_id=tokenizer.pad_token_id)
        seconds += time.perf_counter() - t0
        new = out[:, batch["input_ids"].shape[1] :]
        ended = new == tokenizer.eos_token_id  # a completion's tokens run to its first EOS, included
        completions += new.shape[0]
        tokens += int((ended.cumsum(1) - ended.int() == 0).sum())
    return {"completions": completions, "tokens": tokens, "engine_s": seconds,
            "completions_per_s": completions / seconds, "tokens_per_s": tokens / seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a saved HF model directory (default: the quickstart architecture, random weights)")
    ap.add_argument("--prompts", type=int, default=64, help="held-out problems (P)")
    ap.add_argument("--samples", type=int, default=64, help="completions per problem (N)")
    ap.add_argument("--max-new-tokens", type=int, default=6, help="completion length (L; quickstart: 6)")
    ap.add_argument("--min-new-tokens", type=int, help="EOS not sampled before this (default: L for random weights, "
                    "0 with --model)")
    ap.add_argument("--batch", type=int, default=256, help="sequences per generation call (rollout.batch_size)")
    ap.add_argument("--single-prompts", type=int, default=2, help="prompts for the one-completion-per-call side")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.min_new_tokens is None:
        args.min_new_tokens = 0 if args.model else args.max_new_tokens
    with tempfile.TemporaryDirectory(prefix="eval_throughput_") as tmp:
        model_dir = args.model or str(make_model_dir(Path(tmp)))
        per_call = max(1, args.batch // args.samples)
        rows = {"rlvr eval": run_rlvr(args, model_dir),
                "hf generate": run_hf_generate(args, model_dir, per_call),
                "hf generate, 1 completion/call": run_hf_generate(args, model_dir, 1, one_at_a_time=True)}
    print(f"\nP={args.prompts} prompts x N={args.samples} samples, L={args.max_new_tokens} new tokens, "
          f"batch {args.batch} sequences ({per_call} prompts/call), {torch.get_num_threads()} thread(s)")
    print(f"{'side':<32}{'completions':>12}{'engine s':>10}{'compl./s':>10}{'tokens/s':>10}{'rlvr/side compl./s':>20}")
    base = rows["rlvr eval"]["completions_per_s"]
    for name, r in rows.items():
        print(f"{name:<32}{r['completions']:>12}{r['engine_s']:>10.2f}{r['completions_per_s']:>10.0f}"
              f"{r['tokens_per_s']:>10.0f}{base / r['completions_per_s']:>19.2f}x")
    r = rows["rlvr eval"]
    print(f"rlvr eval end to end (engine + verifier + answer grouping): {r['eval_s']:.2f} s, "
          f"{r['eval_completions_per_s']:.0f} completions/s")
    print(json.dumps({"args": vars(args), **rows}))


if __name__ == "__main__":
    main()
