"""The `process_reward_model` process reward: a learned process reward model (PRM) scores each step of a completion.

Steps are the non-empty pieces of the completion between `separator`s (lines by default). With a
sequence-classification head (AutoModelForSequenceClassification, as the `reward_model` reward loads one) the model
reads (prompt, completion up to the end of step k) for each k and its score is step k's; with a token-classification
head (AutoModelForTokenClassification, the PRMs of Math-Shepherd and PURE) one forward over (prompt, completion) is
read at each step's last token. A step's reward is `score`: p(label), p(label) - p(other label) of a two-label
head (PURE's p(good) - p(bad)), or the logit of a one-label head."""

from __future__ import annotations

import functools
from typing import Any

from rlvr.config import ProcessRewardModelSettings
from rlvr.rewards.process import register_process_reward
from rlvr.rewards.reward_model import batched_logits, input_ids
from rlvr.verifiers.verdict import SpanScore


def step_spans(completion: str, separator: str) -> list[tuple[int, int]]:
    """[start, end) of each non-empty piece of `completion` between separators, surrounding whitespace excluded."""
    spans, start = [], 0
    for piece in completion.split(separator):
        stripped = piece.strip()
        if stripped:
            first = start + piece.index(stripped)
            spans.append((first, first + len(stripped)))
        start += len(piece) + len(separator)
    return spans


@functools.lru_cache(maxsize=2)
def load_process_reward_model(name: str, head: str, dtype: str, device: str) -> tuple[Any, Any, str]:
    """(model, tokenizer, head) in eval mode, loaded once per process; `head` auto is read from the architecture."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoModelForTokenClassification

    from rlvr.errors import RlvrError
    from rlvr.models.loading import DTYPES, load_tokenizer, resolve_device

    try:
        config = AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as e:
        raise RlvrError(f"process_reward_model: cannot read a model config from '{name}': {e}") from None
    if head == "auto":
        head = "token" if any("TokenClassification" in a for a in config.architectures or []) else "sequence"
    loader = AutoModelForTokenClassification if head == "token" else AutoModelForSequenceClassification
    try:
        model = loader.from_pretrained(name, dtype=DTYPES[dtype])
    except (OSError, ValueError) as e:
        raise RlvrError(f"process_reward_model: cannot load a {head}-classification model from '{name}': {e}") \
            from None
    tokenizer = load_tokenizer(name, setting="rewards.step_reward.args.model")
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    model = model.to(resolve_device(device, "rewards.step_reward.args.device"))
    return model.eval().requires_grad_(False), tokenizer, head


def head_scores(logits, how: str, label: int | None) -> list[float]:
    """Per row of logits [n, labels]: the logit of a one-label head ('logit'), p(label) ('probability'), or
    p(label) - p(the other label) of a two-label head ('difference')."""
    import torch

    logits = logits.float()
    labels = logits.shape[-1]
    if how == "logit":
        if labels != 1:
            raise ValueError(f"process_reward_model: score=logit needs a one-label head, the model has {labels}")
        return logits[:, 0].tolist()
    chosen = labels - 1 if label is None else label
    if not 0 <= chosen < labels:
        raise ValueError(f"process_reward_model: label={label}, but the model has {labels} labels")
    probs = torch.softmax(logits, -1)
    if how == "probability":
        return probs[:, chosen].tolist()
    if labels != 2:
        raise ValueError(f"process_reward_model: score=difference needs a two-label head, the model has {labels}")
    return (probs[:, chosen] - probs[:, 1 - chosen]).tolist()


def _forward(model, sequences: list[list[int]], batch_size: int) -> list:
    """The logits of each sequence (right padded, so a row's positions are its own), batch by batch: [labels] per
    sequence for a sequence head (pooled at its last real token), [length, labels] for a token head."""
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    out = []
    for chunk, logits in batched_logits(model, sequences, batch_size, pad):
        out += [row[: len(s)] if row.dim() == 2 else row for row, s in zip(logits, chunk)]
    return out


def token_head_inputs(tokenizer, prompt: Any, completion: str, ends: list[int], max_tokens: int
                      ) -> tuple[list[int], list[int]]:
    """A token head's input, the prompt's text and the completion on the next line as plain text, and the position
    of the token holding each step's last character (from the tokenizer's offsets); the last `max_tokens` kept."""
    from rlvr.verifiers import guards

    head = f"{guards.prompt_text(prompt)}\n"
    encoded = tokenizer(head + completion, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = list(encoded["input_ids"]), encoded["offset_mapping"]
    positions = [next(i for i, (_, stop) in enumerate(offsets) if stop >= len(head) + end) for end in ends]
    cut = max(0, len(ids) - max_tokens)
    return ids[cut:], [max(p - cut, 0) for p in positions]


def process_reward_model(prompt: Any, completion: str, **fields: Any) -> list[SpanScore]:
    """Each step (piece between separators) of the completion scored by the PRM. Settings:
    rlvr.config.ProcessRewardModelSettings (rewards.step_reward.args)."""
    import torch

    s = ProcessRewardModelSettings(**{k: v for k, v in fields.items() if k in ProcessRewardModelSettings.model_fields})
    model, tokenizer, head = load_process_reward_model(s.model, s.head, s.dtype, s.device)
    spans = step_spans(completion, s.separator)
    if not spans:
        return []
    if head == "sequence":
        sequences = [input_ids(tokenizer, prompt, completion[:end], s.max_tokens) for _, end in spans]
        logits = torch.stack(_forward(model, sequences, s.batch_size))
    else:
        ids, positions = token_head_inputs(tokenizer, prompt, completion, [end for _, end in spans], s.max_tokens)
        (per_token,) = _forward(model, [ids], 1)
        logits = per_token[positions]
    scores = head_scores(logits, s.score, s.label)
    return [SpanScore(start, end, score) for (start, end), score in zip(spans, scores)]


def preload(settings: ProcessRewardModelSettings) -> None:
    """Load the PRM in a reward worker before its first call (outside any item's time limit)."""
    load_process_reward_model(settings.model, settings.head, settings.dtype, settings.device)


register_process_reward("process_reward_model", ProcessRewardModelSettings, preload)(process_reward_model)
