"""Training step time and peak GPU memory on one CUDA GPU: rlvr's Trainer vs TRL's GRPOTrainer on the anchor
configuration, one after the other in one invocation (each side in its own process, so neither sees the other's
memory).

Anchor configuration (both sides): a Qwen2.5-0.5B-shaped model with random weights in bf16, a BPE tokenizer trained
here; 16 prompts x 8 samples per step, exactly 256 new tokens each (EOS banned until then), temperature 1;
beta 0 (no reference model), one policy update per generation, gradient checkpointing, AdamW at lr 1e-6; reward
len(completion) % 7. TRL is used as documented: GRPOConfig(per_device_train_batch_size=64,
gradient_accumulation_steps=2, num_generations=8, max_completion_length=256, bf16=True, beta=0.0,
gradient_checkpointing=True, generation_kwargs={"min_new_tokens": 256}). rlvr: rollout.engine=auto (the static
engine on CUDA) with rollout.compile_layers (--no-compile-layers: without), micro-batches of --micro-batch
sequences (several values: one rlvr run each; TRL's forward takes 64 sequences at once, and each micro-batch pays
its kernel launches once, eight times a step at 16, four at 32, while activations grow with it); with
--compile-training, one more rlvr run whose update goes through compiled decoder layers (model.compile_layers).
Reported: median seconds per step after --warmup steps, peak GPU memory (torch.cuda.max_memory_allocated
over the training steps; for rlvr the largest of its per-phase peaks, perf/*_peak_mem_gib), the ratios the issue
asks for (TRL / rlvr step time, rlvr / TRL peak memory), and rlvr's phases (generation, forward-backward, optimizer
seconds; peak memory while generating and while updating). The first rlvr run then resumes its final checkpoint
for one more step; with --profile, it first trains one step more than timed, its generation and update under
torch.profiler (how much of each the GPU is busy; the operators by GPU time).

Every side prints each step's time as it finishes, and the JSON (--json) is rewritten after each side, so a run cut
short keeps what it measured.

--cpu rehearses the same code on the CPU (tests/test_gpu_rehearsal.py runs it in `make test`): the same config keys,
reward file and worker count, the static engine, the resume check and the profiled step, with a small Qwen2 in
float32, 4 prompts x 4 samples x 16 tokens by default; its times say nothing about a GPU.

Run:  python benchmarks/gpu_step.py                   (6 steps each, median of the last 4)
      python benchmarks/gpu_step.py --steps 8 --json out.json
      python benchmarks/gpu_step.py --micro-batch 32 16   (rlvr at both micro-batch sizes, TRL once)
      python benchmarks/gpu_step.py --compile-training     (and rlvr with its update compiled)
      python benchmarks/gpu_step.py --cpu --steps 2        (the rehearsal)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from gpu_shapes import (
    arithmetic_prompts,
    bench_setup,
    device_name,
    length_mod_7,
    require_cuda,
    synchronize,
    tokenizer_and_model,
)

PROMPTS, SAMPLES, NEW_TOKENS = 16, 8, 256
CPU_PROMPTS, CPU_SAMPLES, CPU_NEW_TOKENS = 4, 4, 16  # --cpu's defaults
# rlvr's per-step figures (metrics.jsonl): where a step's time and memory go
PHASES = ("gen_s", "train_s", "forward_backward_s", "optimizer_s", "gen_peak_mem_gib", "train_peak_mem_gib")


def run_rlvr(args, root: Path) -> dict:
    from rlvr.config import build_config
    from rlvr.models.loading import save_pretrained
    from rlvr.tracking.jsonl import read_jsonl
    from rlvr.training.trainer import Trainer

    setup = bench_setup(args.cpu)
    tokenizer, model = tokenizer_and_model(**setup)
    save_pretrained(model, tokenizer, root / "model")
    del model
    empty_cache()
    texts = arithmetic_prompts(args.prompts * (args.steps + 4))
    (root / "prompts.jsonl").write_text("".join(json.dumps({"prompt": t, "answer": "0"}) + "\n" for t in texts))
    out = root / "rlvr"

    def config(steps: int):
        return build_config({
            "seed": 0, "steps": steps,
            "model": {"name": str(root / "model"), "dtype": str(setup["dtype"]).removeprefix("torch."),
                      "gradient_checkpointing": True, "compile_layers": args.compile_training},
            "data": {"tasks": [{"name": "dataset", "args": {"path": str(root / "prompts.jsonl")}}],
                     "prompts_per_step": args.prompts},
            "rollout": {"engine": args.engine, "samples_per_prompt": args.samples, "max_new_tokens": args.new_tokens,
                        "min_new_tokens": args.new_tokens, "temperature": 1.0, "batch_size": args.prompts * args.samples,
                        "compile_layers": args.compile_layers},
            "algorithm": {"kl_coef": 0.0},
            "optim": {"lr": 1e-6, "micro_batch_size": args.micro_batch},
            "rewards": {"functions": [{"function": f"{Path(__file__).resolve().parent / 'gpu_shapes.py'}:length_mod_7", "name": "length"}],
                        "num_workers": 4},
            "eval": {"every_steps": 0},
            "checkpoint": {"every_steps": 0},
            "tracking": {"output_dir": str(out), "console": True, "tensorboard": "off", "log_every": 1},
        })

    total = args.steps + (1 if args.profile else 0)  # a profiled step, after the timed ones
    trainer = Trainer(config(total))
    engine = type(trainer.engine).__name__
    profiles = profile_last_step(trainer, total, args.profile, f"rlvr_mb{args.micro_batch}") if args.profile else {}
    trainer.fit()  # the final checkpoint is written after the last step, outside perf/step_s
    capture_s = getattr(trainer.engine, "capture_s", None)
    del trainer
    gc.collect()  # the trainer, its engine and model refer to each other: free them before the resumed one loads
    empty_cache()
    resumed_from = None
    if args.resume:
        resumed = Trainer(config(total + 1), resume="auto")
        resumed_from = resumed.step
        resumed.fit()
    steps = sorted((r for r in read_jsonl(out / "metrics.jsonl") if "perf/step_s" in r), key=lambda r: r["step"])
    times = [r["perf/step_s"] for r in steps[: args.steps]]
    phases = {name: [r.get(f"perf/{name}") for r in steps[: args.steps]] for name in PHASES}
    # The trainer resets the peak at each phase, so the training steps' peak is the largest of their phases'.
    peaks = [v for v in phases["gen_peak_mem_gib"] + phases["train_peak_mem_gib"] if v is not None]
    timeouts = sum(r.get("reward_pool/timeouts", 0) for r in steps)
    return {"step_s": times, **phases, "peak_mem_GiB": max(peaks) if peaks else None, "engine": engine,
            "capture_s": capture_s, "resumed_from_step": resumed_from, "last_step": steps[-1]["step"],
            "profiles": profiles, "reward_timeouts": timeouts}


def empty_cache() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def profile_last_step(trainer, step: int, folder: str, name: str) -> dict:
    """Run step `step`'s generation (Trainer.rollout) and update (Trainer.update) under torch.profiler: how much of
    each phase's wall time the GPU was busy (the rest is the host: Python, launches, waiting), and the operators
    by GPU time (tables in `folder`). Returns {phase: figures}, filled when that step has run."""
    from gpu_generate import profile_call

    profiles: dict[str, dict] = {}
    for phase in ("rollout", "update"):
        original = getattr(trainer, phase)

        def profiled(*a, _original=original, _phase=phase, **k):
            if trainer.step != step:
                return _original(*a, **k)
            result = []
            profiles[_phase] = profile_call(lambda: result.append(_original(*a, **k)),
                                            f"{folder}/{name}_{_phase}.txt", f"rlvr step {step} {_phase}")
            return result[0]

        setattr(trainer, phase, profiled)
    return profiles


def run_trl(args, root: Path) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tokenizer, model = tokenizer_and_model(**bench_setup(args.cpu))
    dataset = Dataset.from_dict({"prompt": arithmetic_prompts(args.prompts * (args.steps + 4))})
    config = GRPOConfig(output_dir=str(root / "trl"), per_device_train_batch_size=args.prompts * args.samples // 2,
                        gradient_accumulation_steps=2, num_generations=args.samples,
                        max_completion_length=args.new_tokens, bf16=not args.cpu, use_cpu=args.cpu,
                        learning_rate=1e-6, beta=0.0, gradient_checkpointing=True, max_steps=args.steps,
                        logging_steps=1, save_strategy="no", report_to="none",
                        generation_kwargs={"min_new_tokens": args.new_tokens})

    def reward(completions, **_):
        return [length_mod_7("", c) for c in completions]

    times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *_, **__):
            synchronize()
            self.t0 = time.perf_counter()

        def on_step_end(self, *_, **__):
            synchronize()
            times.append(time.perf_counter() - self.t0)
            print(f"trl step {len(times)}: {times[-1]:.2f} s", flush=True)

    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[StepTimer()])
    if torch.cuda.is_available() and not args.cpu:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() and not args.cpu else None
    return {"step_s": times, "peak_mem_GiB": peak}


def run_side(command: list[str], timeout_s: float | None) -> int:
    """One side in its own process; past `timeout_s` it is sent SIGABRT first, so faulthandler prints where each of
    its threads was, then killed."""
    proc = subprocess.Popen(command, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"--- past {timeout_s:g} s: stopping it, with a traceback", flush=True)
        proc.send_signal(signal.SIGABRT)
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2, help="first steps left out of the median (capture, warm-up)")
    ap.add_argument("--micro-batch", type=int, nargs="+", default=[32],
                    help="rlvr's optim.micro_batch_size (sequences); several values run rlvr once for each, the "
                         "resume check after the first only")
    ap.add_argument("--engine", default="auto", help="rlvr's rollout.engine")
    ap.add_argument("--compile-training", action="store_true",
                    help="one more rlvr run (at the first micro-batch size, after TRL) with model.compile_layers: "
                         "decoder layers compiled for the update")
    ap.add_argument("--compile-layers", action=argparse.BooleanOptionalAction, default=True,
                    help="rlvr's rollout.compile_layers (default: on)")
    ap.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                    help="rlvr: resume the final checkpoint for one more step (used internally)")
    ap.add_argument("--profile", default=None,
                    help="folder: the first rlvr run profiles one more step's generation and update there")
    ap.add_argument("--side-timeout", type=float, default=None, help="seconds each side may run (default: no limit)")
    ap.add_argument("--side", choices=["rlvr", "trl"], default=None, help="run one side only (used internally)")
    ap.add_argument("--cpu", action="store_true", help="rehearse the same code on the CPU at a small shape")
    ap.add_argument("--prompts", type=int, default=None, help=f"prompts per step (default {PROMPTS}; --cpu "
                                                               f"{CPU_PROMPTS})")
    ap.add_argument("--samples", type=int, default=None, help=f"samples per prompt (default {SAMPLES}; --cpu "
                                                               f"{CPU_SAMPLES})")
    ap.add_argument("--new-tokens", type=int, default=None, help=f"new tokens per sample (default {NEW_TOKENS}; "
                                                                  f"--cpu {CPU_NEW_TOKENS})")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    require_cuda("benchmarks/gpu_step.py", args.cpu)
    for name, gpu, cpu in (("prompts", PROMPTS, CPU_PROMPTS), ("samples", SAMPLES, CPU_SAMPLES),
                           ("new_tokens", NEW_TOKENS, CPU_NEW_TOKENS)):
        if getattr(args, name) is None:
            setattr(args, name, cpu if args.cpu else gpu)
    if args.cpu and args.engine == "auto":
        args.engine = "static"  # what auto picks on CUDA
    if args.side:
        args.micro_batch = args.micro_batch[0]
        with tempfile.TemporaryDirectory() as tmp:
            result = (run_rlvr if args.side == "rlvr" else run_trl)(args, Path(tmp))
        Path(args.json).write_text(json.dumps(result))
        return
    # (name, side, micro-batch, resume check and profile, compiled update); TRL second, so a run cut short has the ratio
    first, *others = args.micro_batch
    sides = [(f"rlvr mb={first}", "rlvr", first, True, False), ("trl", "trl", 0, False, False)]
    sides += [(f"rlvr mb={m}", "rlvr", m, False, False) for m in others]
    if args.compile_training:
        sides.append((f"rlvr mb={first} compiled", "rlvr", first, False, True))
    results = {}
    shape = "a small Qwen2 in float32 (the CPU rehearsal)" if args.cpu else "Qwen2.5-0.5B-shaped bf16"
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, side, micro, resume, compiled) in enumerate(sides):
            path = Path(tmp) / f"{i}.json"
            command = [sys.executable, __file__, "--side", side, "--json", str(path), "--steps", str(args.steps),
                       "--micro-batch", str(micro), "--engine", args.engine, "--prompts", str(args.prompts),
                       "--samples", str(args.samples), "--new-tokens", str(args.new_tokens),
                       "--compile-layers" if args.compile_layers else "--no-compile-layers",
                       *(["--compile-training"] if compiled else []), *(["--cpu"] if args.cpu else []),
                       "--resume" if resume else "--no-resume"] + (["--profile", args.profile] if resume and
                                                                    args.profile else [])
            print(f"--- {name}: {' '.join(command[1:])}", flush=True)
            code = run_side(command, args.side_timeout)
            if code != 0 or not path.exists():
                print(f"{name} failed (exit code {code})", flush=True)
                continue
            r = json.loads(path.read_text())
            r["median_step_s"] = statistics.median(r["step_s"][args.warmup :] or r["step_s"])
            results[name] = r
            print(f"{name}: steps {[round(t, 2) for t in r['step_s']]} s, median {r['median_step_s']:.2f} s, peak "
                  f"{gib(r['peak_mem_GiB'])}", flush=True)
            if args.json:  # what is measured so far, so a run cut short keeps it
                Path(args.json).write_text(json.dumps({"device": device_name(args.cpu), "shape": shape,
                                                       "results": results}, indent=2))
    print(f"\n{args.prompts} prompts x {args.samples} samples x {args.new_tokens} new tokens, {shape}, "
          f"{device_name(args.cpu)}, torch {torch.__version__}")
    summary(results, args)


def gib(value: float | None, unit: str = " GiB") -> str:
    """A peak in GiB, or n/a (no CUDA memory counter on a CPU)."""
    return "n/a" if value is None else f"{value:.2f}{unit}"


def summary(results: dict, args) -> None:
    """Each side's median step and peak, the ratios against TRL, and each rlvr run's phases."""
    trl = results.get("trl")
    print(f"{'side':<20} {'median s/step':>14} {'peak GiB':>9} {'TRL / side time':>16} {'side / TRL memory':>18}")
    for name, r in results.items():
        memory = (f"{r['peak_mem_GiB'] / trl['peak_mem_GiB']:>18.2f}" if trl and r["peak_mem_GiB"] and
                  trl["peak_mem_GiB"] else f"{'n/a':>18}")
        ratios = f"{trl['median_step_s'] / r['median_step_s']:>15.2f}x {memory}" if trl and name != "trl" else ""
        print(f"{name:<20} {r['median_step_s']:>14.2f} {gib(r['peak_mem_GiB'], ''):>9} {ratios}")
    print("issue 29 asks TRL / rlvr step time >= 5 and rlvr / TRL peak memory <= 1")
    for name, r in results.items():
        if name == "trl":
            continue
        resumed = (f"resumed from step {r['resumed_from_step']} to step {r['last_step']}" if r["resumed_from_step"]
                   is not None else "no resume check")
        print(f"{name}: engine {r['engine']} (compiled layers: {args.compile_layers}), capture {r['capture_s']} s; "
              f"{resumed}; reward items timed out: {r['reward_timeouts']}; medians after warm-up:")
        for phase, figures in r.get("profiles", {}).items():
            print(f"  profiled step, {phase}: {figures['wall_s']:.3f} s wall, {figures['busy_label']} "
                  f"{figures['busy_s']:.3f} s ({figures['busy_s'] / figures['wall_s']:.0%})")
        for phase in PHASES:
            values = [v for v in r[phase][args.warmup :] if v is not None]
            if values:
                print(f"  {phase:<20} {statistics.median(values):8.2f}")


if __name__ == "__main__":
    main()
