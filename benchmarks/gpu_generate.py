"""Decode throughput on one CUDA GPU: rlvr's static-cache engine (CUDA graphs; and with its decoder layers compiled
by torch.compile before capture), rlvr's hf engine, and transformers' `generate` with its dynamic cache and with
`cache_implementation="static"` (which compiles the decode step and captures CUDA graphs), on the same
Qwen2.5-0.5B-shaped bf16 model (random weights), prompts, batch and lengths, in one run.

Every side decodes --prompts x --samples sequences of exactly --new-tokens tokens (EOS banned until then:
min_new_tokens = max_new_tokens) at temperature 1, no top-k/top-p. Each side's first call is timed on its own
(graph capture, compilation: the one-time cost), then the median of --reps further calls gives tokens/s;
ratios are against the static engine (graphs). Then bf16 parity on the same model (--parity prompts, 64 new
tokens): greedy tokens of the static engine against the hf engine, and the static engine's sampled logprobs against
one full forward pass over the same tokens. Results also go to --json.

The JSON (--json) is rewritten after each side, so a run cut short keeps what it measured. --cpu rehearses the same
code on the CPU (tests/test_gpu_rehearsal.py runs it in `make test`): a small Qwen2 in float32, 8 prompts x 16
tokens, one timed call per side; its figures say nothing about a GPU.

Run:  python benchmarks/gpu_generate.py                         (128 prompts x 1 sample x 256 new tokens)
      python benchmarks/gpu_generate.py --prompts 16 --samples 8 --json out.json
      python benchmarks/gpu_generate.py --cpu --skip hf dynamic compiled static-generate   (the rehearsal)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from generate import engine_side, generate_side, measure, print_table
from gpu_shapes import arithmetic_prompts, bench_setup, device_name, require_cuda, synchronize, tokenizer_and_model

from rlvr.models.logprobs import completion_logprobs
from rlvr.rollout import SamplingParams, make_engine


def parity(model, tokenizer, prompts, static) -> dict:
    """bf16 on CUDA: greedy rows identical to the hf engine's (and the mean length of the identical prefix), and
    |logprob| differences between the static engine's sampled tokens and one full forward pass."""
    greedy = SamplingParams(greedy=True, max_new_tokens=64)
    ours = [g[0].token_ids for g in static.generate(prompts, greedy)]
    theirs = [g[0].token_ids for g in make_engine("hf", model, tokenizer, batch_size=len(prompts)).generate(
        prompts, greedy)]
    prefixes = [next((i for i, (u, v) in enumerate(zip(a, b)) if u != v), min(len(a), len(b)))
                for a, b in zip(ours, theirs)]
    diffs = []
    for prompt, group in zip(prompts, static.generate(prompts, SamplingParams(max_new_tokens=64))):
        ids = torch.tensor([prompt + group[0].token_ids], device=model.device)
        with torch.no_grad():
            logp, _ = completion_logprobs(model, ids, torch.ones_like(ids), len(group[0].token_ids), 1.0)
        diffs.append((logp[0].float().cpu() - torch.tensor(group[0].logprobs)).abs())
    diff = torch.cat(diffs)
    return {"greedy_rows_identical": sum(a == b for a, b in zip(ours, theirs)) / len(prompts),
            "greedy_identical_prefix_mean": sum(prefixes) / len(prefixes), "greedy_length_mean":
            sum(map(len, ours)) / len(ours), "logprob_diff_max": float(diff.max()),
            "logprob_diff_mean": float(diff.mean()), "logprob_tokens": len(diff)}


