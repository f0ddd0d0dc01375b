"""Vision-language policies: images in conversational prompts, the processor's outputs travelling with each prompt's
token ids, and the model inputs (pixels, grid sizes, multimodal RoPE positions) an engine and the loss hand the model.

A prompt with images is a conversation whose user content holds `{"type": "image", "image": value}` parts (value: a
file path, bytes, a `datasets` Image dict or a PIL image), the format of Hugging Face processors' chat templates. The
`VisionPromptEncoder` renders it with the processor and returns `PromptIds`: the token ids (image placeholders
expanded) plus the processor's other outputs, which every later stage reads with `prompt_inputs`. Text-only prompts and
text-only models never meet any of this: their ids are plain lists and their positions are computed as before.
"""

from __future__ import annotations

from typing import Any

import torch

from rlvr.errors import DataError
from rlvr.models.images import image_parts, load_image, without_pixels
from rlvr.models.prompts import Prompt, PromptEncoder

# Processor outputs aligned with the tokens (rebuilt from the batch's ids), not per-image inputs.
TOKEN_ALIGNED = ("input_ids", "attention_mask", "mm_token_type_ids", "token_type_ids")


class PromptIds(list):
    """A prompt's token ids (a plain list of ints wherever ids travel) plus `inputs`, the model inputs that go with
    them: the processor's pixel values, image grid sizes, pixel masks. Pickles with its inputs (async workers)."""

    def __init__(self, ids, inputs: dict[str, torch.Tensor]):
        super().__init__(ids)
        self.inputs = inputs


def prompt_inputs(prompt_ids: list[int]) -> dict[str, torch.Tensor]:
    """The model inputs that travel with a prompt's ids: empty for a text prompt."""
    return getattr(prompt_ids, "inputs", {})


def is_vision_model(model_or_config) -> bool:
    """Whether a model (or its config) has a vision tower: an image-text-to-text model."""
    config = getattr(model_or_config, "config", model_or_config)
    return getattr(config, "vision_config", None) is not None


def image_placeholder_ids(model) -> tuple[int, ...]:
    """The token ids a vision-language model reads as places for image features (empty for a text model)."""
    config = getattr(model, "config", None)
    if not is_vision_model(config):
        return ()
    keys = ("image_token_id", "image_token_index", "video_token_id")
    return tuple(sorted({v for k in keys if isinstance(v := getattr(config, k, None), int)}))


# ------------------------------------------------------------------------------------------------------------- encoding


class VisionPromptEncoder(PromptEncoder):
    """Prompts through a multimodal processor: a conversation with images is rendered by the processor's chat template,
    its images turned into pixel values and the image placeholders expanded; the result is `PromptIds` carrying the
    processor's per-image outputs. Prompts without images are encoded as by `PromptEncoder`."""

    def __init__(self, processor, chat_template: str = "auto", system_prompt: str | None = None,
                 max_tokens: int = 1024, limit_source: str = "data.max_prompt_tokens",
                 template_kwargs: dict[str, Any] | None = None):
        tokenizer = processor.tokenizer  # text-only prompts use the processor's template when the tokenizer has none
        if not getattr(tokenizer, "chat_template", None) and getattr(processor, "chat_template", None):
            tokenizer.chat_template = processor.chat_template
        super().__init__(tokenizer, chat_template, system_prompt, max_tokens, limit_source, template_kwargs)
        self.processor = processor

    def __call__(self, prompt: Prompt, where: str = "") -> list[int]:
        parts = image_parts(prompt)
        if not parts:
            return super().__call__(prompt, where)
        at = f" ({where})" if where else ""
        if not self.use_template:
            raise DataError(f"Prompt{at} has images, but model.chat_template=never; images are placed by the "
                            "processor's chat template.")
        images = []
        for i, part in enumerate(parts, 1):
            try:
                images.append(load_image(part.get("image")))
            except DataError as e:
                raise DataError(f"Prompt{at}, image {i}: {e}") from None
        text = self.processor.apply_chat_template(without_pixels(self.messages(prompt)), tokenize=False,
                                                  add_generation_prompt=True, **self.template_kwargs)
        out = self.processor(text=[text], images=[images], return_tensors="pt", add_special_tokens=False)
        ids = out["input_ids"][0].tolist()
        if len(ids) > self.max_tokens:
            raise DataError(f"Prompt{at} has {len(ids)} tokens with its image tokens, over the limit of "
                            f"{self.max_tokens} ({self.limit_source}). Raise the limit, or make the processor's images "
                            "smaller (fewer image tokens).")
        return PromptIds(ids, {k: v for k, v in out.items() if k not in TOKEN_ALIGNED})


