"""Episodes: multi-turn rollouts in an environment, as one token sequence built only by appending ids.

The sampled tokens of each assistant turn are appended as sampled (with their logprobs); the environment's reply
is rendered once (rlvr.envs.render) and appended, flagged as environment tokens. A single-turn completion is an
episode of one turn, so the batch, the advantages and the losses see one shape: `Completion.policy_mask` says
which tokens the policy wrote, and the loss masks derive from it.

Episodes are batched across environments that are at different turns: each engine call continues every live
episode from its ids so far. The first turn draws the group's n samples from the shared prompt (one prefill);
later turns continue each episode alone (n=1) from its own generator, seeded from the group's generator, so an
episode's samples do not depend on which other episodes share the batch.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import torch

from rlvr.envs.base import REWARD_RULES, ChatModels, Environment, EnvStep, Message
from rlvr.envs.render import ChatRenderer
from rlvr.envs.task import EnvTask
from rlvr.errors import DataError, RlvrError
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout.agents import AgentRunner
from rlvr.rollout.base import Completion, Episode, RolloutEngine, SamplingParams, TokenSequence
from rlvr.rollout.chat_models import EngineChatModels
from rlvr.tasks.base import Problem, Task
from rlvr.watchdog import WATCH


@dataclass
class _Running(TokenSequence):
    """An episode in progress."""

    env: Environment
    task: EnvTask
    prompt: list[int]
    budget: int  # tokens after the prompt
    generator: torch.Generator | None = None
    messages: list[Message] = field(default_factory=list)
    turn_rewards: list[float] = field(default_factory=list)
    turn_starts: list[int] = field(default_factory=list)
    anchors: list[Hashable] = field(default_factory=list)
    opening: list[Message] = field(default_factory=list)  # the episode's opening messages (its shared prompt)
    turns: int = 0
    done: bool = False
    truncated: bool = False
    awaiting_reply: bool = False  # one that depends on other episodes (Environment.reply)
    last_turn: list[int] | None = None  # the last sampled turn's ids (None before the first)

    @property
    def left(self) -> int:
        return self.budget - len(self.ids)


class EpisodeRunner:
    """(task, problem) work items -> prompt ids and groups of `params.n` completions: a task without an
    environment goes straight to the engine; an environment task is played as episodes. Its environments talk to
    `models` besides the policy (a game's frozen-checkpoint opponent; default: each through a rollout engine)."""

    def __init__(self, engine: RolloutEngine, encode: PromptEncoder, models: ChatModels | None = None):
        self.engine, self.encode = engine, encode
        self.models = models or EngineChatModels()
        self.tokenizer = encode.tokenizer
        self.renderer = ChatRenderer(encode.tokenizer, encode.use_template, encode.system_prompt, encode.template_kwargs)
        self.env_s = 0.0  # seconds in environments (opening, stepping, rendering replies), summed over calls
        self.agents = AgentRunner(engine, encode, self.renderer)  # environments whose program drives the episode

    def generate(self, work: list[tuple[Task | None, Problem]], params: SamplingParams,
                 generators: list[torch.Generator] | None = None, where: str = "problem",
                 encoded: list[list[int]] | None = None) -> tuple[list[list[int]], list[list[Completion]]]:
        """Prompt ids and completions for each work item; with `generators` (one per item), item i's samples
        depend on generators[i] alone. With `encoded` (the prompt ids of every item), the items of tasks without an
        environment are not encoded again and may name no task (None: a rollout worker holds environment tasks
        only)."""
        plain = [i for i, (task, _) in enumerate(work) if not isinstance(task, EnvTask)]
        driven = [i for i, (task, _) in enumerate(work) if isinstance(task, EnvTask) and task.plays_itself]
        played = [i for i, (task, _) in enumerate(work) if isinstance(task, EnvTask) and not task.plays_itself]
        prompts: list[list[int]] = [[] for _ in work]
        groups: list[list[Completion]] = [[] for _ in work]
        pick = (lambda rows: [generators[i] for i in rows]) if generators is not None else (lambda rows: None)
        for i in plain:
            task, p = work[i]
            prompts[i] = encoded[i] if encoded is not None else \
                self.encode(p.prompt, where=f"task {task.label}, {where} {p.uid}")
        if plain:
            for i, group in zip(plain, self.engine.generate([prompts[i] for i in plain], params, pick(plain))):
                groups[i] = group
        if played:
            opened, episodes = self.play([work[i] for i in played], params, pick(played), where)
            for i, prompt, group in zip(played, opened, episodes):
                prompts[i], groups[i] = prompt, group
        if driven:
            t0 = time.perf_counter()
            opened, episodes = self.agents.play([work[i] for i in driven], params, pick(driven))
            self.env_s += time.perf_counter() - t0 - self.agents.metrics.get("endpoint/engine_s", 0.0)
            for i, prompt, group in zip(driven, opened, episodes):
                prompts[i], groups[i] = prompt, group
        return prompts, groups

    def generate_batches(self, work: list[tuple[Task, Problem]], params: SamplingParams,
                         generators: list[torch.Generator] | None = None, where: str = "problem",
                         encoded: list[list[int]] | None = None
                         ) -> Iterator[tuple[list[list[int]], list[list[Completion]]]]:
        """`generate` one engine batch of work items (whole groups) at a time, so a batch can be scored while the
        next one is generated: the same samples as one call, which draws batch after batch in the same order."""
        per_batch = max(1, getattr(self.engine, "batch_size", len(work) * params.n) // params.n)
        for i in range(0, len(work), per_batch):
            part = slice(i, i + per_batch)
            yield self.generate(work[part], params, generators[part] if generators is not None else None, where,
                                encoded[part] if encoded is not None else None)

    def _open(self, task: EnvTask, problem: Problem, n: int, where: str
              ) -> tuple[list[Environment], list[int], list[Message]]:
        envs = task.make_envs(problem, n, self.models)
        openings = [env.reset() for env in envs]
        opens_awaiting = envs[0].starts_awaiting_reply
        if any(o != openings[0] for o in openings) or any(e.starts_awaiting_reply != opens_awaiting for e in envs):
            raise RlvrError(f"Environment '{task.config.name}' opened episodes of one problem differently; reset() "
                            "and starts_awaiting_reply must depend on the problem only (the group shares one prompt).")
        prompt = self.renderer.opening(openings[0], envs[0].tools, generation_prompt=not opens_awaiting)
        if len(prompt) > self.encode.max_tokens:
            raise DataError(f"Opening prompt of task {task.label}, {where} {problem.uid} has {len(prompt)} tokens, "
                            f"over the limit of {self.encode.max_tokens} ({self.encode.limit_source}).")
        return envs, prompt, openings[0]

    def play(self, work: list[tuple[EnvTask, Problem]], params: SamplingParams,
             generators: list[torch.Generator] | None = None, where: str = "problem"
             ) -> tuple[list[list[int]], list[list[Episode]]]:
        """Play `params.n` episodes of each problem to the end; their prompts and finished episodes."""
        n = params.n
        prompts, running = [], []
        t0 = time.perf_counter()
        for task, problem in work:
            envs, prompt, opening = self._open(task, problem, n, where)
            prompts.append(prompt)
            budget = task.config.max_tokens or task.config.max_turns * params.max_new_tokens
            running += [_Running(env, task, prompt, budget, opening=opening,
                                 awaiting_reply=env.starts_awaiting_reply)
                        for env in envs]
        self.env_s += time.perf_counter() - t0
        try:
            with getattr(self.engine, "session", nullcontext)():  # an engine that keeps caches across turns
                finished = self._play(running, prompts, params, generators)
        finally:
            t0 = time.perf_counter()
            for r in running:
                r.env.close()
            self.env_s += time.perf_counter() - t0
        return prompts, [finished[g * n : (g + 1) * n] for g in range(len(work))]

    def _play(self, running: list[_Running], prompts: list[list[int]], params: SamplingParams,
              generators: list[torch.Generator] | None) -> list[Episode]:
        """Every episode's turns until it ends, live episodes batched in one engine call per turn. Groups whose
        episodes start awaiting a reply (a game's seats) join from their first reply on; an episode awaiting another's
        move sits out the calls until `reply()` gives its reply."""
        n = params.n
        starting = [g for g in range(len(prompts)) if not running[g * n].awaiting_reply]
        if starting:
            longest = max(running[g * n + j].budget for g in starting for j in range(n))
            first = self.engine.generate([prompts[g] for g in starting],
                                         replace(params, max_new_tokens=min(params.max_new_tokens, longest)),
                                         [generators[g] for g in starting] if generators is not None else None)
            t0 = time.perf_counter()
            for g, group in zip(starting, first):
                for j, completion in enumerate(group):
                    self._after_turn(running[g * n + j], completion)
            self.env_s += time.perf_counter() - t0
        if generators is not None:  # each episode's own stream for later turns, drawn from its group's
            for g, gen in enumerate(generators):
                seeds = torch.randint(2**62, (n,), generator=gen, device=gen.device).tolist()
                for j, seed in enumerate(seeds):
                    running[g * n + j].generator = torch.Generator(gen.device).manual_seed(seed)
        while True:
            t0 = time.perf_counter()
            for r in running:
                if r.awaiting_reply and not r.done:
                    self._receive(r)
            self.env_s += time.perf_counter() - t0
            if not (live := [r for r in running if not r.done]):
                break
            ready = [r for r in live if not r.awaiting_reply]
            if not ready:
                names = sorted({r.task.config.name for r in live})
                raise RlvrError(f"Environment '{names[0]}': every live episode awaits a reply that never comes "
                                "(reply() returned None although no episode can move).")
            turn = replace(params, n=1, max_new_tokens=min(params.max_new_tokens, max(r.left for r in ready)))
            gens = [r.generator for r in ready] if generators is not None else None
            out = self.engine.generate([r.prompt + r.ids for r in ready], turn, gens)
            t0 = time.perf_counter()
            for r, group in zip(ready, out):
                self._after_turn(r, group[0])
            self.env_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        finished = [self._finish(r) for r in running]
        self.env_s += time.perf_counter() - t0
        return finished

    def _after_turn(self, r: _Running, c: Completion) -> None:
        """Append a sampled turn, let the environment answer, append its reply (or end the episode)."""
        kept = min(len(c.token_ids), r.left)
        ids = c.token_ids[:kept]
        r.turn_starts.append(len(r.ids))
        r.anchors.append(anchor_state(r))
        r.append(ids, True, c.logprobs[:kept], c.entropies[:kept] if c.entropies else None)
        r.turns += 1
        r.last_turn = ids
        text = c.text if kept == len(c.token_ids) else self.tokenizer.decode(ids, skip_special_tokens=True)
        r.messages.append({"role": "assistant", "content": text})
        r.truncated = c.truncated or kept < len(c.token_ids)
        if kept < len(c.token_ids):  # out of budget: the turn is cut, the environment is not asked
            self._end_early(r)
            return
        try:
            with WATCH.waiting(f"the environment of task {r.task.label} (turn {r.turns} of an episode)"):
                step = r.env.step(text)
        except Exception as e:
            raise RlvrError(f"Environment '{r.task.config.name}' failed at turn {r.turns} of an episode of task "
                            f"{r.task.label}: {type(e).__name__}: {e}") from e
        r.turn_rewards.append(float(step.reward or 0.0))
        if step.awaiting_reply and not step.done:
            r.awaiting_reply = True
            return
        self._answer(r, step)

    def _receive(self, r: _Running) -> None:
        """The reply an episode awaits, once the environment has it (Environment.reply)."""
        try:
            step = r.env.reply()
        except Exception as e:
            raise RlvrError(f"Environment '{r.task.config.name}' failed replying after turn {r.turns} of an episode "
                            f"of task {r.task.label}: {type(e).__name__}: {e}") from e
        if step is None:
            return
        r.awaiting_reply = False
        if step.reward and r.turn_rewards:
            r.turn_rewards[-1] += float(step.reward)
        self._answer(r, step)

    def _answer(self, r: _Running, step: EnvStep) -> None:
        """Append the environment's reply, or end the episode (the environment ended it, or the turn limit)."""
        if step.done:
            r.done = True
            return
        if r.turns >= r.task.config.max_turns:
            self._end_early(r)
            return
        reply = self.renderer.continuation(step.messages, r.last_turn)
        if len(reply) >= r.left:  # no room for the reply and a turn after it
            r.truncated = True
            self._end_early(r)
            return
        r.append(reply, False)
        r.messages += step.messages

    def _end_early(self, r: _Running) -> None:
        """End an episode the environment did not end (token budget, turn limit); it hears of it (abandon)."""
        r.done = True
        r.env.abandon()

    def _finish(self, r: _Running) -> Episode:
        outcome = r.env.outcome()
        cfg = r.task.config
        reward = REWARD_RULES[cfg.reward](outcome.reward, r.turn_rewards, cfg.gamma)
        # Each turn's reward as the rule counts it in the episode reward (a cut last turn was never answered).
        weight = {"final": lambda t: 0.0, "sum": lambda t: 1.0, "discounted": lambda t: cfg.gamma**t}[cfg.reward]
        stepped = r.turn_rewards + [0.0] * (r.turns - len(r.turn_rewards))
        turn_rewards = [weight(t) * x for t, x in enumerate(stepped)]
        metrics = {"turns": float(r.turns), **r.env.metrics()}
        answer = next((m["content"] for m in reversed(r.messages) if m["role"] == "assistant"), "")
        return Episode(token_ids=r.ids, text=answer, logprobs=r.logprobs, truncated=r.truncated,
                       entropies=r.entropies, policy_mask=r.policy, role=r.env.role,
                       fields={"episode_reward": reward, "episode_success": outcome.success,
                               "episode_metrics": metrics},
                       messages=r.messages, turns=r.turns, reward=reward, success=outcome.success,
                       turn_starts=r.turn_starts, turn_rewards=turn_rewards, anchors=r.anchors)


def anchor_state(r: _Running) -> Hashable:
    """The anchor state of the turn `r` is about to take (GiGPO's step groups, rlvr.algorithms.turn_credit): its
    environment's state key, from the conversation so far (the opening, every turn and reply)."""
    try:
        return r.env.state_key([*r.opening, *r.messages])
    except Exception as e:
        raise RlvrError(f"Environment '{r.task.config.name}' failed naming its state before turn {r.turns + 1} of an "
                        f"episode of task {r.task.label}: {type(e).__name__}: {e}") from e
