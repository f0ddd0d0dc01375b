"""How a causal LM takes a KV cache object across transformers releases."""

from __future__ import annotations

import functools
import inspect


def cache_keyword(model) -> str:
    """The keyword under which the model's forward takes a KV cache object: `cache` in newer transformers releases,
    `past_key_values` (deprecated there) in older ones. A peft model passes keywords on to its base model."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return _cache_keyword(type(base))


@functools.cache
def _cache_keyword(model_class: type) -> str:
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"
