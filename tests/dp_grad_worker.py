"""Computes one step's policy gradient for every aggregation mode on a fixed tiny model and batch.

Run alone (world 1) or as one of several torchrun-style ranks (env RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, gloo); each rank takes an interleaved share of the samples. Rank 0 saves
{mode: {param name: grad}} to the path given as argv[1]. argv[2] is the micro-batch size.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from rlvr.algorithms import KL_ESTIMATORS, POLICY_LOSSES
from rlvr.config import AlgorithmConfig, TinyModelConfig
from rlvr.distributed import rank, sum_gradients
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.rollout.base import Completion
from rlvr.training.batch import RolloutBatch
from rlvr.training.update import LossSetup, accumulate_gradients

MODES = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


def fixed_batch(vocab: int) -> RolloutBatch:
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, vocab, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist()
               for _ in range(4)]
    groups = []
    for _ in prompts:
        group = []
        for _ in range(2):
            length = int(torch.randint(1, 7, (1,), generator=g))
            toks = torch.randint(3, vocab, (length,), generator=g).tolist()
            group.append(Completion(toks, "", (-torch.rand(length, generator=g)).tolist(), False))
        groups.append(group)
    batch = RolloutBatch.from_completions(prompts, groups, pad_id=0, metadata=[{}] * 4)
    batch.advantages = torch.randn(len(batch), 1, generator=g, dtype=torch.float64) * batch.completion_mask.double()
    batch.loss_mask = batch.completion_mask.double()
    batch.old_logprobs = batch.rollout_logprobs.double()
    return batch


def main(out: str, micro_batch_size: int) -> None:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group("gloo")
    world = dist.get_world_size() if dist.is_initialized() else 1
    tok = train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40)
    model = build_tiny_model(TinyModelConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32), tok, 0)
    model = model.double()
    batch = fixed_batch(len(tok))
    mine = batch.select(torch.arange(rank(), len(batch), world))
    grads = {}
    for mode in MODES:
        cfg = AlgorithmConfig(loss_aggregation=mode)
        setup = LossSetup(algorithm=cfg, policy_loss=POLICY_LOSSES.get("ppo_clip"), kl_estimator=KL_ESTIMATORS.get("k3"),
                          kl_coef=0.0, temperature=1.0, norm_constant=6, micro_batch_size=micro_batch_size,
                          on_policy=False)
        model.zero_grad(set_to_none=True)
        accumulate_gradients(model, mine, setup)
        sum_gradients(model)
        grads[mode] = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    if rank() == 0:
        torch.save(grads, out)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
