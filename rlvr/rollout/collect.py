"""Collecting one step's groups: draw prompts the filter admits, generate their samples, score them, and keep the
groups the filter accepts, in as many generation rounds as the filter needs. The trainer makes one call,
`StepCollector.collect(step)`, and never sees how the groups were made."""

from __future__ import annotations

import time

import torch

from rlvr.curriculum import CurriculumStats, GroupFilter, PromptSampler, prompt_key
from rlvr.distributed import all_gather_objects, shard
from rlvr.errors import ConfigError
from rlvr.models.prompts import PromptEncoder
from rlvr.rewards.composite import RewardComposer, Scored
from rlvr.rollout.base import RolloutEngine, SamplingParams, group_generator
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.hints import make_hints, with_failures
from rlvr.rollout.self_play import follow_up_groups, self_play_metrics, settle_late_rewards
from rlvr.rollout.steps import CollectedStep, Group, staleness_metrics
from rlvr.tasks import Problem, Task


class StepCollector:
    """Synchronous collection: generate a round, score it, filter; regenerate while the filter wants more.

    A filter that regenerates (DAPO dynamic sampling, the pass-rate band) sets aside the groups it rejects, and
    further rounds are generated until the step has `prompts_per_step` kept groups or `max_rounds` is hit; a step
    still short is topped up with set-aside groups and says so in sampling/filled_frac."""

    def __init__(self, engine: RolloutEngine, encode: PromptEncoder, tasks: list[Task], sampler: PromptSampler,
                 group_filter: GroupFilter, stats: CurriculumStats, composer: RewardComposer, params: SamplingParams,
                 *, prompts_per_step: int, max_rounds: int, seed: int, seed_per_group: bool, device, hints=None):
        self.runner = EpisodeRunner(engine, encode)  # environment tasks play episodes, the others one completion
        # data.hints: all-fail groups sampled again with hints (rlvr.rollout.hints)
        self.hints = make_hints(hints, runner=self.runner, composer=composer, tasks=tasks, stats=stats, params=params,
                                seed=seed, seed_per_group=seed_per_group, device=device)
        self.tasks, self.sampler = tasks, sampler
        self.filter, self.stats, self.composer, self.params = group_filter, stats, composer, params
        self.prompts_per_step, self.max_rounds, self.seed = prompts_per_step, max_rounds, seed
        self.seed_per_group, self.device = seed_per_group, device
        self.reward_wait_s = 0.0

    def _round(self, step: int, round_index: int) -> tuple[list[Group], Scored]:
        """Draw `prompts_per_step` prompts the filter admits, sample their groups, score every sample. Every rank
        draws the same prompts; each generates and scores its own block of groups, and every rank gets them all."""
        drawn = self.sampler.next_batch(self.prompts_per_step,
                                        lambda t, p: self.filter.admit(self.stats, prompt_key(self.tasks[t], p)))
        self.stats.record_draws([t for t, _ in drawn])
        return self._generate(step, round_index, drawn)

    def _generate(self, step: int, round_index: int, drawn: list[tuple[int, Problem]]) -> tuple[list[Group], Scored]:
        """Sample and score the groups of `drawn` (source, problem) pairs: each rank its own block of groups, and
        every rank gets them all."""
        mine = shard(len(drawn))
        generators = None
        if self.seed_per_group:
            generators = [group_generator(self.device(), self.seed, step, round_index, g) for g in mine]
        # Each engine batch goes to the reward pool as soon as it is generated, scored while the next one is.
        prompts, completions, jobs = [], [], []
        work = [(self.tasks[t], p) for t, p in drawn[mine.start : mine.stop]]
        for part_prompts, part in self.runner.generate_batches(work, self.params, generators):
            first = mine.start + len(completions)
            prompts += part_prompts
            completions += part
            jobs.append(self.composer.submit(
                [(self.tasks[t], p, c.text, c.reward_fields(self.params.max_new_tokens))
                 for (t, p), group in zip(drawn[first : first + len(part)], part) for c in group]))
        waited = time.perf_counter()
        mine_scored = Scored.concat([job.result() for job in jobs]) if jobs else self.composer.score([])
        self.reward_wait_s += time.perf_counter() - waited
        parts = all_gather_objects((prompts, completions, mine_scored))
        prompts = [p for part, _, _ in parts for p in part]
        completions = [g for _, part, _ in parts for g in part]
        scored = Scored.concat([s for _, _, s in parts])
        n = self.params.n
        groups = [Group(t, p, prompts[g], completions[g], scored.select(list(range(g * n, (g + 1) * n))), step - 1)
                  for g, (t, p) in enumerate(drawn)]
        return groups, scored

    def collect(self, step: int) -> CollectedStep:
        t0 = time.perf_counter()
        self.reward_wait_s = 0.0  # scoring not hidden behind generation
        self.runner.env_s = 0.0  # environments' share of generation (episodes)
        kept: list[Group] = []
        rejected: list[Group] = []
        rounds_scored: list[Scored] = []
        generated_groups: list[Group] = []  # as sampled, without hints (what accuracy and the curriculum see)
        hinted_scored: list[Scored] = []
        rounds, gen_tokens, skipped = 0, 0, 0
        while len(kept) < self.prompts_per_step and rounds < (self.max_rounds if self.filter.regenerates else 1):
            groups, scored = self._round(step, rounds)
            generated_groups += groups
            groups, scorings = self.hints.rescue(step, rounds, groups)
            hinted_scored += scorings
            rounds += 1
            skipped += self.sampler.skipped
            rounds_scored.append(scored)
            for group in groups:
                gen_tokens += sum(c.policy_tokens for c in group.completions)
                (kept if self.filter.keep(group.scored.total, group.scored.correct) else rejected).append(group)
        trained = (kept + rejected)[: self.prompts_per_step]
        # Self-play tasks derive more problems from this step's groups and settle rewards known only now
        follow = follow_up_groups(step, trained, self.tasks, lambda work, k: self._generate(step, rounds + k, work))
        gen_tokens += sum(c.policy_tokens for g in follow for c in g.completions)
        trained, generated_groups = settle_late_rewards(self.tasks, trained + follow, generated_groups + follow)
        gen_s = time.perf_counter() - t0
        generated = with_failures(Scored.concat(rounds_scored + [g.scored for g in follow]), hinted_scored).with_totals(
            torch.cat([g.scored.total for g in generated_groups]))
        metrics = {"perf/gen_tokens_per_s": gen_tokens / max(gen_s, 1e-9), "perf/gen_s": gen_s,
                   "perf/reward_wait_s": self.reward_wait_s, "perf/env_s": self.runner.env_s,
                   # tokens the engine decoded per sample: fewer than their length with tree rollouts' shared prefixes
                   "rollout/decoded_tokens_per_completion": sum(c.decoded for g in generated_groups for c in
                                                                g.completions) / max(len(generated.total), 1),
                   **self_play_metrics(self.tasks, trained)}
        if self.filter.regenerates:
            metrics["sampling/rounds"] = rounds
            metrics["sampling/wasted_frac"] = 1 - len(trained) * self.params.n / len(generated.total)
            metrics["sampling/filled_frac"] = min(len(kept), self.prompts_per_step) / self.prompts_per_step
            metrics["sampling/skipped_prompts"] = skipped
        metrics.update(staleness_metrics(step, trained))
        metrics.update(self.hints.step_metrics(trained))
        return CollectedStep(trained, generated_groups, generated, metrics)

    def close(self) -> None:
        """Nothing to release: generation and scoring run in the trainer's process and its reward pool."""


