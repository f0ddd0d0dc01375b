"""The policy-gradient pass over one mini-batch: micro-batches, loss terms, backward.

Loss shares are divided by the mini-batch's *global* token and sequence counts (summed over ranks), so
accumulated gradients equal the full-batch gradient for any micro-batch size or data-parallel split.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rlvr.algorithms import aggregate
from rlvr.algorithms.correction import CorrectionSpec, rollout_correction
from rlvr.config import AlgorithmConfig
from rlvr.distributed import all_reduce_sum
from rlvr.errors import RlvrError
from rlvr.training.batch import RolloutBatch
from rlvr.training.scoring import BatchScorer
from rlvr.watchdog import WATCH


@dataclass
class LossSetup:
    algorithm: AlgorithmConfig
    policy_loss: Callable
    kl_estimator: Callable
    kl_coef: float  # in the loss; 0 when KL is off or placed in the reward
    temperature: float
    norm_constant: float
    micro_batch_size: int
    on_policy: bool  # old logprobs = current ones (ratio exactly 1)
    before_backward: Callable[[bool], None] = lambda last: None  # told whether the mini-batch's last backward follows
    correction: CorrectionSpec = CorrectionSpec()  # rollout-vs-trainer importance weights / masks
    bypass: bool = False  # old logprobs are the rollout's; the correction compares the current policy with them
    share_prompts: bool = False  # one prompt forward for a prompt's samples (BatchScorer)
    skip_zero_advantage: bool = False  # no forward/backward for rows whose loss is zero (trained_rows)


def vanishes_without_advantage(policy_loss: Callable, algorithm: AlgorithmConfig) -> bool:
    """Whether `policy_loss` is zero, with zero gradient, where the advantage is 0 (every built-in loss is A times
    a ratio term); probed once on random logprobs, so a registered loss that is not is never skipped."""
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(2, 5, generator=g, dtype=torch.float64)).requires_grad_()
    old = logp.detach() - 0.1 * torch.rand(2, 5, generator=g, dtype=torch.float64)
    mask = torch.ones(2, 5, dtype=torch.float64)
    loss, _ = policy_loss(logp, old, torch.zeros_like(mask), mask, algorithm)
    if not loss.requires_grad:
        return bool((loss == 0).all())
    (grad,) = torch.autograd.grad(loss.sum(), logp, allow_unused=True)
    return bool((loss == 0).all()) and (grad is None or bool((grad == 0).all()))


def trained_rows(mini: RolloutBatch) -> tuple[torch.Tensor, bool]:
    """The rows with a non-zero advantage on some token of the loss: with a policy loss that vanishes at A = 0 and no
    KL or entropy term, every other row adds exactly nothing to the gradient (GRPO's groups whose samples all scored
    alike), while its tokens stay in the normalisers. When no row has one, the shortest row stands in (the flag says
    so), so the same parameters get their zero gradient, and AdamW its step, as when every row is computed."""
    live = ((mini.advantages != 0) & (mini.loss_mask > 0)).any(-1)
    if live.any() or not len(mini):
        return live.nonzero().squeeze(-1), False
    return mini.attention_mask.sum(-1).argmin().reshape(1), True


def accumulate_gradients(model, mini: RolloutBatch, setup: LossSetup,
                         log_ratios: list[torch.Tensor] | None = None) -> dict[str, float]:
    """Backward the mini-batch's loss, micro-batch by micro-batch; returns summed statistics
    (token sums for per-token stats, 'loss' as the mini-batch loss on this rank). With `log_ratios`, the log
    ratios trainer/rollout of the selected tokens are appended to it (for quantiles).

    The rollout correction weighs the per-token loss by a detached weight and zeroes masked tokens' loss; masked
    tokens stay in the normalisers, so the loss scale does not move with the masked fraction."""
    a = setup.algorithm
    global_tokens = all_reduce_sum(float(mini.loss_mask.sum()))
    global_seqs = all_reduce_sum(float(len(mini)))
    agg = dict(mode=a.loss_aggregation, global_tokens=global_tokens, global_seqs=global_seqs,
               norm_constant=setup.norm_constant)
    sums: dict[str, float] = defaultdict(float)
    sums["rows"] = len(mini)
    stand_in = False
    if setup.skip_zero_advantage:
        # Skipped rows' entropy (and a stand-in's) is the sampler's (the same policy and temperature), so
        # actor/entropy stays over every sampled token, whatever rows a rank computes; the figures that need the
        # trainer's logprobs are over the computed rows.
        rows, stand_in = trained_rows(mini)
        skipped = torch.ones(len(mini), dtype=torch.bool)
        skipped[rows] = stand_in
        sums["entropy"] += float((mini.rollout_entropy * mini.completion_mask)[skipped].sum())
        sums["entropy_tokens"] += float(mini.completion_mask[skipped].sum())
        mini = mini.select(rows)
    sums["skipped_rows"] = sums["rows"] - len(mini)
    device = next(model.parameters()).device
    micro = mini.micro_batches(torch.arange(len(mini)), setup.micro_batch_size)
    scorer = BatchScorer(model, mini, device, setup.temperature, setup.share_prompts, setup.micro_batch_size,
                         grad=True)
    for i, rows in enumerate(micro):
        WATCH.progress()
        mb = mini.select(rows).to(device)
        mask, loss_mask = mb.completion_mask, mb.loss_mask
        logp, entropy = scorer(rows, mb, with_entropy=True, entropy_grad=a.entropy_coef > 0)
        logp = logp.to(mb.advantages.dtype)
        old = logp.detach() if setup.on_policy else mb.old_logprobs
        per_token, stats = setup.policy_loss(logp, old, mb.advantages, loss_mask, a)
        trainer_logp = logp.detach() if setup.bypass else old  # the proximal policy, or the current one in bypass
        weight, keep, corr = rollout_correction(trainer_logp, mb.rollout_logprobs, mask, setup.correction)
        if setup.correction.active:
            per_token = per_token * weight * keep
        stats.update(corr)
        if log_ratios is not None:
            log_ratios.append((trainer_logp - mb.rollout_logprobs)[loss_mask > 0].cpu())
        loss = aggregate(per_token, loss_mask, **agg)
        if mb.ref_logprobs is not None:
            kl = setup.kl_estimator(logp, mb.ref_logprobs)
            if setup.kl_coef > 0:
                loss = loss + setup.kl_coef * aggregate(kl, loss_mask, **agg)
            sums["kl_ref"] += float((kl.detach() * mask).sum())
        if a.entropy_coef > 0:
            loss = loss - a.entropy_coef * aggregate(entropy, loss_mask, **agg)
        setup.before_backward(i == len(micro) - 1)
        loss.backward()
        sums["loss"] += loss.item()
        sums["tokens"] += float(mask.sum())
        if not stand_in:
            sums["entropy_tokens"] += float(mask.sum())
            sums["entropy"] += float((entropy.detach() * mask).sum())
        sums["selected_tokens"] += float(loss_mask.sum())
        sums["logprob_diff"] += float(((logp.detach() - mb.rollout_logprobs).abs() * mask).sum())
        for k, v in stats.items():
            sums[k] += float((v.detach() * loss_mask).sum())
    scorer.finish()
    return sums


def step_if_finite(optimizer, scheduler, params: list[torch.Tensor], loss: float, grad_clip: float | None) -> float:
    """Clip the gradients and take the optimizer and scheduler step, unless the loss or the gradient norm is
    NaN/inf: then the gradients are dropped and the weights stay as they were. Returns the gradient norm
    (NaN when the update was skipped)."""
    norm = torch.nn.utils.clip_grad_norm_(params, grad_clip or float("inf"))
    norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # a DTensor under FSDP2
    if not (math.isfinite(loss) and math.isfinite(norm)):
        optimizer.zero_grad(set_to_none=True)
        return float("nan")
    optimizer.step()
    scheduler.step()
    return norm


class NonFiniteStreak:
    """Counts steps in a row with a skipped (non-finite) update and stops the run after `limit` of them."""

    def __init__(self, limit: int, count: int = 0):
        self.limit, self.count = limit, count

    def record(self, step: int, skipped: int, updates: int) -> str | None:
        """A warning for a step with skipped updates (None for a clean step); raises RlvrError at the limit."""
        if not skipped:
            self.count = 0
            return None
        self.count += 1
        if self.count >= self.limit:
            raise RlvrError(
                f"Stopped at step {step}: the loss or gradient was NaN/inf in {self.count} steps in a row "
                f"(optim.max_nonfinite_steps={self.limit}). Those updates were skipped, so the weights and the last "
                f"checkpoint are finite. Lower optim.lr, set optim.grad_clip, check the reward functions for NaN, "
                f"or train in float32/bfloat16 instead of float16."
            )
        return (f"step {step}: non-finite loss or gradient, {skipped} of {updates} updates skipped "
                f"({self.count} steps in a row; the run stops at optim.max_nonfinite_steps={self.limit})")
