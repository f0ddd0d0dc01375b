"""Load a policy and its tokenizer: any Hugging Face causal LM (hub name or local directory), a GGUF model (a .gguf
file or a packaged model's short name, dequantized once into a cached HF directory: rlvr.models.gguf), or a tiny
config-built model with a BPE tokenizer trained locally on the task's text."""

from __future__ import annotations

import functools
import logging
import os
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoProcessor,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.utils import logging as hf_logging

from rlvr.config import ModelConfig, TinyModelConfig
from rlvr.errors import RlvrError
from rlvr.models.gguf import PACKAGED, resolve_model_name
from rlvr.models.vision import freeze_vision, is_vision_model

TINY = "tiny"
PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"

hf_logging.disable_progress_bar()

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on `texts`; digits are always single tokens."""
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, EOS, UNK], show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS, unk_token=UNK)


def build_tiny_model(spec: TinyModelConfig, tokenizer: PreTrainedTokenizerBase, seed: int) -> PreTrainedModel:
    """A small randomly initialised Llama- or Qwen2-style decoder sized for `tokenizer`."""
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    if spec.architecture == "qwen2":
        return Qwen2ForCausalLM(Qwen2Config(**common))
    return LlamaForCausalLM(LlamaConfig(**common))


def _hub_cached(name: str) -> bool:
    """Whether the hub model `name` is in the local Hugging Face cache (its config.json at least)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # an invalid repo id and the like: not cached
        return False


@functools.cache
def hub_unreachable_reason(endpoint: str, timeout_s: float = 5.0) -> str | None:
    """Why the hub at `endpoint` cannot be reached (HF_HUB_OFFLINE, no DNS, refused, timed out), or None.
    One quick request instead of the libraries' retries."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return None  # it answered
    except (OSError, ValueError) as e:
        return f"{endpoint} cannot be reached: {getattr(e, 'reason', e)}"
    return None


def check_model_reachable(name: str, setting: str = "model.name") -> None:
    """A hub name (not a local directory) must be in the local cache or the hub reachable; otherwise fail at once,
    saying how to point `setting` (the field that gave `name`) at a local directory."""
    if name == TINY or name.lower() in PACKAGED or Path(name).expanduser().exists() or _hub_cached(name):
        return
    reason = hub_unreachable_reason(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    if reason:
        raise RlvrError(
            f"model '{name}' is not a local directory, not in the Hugging Face cache, and the hub cannot be used "
            f"({reason}). Download it where there is network access (huggingface-cli download {name} --local-dir "
            f"DIR), copy DIR here and set {setting}=DIR"
            + (" (or model.tokenizer=DIR for a tokenizer)." if setting == "model.name" else ".")
        )


def resolve_device(name: str = "auto", setting: str = "model.device") -> torch.device:
    """A device setting (`model.device`, `teacher.device`, a reward model's `device`: `setting` names it in the
    errors) as a torch device: auto is CUDA when available (the process's current GPU), else the CPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RlvrError(f"{setting}={name}, but torch sees no CUDA device here (torch {torch.__version__}). Use "
                        f"{setting}=auto or cpu, or install a CUDA build of torch.")
    device = torch.device(name)
    if device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    if device.index >= torch.cuda.device_count():
        raise RlvrError(f"{setting}={name}, but this machine has {torch.cuda.device_count()} CUDA device(s) "
                        f"(cuda:0 to cuda:{torch.cuda.device_count() - 1}).")
    return device


def _check_local(name: str, setting: str = "model.name") -> None:
    p = Path(name).expanduser()
    looks_local = p.exists() or name.startswith(("/", ".", "~")) or name.count("/") > 1
    if not looks_local:
        check_model_reachable(name, setting)
        return
    if not p.is_dir():
        raise RlvrError(
            f"{setting} '{name}' does not exist. Give an existing directory saved with save_pretrained "
            f"(config.json + weights), a .gguf file, a packaged model ({', '.join(PACKAGED)}), "
            + ("a hub name like 'Qwen/Qwen2.5-0.5B-Instruct', or 'tiny'." if setting == "model.name" else
               "or a hub name like 'Qwen/Qwen2.5-0.5B-Instruct'.")
        )
    if not (p / "config.json").is_file():
        raise RlvrError(f"{setting} '{name}' is a directory without config.json; point it at a saved HF model "
                        "directory.")


