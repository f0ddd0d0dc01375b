"""Collecting one step's groups: draw prompts the filter admits, generate their samples, score them, and keep the
groups the filter accepts, in as many generation rounds as the filter needs; the run's collection stages
(rlvr.rollout.stages) act at their hooks in between. The trainer makes one call, `StepCollector.collect(step)`, and
never sees how the groups were made."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from rlvr.curriculum import CurriculumStats, GroupFilter, PromptSampler, prompt_key
from rlvr.distributed import all_gather_objects, shard
from rlvr.models.prompts import PromptEncoder
from rlvr.rewards.composite import RewardComposer, Scored
from rlvr.rollout.base import Completion, RolloutEngine, SamplingParams, group_generator
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.stages import CollectionStage, StageSetup, StepDraft, make_stages, refuse_unsupported
from rlvr.rollout.steps import CollectedStep, Group, staleness_metrics
from rlvr.tasks import Problem, Task


class StepCollector:
    """Synchronous collection: generate a round, score it, let the stages act, filter; regenerate while the filter
    wants more; then the stages act on the chosen groups.

    A filter that regenerates (DAPO dynamic sampling, the pass-rate band) sets aside the groups it rejects, and
    further rounds are generated until the step has `prompts_per_step` kept groups or `max_rounds` is hit; a step
    still short is topped up with set-aside groups and says so in sampling/filled_frac."""

    def __init__(self, engine: RolloutEngine, encode: PromptEncoder, tasks: list[Task], sampler: PromptSampler,
                 group_filter: GroupFilter, stats: CurriculumStats, composer: RewardComposer, params: SamplingParams,
                 *, prompts_per_step: int, max_rounds: int, seed: int, seed_per_group: bool, device,
                 stages: list[CollectionStage] = ()):
        self.runner = EpisodeRunner(engine, encode)  # environment tasks play episodes, the others one completion
        self.stages = list(stages)
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
        return self._generate(step, (round_index,), drawn)

    def _generate(self, step: int, key: tuple, work: list[tuple[int, Problem]], *,
                  prompts: list[list[int]] | None = None, where: str = "problem",
                  finish: Callable[[int, Completion], Completion] | None = None) -> tuple[list[Group], Scored]:
        """Sample and score the groups of `work` ((task index, problem) pairs), each rank its own block of groups,
        and every rank gets them all: the one generation path of rounds and stages (rlvr.rollout.stages.Generate
        says what `key`, `prompts` and `finish` are)."""
        mine = shard(len(work))
        generators = None
        if self.seed_per_group:
            generators = [group_generator(self.device(), self.seed, step, *key, g) for g in mine]
        # Each engine batch goes to the reward pool as soon as it is generated, scored while the next one is.
        sampled_from, completions, jobs = [], [], []
        items = [(self.tasks[t], p) for t, p in work[mine.start : mine.stop]]
        encoded = prompts[mine.start : mine.stop] if prompts is not None else None
        for part_prompts, part in self.runner.generate_batches(items, self.params, generators, where, encoded):
            first = mine.start + len(completions)
            if finish is not None:
                part = [[finish(first + j, c) for c in group] for j, group in enumerate(part)]
            sampled_from += part_prompts
            completions += part
            jobs.append(self.composer.submit(
                [(self.tasks[t], p, c.text, c.reward_fields(self.params.max_new_tokens))
                 for (t, p), group in zip(work[first : first + len(part)], part) for c in group]))
        waited = time.perf_counter()
        mine_scored = Scored.concat([job.result() for job in jobs]) if jobs else self.composer.score([])
        self.reward_wait_s += time.perf_counter() - waited
        parts = all_gather_objects((sampled_from, completions, mine_scored))
        sampled_from = [p for part, _, _ in parts for p in part]
        completions = [g for _, part, _ in parts for g in part]
        scored = Scored.concat([s for _, _, s in parts])
        n = self.params.n
        groups = [Group(t, p, sampled_from[g], completions[g], scored.select(list(range(g * n, (g + 1) * n))),
                        step - 1)
                  for g, (t, p) in enumerate(work)]
        return groups, scored

    def draft(self, step: int) -> StepDraft:
        """A fresh step, whose stages generate through this collector's `_generate`."""
        return StepDraft(step, partial(self._generate, step))

    def collect(self, step: int) -> CollectedStep:
        t0 = time.perf_counter()
        self.reward_wait_s = 0.0  # scoring not hidden behind generation
        self.runner.env_s = 0.0  # environments' share of generation (episodes)
        self.runner.agents.version, self.runner.agents.metrics = step - 1, {}  # agent episodes' calls (policy version)
        draft = self.draft(step)
        kept: list[Group] = []
        rejected: list[Group] = []
        gen_tokens, skipped = 0, 0
        while len(kept) < self.prompts_per_step and draft.rounds < (self.max_rounds if self.filter.regenerates
                                                                    else 1):
            groups, scored = self._round(step, draft.rounds)
            draft.generated += groups
            draft.scorings.append(scored)
            for stage in self.stages:
                groups = stage.after_round(draft, draft.rounds, groups)
            draft.rounds += 1
            skipped += self.sampler.skipped
            for group in groups:
                gen_tokens += sum(c.policy_tokens for c in group.completions)
                (kept if self.filter.keep(group.scored.total, group.scored.correct) else rejected).append(group)
        trained = (kept + rejected)[: self.prompts_per_step]
        chosen = len(draft.generated)
        for stage in self.stages:
            trained = stage.after_choice(draft, trained)
        gen_tokens += sum(c.policy_tokens for g in draft.generated[chosen:] for c in g.completions)
        gen_s = time.perf_counter() - t0
        generated = draft.scored()
        metrics = {"perf/gen_tokens_per_s": gen_tokens / max(gen_s, 1e-9), "perf/gen_s": gen_s,
                   "perf/reward_wait_s": self.reward_wait_s, "perf/env_s": self.runner.env_s,
                   # tokens the engine decoded per sample: fewer than their length with tree rollouts' shared prefixes
                   "rollout/decoded_tokens_per_completion": sum(c.decoded for g in draft.generated for c in
                                                                g.completions) / max(len(generated.total), 1)}
        if self.filter.regenerates:
            metrics["sampling/rounds"] = draft.rounds
            metrics["sampling/wasted_frac"] = 1 - len(trained) * self.params.n / len(generated.total)
            metrics["sampling/filled_frac"] = min(len(kept), self.prompts_per_step) / self.prompts_per_step
            metrics["sampling/skipped_prompts"] = skipped
        metrics.update(staleness_metrics(step, trained))
        metrics.update(self.runner.agents.metrics)  # agent episodes' endpoint: calls, latency, engine batch sizes
        for stage in self.stages:
            metrics.update(stage.metrics(trained))
        return CollectedStep(trained, draft.generated, generated, metrics)

    def close(self) -> None:
        """Nothing to release: generation and scoring run in the trainer's process and its reward pool."""


