"""The one batch object that moves forward through a step: token layout, masks, logprobs, rewards,
advantages, group ids and per-sample metadata."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch

from rlvr.models.vision import collate_inputs, prompt_inputs
from rlvr.rollout.base import Completion


@dataclass
class RolloutBatch:
    input_ids: torch.Tensor  # [N, P + C]: left-padded prompt, right-padded completion
    attention_mask: torch.Tensor  # [N, P + C]
    completion_mask: torch.Tensor  # [N, C] float, 1 on tokens the policy sampled (0 on padding and environment tokens)
    rollout_logprobs: torch.Tensor  # [N, C] from the sampler
    rollout_entropy: torch.Tensor  # [N, C] sampling entropy per token (zeros unless the engine returned it)
    group_ids: torch.Tensor  # [N]
    truncated: torch.Tensor  # [N] bool
    loss_mask: torch.Tensor | None = None  # [N, C] tokens that receive policy gradient (subset of completion_mask)
    scores: torch.Tensor | None = None  # [N] total reward
    advantages: torch.Tensor | None = None  # [N, C]
    old_logprobs: torch.Tensor | None = None  # [N, C]
    ref_logprobs: torch.Tensor | None = None  # [N, C]
    teacher_logprobs: torch.Tensor | None = None  # [N, C] under the teacher (on-policy distillation), 0 off the mask
    metadata: list[dict[str, Any]] = field(default_factory=list)
    # Per row, the model inputs of its prompt besides the ids (a vision-language prompt's pixels; the n rows of a
    # group share one dict); None when no prompt has any (text-only).
    model_inputs: list[dict[str, torch.Tensor]] | None = None

    @property
    def completion_width(self) -> int:
        return self.completion_mask.shape[1]

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def select(self, index: torch.Tensor) -> RolloutBatch:
        """The rows `index` (a LongTensor), trimmed to the widest completion among them."""
        picked = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                picked[f.name] = value[index]
            elif f.name == "metadata":
                picked[f.name] = [value[i] for i in index.tolist()] if value else []
            elif f.name == "model_inputs" and value is not None:
                picked[f.name] = [value[i] for i in index.tolist()]
        out = replace(self, **picked)
        if not len(out):
            return out
        # Trim columns that are padding in every selected row: leading prompt pads, trailing completion pads
        # (attention, not completion_mask: an episode's environment tokens are real tokens outside the loss).
        width_p = out.input_ids.shape[1] - out.completion_width
        keep_c = max(1, int(out.attention_mask[:, width_p:].sum(-1).max()))
        first = int(out.attention_mask[:, :width_p].argmax(-1).min()) if width_p else 0
        for name in ("completion_mask", "loss_mask", "rollout_logprobs", "rollout_entropy", "advantages",
                     "old_logprobs", "ref_logprobs", "teacher_logprobs"):
            value = getattr(out, name)
            if value is not None:
                setattr(out, name, value[:, :keep_c])
        out.input_ids = out.input_ids[:, first : width_p + keep_c]
        out.attention_mask = out.attention_mask[:, first : width_p + keep_c]
        return out

    def micro_batches(self, rows: torch.Tensor, size: int) -> list[torch.Tensor]:
        """`rows` in micro-batches of at most `size` rows. When they need more than one, rows are ordered by length
        (longest first, so an out-of-memory shows at once) and each micro-batch, trimmed by `select`, carries little
        padding; losses are divided by global counts, so the order changes no gradient."""
        if len(rows) <= size:
            return [rows]
        lengths = self.attention_mask[rows].sum(-1)
        return list(rows[torch.argsort(lengths, descending=True, stable=True)].split(size))

    def distinct_prompts(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The distinct prompts among the rows: their ids [U, P] and attention mask, left-padded (columns that are
        padding in all of them dropped), and each row's index into them [N]."""
        width = self.input_ids.shape[1] - self.completion_width
        ids, mask = self.input_ids[:, :width], self.attention_mask[:, :width]
        keys, index = torch.unique(torch.where(mask.bool(), ids, -1), dim=0, return_inverse=True)
        first = torch.full((len(keys),), len(self)).scatter_reduce_(0, index, torch.arange(len(self)), "amin")
        ids, mask = ids[first], mask[first]
        start = int(mask.argmax(-1).min()) if width else 0
        return ids[:, start:], mask[:, start:], index

    def forward_inputs(self, device: torch.device | str) -> dict[str, torch.Tensor]:
        """The rows' model inputs besides ids and mask, collated for one forward on `device` ({} for text rows)."""
        return collate_inputs(self.model_inputs, device) if self.model_inputs is not None else {}

    def to(self, device: torch.device | str) -> RolloutBatch:
        """The same rows with every tensor on `device`."""
        return replace(self, **{f.name: getattr(self, f.name).to(device) for f in fields(self)
                                if isinstance(getattr(self, f.name), torch.Tensor)})

    @classmethod
    def from_completions(
        cls, prompts: list[list[int]], completions: list[list[Completion]], pad_id: int, metadata: list[dict]
    ) -> RolloutBatch:
        """Flatten per-prompt completion groups; group i holds the samples of prompts[i]. An episode's environment
        tokens sit in the completion region with attention 1 and completion_mask 0 (rollout logprobs 0 there), so
        everything that reads completion_mask (loss, entropy, KL, token selection, lengths) sees policy tokens."""
        rows = [(g, prompts[g], c) for g, group in enumerate(completions) for c in group]
        width_p = max(len(p) for _, p, _ in rows)
        width_c = max(1, max(len(c.token_ids) for _, _, c in rows))
        n = len(rows)
        ids = torch.full((n, width_p + width_c), pad_id, dtype=torch.long)
        attn = torch.zeros((n, width_p + width_c), dtype=torch.long)
        cmask = torch.zeros((n, width_c))
        logps = torch.zeros((n, width_c))
        entropy = torch.zeros((n, width_c))
        for r, (_, p, c) in enumerate(rows):
            ids[r, width_p - len(p) : width_p] = torch.tensor(p)
            attn[r, width_p - len(p) : width_p + len(c.token_ids)] = 1
            if c.token_ids:
                ids[r, width_p : width_p + len(c.token_ids)] = torch.tensor(c.token_ids)
                cmask[r, : len(c.token_ids)] = 1 if c.policy_mask is None else torch.tensor(c.policy_mask).float()
                logps[r, : len(c.token_ids)] = torch.tensor(c.logprobs)
                if c.entropies:
                    entropy[r, : len(c.token_ids)] = torch.tensor(c.entropies)
        return cls(
            input_ids=ids,
            attention_mask=attn,
            completion_mask=cmask,
            rollout_logprobs=logps,
            rollout_entropy=entropy,
            group_ids=torch.tensor([g for g, _, _ in rows]),
            truncated=torch.tensor([c.truncated for _, _, c in rows]),
            # each sample's role, resolved when its group was collected (rlvr.rollout.roles, docs/self_play.md)
            metadata=[metadata[g] if c.role is None else {**metadata[g], "role": c.role} for g, _, c in rows],
            model_inputs=[prompt_inputs(p) for _, p, _ in rows] if any(prompt_inputs(p) for p in prompts) else None,
        )
