"""What playing an environment through OpenEnv or verifiers costs against the native one, in one run: the same
guess-the-number games played in the native environment, the OpenEnv one in process, the OpenEnv one served on
127.0.0.1 (OpenEnv's app and client over its WebSocket), and the verifiers taskset (verifiers' rollout, its model
calls through rlvr's OpenAI-compatible endpoint), on a tiny model so that what is not the model's is as large a share
as it gets (docs/environments.md, "OpenEnv", "verifiers").

    python -m benchmarks.environment_overhead [--problems 16] [--samples 8] [--repeats 3]

Per way: the seconds of the play outside the engine's generate calls (environments, rendering, the runner's
bookkeeping; for verifiers also the harness, HTTP and the call batcher's waits) per assistant turn and their share
of the play, and per model call for verifiers. The native and OpenEnv games must be token for token the same (the
benchmark stops otherwise); verifiers' are other samples of the same games (an agent episode samples each turn from
its own stream, tests/test_verifiers_guess_number.py), so only their per-turn figures compare. Needs pip install
'rlvr[openenv,verifiers]'.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlvr.config import EnvConfig, TaskConfig, TinyModelConfig
from rlvr.envs import make_tasks
from rlvr.envs.task import EnvTask
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout import SamplingParams, group_generator
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.tasks import make_task

PROMPT = "I am thinking of a number from 1 to {high}. What is your guess?"
OPENENV = {"environment": "rlvr.envs.openenv_guess_number:GuessNumberEnvironment", "env_args": {"high": 20},
           "reset_fields": {"secret": "answer"}, "invalid_action": "Reply with a number."}
WAYS = {"native": ("guess_number", {}), "openenv in process": ("openenv", OPENENV),
        "openenv served": ("openenv", {**OPENENV, "mode": "served"}), "verifiers": ("verifiers", {})}
VERIFIERS = {"taskset": "rlvr.envs.verifiers_guess_number", "eval_taskset_args": {"split": "eval"},
             "taskset_args": {"high": 20, "eval_size": 40, "prompt": PROMPT, "max_turns": 5}}
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_policy():
    tok = train_tokenizer([f"{PROMPT.format(high=20)} {a} higher lower Reply with a number." for a in range(21)], 60)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token, tok.chat_template = "<|im_end|>", TEMPLATE
    torch.manual_seed(0)
    config = TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    return build_tiny_model(config, tok, 0).eval(), tok


class TimedEngine(HFRolloutEngine):
    """The hf engine, its generate calls timed."""

    engine_s = 0.0

    def generate(self, prompts, params, generators=None):
        t0 = time.perf_counter()
        try:
            return super().generate(prompts, params, generators)
        finally:
            self.engine_s += time.perf_counter() - t0


def play(model, tok, env: str, args: dict, problems: int, samples: int):
    """The games, the seconds outside the engine, the play's seconds and the model calls made."""
    if env == "verifiers":
        [task] = make_tasks([TaskConfig(name="verifiers", args=VERIFIERS)], 0)
    else:
        task = EnvTask(make_task("guess_number", 0, {"high": 20, "prompt": PROMPT}),
                       EnvConfig(name=env, max_turns=5, max_tokens=60, args=args))
    engine = TimedEngine(model, tok)
    runner = EpisodeRunner(engine, PromptEncoder(tok))
    work = [(task, task.problem("train", i)) for i in range(problems)]
    gens = [group_generator(torch.device("cpu"), 0, g) for g in range(problems)]
    t0 = time.perf_counter()
    _, groups = runner.generate(work, SamplingParams(n=samples, max_new_tokens=3), gens)
    wall = time.perf_counter() - t0
    episodes = [e for g in groups for e in g]
    calls = runner.agents.metrics.get("endpoint/calls", 0.0)
    return episodes, wall - engine.engine_s, wall, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tok = tiny_policy()
    reference = None
    print(f"{args.problems} problems x {args.samples} games, {args.repeats} repeats, medians")
    for way, (env, env_args) in WAYS.items():
        per_turn, shares, per_call = [], [], []
        for _ in range(args.repeats):
            episodes, outside_s, wall, calls = play(model, tok, env, env_args, args.problems, args.samples)
            tokens = [e.token_ids for e in episodes]
            if reference is None:
                reference = tokens
            if env != "verifiers" and tokens != reference:
                raise SystemExit(f"{way}: the games differ from the native ones")
            per_turn.append(1000 * outside_s / sum(e.turns for e in episodes))
            shares.append(outside_s / wall)
            per_call += [1000 * outside_s / calls] if calls else []
        turns = sum(e.turns for e in episodes)
        calls = f", {statistics.median(per_call):.2f} ms per model call" if per_call else ""
        print(f"{way:>20}: {statistics.median(per_turn):6.2f} ms outside the engine per assistant turn ({turns} "
              f"turns){calls}, {100 * statistics.median(shares):4.1f}% of the play")


if __name__ == "__main__":
    main()
