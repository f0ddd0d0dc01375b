"""Shared set-up of the GPU benchmarks: a Qwen2.5-0.5B-shaped decoder with random weights and a BPE tokenizer
trained here on the benchmark's own prompts (nothing is downloaded); with --cpu, a small Qwen2 of the same family on
the CPU, so the same code paths are rehearsed where no GPU is (tests/test_gpu_rehearsal.py)."""

from __future__ import annotations

import random
import sys

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from rlvr.models.loading import train_tokenizer

# Qwen2.5-0.5B's shape: 24 layers, hidden 896, 14 query / 2 key-value heads, tied embeddings, 151,936-token vocabulary.
QWEN25_05B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True,
                  bos_token_id=None)


# The same architecture at a size a CPU steps through in seconds (the rehearsal of the GPU benchmarks).
SMALL_QWEN2 = dict(QWEN25_05B, vocab_size=4096, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2)


def require_cuda(script: str, cpu: bool = False) -> None:
    """Exit with a message unless CUDA is here, or the benchmark runs its --cpu rehearsal."""
    if cpu:
        return
    if not torch.cuda.is_available():
        sys.exit(f"{script} measures CUDA throughput and needs a CUDA GPU; torch {torch.__version__} sees none here. "
                 f"On a CPU, run benchmarks/generate.py (decoding) or benchmarks/cpu_step.py (training steps); "
                 f"`{script} --cpu` rehearses this benchmark's code on the CPU at a small shape.")


def arithmetic_prompts(count: int, seed: int = 0) -> list[str]:
    """Prompts like the TRL anchor's: 'Compute a + b * c. Think step by step and give the final answer.'"""
    rng = random.Random(seed)
    return [f"Compute {rng.randint(1, 999)} + {rng.randint(1, 999)} * {rng.randint(1, 999)}. Think step by step and "
            f"give the final answer." for _ in range(count)]


def length_mod_7(prompt: str, completion: str, **_) -> float:
    """The anchor's reward: the completion's length in characters, modulo 7 (varies inside every group). rlvr's
    reward workers load it from this file."""
    return float(len(completion) % 7)


def tokenizer_and_model(dtype: torch.dtype = torch.bfloat16, device: str = "cuda", seed: int = 0,
                        shape: dict | None = None):
    """The local tokenizer (vocabulary ~1,000; the model keeps Qwen2.5's 151,936 rows) and the random-init model
    (`shape`: Qwen2.5-0.5B's, or SMALL_QWEN2)."""
    tokenizer = train_tokenizer(arithmetic_prompts(2000, seed=1), 1000)
    config = Qwen2Config(**(shape or QWEN25_05B), eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    with torch.device(device):  # initialised where it runs: seconds, not a minute on the CPU
        model = Qwen2ForCausalLM(config)
    return tokenizer, model.to(dtype).eval()


def bench_setup(cpu: bool) -> dict:
    """Where a GPU benchmark runs: on CUDA in bf16 at Qwen2.5-0.5B's shape, or (--cpu) its rehearsal in float32 at
    SMALL_QWEN2's."""
    if cpu:
        return {"device": "cpu", "dtype": torch.float32, "shape": SMALL_QWEN2}
    return {"device": "cuda", "dtype": torch.bfloat16, "shape": QWEN25_05B}


def device_name(cpu: bool) -> str:
    return "CPU (rehearsal at a small shape)" if cpu else torch.cuda.get_device_name()


def synchronize() -> None:
    """Wait for the GPU's queued work (nothing to wait for on a CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
