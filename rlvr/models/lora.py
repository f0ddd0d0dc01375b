"""LoRA through peft (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"): only the adapter
weights train, and the reference policy is the same model with its adapters disabled, so no second copy of
the base model is loaded."""

from __future__ import annotations

import copy
from pathlib import Path

from transformers import PreTrainedModel

from rlvr.config import LoraSettings
from rlvr.errors import RlvrError

ADAPTER_DIR = "adapter"  # a checkpoint's adapter lives here, beside the merged model


def _peft():
    try:
        import peft
    except ImportError:
        raise RlvrError("model.lora needs peft: pip install 'rlvr[lora]' (or pip install peft).") from None
    return peft


def is_lora(model) -> bool:
    return hasattr(model, "peft_config")


def add_lora(model: PreTrainedModel, settings: LoraSettings):
    """`model` wrapped with fresh LoRA adapters; every base weight is frozen."""
    peft = _peft()
    config = peft.LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                             target_modules=settings.target_modules, task_type="CAUSAL_LM")
    return peft.get_peft_model(model, config)


def load_lora(model: PreTrainedModel, checkpoint: str | Path):
    """`model` (the base) with the trainable adapters saved in `checkpoint`."""
    return _peft().PeftModel.from_pretrained(model, str(Path(checkpoint) / ADAPTER_DIR), is_trainable=True)


def save_lora(model, tokenizer, path: str | Path) -> None:
    """The adapters in `path/adapter`, and the merged model (base + adapters) with its tokenizer in `path`, loadable
    with plain transformers. The merge runs on a copy, so training goes on with the adapters unmerged."""
    path = Path(path)
    model.save_pretrained(path / ADAPTER_DIR, safe_serialization=True)
    merged = copy.deepcopy(model).merge_and_unload()
    merged.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
