"""What a step reports: about its samples (reward and accuracy over every generated sample, lengths and advantages
over the trained batch, per-reward failures, per-source figures, the prompt pool's pass-rate histogram) and about its
update (loss, entropy, KL, clip fractions, gradient norm), and on CUDA the memory each phase took."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from rlvr.algorithms.kl import sampled_reverse_kl
from rlvr.curriculum import CurriculumStats, GroupOutcome, PromptSampler
from rlvr.rewards.composite import Scored
from rlvr.tasks import Task
from rlvr.training.batch import RolloutBatch


def rollout_metrics(batch: RolloutBatch, generated: Scored, outcomes: list[GroupOutcome], n: int, tasks: list[Task],
                    stats: CurriculumStats, sampler: PromptSampler) -> dict[str, float]:
    """Reward and accuracy over every generated sample (`n` per group); shapes and advantages over the trained
    batch; per-source figures and the prompt pool's pass-rate histogram from the curriculum statistics."""
    lengths = batch.completion_mask.sum(-1)
    groups = generated.total.view(-1, n)
    m = {
        "reward/mean": float(generated.total.mean()),
        "reward/std": float(generated.total.std(unbiased=False)),
        "accuracy": float(generated.correct.float().mean()),
        "groups/zero_std_frac": float((groups.std(-1, unbiased=False) == 0).float().mean()) if n > 1 else 1.0,
        "groups/all_fail_frac": float((~generated.correct.view(-1, n).any(-1)).float().mean()),
        "response_length/mean": float(lengths.mean()),
        "response_length/max": float(lengths.max()),
        "response/truncated_frac": float(batch.truncated.float().mean()),
        "advantage/zero_frac": float((batch.advantages.abs().sum(-1) == 0).float().mean()),
        "tokens/selected_frac": float(batch.loss_mask.sum() / batch.completion_mask.sum().clamp(min=1)),
    }
    for name, values in generated.per_function.items():
        m[f"reward/{name}/mean"] = float(values.mean())
        m[f"reward/{name}/std"] = float(values.std(unbiased=False))
        for kind, plural in (("error", "errors"), ("timeout", "timeouts"), ("crash", "crashes")):
            m[f"reward/{name}/{plural}"] = generated.failures[name][kind]
    for key, values in generated.extras.items():
        m[f"reward/{key}"] = float(values.nanmean())
    if len(tasks) > 1:
        for t, task in enumerate(tasks):
            mine = [o for o in outcomes if o.source == t]
            samples = sum(len(o.correct) for o in mine)
            m[f"source/{task.label}/drawn"] = stats.sources[t].drawn
            if samples:
                m[f"source/{task.label}/accuracy"] = sum(sum(o.correct) for o in mine) / samples
                m[f"source/{task.label}/reward"] = sum(o.mean_reward * len(o.correct) for o in mine) / samples
    if batch.teacher_logprobs is not None:  # on-policy distillation: how far the samples are from the teacher
        m["distill/reverse_kl"] = sampled_reverse_kl(batch.rollout_logprobs, batch.teacher_logprobs, batch.completion_mask)
    m.update(sampler.metrics())
    histogram = stats.pass_rate_histogram()
    m["pool/prompts_seen"] = len(stats.prompts)
    for b, count in enumerate(histogram):
        m[f"pool/pass_rate_{b / len(histogram):.1f}-{(b + 1) / len(histogram):.1f}"] = count
    return m


def update_metrics(sums: dict[str, float], updates: int, grad_norms: list[float], skipped: int) -> dict[str, float]:
    """The update's figures from the loss terms summed over micro-batches and ranks (`sums`, with the step's
    `tokens` and `selected_tokens`): the loss per optimizer update, entropy, KL and the logprob gap per token, clip
    fractions, ppo_kl and rollout_corr/* per selected token, the mean gradient norm of the updates taken, and the
    fraction of rows the update skipped (zero advantage: their entropy is the sampler's; the figures that need the
    trainer's logprobs are over the rows it computed)."""
    sums = dict(sums)
    tokens, selected = max(sums.pop("tokens"), 1.0), max(sums.pop("selected_tokens"), 1.0)
    m = {
        "actor/loss": sums.pop("loss") / updates,
        "actor/entropy": sums.pop("entropy") / max(sums.pop("entropy_tokens"), 1.0),
        "actor/kl_ref": sums.pop("kl_ref") / tokens if "kl_ref" in sums else float("nan"),
        "rollout/logprob_abs_diff": sums.pop("logprob_diff") / tokens,
        "actor/grad_norm": sum(grad_norms) / len(grad_norms) if grad_norms else float("nan"),
        "actor/skipped_updates": skipped,
        "actor/zero_advantage_skip_frac": sums.pop("skipped_rows") / max(sums.pop("rows"), 1.0),
    }
    m.update({(k if "/" in k else f"actor/{k}"): v / selected for k, v in sums.items()})
    return m


class MemoryPeaks:
    """The most CUDA memory allocated in each phase of a step, `perf/<phase>_peak_mem_gib` (verl logs its
    perf/max_memory_allocated_gb alike), and of a part within a phase on any device (`within`: the teacher's pass,
    on the policy's GPU or its own); nothing on a CPU."""

    def __init__(self, device: torch.device):
        self.device = device if device.type == "cuda" else None
        self.carried = 0  # bytes: the phase's peak before a part within it reset the counter
        self.parts: dict[str, float] = {}  # the parts' peaks since the last read, in GiB

    def start(self) -> None:
        self.carried = 0
        if self.device is not None:
            torch.cuda.reset_peak_memory_stats(self.device)

    def read(self, phase: str) -> dict[str, float]:
        """The peak since `start()` or the last `read()` (and the parts' peaks measured meanwhile); the next phase
        starts here."""
        parts, self.parts = self.parts, {}
        if self.device is None:
            return parts
        peak = max(self.carried, torch.cuda.max_memory_allocated(self.device)) / 2**30
        self.start()
        return {f"perf/{phase}_peak_mem_gib": peak, **parts}

    @contextlib.contextmanager
    def within(self, part: str, device: torch.device) -> Iterator[None]:
        """Measure the peak on `device` (a CUDA device; nothing elsewhere) during the block as
        `perf/<part>_peak_mem_gib`, returned by the next `read`; the enclosing phase's peak on the policy's device
        keeps what it reached before the block."""
        if device.type != "cuda":
            yield
            return
        if device == self.device:
            self.carried = max(self.carried, torch.cuda.max_memory_allocated(device))
        torch.cuda.reset_peak_memory_stats(device)
        try:
            yield
        finally:
            peak = torch.cuda.max_memory_allocated(device)
            if device == self.device:
                self.carried = max(self.carried, peak)
            self.parts[f"perf/{part}_peak_mem_gib"] = peak / 2**30