def make_prompt_encoder(tokenizer, processor=None, **kwargs) -> PromptEncoder:
    """The prompt encoder for a policy: through its processor when it has one (a vision-language model)."""
    return VisionPromptEncoder(processor, **kwargs) if processor is not None else PromptEncoder(tokenizer, **kwargs)


# ---------------------------------------------------------------------------------------------------------- model inputs


def collate_inputs(rows: list[dict[str, torch.Tensor]], device: torch.device | str | None = None
                   ) -> dict[str, torch.Tensor]:
    """The per-prompt model inputs of a batch's rows as one set of keyword arguments: each input concatenated along its
    first dimension in row order (Qwen-VL's patches and grid sizes, LLaVA's images), zero-padded in the others where
    rows differ (Idefics3's images per sample, as its processor pads them: all-zero images are skipped by the model)."""
    out: dict[str, torch.Tensor] = {}
    for key in dict.fromkeys(k for row in rows for k in row):
        values = [row[key] for row in rows if key in row]
        widest = [max(v.shape[d] for v in values) for d in range(values[0].dim())]
        padded = []
        for v in values:
            pad = [p for d in reversed(range(1, v.dim())) for p in (0, widest[d] - v.shape[d])]
            padded.append(torch.nn.functional.pad(v, pad) if any(pad) else v)
        out[key] = torch.cat(padded).to(device) if device is not None else torch.cat(padded)
    return out


def _rope_index(model):
    """The multimodal RoPE index function of a Qwen-VL-style model (`get_rope_index`), or None."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = getattr(base, "model", None)
    return getattr(inner, "get_rope_index", None) if is_vision_model(base) else None


def model_positions(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Position ids for a left-padded batch: each row's real tokens counted from 0 ([B, L]); for a Qwen-VL-style
    model with images, its multimodal RoPE positions [3, B, L] (temporal, height, width for image tokens; text
    continuing after them), computed from the ids with the model's own `get_rope_index` (Wang et al. 2024, Qwen2-VL)."""
    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    rope_index = _rope_index(model) if "image_grid_thw" in inputs else None
    if rope_index is None:
        return positions
    types = (input_ids == model.config.image_token_id).int()
    positions, _ = rope_index(input_ids=input_ids, mm_token_type_ids=types, image_grid_thw=inputs["image_grid_thw"],
                              attention_mask=attention_mask)
    return positions


def next_positions(positions: torch.Tensor) -> torch.Tensor:
    """The position [B] of the token after each row's last one (a multimodal row's last token is text: one value)."""
    last = positions[..., -1]
    return (last if positions.dim() == 2 else last.amax(0)) + 1


# ------------------------------------------------------------------------------------------------------------- freezing


def freeze_vision(model) -> int:
    """Freeze everything but the language side (the decoder holding the input embeddings, and the LM head): the vision
    tower and its projector/connector stay as loaded, as the visual RFT recipes do (Liu et al. 2025, Visual-RFT).
    Returns the number of parameters frozen."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = getattr(base, "model", base)
    embeddings = base.get_input_embeddings()
    frozen = 0
    for child in inner.children():
        if any(m is embeddings for m in child.modules()):
            continue
        for p in child.parameters():
            if p.requires_grad:
                p.requires_grad_(False)
                frozen += p.numel()
    return frozen
