"""Prompt samplers and per-prompt statistics."""

from rlvr.curriculum.samplers import MixtureSampler

__all__ = ["MixtureSampler"]