def make_collector(max_staleness: int, *, data, failures=None, **kwargs):
    """The synchronous `StepCollector` for max_staleness 0; the asynchronous pipeline of rollout worker processes
    (rlvr.rollout.workers; Ray actors with a ray_address) for max_staleness > 0, which refuses a stage it cannot run.
    Either runs the collection stages that the data section (`data`), the tasks and the composer ask for
    (rlvr.rollout.stages); `failures`, the run's reward failure budget, counts the stages' own reward calls."""
    stages = make_stages(StageSetup(data, kwargs["tasks"], kwargs.get("stats"), kwargs.get("encode"),
                                    kwargs.get("params"), kwargs.get("composer"), failures))
    if max_staleness == 0:
        kwargs = {k: v for k, v in kwargs.items() if k not in ASYNC_ONLY}
        return StepCollector(**kwargs, stages=stages)
    refuse_unsupported(stages)
    from rlvr.rollout.workers import AsyncCollector

    address, num_cpus = kwargs.pop("ray_address", None), kwargs.pop("ray_num_cpus", None)
    if address is not None:
        from rlvr.rollout.ray_workers import RayLauncher

        kwargs["launcher"] = RayLauncher(address, num_cpus)
    try:
        return AsyncCollector(max_staleness=max_staleness, stages=stages, **kwargs)
    except BaseException:
        if kwargs.get("launcher") is not None:
            kwargs["launcher"].close()  # a Ray instance started for the workers
        raise


ASYNC_ONLY = ("model", "tokenizer", "engine_name", "batch_size", "num_workers", "ray_address", "ray_num_cpus",
              "cancellation", "rollout")
