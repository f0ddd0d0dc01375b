"""`rollout.engine: auto`: the static-cache engine where it is fastest (CUDA, a covered model family), the hf engine
elsewhere (on a CPU the two are within noise of each other for small models, and hf keeps CPU runs reproducing
earlier results exactly; see docs/engines.md)."""

from __future__ import annotations

import sys

from rlvr.models.head import causal_lm
from rlvr.models.vision import is_vision_model
from rlvr.rollout.base import ENGINES
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.rollout.static import StaticCacheEngine, unsupported_reason


@ENGINES.register("auto")
def auto_engine(model, tokenizer, batch_size: int = 256):
    """static on CUDA for Llama/Qwen2/Qwen3/Mistral models, hf otherwise."""
    on_cuda = causal_lm(model).get_input_embeddings().weight.device.type == "cuda"
    if on_cuda and is_vision_model(causal_lm(model)):
        print("note: rollout.engine=auto: the static engine does not prefill image features, so this vision-language "
              "model generates with the hf engine", file=sys.stderr)
    elif on_cuda and unsupported_reason(model) is None:
        return StaticCacheEngine(model, tokenizer, batch_size)
    return HFRolloutEngine(model, tokenizer, batch_size)