def profile_call(run, path: str, name: str) -> dict:
    """One more call under torch.profiler: the operators and kernels by device time (the table goes to `path`), and
    how much of the call's wall time the GPU was busy (the rest is the host: Python, launches, synchronisation); on a
    CPU, the operators by CPU time and the CPU seconds spent in them."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        run()
        synchronize()
    wall = time.perf_counter() - t0
    averages = prof.key_averages()
    key, label = ("self_device_time_total", "GPU busy") if cuda else ("self_cpu_time_total", "CPU in operators")
    busy = sum(getattr(e, key) for e in averages) / 1e6
    table = averages.table(sort_by=key, row_limit=30)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write(table)
    print(f"{name} under the profiler: {wall:.3f} s wall, {label} {busy:.3f} s ({busy / wall:.0%}); top operators "
          f"by {'GPU' if cuda else 'CPU'} time:\n" + "\n".join(table.splitlines()[:16]), flush=True)
    return {"wall_s": wall, "busy_s": busy, "busy_label": label}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=128)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip", nargs="*", default=[], help="sides to leave out: compiled, hf, dynamic, static-generate")
    ap.add_argument("--parity", type=int, default=32, help="prompts for the bf16 parity check (0: none)")
    ap.add_argument("--profile", default=None, help="folder: profile one more call of each static engine side there")
    ap.add_argument("--cpu", action="store_true", help="rehearse the same code on the CPU at a small shape "
                    "(8 prompts x 16 new tokens, 1 rep, 4 parity prompts unless given)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    require_cuda("benchmarks/gpu_generate.py", args.cpu)
    if args.cpu:
        for flag, value in (("--prompts", 8), ("--new-tokens", 16), ("--reps", 1), ("--parity", 4)):
            if flag not in sys.argv:
                setattr(args, flag[2:].replace("-", "_"), value)
    t0 = time.perf_counter()
    tokenizer, model = tokenizer_and_model(**bench_setup(args.cpu))
    prompts = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in arithmetic_prompts(args.prompts)]
    print(f"model ready in {time.perf_counter() - t0:.1f} s: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M "
          f"parameters, {next(model.parameters()).dtype}, {device_name(args.cpu)}, torch {torch.__version__}; "
          f"{args.prompts} prompts x {args.samples} samples x {args.new_tokens} new tokens, prompt lengths "
          f"{min(map(len, prompts))}-{max(map(len, prompts))}", flush=True)
    engines = {}

    def keep(name, compiled=False):
        def setup(engine):
            if compiled:
                engine.compile_layers()
            engines[name] = engine
        return setup

    static, compiled = "rlvr static engine", "rlvr static engine, compiled layers"
    sides = {static: lambda: engine_side("static", model, tokenizer, prompts, args, keep(static))}
    if "static-generate" not in args.skip:  # the peer second, so a run cut short still has the ratio
        sides["transformers generate (static cache)"] = lambda: generate_side("static", model, tokenizer, prompts,
                                                                              args)
    if "compiled" not in args.skip:
        sides[compiled] = lambda: engine_side("static", model, tokenizer, prompts, args, keep(compiled, True))
    if "hf" not in args.skip:
        sides["rlvr hf engine"] = lambda: engine_side("hf", model, tokenizer, prompts, args)
    if "dynamic" not in args.skip:
        sides["transformers generate (dynamic cache)"] = lambda: generate_side(None, model, tokenizer, prompts, args)
    results, runs, checks = {}, {}, {}

    def write_json() -> None:  # after each side, so a run cut short keeps what it measured
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"args": vars(args), "device": device_name(args.cpu), "torch": torch.__version__,
                           "results": results, "parity": checks}, f, indent=2)

    for name, make in sides.items():
        try:
            runs[name] = make()
            results[name] = measure(runs[name], args.reps, synchronize)
        except Exception as e:  # a side that cannot run here is reported, not fatal
            print(f"{name}: failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}", flush=True)
            continue
        r = results[name]
        r["peak_mem_GiB"] = torch.cuda.max_memory_allocated() / 2**30 if not args.cpu else None
        print(f"{name}: {r['tokens_per_s']:,.0f} tokens/s, first call {r['first_call_s']:.1f} s", flush=True)
        if not args.cpu:
            torch.cuda.empty_cache()
        write_json()
    for name, engine in engines.items():
        if name in results:
            print(f"{name}: {engine.capture_s:.1f} s capturing {len(engine.graphs)} graph(s)"
                  f"{', compilation included' if engine.compiled_layer else ''}")
            results[name]["capture_s"] = engine.capture_s
    print_table(results, static)
    if args.cpu:
        print("CPU rehearsal: the code paths ran; no figure here says anything about a GPU")
    best = max((r for n, r in results.items() if n.startswith("rlvr static")), key=lambda r: r["tokens_per_s"])
    peer = results.get("transformers generate (static cache)")
    print(f"acceptance (issue 14): best static engine {best['tokens_per_s']:,.0f} tokens/s (>= 40,000: "
          f"{best['tokens_per_s'] >= 40000}); vs transformers static generate "
          f"{best['tokens_per_s'] / peer['tokens_per_s'] if peer else float('nan'):.2f}x (>= 2); one-time capture "
          f"{best.get('capture_s', float('nan')):.1f} s (<= 60)")
    if args.parity and static in engines:
        checks = parity(model, tokenizer, prompts[: args.parity], engines[static])
        print(f"{str(next(model.parameters()).dtype).removeprefix('torch.')} parity over {args.parity} prompts x 64 tokens: greedy rows identical to the hf engine "
              f"{checks['greedy_rows_identical']:.0%} (identical prefix {checks['greedy_identical_prefix_mean']:.1f} "
              f"of {checks['greedy_length_mean']:.1f} tokens on average); sampled logprobs vs a full forward: max "
              f"|diff| {checks['logprob_diff_max']:.3e}, mean {checks['logprob_diff_mean']:.3e} over "
              f"{checks['logprob_tokens']} tokens", flush=True)
    if args.profile:
        for name in (static, compiled):
            if name in results:
                file = f"{args.profile}/profile_static{'_compiled' if name == compiled else ''}.txt"
                results[name]["profile"] = profile_call(runs[name], file, name)
    write_json()


if __name__ == "__main__":
    main()
