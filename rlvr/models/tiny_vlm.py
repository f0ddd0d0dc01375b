"""A tiny vision-language model built from configs, for tests and the CPU learning demo: an Idefics3 (SmolVLM-style)
vision tower and connector in front of a small Llama decoder, a BPE tokenizer trained locally with the processor's
special tokens, and an image processor with explicit small sizes. Nothing is downloaded."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

from rlvr.models.loading import EOS, train_tokenizer

# A chat template over text and image parts (the processor expands each <image> into its image tokens).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{% if m.content is string %}{{ m.content }}{% else %}"
    "{% for p in m.content %}{% if p.type == 'image' %}<image>{% else %}{{ p.text }}{% endif %}{% endfor %}"
    "{% endif %}" + EOS + "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
IMAGE_TOKENS = ["<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>"]


def build_tiny_vlm(texts: Iterable[str], seed: int = 0, image_size: int = 64, patch_size: int = 8,
                   hidden_size: int = 64, num_layers: int = 2, vocab_size: int = 256
                   ) -> tuple[Idefics3ForConditionalGeneration, Idefics3Processor]:
    """A randomly initialised Idefics3-style model and its processor. Each image is resized to `image_size` square
    and becomes (image_size / patch_size)^2 / 4 image tokens (the connector's pixel shuffle merges 2x2 patches)."""
    tokenizer = train_tokenizer(["<|user|><|assistant|><|system|>", *texts], vocab_size)
    tokenizer.add_special_tokens({"additional_special_tokens": IMAGE_TOKENS})
    tokenizer.chat_template = CHAT_TEMPLATE
    image_processor = Idefics3ImageProcessorPil(size={"longest_edge": image_size},
                                                max_image_size={"longest_edge": image_size}, do_image_splitting=False)
    processor = Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer,
                                  image_seq_len=(image_size // patch_size) ** 2 // 4, chat_template=CHAT_TEMPLATE)
    config = Idefics3Config(
        text_config=dict(model_type="llama", vocab_size=len(tokenizer), hidden_size=hidden_size,
                         intermediate_size=hidden_size * 4, num_hidden_layers=num_layers, num_attention_heads=4,
                         num_key_value_heads=4, max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None, tie_word_embeddings=True),
        vision_config=dict(hidden_size=hidden_size, intermediate_size=hidden_size * 2, num_hidden_layers=num_layers,
                           num_attention_heads=4, image_size=image_size, patch_size=patch_size),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"), scale_factor=2, pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, processor
