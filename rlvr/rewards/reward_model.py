"""The `reward_model` reward: the score of a sequence-classification model (AutoModelForSequenceClassification,
as TRL's reward models are) for (prompt, reply), batched over a prompt group, with normalisation options.

Input: the conversation [user: prompt, assistant: reply] through the model's chat template when its tokenizer has
one, else prompt and reply as one text; longer inputs keep their last `max_tokens` tokens. With one label the
score is its logit; with several, the probability of `label` (default: the last)."""

from __future__ import annotations

import functools
from typing import Any

from rlvr.config import RewardModelSettings
from rlvr.rewards.loading import register_reward, split_settings
from rlvr.verifiers import guards


@functools.lru_cache(maxsize=2)
def load_reward_model(name: str, dtype: str, device: str) -> tuple[Any, Any]:
    """A sequence-classification model and its tokenizer, in eval mode, loaded once per process."""
    from transformers import AutoModelForSequenceClassification

    from rlvr.errors import RlvrError
    from rlvr.models.loading import DTYPES, load_tokenizer, resolve_device

    tokenizer = load_tokenizer(name, setting="reward_model args.model")
    try:
        model = AutoModelForSequenceClassification.from_pretrained(name, dtype=DTYPES[dtype])
    except (OSError, ValueError) as e:
        raise RlvrError(f"reward_model: cannot load a sequence-classification model from '{name}': {e}") from None
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model.to(resolve_device(device, "reward_model args.device")).eval().requires_grad_(False), tokenizer


def input_ids(tokenizer, prompt: Any, reply: str, max_tokens: int) -> list[int]:
    """(prompt, reply) as the reward model reads it: the chat template's conversation, or the two texts joined."""
    if getattr(tokenizer, "chat_template", None):
        messages = list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        ids = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": reply}], tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    else:
        ids = tokenizer.encode(f"{guards.prompt_text(prompt)}\n{reply}", add_special_tokens=False)
    return ids[-max_tokens:]


def batched_logits(model, sequences: list[list[int]], batch_size: int, pad: int):
    """`sequences` in batches of `batch_size`, each right padded with `pad` and run through `model` without
    gradients: yields (the batch's sequences, their logits)."""
    import torch

    device = next(model.parameters()).device
    for start in range(0, len(sequences), batch_size):
        chunk = sequences[start : start + batch_size]
        width = max(len(s) for s in chunk)
        ids = torch.tensor([s + [pad] * (width - len(s)) for s in chunk], device=device)
        mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in chunk], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits
        yield chunk, logits


def raw_scores(model, sequences: list[list[int]], label: int | None, batch_size: int) -> list[float]:
    """The score of each token sequence: the logit of a one-label model, else the probability of `label`. Right
    padded: the model pools at each row's last real token (found from pad_token_id)."""
    import torch

    out: list[float] = []
    for _, logits in batched_logits(model, sequences, batch_size, model.config.pad_token_id):
        logits = logits.float()
        if logits.shape[-1] == 1:
            out += logits[:, 0].tolist()
        else:
            out += torch.softmax(logits, -1)[:, -1 if label is None else label].tolist()
    return out


def normalized(scores: list[float], how: str) -> list[float]:
    """none; sigmoid; group: z-scores over the call's samples (one prompt group), 0 for a group of one."""
    import torch

    t = torch.tensor(scores, dtype=torch.float64)
    if how == "sigmoid":
        t = torch.sigmoid(t)
    elif how == "group":
        t = (t - t.mean()) / (t.std(unbiased=False) + 1e-6) if len(t) > 1 else torch.zeros_like(t)
    return t.tolist()


@register_reward("reward_model", RewardModelSettings, batched=True,
                 preload=lambda s: load_reward_model(s.model, s.dtype, s.device))
def reward_model(prompts: list, completions: list[str], **fields: Any) -> list[float]:
    """A sequence-classification reward model's score of each (prompt, reply) of a prompt group, normalised
    (none, sigmoid, or z-scores within the group), times `scale` plus `shift`. Settings:
    rlvr.config.RewardModelSettings (rewards.functions[].args)."""
    s, _ = split_settings(RewardModelSettings, fields)
    model, tokenizer = load_reward_model(s.model, s.dtype, s.device)
    if s.label is not None and not 0 <= s.label < model.config.num_labels:
        raise ValueError(f"reward_model: label={s.label}, but the model has {model.config.num_labels} labels")
    sequences = [input_ids(tokenizer, p, c, s.max_tokens) for p, c in zip(prompts, completions)]
    scores = normalized(raw_scores(model, sequences, s.label, s.batch_size), s.normalize)
    return [s.scale * x + s.shift for x in scores]