def make_collector(max_staleness: int, **kwargs):
    """The synchronous `StepCollector` for max_staleness 0; the asynchronous pipeline of rollout worker processes
    (rlvr.rollout.workers; Ray actors with a ray_address) for max_staleness > 0."""
    if max_staleness == 0:
        kwargs = {k: v for k, v in kwargs.items() if k not in ASYNC_ONLY}
        return StepCollector(**kwargs)
    self_play = [t.label for t in kwargs["tasks"] if t.self_play]
    if self_play:
        raise ConfigError(f"Task {self_play[0]} plays against the policy's own generations (self-play), which needs the "
                          "synchronous collector: set rollout.max_staleness=0 (docs/self_play.md).")
    from rlvr.rollout.workers import AsyncCollector

    kwargs.pop("hints", None)  # refused with max_staleness > 0 by the config (hints run in the synchronous loop)
    address, num_cpus = kwargs.pop("ray_address", None), kwargs.pop("ray_num_cpus", None)
    if address is not None:
        from rlvr.rollout.ray_workers import RayLauncher

        kwargs["launcher"] = RayLauncher(address, num_cpus)
    try:
        return AsyncCollector(max_staleness=max_staleness, **kwargs)
    except BaseException:
        if kwargs.get("launcher") is not None:
            kwargs["launcher"].close()  # a Ray instance started for the workers
        raise


ASYNC_ONLY = ("model", "tokenizer", "engine_name", "batch_size", "num_workers", "ray_address", "ray_num_cpus",
              "rollout")
