"""Hint scaffolding at rollout time: a group whose samples all failed is sampled again with part of a reference
solution as a hint, and the hinted group, when it holds a signal (its rewards differ), is trained in its place.

Guide (Nath et al. 2025, "Adaptive Guidance Accelerates Reinforcement Learning of Reasoning Models"), GHPO (Liu et
al. 2025) and SEELE (Li et al. 2025, "Staying in the Sweet Spot") all hint only where the policy fails. Two
placements (data.hints.placement, each a registered augmenter):

- `prompt` (Guide): the hint follows the question; the samples y ~ pi(. | question, hint) are trained as completions
  of the question alone. That is off-policy: the trainer's pi(y | question) against the sampler's pi(y | question,
  hint), which the rollout correction (algorithm.rollout_correction; TIS unless set) weighs token by token.
- `response` (SEELE, GHPO): the hint opens the answer and the policy continues it. The hint's tokens are context
  (policy_mask False, as an environment's tokens in an episode): never trained as the policy's own.

Either way the batch's prompt is the question without the hint, the group keeps its n samples, it is marked
(`Group.hint`) and its samples stay out of accuracy and the curriculum's pass rates (the unhinted group is what the
step reports). How much of the hint a problem gets is rlvr.curriculum.hints.HintSchedule's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from rlvr.config import HintConfig
from rlvr.curriculum import CurriculumStats, prompt_key
from rlvr.curriculum.hints import HintSchedule, hint_prefix, hint_text
from rlvr.distributed import all_gather_objects, shard
from rlvr.envs.task import EnvTask
from rlvr.errors import DataError
from rlvr.models.prompts import PromptEncoder, with_instruction
from rlvr.registry import Registry
from rlvr.rewards.composite import RewardComposer, Scored
from rlvr.rollout.base import Completion, SamplingParams, group_generator
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.steps import Group, Hint
from rlvr.tasks import Problem, Task


@dataclass
class HintedPrompt:
    """What a hinted problem is sampled from: the prompt ids the engine continues and the hint tokens the completion
    starts with (context, not the policy's; empty when the hint is in the prompt)."""

    sample_ids: list[int]
    prefix_ids: list[int]


HINT_PLACEMENTS: Registry[Callable[..., HintedPrompt]] = Registry("hint placement")


@HINT_PLACEMENTS.register("prompt")
def hint_in_prompt(problem: Problem, prompt_ids: list[int], hint: str, encode: PromptEncoder,
                   template: str) -> HintedPrompt:
    """The hint appended to the question (`template`, after a blank line); the completion is all the policy's."""
    return HintedPrompt(encode(with_instruction(problem.prompt, template.format(hint=hint))), [])


@HINT_PLACEMENTS.register("response")
def hint_in_response(problem: Problem, prompt_ids: list[int], hint: str, encode: PromptEncoder,
                     template: str) -> HintedPrompt:
    """The hint opens the answer: its tokens follow the question's prompt and the policy continues them."""
    ids = encode.tokenizer(hint, add_special_tokens=False)["input_ids"]
    return HintedPrompt(prompt_ids + list(ids), list(ids))


def after_prefix(prefix: list[int], completion: Completion, tokenizer) -> Completion:
    """A completion that starts with `prefix` (context tokens: logprob 0, not the policy's) and goes on with what the
    policy sampled; its text, what the rewards read, is all of it."""
    if not prefix:
        return completion
    ids = prefix + completion.token_ids
    context = [False] * len(prefix)
    return replace(completion, token_ids=ids, text=tokenizer.decode(ids, skip_special_tokens=True),
                   logprobs=[0.0] * len(prefix) + completion.logprobs,
                   entropies=[0.0] * len(prefix) + completion.entropies if completion.entropies else [],
                   policy_mask=context + (completion.policy_mask or [True] * len(completion.token_ids)))


class HintScaffold:
    """data.hints: after each generation round, the all-fail groups are sampled again with hints (up to
    `max_rounds` times, the hint growing while a hinted group still all fails); a hinted group with a signal replaces
    its unhinted group among the groups the step trains on."""

    def __init__(self, config: HintConfig, runner: EpisodeRunner, composer: RewardComposer, tasks: list[Task],
                 stats: CurriculumStats, params: SamplingParams, seed: int, seed_per_group: bool, device):
        self.config, self.runner, self.composer, self.tasks = config, runner, composer, tasks
        self.params, self.seed, self.seed_per_group, self.device = params, seed, seed_per_group, device
        self.schedule = HintSchedule(stats, config.target_pass_rate, config.initial_fraction, config.gain,
                                     config.min_fraction, config.max_fraction, config.prior_momentum)
        self.place = HINT_PLACEMENTS.get(config.placement)
        self.counts: Counter = Counter()
        self.pass_rates: list[float] = []  # of every hinted group this step
        self.fractions: list[float] = []  # of the hinted groups trained this step

    def _hinted_prompt(self, group: Group, fraction: float) -> tuple[HintedPrompt, str] | None:
        """The hinted prompt of a group's problem at `fraction`, or None when it has no hint (no source text, an
        environment task, or a hinted prompt over the token limit)."""
        task, problem = self.tasks[group.source], group.problem
        if isinstance(task, EnvTask):
            return None
        full = hint_text(self.config.source.name, self.config.source.args, problem)
        text = hint_prefix(full, fraction) if full else ""
        if not text:
            return None
        try:
            return self.place(problem, group.prompt_ids, text, self.runner.encode, self.config.template), text
        except DataError:  # the question with its hint is over data.max_prompt_tokens
            return None

    def rescue(self, step: int, round_index: int, groups: list[Group]) -> tuple[list[Group], list[Scored]]:
        """The round's groups with hinted groups in place of the all-fail ones they rescue, and the scorings of every
        hinted sample (their reward failures count like any other); the figures go to `step_metrics`."""
        out = list(groups)
        waiting = []  # (index in groups, current fraction)
        for i, group in enumerate(groups):
            key = prompt_key(self.tasks[group.source], group.problem)
            if group.scored.correct.any():
                self.schedule.observe_unhinted(key, float(group.scored.correct.float().mean()))
            else:
                waiting.append((i, self.schedule.fraction(key)))
        self.counts["groups"] += len(groups)
        self.counts["all_fail_groups"] += len(waiting)
        scorings = []
        for attempt in range(self.config.max_rounds):
            ready = []
            for i, fraction in waiting:
                hinted = self._hinted_prompt(groups[i], fraction)
                if hinted is None:
                    self.counts["unavailable_groups"] += attempt == 0
                else:
                    ready.append((i, fraction, *hinted))
            if not ready:
                break
            hinted_groups, scored = self._sample(step, round_index, attempt, groups, ready)
            scorings.append(scored)
            self.counts["hinted_samples_generated"] += len(ready) * self.params.n
            waiting = []
            for (i, fraction, _, text), hinted in zip(ready, hinted_groups):
                key = prompt_key(self.tasks[groups[i].source], groups[i].problem)
                rate = float(hinted.scored.correct.float().mean())
                self.pass_rates.append(rate)
                bigger = self.schedule.observe_hinted(key, fraction, rate)
                if float(hinted.scored.total.std()) > 0:  # a signal: the hinted group is trained
                    out[i] = replace(hinted, hint=Hint(text, fraction, self.config.placement))
                    self.fractions.append(fraction)
                else:
                    waiting.append((i, bigger))
        return out, scorings

    def step_metrics(self, trained: list[Group]) -> dict[str, float]:
        """The step's hint figures (and a fresh count for the next step): all-fail groups among the generated ones,
        rescued ones, the share of trained samples that were hinted, the hinted pass rate and hint fraction."""
        c = self.counts
        m = {"hints/all_fail_frac": c["all_fail_groups"] / max(c["groups"], 1),
             "hints/rescued_frac": len(self.fractions) / max(c["all_fail_groups"], 1),
             "hints/hinted_frac": sum(g.hint is not None for g in trained) / max(len(trained), 1),
             "hints/unavailable_groups": c["unavailable_groups"],
             "hints/hinted_samples_generated": c["hinted_samples_generated"],
             "hints/prior_fraction": self.schedule.prior}
        if self.pass_rates:
            m["hints/hinted_pass_rate"] = sum(self.pass_rates) / len(self.pass_rates)
        if self.fractions:
            m["hints/fraction_mean"] = sum(self.fractions) / len(self.fractions)
        self.counts, self.pass_rates, self.fractions = Counter(), [], []
        return m

    def _sample(self, step: int, round_index: int, attempt: int, groups: list[Group],
                ready: list[tuple[int, float, HintedPrompt, str]]) -> tuple[list[Group], Scored]:
        """Generate and score the hinted groups, each rank its block, every rank gets them all."""
        mine = shard(len(ready))
        generators = None
        if self.seed_per_group:
            generators = [group_generator(self.device(), self.seed, step, round_index, "hint", attempt, j)
                          for j in mine]
        block = ready[mine.start : mine.stop]
        work = [(self.tasks[groups[i].source], groups[i].problem) for i, *_ in block]
        _, sampled = self.runner.generate(work, self.params, generators, where="hinted problem",
                                          encoded=[hinted.sample_ids for _, _, hinted, _ in block])
        tokenizer = self.runner.tokenizer
        completions = [[after_prefix(hinted.prefix_ids, c, tokenizer) for c in group]
                       for (_, _, hinted, _), group in zip(block, sampled)]
        scored = self.composer.score([(task, problem, c.text, c.reward_fields(self.params.max_new_tokens))
                                      for (task, problem), group in zip(work, completions) for c in group])
        parts = all_gather_objects((completions, scored))
        completions = [g for part, _ in parts for g in part]
        scored = Scored.concat([s for _, s in parts])
        n = self.params.n
        return [Group(groups[i].source, groups[i].problem, groups[i].prompt_ids, completions[j],
                      scored.select(list(range(j * n, (j + 1) * n))), step - 1)
                for j, (i, *_) in enumerate(ready)], scored


class NoHints:
    """data.hints unset: groups are trained as generated."""

    def rescue(self, step: int, round_index: int, groups: list[Group]) -> tuple[list[Group], list[Scored]]:
        return groups, []

    def step_metrics(self, trained: list[Group]) -> dict[str, float]:
        return {}


def with_failures(scored: Scored, others: list[Scored]) -> Scored:
    """`scored` (the step's unhinted samples, what accuracy is measured on) with the reward failures of `others`
    (hinted samples) added, so the failure budget sees every reward call; the sample count stays the unhinted one, so
    a failing hint raises the failure rate, never hides it."""
    if not others:
        return scored
    failures = {name: sum((s.failures.get(name, Counter()) for s in others), scored.failures[name])
                for name in scored.failures}
    first = dict(scored.first_errors)
    for s in others:
        first = {**s.first_errors, **first}
    return replace(scored, failures=failures, first_errors=first)


def make_hints(config: HintConfig | None, **kwargs) -> HintScaffold | NoHints:
    """The hint scaffold data.hints describes, or NoHints."""
    return NoHints() if config is None else HintScaffold(config, **kwargs)