def model_source(cfg: ModelConfig, setting: str = "model.name") -> str:
    """What model.name (with model.gguf_file) loads from: a GGUF model's cached HF directory (converted on first
    use), anything else as written. `setting` is the field cfg.name came from (teacher.name, ...), for the errors."""
    return cfg.name if cfg.name == TINY else resolve_model_name(cfg.name, cfg.gguf_file, setting)


def load_tokenizer(name: str, trust_remote_code: bool = False, setting: str = "model.name") -> PreTrainedTokenizerBase:
    """The tokenizer of an HF directory or hub name, or of a GGUF model (its cached directory); errors name
    `setting`, the field that gave `name`."""
    name = resolve_model_name(name, setting=setting)
    _check_local(name, setting)
    try:
        tok = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as e:
        raise RlvrError(f"Could not load a tokenizer from '{name}': {e}") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def enable_activation_checkpointing(model: PreTrainedModel) -> None:
    """Recompute each decoder layer's activations in backward (transformers' gradient checkpointing, renamed
    activation checkpointing in transformers 5.2x)."""
    (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()


def load_model(cfg: ModelConfig, name: str | None = None, setting: str = "model.name") -> PreTrainedModel:
    """The model `name` (default model.name, with model.gguf_file) loaded as cfg says (dtype, attention,
    gradient checkpointing); errors name `setting`, the field that gave it (teacher.name, a judge's args.model)."""
    name = (model_source(cfg, setting) if name is None or name == cfg.name
            else resolve_model_name(name, setting=setting))
    _check_local(name, setting)
    kwargs = {"dtype": DTYPES[cfg.dtype], "trust_remote_code": cfg.trust_remote_code}
    if cfg.attn_implementation:
        kwargs["attn_implementation"] = cfg.attn_implementation
    try:
        config = AutoConfig.from_pretrained(name, trust_remote_code=cfg.trust_remote_code)
        # A vision-language model (a vision tower in its config) loads through the image-text-to-text auto class.
        auto = AutoModelForImageTextToText if is_vision_model(config) else AutoModelForCausalLM
        model = auto.from_pretrained(name, **kwargs)
    except OSError as e:
        raise RlvrError(
            f"Could not load model '{name}': {e}\nGive a local HF directory, or a hub name reachable from this machine."
        ) from None
    if cfg.gradient_checkpointing:
        enable_activation_checkpointing(model)
        model.config.use_cache = False
    if cfg.freeze_vision and is_vision_model(model):
        freeze_vision(model)
    return model


def load_processor(name: str, trust_remote_code: bool = False):
    """The multimodal processor (image processor, tokenizer, chat template) of a vision-language model."""
    try:
        return AutoProcessor.from_pretrained(resolve_model_name(name), trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError, ImportError) as e:
        raise RlvrError(f"'{name}' is a vision-language model, but its processor could not be loaded: "
                        f"{type(e).__name__}: {e}") from None


def load_policy(
    cfg: ModelConfig, seed: int, corpus: Iterable[str] | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The trainable policy and its tokenizer. `corpus` trains the tokenizer of a tiny model."""
    if cfg.name == TINY:
        if corpus is None:
            raise RlvrError("model.name=tiny needs text to train its tokenizer on; pass the task's prompts.")
        tokenizer = train_tokenizer(corpus, cfg.tiny.vocab_size)
        model = build_tiny_model(cfg.tiny, tokenizer, seed)
        if cfg.dtype not in ("auto", "float32"):
            model = model.to(DTYPES[cfg.dtype])
    else:
        tokenizer = load_tokenizer(cfg.tokenizer or model_source(cfg), cfg.trust_remote_code)
        model = load_model(cfg)
    if model.generation_config is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    logging.getLogger("transformers").setLevel(logging.ERROR)
    return model, tokenizer


def save_pretrained(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, path: str | Path,
                    state_dict: dict[str, torch.Tensor] | None = None) -> None:
    """Write model and tokenizer (and a vision-language model's processor) so plain `from_pretrained` loads them (a
    LoRA model: merged, plus its adapter);
    `state_dict` gives the full weights of a model whose own parameters are shards (FSDP2)."""
    from rlvr.models.lora import is_lora, save_lora

    if is_lora(model):
        save_lora(model, tokenizer, path)
    else:
        model.save_pretrained(path, safe_serialization=True, state_dict=state_dict)
        tokenizer.save_pretrained(path)
    base = model.get_base_model() if is_lora(model) else model
    if is_vision_model(base):  # the processor (image processor, chat template) from where the model was loaded
        load_processor(base.name_or_path).save_pretrained(path)
