"""Decode throughput on the CPU: rlvr's static-cache engine, rlvr's hf engine, and transformers' own `generate`
with its dynamic cache and with `cache_implementation="static"`, on the same model, prompts, batch and lengths,
in one run.

Every side samples N completions for each of P arithmetic prompts at temperature 1 (no top-k/top-p), with EOS
banned until L (min_new_tokens = max_new_tokens = L) so every side generates exactly P x N x L tokens. Each
side's first call is timed on its own (cache allocation, graph capture or compilation: the one-time cost), then
the median of --reps further calls gives tokens/s (wall clock) and tokens per CPU-second of this process (less
sensitive to other load on a shared machine); ratios are against the static engine. Model: the quickstart's
architecture (llama, hidden 128, 4 layers, 64-token vocabulary) with random weights, or --hidden/--layers/...
for others. Run on an otherwise idle machine; threads default to 1.

Run:  .venv/bin/python benchmarks/generate.py                      (quickstart shape: P=32 x N=8, L=6)
      .venv/bin/python benchmarks/generate.py --new-tokens 64      (longer completions)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from rlvr.config import TinyModelConfig
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.rollout import SamplingParams, make_engine
from rlvr.tasks import make_task


def build(args):
    if args.model:
        return build_named(args)
    task = make_task("arithmetic", 0, {"max_operand": 99, "operators": "+"})
    tokenizer = train_tokenizer(list(task.corpus()), args.vocab)
    spec = TinyModelConfig(architecture=args.architecture, hidden_size=args.hidden, num_layers=args.layers,
                           num_heads=args.heads, intermediate_size=args.intermediate, vocab_size=args.vocab,
                           max_position_embeddings=max(256, 64 + args.new_tokens))
    model = build_tiny_model(spec, tokenizer, 0).eval()
    prompts = [tokenizer(task.problem("train", i).prompt, add_special_tokens=False)["input_ids"] for i in range(args.prompts)]
    return model, tokenizer, prompts


def build_named(args):
    """A named model (`--model smollm2-135m-instruct`, a directory, a GGUF file) with chat-templated addition
    questions as prompts."""
    from rlvr.config import ModelConfig
    from rlvr.models.loading import load_model, load_tokenizer, model_source

    cfg = ModelConfig(name=args.model, dtype=args.dtype)
    source = model_source(cfg)
    model, tokenizer = load_model(cfg, name=source).eval(), load_tokenizer(source)
    prompts = [tokenizer.apply_chat_template(
        [{"role": "user", "content": f"What is {10 + 7 * i % 89} + {23 + 13 * i % 76}? Put the final answer in "
                                     f"\\boxed{{}}."}], add_generation_prompt=True, tokenize=True,
        return_dict=False) for i in range(args.prompts)]
    return model, tokenizer, prompts


def engine_side(name: str, model, tokenizer, prompts, args, setup: Callable = lambda engine: None
                ) -> Callable[[], int]:
    engine = make_engine(name, model, tokenizer, batch_size=args.prompts * args.samples)
    setup(engine)
    params = SamplingParams(n=args.samples, temperature=1.0, max_new_tokens=args.new_tokens,
                            min_new_tokens=args.new_tokens)

    def run() -> int:
        return sum(len(c.token_ids) for g in engine.generate(prompts, params) for c in g)

    return run


def generate_side(cache: str | None, model, tokenizer, prompts, args) -> Callable[[], int]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), tokenizer.pad_token_id)
    mask = torch.zeros_like(ids)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :], mask[row, width - len(p) :] = torch.tensor(p), 1
    ids, mask = ids.to(model.device), mask.to(model.device)
    extra = {"cache_implementation": cache} if cache else {}

    @torch.no_grad()
    def run() -> int:
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=None,
                             top_p=None, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                             num_return_sequences=args.samples, pad_token_id=tokenizer.pad_token_id, **extra)
        return (out.shape[1] - width) * out.shape[0]

    return run


def measure(run: Callable[[], int], reps: int, sync: Callable[[], None] = lambda: None) -> dict:
    """The first call's seconds (one-time costs included) and the median tokens/s of `reps` further calls."""
    sync()
    t0 = time.perf_counter()
    run()
    sync()
    first = time.perf_counter() - t0
    times, cpu_times, tokens = [], [], 0
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        tokens = run()
        sync()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    median = statistics.median(times)
    return {"first_call_s": first, "median_s": median, "tokens": tokens, "tokens_per_s": tokens / median,
            "tokens_per_cpu_s": tokens / statistics.median(cpu_times)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=6)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--architecture", default="llama", choices=["llama", "qwen2"])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--model", default=None, help="a model name instead of the tiny one (smollm2-135m-instruct, a "
                    "directory, a .gguf file)")
    ap.add_argument("--dtype", default="float32", help="with --model: float32 or bfloat16")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer, prompts = build(args)
    sides = {
        "rlvr static engine": engine_side("static", model, tokenizer, prompts, args),
        "rlvr hf engine": engine_side("hf", model, tokenizer, prompts, args),
        "transformers generate (dynamic cache)": generate_side(None, model, tokenizer, prompts, args),
        "transformers generate (static cache)": generate_side("static", model, tokenizer, prompts, args),
    }
    shape = (args.model + f" ({args.dtype})" if args.model else
             f"{args.architecture} hidden {args.hidden} x {args.layers} layers")
    print(f"{args.prompts} prompts x {args.samples} samples x {args.new_tokens} new tokens, {shape}, "
          f"vocab {len(tokenizer)}, {args.threads} thread(s), torch {torch.__version__}")
    results = {}
    for name, run in sides.items():
        try:
            results[name] = measure(run, args.reps)
        except Exception as e:  # a peer that cannot run here is reported, not fatal
            print(f"{name}: failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    print_table(results, "rlvr static engine")


def print_table(results: dict[str, dict], base_name: str) -> None:
    base = results.get(base_name)
    print(f"{'side':<44} {'tokens/s':>10} {'s/call':>8} {'first call s':>13} {'static engine / side':>21} "
          f"{'tokens/CPU-s':>13} {'ratio':>6}")
    for name, r in results.items():
        ratio = base["tokens_per_s"] / r["tokens_per_s"] if base else float("nan")
        cpu_ratio = base["tokens_per_cpu_s"] / r["tokens_per_cpu_s"] if base else float("nan")
        print(f"{name:<44} {r['tokens_per_s']:>10,.0f} {r['median_s']:>8.3f} {r['first_call_s']:>13.2f} {ratio:>20.2f}x "
              f"{r['tokens_per_cpu_s']:>13,.0f} {cpu_ratio:>5.2f}x")


if __name__ == "__main__":
    main()
