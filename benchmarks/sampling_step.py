"""One decode step's token choice at a 150k vocabulary: rlvr's (rlvr.rollout.sampling.next_tokens with the static
engine's two-level inverse-CDF draw: the token, its logprob and the distribution's entropy) against transformers'
sampling step in `generate` (its min-new-tokens and temperature logits processors, softmax, torch.multinomial: the
token only) and against rlvr's previous token choice (softmax, then one float64 CDF over the whole row), on the
same bf16 logits in one run.

At Qwen2.5-0.5B's vocabulary (151,936) and 128 rows the logits of one step are 39 MB in bf16, each float32 pass over
them 78 MB: the static engine's decoding step on a GPU is a few milliseconds, so passes over the vocabulary matter
beside the model. Each side's median over --reps calls after one untimed call.

Run:  python benchmarks/sampling_step.py                    (CUDA when present, else the CPU)
      python benchmarks/sampling_step.py --device cpu --rows 32
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    MinNewTokensLengthLogitsProcessor,
    TemperatureLogitsWarper,
)

from rlvr.rollout.base import SamplingParams
from rlvr.rollout.sampling import next_tokens
from rlvr.rollout.static import inverse_cdf


def rlvr_side(logits, eos, uniform, params):
    return next_tokens(logits, 0, params, eos, partial(inverse_cdf, uniform=uniform))


def previous_side(logits, eos, uniform, params):
    """rlvr's token choice until 2026-11-26: log-softmax for the logprobs, a masked copy, a softmax and a float64
    CDF over the whole row for the draw, the entropy from the log-softmax's exp."""
    scaled = logits.float() / params.temperature
    logp_all = torch.log_softmax(scaled, dim=-1)
    probs = scaled.index_fill(-1, eos, float("-inf")).softmax(-1)
    cdf = probs.double().cumsum(-1)
    target = (uniform.double() * cdf[:, -1]).unsqueeze(-1)
    tok = torch.searchsorted(cdf, target, right=True).squeeze(-1).clamp_(max=probs.shape[-1] - 1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return tok, logp_all.gather(-1, tok[:, None]).squeeze(-1), entropy


def transformers_side(logits, eos, processors, input_ids):
    scores = processors(input_ids, logits.float())
    return torch.multinomial(scores.softmax(-1), 1).squeeze(-1)


def timed(run, reps: int, cuda: bool) -> float:
    run()
    times = []
    for _ in range(reps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        run()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=151_936)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    device, cuda = torch.device(args.device), args.device.startswith("cuda")
    g = torch.Generator(device).manual_seed(0)
    logits = (3 * torch.randn(args.rows, args.vocab, generator=g, device=device)).to(torch.bfloat16)
    uniform = torch.rand(args.rows, generator=g, device=device)
    eos = torch.tensor([0], device=device)
    # EOS banned (min_new_tokens) and the entropy asked for: a rollout step of the GPU benchmarks
    params = SamplingParams(max_new_tokens=256, min_new_tokens=256, temperature=args.temperature,
                            return_entropy=True)
    processors = LogitsProcessorList([MinNewTokensLengthLogitsProcessor(8, 264, [0], device=device),
                                      TemperatureLogitsWarper(args.temperature)])
    input_ids = torch.zeros(args.rows, 8, dtype=torch.long, device=device)
    sides = {
        "rlvr: token, logprob, entropy": partial(rlvr_side, logits, eos, uniform, params),
        "rlvr before: token, logprob, entropy": partial(previous_side, logits, eos, uniform, params),
        "transformers generate: token only": partial(transformers_side, logits, eos, processors, input_ids),
    }
    ours, before = sides["rlvr: token, logprob, entropy"](), sides["rlvr before: token, logprob, entropy"]()
    same = float((ours[0] == before[0]).double().mean())
    print(f"{args.rows} rows x {args.vocab:,} vocabulary, bf16 logits, temperature {args.temperature:g}, "
          f"{torch.cuda.get_device_name() if cuda else f'CPU, {torch.get_num_threads()} threads'}, "
          f"torch {torch.__version__}; rlvr's tokens equal the previous draw's at the same uniforms: {same:.2%}")
    results = {name: timed(run, args.reps, cuda) for name, run in sides.items()}
    first = results["rlvr: token, logprob, entropy"]
    print(f"{'side':<38} {'ms/step':>9} {'side / rlvr':>12}")
    for name, seconds in results.items():
        print(f"{name:<38} {seconds * 1e3:>9.3f} {seconds / first:>11.2f}x")


if __name__ == "__main__":
    main()
