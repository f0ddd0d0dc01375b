"""What playing an environment through OpenEnv costs: the same guess-the-number games played in the native
environment, the OpenEnv one in process, and the OpenEnv one served on 127.0.0.1 (OpenEnv's app and client over its
WebSocket), on a tiny model so that the environment's share is as large as it gets (docs/environments.md, "OpenEnv").

    python benchmarks/openenv_overhead.py [--problems 16] [--samples 8] [--repeats 3]

Per way: the episode runner's environment seconds (opening, stepping, rendering replies, closing; EpisodeRunner.env_s)
per assistant turn, and their share of the whole play; the games must be token for token the same in all three ways
(the benchmark stops otherwise). Needs pip install 'rlvr[openenv]'.
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
from rlvr.rollout import SamplingParams, group_generator
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.tasks import make_task

PROMPT = "I am thinking of a number from 1 to {high}. What is your guess?"
OPENENV = {"environment": "rlvr.envs.openenv_guess_number:GuessNumberEnvironment", "env_args": {"high": 20},
           "reset_fields": {"secret": "answer"}, "invalid_action": "Reply with a number."}
WAYS = {"native": ("guess_number", {}), "openenv in process": ("openenv", OPENENV),
        "openenv served": ("openenv", {**OPENENV, "mode": "served"})}
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_policy():
    tok = train_tokenizer([f"{PROMPT.format(high=20)} {a} higher lower Reply with a number." for a in range(21)], 60)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token, tok.chat_template = "<|im_end|>", TEMPLATE
    torch.manual_seed(0)
    config = TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    return build_tiny_model(config, tok, 0).eval(), tok


def play(model, tok, env: str, args: dict, problems: int, samples: int):
    task = EnvTask(make_task("guess_number", 0, {"high": 20, "prompt": PROMPT}),
                   EnvConfig(name=env, max_turns=5, max_tokens=60, args=args))
    runner = EpisodeRunner(HFRolloutEngine(model, tok), PromptEncoder(tok))
    work = [(task, task.problem("train", i)) for i in range(problems)]
    gens = [group_generator(torch.device("cpu"), 0, g) for g in range(problems)]
    t0 = time.perf_counter()
    _, groups = runner.play(work, SamplingParams(n=samples, max_new_tokens=3), gens)
    episodes = [e for g in groups for e in g]
    return episodes, runner.env_s, time.perf_counter() - t0


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
        per_turn, shares = [], []
        for _ in range(args.repeats):
            episodes, env_s, wall = play(model, tok, env, env_args, args.problems, args.samples)
            tokens = [e.token_ids for e in episodes]
            if reference is None:
                reference = tokens
            if tokens != reference:
                raise SystemExit(f"{way}: the games differ from the native ones")
            per_turn.append(1000 * env_s / sum(e.turns for e in episodes))
            shares.append(env_s / wall)
        turns = sum(e.turns for e in episodes)
        print(f"{way:>20}: {statistics.median(per_turn):6.2f} ms of environment per assistant turn ({turns} turns), "
              f"{100 * statistics.median(shares):4.1f}% of the play")


if __name__ == "__main__":
    main()
