"""Peak memory and time of one micro-batch's token logprobs, forward and backward, through the output head: the
logits made whole (the head, then rlvr.models.logprobs.TokenLogprobs over the logits, as before) against made a chunk
at a time from the hidden states (TokenLogprobs with the head's weight, what a half-precision Llama/Qwen/Mistral
policy now takes). Each side runs in a process of its own; on CUDA the figure is torch.cuda.max_memory_allocated
above the inputs, on a CPU the growth of the process's peak resident memory.

Run:  python benchmarks/logprob_memory.py            (Qwen2.5-0.5B's head: vocabulary 151,936, hidden 896; 16 x 257
                                                       positions in bf16, the GPU step benchmark's micro-batch)
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch

from rlvr.models.logprobs import LEAN_CHUNK_POSITIONS, TokenLogprobs

SIDES = {"logits whole": "logits", "chunks from hidden states": "hidden"}


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def run_side(side: str, args) -> dict:
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    torch.manual_seed(0)
    positions = args.rows * args.width
    hidden = torch.randn(positions, args.hidden, device=device, dtype=dtype, requires_grad=True)
    weight = (0.02 * torch.randn(args.vocab, args.hidden, device=device, dtype=dtype)).requires_grad_()
    targets = torch.randint(0, args.vocab, (positions,), device=device)
    scale = torch.randn(positions, device=device)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resident_bytes()
    t0 = time.perf_counter()
    if side == "logits":
        logits = torch.nn.functional.linear(hidden, weight)
        logp, _ = TokenLogprobs.apply(logits, None, targets, 1.0, args.chunk)
    else:
        logp, _ = TokenLogprobs.apply(hidden, weight, targets, 1.0, args.chunk)
    (logp * scale).sum().backward()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"seconds": seconds, "peak_GiB": (peak - base) / 2**30, "logp_sum": float(logp.sum()),
            "grad_hidden_norm": float(hidden.grad.float().norm()), "grad_weight_norm": float(weight.grad.float().norm())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--width", type=int, default=257, help="completion positions per row")
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--hidden", type=int, default=896)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--chunk", type=int, default=LEAN_CHUNK_POSITIONS, help="positions per fp32 chunk")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--side", choices=list(SIDES.values()), default=None, help="run one side only (used internally)")
    args = ap.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side, args)))
        return
    print(f"{args.rows} x {args.width} positions in chunks of {args.chunk}, vocabulary {args.vocab:,}, hidden "
          f"{args.hidden}, {args.dtype}, "
          f"{args.device}" + (f" ({torch.cuda.get_device_name()})" if args.device.startswith("cuda") else ""), flush=True)
    results = {}
    for name, side in SIDES.items():
        out = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--side", side], capture_output=True, text=True,
                             check=True).stdout
        results[name] = json.loads(out.strip().splitlines()[-1])
    print(f"{'side':<28} {'peak GiB':>9} {'seconds':>8} {'sum logp':>14} {'|grad h|':>10} {'|grad W|':>10}")
    for name, r in results.items():
        print(f"{name:<28} {r['peak_GiB']:>9.2f} {r['seconds']:>8.2f} {r['logp_sum']:>14.2f} "
              f"{r['grad_hidden_norm']:>10.4f} {r['grad_weight_norm']:>10.4f}")
    whole, chunked = results["logits whole"], results["chunks from hidden states"]
    print(f"chunks / whole: peak memory {chunked['peak_GiB'] / whole['peak_GiB']:.2f}x, time "
          f"{chunked['seconds'] / whole['seconds']:.2f}x")


if __name__ == "__main__":
    main()
