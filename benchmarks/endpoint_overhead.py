"""What the OpenAI-compatible endpoint costs per call against the engine called directly, on the same model.

The same P chat prompts (arithmetic questions, with the calculator tool offered) are answered greedily with at most
L new tokens, (a) by one direct `engine.generate` call on the prompts rendered as the endpoint renders them, and
(b) by P concurrent `openai` client calls through the endpoint (rlvr.rollout.chat_endpoint: HTTP, JSON, rendering,
the call batcher's wait, tool-call parsing), --reps times each after one warm-up. Greedy decoding makes both sides
generate the same tokens (checked), so the difference in wall time is the endpoint's overhead: reported per call
(ms) and as a share of the direct engine time. Also printed: the batcher's engine calls and their sizes.

Run:  nice -n 10 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/endpoint_overhead.py            (SmolLM2-135M)
      .venv/bin/python benchmarks/endpoint_overhead.py --prompts 16 --new-tokens 48
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch

from rlvr.config import ModelConfig
from rlvr.envs.render import ChatRenderer
from rlvr.models.loading import load_policy
from rlvr.rollout import SamplingParams, make_engine
from rlvr.rollout.agent_trace import EpisodeTrace
from rlvr.rollout.chat_endpoint import ChatEndpoint
from rlvr.rollout.openai_format import Limits
from rlvr.tasks import make_task

CALCULATOR = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    import openai

    torch.set_num_threads(max(1, torch.get_num_threads()))
    model, tok = load_policy(ModelConfig(name=args.model), 0)
    model.eval()
    engine = make_engine("hf", model, tok, batch_size=64)
    renderer = ChatRenderer(tok, True)
    task = make_task("arithmetic", 0, {"max_operand": 999, "operators": "*"})
    conversations = [[{"role": "user", "content": task.problem("train", i).prompt}] for i in range(args.prompts)]
    prompts = [EpisodeTrace(renderer).begin(c, [CALCULATOR]).prompt_ids for c in conversations]
    params = SamplingParams(n=1, max_new_tokens=args.new_tokens, greedy=True)
    endpoint = ChatEndpoint(engine, renderer, Limits("policy", args.new_tokens), record=False)
    endpoint.start()
    client = openai.OpenAI(base_url=endpoint.url, api_key="bench", max_retries=0)

    def direct() -> list[list[int]]:
        return [g[0].token_ids for g in engine.generate(prompts, params)]

    def through_endpoint() -> list[str]:
        out: list[str] = [""] * len(conversations)

        def call(i: int) -> None:
            reply = client.chat.completions.create(model="policy", messages=conversations[i], tools=[CALCULATOR],
                                                   temperature=0, max_tokens=args.new_tokens, logprobs=True)
            out[i] = "".join(t.token for t in reply.choices[0].logprobs.content)
        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(conversations))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out

    def timed(fn):
        t0 = time.perf_counter()
        result = fn()
        return time.perf_counter() - t0, result

    direct(), through_endpoint()  # warm-up
    engine_s, endpoint_s = [], []
    for _ in range(args.reps):
        s, ids = timed(direct)
        engine_s.append(s)
        s, texts = timed(through_endpoint)
        endpoint_s.append(s)
    same = all("".join(tok.decode([t]) for t in i) == text for i, text in zip(ids, texts))
    batches = endpoint.batcher.batch_calls
    endpoint.close()
    e, p = statistics.median(engine_s), statistics.median(endpoint_s)
    print(f"model {args.model}, {args.prompts} prompts x <= {args.new_tokens} greedy tokens, median of {args.reps}")
    print(f"direct engine call: {e:.3f} s;  through the endpoint: {p:.3f} s;  same tokens: {same}")
    print(f"overhead: {1000 * (p - e) / args.prompts:.1f} ms per call, {100 * (p - e) / e:.1f}% of the engine time")
    print(f"engine calls made by the batcher (calls in each): {batches}")


if __name__ == "__main__":
    main()
