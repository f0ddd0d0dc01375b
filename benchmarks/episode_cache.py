"""3-turn episodes on the CPU: the static engine keeping each episode's KV cache across turns vs re-encoding the
whole conversation every turn (docs/environments.md), and the hf engine (which re-encodes) for reference.

Every side plays the same 'try again' episodes (2-digit addition, 3 attempts): P problems x N episodes, each turn
exactly L sampled tokens (min_new_tokens = max_new_tokens = L, so a random-weight model answers wrongly and every
episode runs its 3 turns), under the same per-group seeds. Each side's first call is timed on its own (allocation),
then the median of --reps calls gives policy tokens per second (wall clock) and per CPU-second of this process
(less sensitive to other load on a shared machine), and the prompt tokens prefilled per call. The kept cache and
re-encoding sample identical tokens (checked here as in tests/test_episode_cache.py).

Run:  .venv/bin/python benchmarks/episode_cache.py                  (P=16 x N=8, L=16: quickstart model)
      .venv/bin/python benchmarks/episode_cache.py --new-tokens 6   (the try-again recipe's turn length)
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlvr.config import EnvConfig, TinyModelConfig
from rlvr.envs.task import EnvTask
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout import SamplingParams, group_generator, make_engine
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.tasks import make_task


def build(args):
    task = EnvTask(make_task("arithmetic", 0, {"max_operand": 99, "operators": "+"}),
                   EnvConfig(name="try_again", args={"attempts": 3}, max_turns=3, max_tokens=3 * args.new_tokens + 64))
    tokenizer = train_tokenizer(list(task.corpus()), args.vocab)
    spec = TinyModelConfig(architecture="llama", hidden_size=args.hidden, num_layers=args.layers, num_heads=4,
                           intermediate_size=4 * args.hidden, vocab_size=args.vocab, max_position_embeddings=512)
    return task, tokenizer, build_tiny_model(spec, tokenizer, 0).eval()


class Counting:
    """Wraps an engine's generate to count the prompt tokens each call is handed."""

    def __init__(self, engine):
        self.engine, self.prompt_tokens = engine, 0
        self.batch_size = engine.batch_size
        if hasattr(engine, "session"):
            self.session = engine.session

    def generate(self, prompts, params, generators=None):
        self.prompt_tokens += sum(map(len, prompts))
        return self.engine.generate(prompts, params, generators)


def side(engine_name: str, keep: bool, task, tokenizer, model, args):
    engine = make_engine(engine_name, model, tokenizer, batch_size=args.problems * args.samples)
    engine.keep_turns = keep
    counting = Counting(engine)
    runner = EpisodeRunner(counting, PromptEncoder(tokenizer))
    work = [(task, task.problem("train", i)) for i in range(args.problems)]
    params = SamplingParams(n=args.samples, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens)

    def run():
        generators = [group_generator(torch.device("cpu"), 0, g) for g in range(args.problems)]
        reused = getattr(engine, "reused_tokens", 0)
        _, groups = runner.play(work, params, generators)
        episodes = [e for g in groups for e in g]
        return episodes, getattr(engine, "reused_tokens", 0) - reused

    return run, counting


def measure(run, counting, reps: int) -> dict:
    t0 = time.perf_counter()
    episodes, _ = run()
    first = time.perf_counter() - t0
    times, cpu, prefilled = [], [], []
    for _ in range(reps):
        before = counting.prompt_tokens
        t0, c0 = time.perf_counter(), time.process_time()
        episodes, reused = run()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        prefilled.append(counting.prompt_tokens - before - reused)
    tokens = sum(e.policy_tokens for e in episodes)
    return {"episodes": episodes, "tokens": tokens, "first_s": first, "tokens_per_s": tokens / statistics.median(times),
            "tokens_per_cpu_s": tokens / statistics.median(cpu), "prefilled": statistics.median(prefilled),
            "turns": sum(e.turns for e in episodes) / len(episodes)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=int, default=16)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    task, tokenizer, model = build(args)
    sides = {"static, cache kept across turns": ("static", True), "static, re-encoding each turn": ("static", False),
             "hf engine (re-encodes)": ("hf", False)}
    results = {name: measure(*side(engine, keep, task, tokenizer, model, args), args.reps)
               for name, (engine, keep) in sides.items()}
    kept, fresh = results["static, cache kept across turns"], results["static, re-encoding each turn"]
    same = [e.token_ids for e in kept["episodes"]] == [e.token_ids for e in fresh["episodes"]]
    print(f"{args.problems} problems x {args.samples} episodes, 3 turns of {args.new_tokens} tokens, llama hidden "
          f"{args.hidden} x {args.layers} layers, {args.threads} thread(s), torch {torch.__version__}; "
          f"kept cache and re-encoding sample identical tokens: {same}")
    print(f"{'side':<34}{'turns':>6}{'policy tok':>11}{'tokens/s':>10}{'tokens/CPU-s':>14}{'x re-encode':>12}"
          f"{'prefilled/call':>16}{'first s':>9}")
    for name, r in results.items():
        ratio = r["tokens_per_cpu_s"] / fresh["tokens_per_cpu_s"]
        print(f"{name:<34}{r['turns']:>6.2f}{r['tokens']:>11}{r['tokens_per_s']:>10,.0f}{r['tokens_per_cpu_s']:>14,.0f}"
              f"{ratio:>11.2f}x{r['prefilled']:>16,.0f}{r['first_s']:>9.2f}")


if __name__ == "__main__":
    main()
