"""Agent episodes (rlvr.envs.agent): each program runs in its own thread with an `openai` client pointed at a chat
endpoint over the policy (rlvr.rollout.chat_endpoint) and its own API key; all episodes of a call run at once, so
their model calls meet in the endpoint's call batcher and fill one engine batch.

An episode that raises, runs past its `episode_timeout_s`, returns something that is not a reward or never calls
the model fails: its error is the sample's (`episode_error`, which the task's verifier reports as its error: the
failure budget counts it, completions.jsonl shows it), its tokens stay out of the loss, and the step goes on. A
program that hangs is abandoned in its thread (its key stops working), never waited on past its limit.

Each finished episode is one sample (rlvr.rollout.agent_trace says which segment is trained). The group's prompt is
the longest prefix its episodes' trained segments share; what follows it in an episode (the rest of its prompt,
the agent's inserted messages) is environment tokens.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any

import torch

from rlvr.envs.agent import AgentProgram
from rlvr.envs.render import ChatRenderer
from rlvr.errors import RlvrError
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout.base import Episode, RolloutEngine, SamplingParams
from rlvr.rollout.chat_endpoint import ChatEndpoint
from rlvr.rollout.openai_format import Limits
from rlvr.tasks.base import Problem
from rlvr.watchdog import WATCH


def openai_module():
    try:
        import openai
    except ImportError:
        raise RlvrError("Agent tasks hand each episode an `openai` client; install it: pip install 'rlvr[agents]'.") \
            from None
    return openai


@dataclass
class _Run:
    """One episode in progress: its program, key, thread and what it returned or raised."""

    program: AgentProgram
    key: str
    thread: threading.Thread | None = None
    deadline: float = 0.0
    result: Any = None
    error: str | None = None
    finished: bool = False


class AgentRunner:
    """Plays agent episodes against an endpoint over `engine` (started for each `play`, closed after it)."""

    def __init__(self, engine: RolloutEngine, encode: PromptEncoder, renderer: ChatRenderer):
        self.engine, self.encode, self.renderer = engine, encode, renderer
        self.version = 0  # the policy version recorded with each call
        self.max_wait_s = 0.2  # the call batcher waits this long, or a quarter of an engine call if longer, for a
        # live episode's next call (rlvr.rollout.call_batcher)
        self.metrics: dict[str, float] = {}  # the last play's endpoint metrics (endpoint/...)

    def play(self, work: list[tuple[Any, Problem]], params: SamplingParams,
             generators: list[torch.Generator] | None = None) -> tuple[list[list[int]], list[list[Any]]]:
        """`params.n` episodes of each (agent task, problem): the groups' prompts and their episodes."""
        programs = [task.make_envs(problem, params.n) for task, problem in work]
        first = programs[0][0]
        formats = {p.tool_call_format for group in programs for p in group}
        if len(formats) > 1:
            raise RlvrError(f"Agent tasks played together serve their calls through one endpoint, in one tool-call "
                            f"format; these ask for {' and '.join(sorted(formats))}: give them the same "
                            "data.tasks[].env.args.tool_call_format.")
        limits = Limits(first.model_name, params.max_new_tokens, params.temperature, params.top_p, params.top_k,
                        params.greedy, params.return_entropy, tool_call_format=first.tool_call_format)
        endpoint = ChatEndpoint(self.engine, self.renderer, limits, max_wait_s=self.max_wait_s,
                                call_timeout_s=max(p.call_timeout_s for group in programs for p in group))
        endpoint.version = self.version
        runs: list[list[_Run]] = []
        try:
            endpoint.start()
            for g, group in enumerate(programs):
                streams = [None] * len(group)
                if generators is not None:  # each episode's own stream, drawn from its group's
                    seeds = torch.randint(2**62, (len(group),), generator=generators[g]).tolist()
                    streams = [torch.Generator(generators[g].device).manual_seed(s) for s in seeds]
                runs.append([_Run(p, endpoint.open_episode(s)) for p, s in zip(group, streams)])
            for run in (r for group in runs for r in group):
                self._start(run, endpoint)
            self._wait([r for group in runs for r in group], work)
            traces = [[endpoint.close_episode(r.key) for r in group] for group in runs]
        finally:
            endpoint.close()
            self.metrics = endpoint.metrics()
        return self._samples(work, runs, traces, params)

    def _start(self, run: _Run, endpoint: ChatEndpoint) -> None:
        openai = openai_module()
        program = run.program
        options = {"base_url": endpoint.url, "api_key": run.key, "max_retries": 0, "timeout": program.call_timeout_s + 5}
        row = {**program.row(), "system_prompt": self.renderer.system_prompt}

        def target() -> None:
            try:
                if program.is_async:
                    async def main() -> Any:
                        async with openai.AsyncOpenAI(**options) as client:
                            return await program.function(client, row)
                    run.result = asyncio.run(main())
                else:
                    with openai.OpenAI(**options) as client:
                        run.result = program.function(client, row)
            except BaseException as e:  # the episode's error, whatever the program raised
                run.error = f"the agent raised {type(e).__name__}: {e}"
            run.finished = True
            endpoint.finish_episode(run.key)

        run.deadline = time.monotonic() + program.episode_timeout_s
        run.thread = threading.Thread(target=target, daemon=True, name=f"rlvr-agent-{run.key[-6:]}")
        run.thread.start()

    def _wait(self, runs: list[_Run], work: list[tuple[Any, Problem]]) -> None:
        labels = sorted({task.label for task, _ in work})

        def what() -> str:
            live = sum(not r.finished for r in runs)
            return f"{live} of {len(runs)} agent episodes of task {', '.join(labels)} to finish (each within its " \
                   "episode_timeout_s)"

        with WATCH.waiting(what):
            for run in runs:
                run.thread.join(max(0.0, run.deadline - time.monotonic()))
                if not run.finished:
                    run.error = f"the agent did not finish within episode_timeout_s=" \
                                f"{run.program.episode_timeout_s:g} s (abandoned)"

    def _samples(self, work, runs: list[list[_Run]], traces, params: SamplingParams
                 ) -> tuple[list[list[int]], list[list[Any]]]:
        prompts, groups = [], []
        for (task, problem), group, group_traces in zip(work, runs, traces):
            segments = [trace.trained_segment() for trace in group_traces]
            opened = [s.prompt for s in segments if s is not None]
            prompt = common_prefix(opened) if opened else self.encode(problem.prompt)
            episodes = []
            for run, trace, segment in zip(group, group_traces, segments):
                messages = trace.messages()
                error, reward, success, metrics = run.error, 0.0, False, {}
                if error is None and segment is None:
                    error = "the agent never called the model (no chat.completions call with its key)"
                if error is None:
                    try:
                        reward, success, metrics = run.program.verdict(run.result, messages)
                    except Exception as e:
                        error = f"{type(e).__name__}: {e}"
                metrics = {**metrics, "calls": float(len(trace.calls)), "segments": float(len(trace.segments))}
                if segment is None:
                    ids, policy, logprobs, entropies, truncated, turns = [self.encode.tokenizer.eos_token_id], [False], \
                        [0.0], [0.0], False, 0
                else:
                    rest = len(segment.prompt) - len(prompt)
                    ids = segment.prompt[len(prompt):] + segment.ids
                    policy = [False] * rest + (segment.policy if error is None else [False] * len(segment.ids))
                    logprobs, entropies = [0.0] * rest + segment.logprobs, [0.0] * rest + segment.entropies
                    truncated, turns = segment.truncated, segment.turns
                answer = next((m.get("content") or "" for m in reversed(messages) if m["role"] == "assistant"), "")
                fields = {"episode_reward": reward, "episode_success": success, "episode_metrics": metrics}
                if error is not None:
                    fields["episode_error"] = f"Agent episode of task {task.label}, problem {problem.uid}: {error}"
                episodes.append(Episode(token_ids=ids, text=answer, logprobs=logprobs, truncated=truncated,
                                        entropies=entropies if params.return_entropy else [],
                                        policy_mask=policy, fields=fields, messages=messages, turns=turns,
                                        reward=reward, success=success, calls=trace.calls))
            prompts.append(prompt)
            groups.append(episodes)
        return prompts, groups


def common_prefix(sequences: list[list[int]]) -> list[int]:
    """The longest prefix every sequence shares."""
    shortest = min(len(s) for s in sequences)
    n = 0
    while n < shortest and all(s[n] == sequences[0][n] for s in sequences):
        n += 1
    return sequences[0][:n]
