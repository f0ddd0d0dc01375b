"""Prompt samplers, group filters and the per-prompt / per-source statistics they use (stage 1 of a step: which
prompts to generate for, and which generated groups to train on).

May import tasks and below; independent of envs."""

from rlvr.curriculum.filters import GROUP_FILTERS, GroupFilter, make_filter
from rlvr.curriculum.samplers import SAMPLERS, MixtureSampler, PromptSampler, make_sampler
from rlvr.curriculum.stats import CurriculumStats, GroupOutcome, prompt_key

__all__ = ["GROUP_FILTERS", "SAMPLERS", "CurriculumStats", "GroupFilter", "GroupOutcome", "MixtureSampler",
           "PromptSampler", "make_filter", "make_sampler", "prompt_key"]
