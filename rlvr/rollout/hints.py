"""Hint scaffolding at rollout time (the `hints` collection stage, rlvr.rollout.stages): a group whose samples all
failed is sampled again with part of a reference solution as a hint, and the hinted group, when it holds a signal
(its rewards differ), is trained in its place.

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
from rlvr.envs.task import EnvTask
from rlvr.errors import DataError
from rlvr.models.prompts import PromptEncoder, with_instruction
from rlvr.registry import Registry
from rlvr.rewards.composite import Scored
from rlvr.rollout.base import Completion, SamplingParams
from rlvr.rollout.stages import CollectionStage, StageSetup, StepDraft, register_stage
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


@register_stage("hints")
class HintScaffold(CollectionStage):
    """data.hints: after each generation round, the all-fail groups are sampled again with hints (up to
    `max_rounds` times, the hint growing while a hinted group still all fails); a hinted group with a signal replaces
    its unhinted group among the groups the step trains on. Hinted samples stay out of `draft.generated` (accuracy,
    the curriculum); their scorings count for the failure budget."""

    enabled_by = "data.hints"

    def __init__(self, config: HintConfig, encode: PromptEncoder, tasks: list[Task], stats: CurriculumStats,
                 params: SamplingParams):
        self.config, self.encode, self.tasks, self.params = config, encode, tasks, params
        self.schedule = HintSchedule(stats, config.target_pass_rate, config.initial_fraction, config.gain,
                                     config.min_fraction, config.max_fraction, config.prior_momentum)
        self.place = HINT_PLACEMENTS.get(config.placement)
        self.counts: Counter = Counter()
        self.pass_rates: list[float] = []  # of every hinted group this step
        self.fractions: list[float] = []  # of the hinted groups trained this step

    @classmethod
    def configured(cls, setup: StageSetup) -> HintScaffold | None:
        hints = getattr(setup.data, "hints", None)
        return None if hints is None else cls(hints, setup.encode, setup.tasks, setup.stats, setup.params)

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
            return self.place(problem, group.prompt_ids, text, self.encode, self.config.template), text
        except DataError:  # the question with its hint is over data.max_prompt_tokens
            return None

    def after_round(self, draft: StepDraft, round_index: int, groups: list[Group]) -> list[Group]:
        """The round's groups with hinted groups in place of the all-fail ones they rescue; the scorings of every
        hinted sample go to `draft.side_scorings` (their reward failures count like any other), the figures to
        `metrics`."""
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
            hinted_groups, scored = self._sample(draft, round_index, attempt, groups, ready)
            draft.side_scorings.append(scored)
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
        return out

    def _sample(self, draft: StepDraft, round_index: int, attempt: int, groups: list[Group],
                ready: list[tuple[int, float, HintedPrompt, str]]) -> tuple[list[Group], Scored]:
        """Generate and score the hinted groups through the collector's generation path: sampled from the hinted
        prompts, completions opened by the hint's context tokens, and trained on the question's prompt alone."""
        hinted = [h for _, _, h, _ in ready]
        sampled, scored = draft.generate(
            (round_index, "hint", attempt), [(groups[i].source, groups[i].problem) for i, *_ in ready],
            prompts=[h.sample_ids for h in hinted], where="hinted problem",
            finish=lambda j, c: after_prefix(hinted[j].prefix_ids, c, self.encode.tokenizer))
        return [replace(g, prompt_ids=groups[i].prompt_ids) for (i, *_), g in zip(ready, sampled)], scored

    def metrics(self, trained: list[Group]) -> dict[str, float]:
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
