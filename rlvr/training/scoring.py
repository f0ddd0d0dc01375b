"""Completion logprobs of a batch, micro-batch by micro-batch, for the loss and for the old/reference passes."""

from __future__ import annotations

import torch

from rlvr.models.logprobs import completion_logprobs
from rlvr.models.prompt_prefix import PromptPrefix
from rlvr.training.batch import RolloutBatch


class BatchScorer:
    """Scores the micro-batches of `batch`. When `share_prompts` and the batch's rows repeat their prompts (GRPO's n
    samples), each distinct prompt goes through the model once (`PromptPrefix`) and only completions are computed per
    sample; otherwise, and for rows with images, each row's whole sequence. With `grad`, call `finish()` after the
    last micro-batch's backward: it carries the prompts' share of the gradient through the prompt forward."""

    def __init__(self, model, batch: RolloutBatch, device: torch.device, temperature: float, share_prompts: bool,
                 chunk: int, grad: bool):
        self.model, self.device, self.temperature = model, device, temperature
        self.prefix: PromptPrefix | None = None
        if share_prompts and batch.model_inputs is None and len(batch):
            ids, mask, self.row_prompt = batch.distinct_prompts()
            if len(ids) < len(batch):
                self.prefix = PromptPrefix(model, ids.to(device), mask.to(device), grad, chunk)

    def __call__(self, rows: torch.Tensor, mb: RolloutBatch, with_entropy: bool = False,
                 entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logprobs [B, C] (and entropies) of `mb`, the rows `rows` of the batch, already on the device."""
        if self.prefix is None:
            return completion_logprobs(self.model, mb.input_ids, mb.attention_mask, mb.completion_width,
                                       self.temperature, with_entropy=with_entropy, entropy_grad=entropy_grad,
                                       model_inputs=mb.forward_inputs(self.device))
        width = mb.completion_width
        return self.prefix.completion_logprobs(self.row_prompt[rows].to(self.device), mb.input_ids[:, -width:],
                                               mb.attention_mask[:, -width:], self.temperature, with_entropy,
                                               entropy_grad)

    def finish(self) -> None:
        if self.prefix is not None:
            self.prefix.backward()


def batch_logprobs(model, batch: RolloutBatch, temperature: float, share_prompts: bool,
                   micro_batch_size: int) -> torch.Tensor:
    """Logprobs [N, C] of every row of `batch` under `model` without gradients, on the model's device, micro-batch
    by micro-batch (the completion positions' logits only, through rlvr.models.logprobs)."""
    out = torch.zeros_like(batch.completion_mask)
    device = next(model.parameters()).device
    with torch.no_grad():
        scorer = BatchScorer(model, batch, device, temperature, share_prompts, micro_batch_size, grad=False)
        for rows in batch.micro_batches(torch.arange(len(batch)), micro_batch_size):
            mb = batch.select(rows).to(device)
            logp, _ = scorer(rows, mb)
            out[rows, : mb.completion_width] = logp.float().cpu()
    return out
