"""Tiny vision-language models for tests, built from configs (nothing downloaded): Idefics3 / SmolVLM-style
(rlvr.models.tiny_vlm) and Qwen2-VL-style (multimodal RoPE, image grids)."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image
from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.processing_utils import ProcessorMixin

from rlvr.models.loading import EOS, train_tokenizer
from rlvr.models.tiny_vlm import build_tiny_vlm

QWEN_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{% if m.content is string %}{{ m.content }}{% else %}"
    "{% for p in m.content %}{% if p.type == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ p.text }}{% endif %}{% endfor %}{% endif %}" + EOS + "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
TEXTS = ["how many red squares are there", "where is the blue circle", "answer 1 2 3 4 [0.1, 0.2, 0.5, 0.6]"]


class ImageOnlyQwen2VLProcessor(Qwen2VLProcessor):
    """Qwen2VLProcessor without its video half: the video processor needs torchvision, which this CPU environment
    does not install. Images go through Qwen2VLProcessor's own code."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        self.image_token, self.video_token = "<|image_pad|>", "<|video_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)


def tiny_qwen2_vl(seed: int = 0):
    """A Qwen2-VL-style model (vision tower with 2x2 patch merging, M-RoPE decoder) and its processor; a 28-56 pixel
    image becomes 1-4 image tokens."""
    tok = train_tokenizer(["<|user|><|assistant|>", *TEXTS], 256)
    tok.add_special_tokens({"additional_special_tokens": ["<|vision_start|>", "<|image_pad|>", "<|vision_end|>",
                                                         "<|video_pad|>"]})
    tok.chat_template = QWEN_TEMPLATE
    image_processor = Qwen2VLImageProcessorPil(min_pixels=28 * 28, max_pixels=56 * 56, patch_size=14, merge_size=2,
                                               temporal_patch_size=2)
    processor = ImageOnlyQwen2VLProcessor(image_processor=image_processor, tokenizer=tok, chat_template=QWEN_TEMPLATE)
    ids = tok.convert_tokens_to_ids
    config = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]}, pad_token_id=tok.pad_token_id,
                         eos_token_id=tok.eos_token_id, bos_token_id=None),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, in_chans=3),
        image_token_id=ids("<|image_pad|>"), video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"))
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    return model, processor


def tiny_idefics3(seed: int = 0):
    return build_tiny_vlm(TEXTS, seed=seed, image_size=32, hidden_size=32)


def noise_image(seed: int, size: tuple[int, int] = (48, 40)) -> Image.Image:
    return Image.fromarray(np.random.RandomState(seed).randint(0, 255, (*size, 3), dtype=np.uint8))


def image_prompt(*images, text: str = "how many red squares are there") -> list[dict]:
    return [{"role": "user", "content": [*({"type": "image", "image": im} for im in images),
                                         {"type": "text", "text": text}]}]
