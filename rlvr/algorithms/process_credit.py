"""Process credit: token-level advantages from step rewards (a score per step of a completion, placed on the step's
last token), in sum form or in PURE's min form.

PURE (Cheng et al. 2025, "Stop Summation: Min-Form Credit Assignment Is All Process Reward Model Needs for
Reasoning", arXiv 2504.15275): the canonical sum-form return of a token, the sum of the step rewards ahead of it,
pays a completion for every extra step a process reward scores well, so a policy learns to pad with easy steps;
the min-form return, the minimum of the step rewards ahead, cannot be raised by adding steps and is only as good as
the worst step still to come. With r_k the rewards of sample i's steps, e_k the token ending step k, s_i its outcome
score and beta = process_outcome_weight:

    P_t = sum_{k: e_k >= t} r_k          (process_sum)        P_t = min_{k: e_k >= t} r_k   (process_min)
    P_t = 0 where no step ends at or after t
    G_t = P_t + beta s_i                 R_i = G at the sample's first token (every step ahead)
    A_t = whiten(G_t - mean_{j in group} R_j)   over the valid tokens of the batch (REINFORCE++-baseline's
                                                 normalisation, Hu 2025: per-token returns need no group std)

PURE's released code approximates the minimum by a softmin-weighted sum (temperature 0.1); this is the exact minimum
of its definition. Formulas: docs/credit.md.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlvr.algorithms.advantages import ADVANTAGES, AdvantageInputs, masked_whiten, sample_rewards
from rlvr.algorithms.groups import group_stats
from rlvr.algorithms.settings import AlgorithmSettings


def future_step_returns(step_rewards: Tensor, step_mask: Tensor, form: str) -> Tensor:
    """[N, C] P_t over the steps ending at or after token t (step k's reward sits at its last token, where step_mask
    is 1): their sum ('sum') or their minimum ('min'); 0 where no step lies ahead."""
    ends = step_mask > 0
    if form == "sum":
        return torch.where(ends, step_rewards, 0.0).flip(1).cumsum(1).flip(1)
    if form == "min":
        ahead = torch.where(ends, step_rewards, torch.inf).flip(1).cummin(1).values.flip(1)
        return torch.where(torch.isinf(ahead), 0.0, ahead)
    raise ValueError(f"unknown process credit form '{form}'; one of sum, min")


def process_returns(inp: AdvantageInputs, cfg: AlgorithmSettings, form: str) -> Tensor:
    """[N, C] G_t = P_t + beta s_i (0 on padding)."""
    if inp.step_rewards is None or inp.step_mask is None:
        raise ValueError(f"advantage 'process_{form}' needs step rewards: set rewards.step_reward (a step reward "
                         "such as arithmetic_steps, or a process reward model; docs/credit.md)")
    steps = future_step_returns(inp.step_rewards.to(inp.mask.dtype), inp.step_mask, form)
    return (steps + cfg.process_outcome_weight * sample_rewards(inp)[:, None]) * inp.mask


def _process_credit(inp: AdvantageInputs, cfg: AlgorithmSettings, form: str) -> Tensor:
    returns = process_returns(inp, cfg, form)
    first = (inp.mask > 0).float().argmax(1)  # each sample's first valid token sees every step ahead of it
    whole = returns.gather(1, first[:, None]).squeeze(1)
    mean, _ = group_stats(whole, inp.group_ids, cfg.std_unbiased)
    return masked_whiten((returns - mean[:, None]) * inp.mask, inp.mask, cfg.std_unbiased, cfg.advantage_epsilon)


@ADVANTAGES.register("process_min", needs={"step_rewards"})
def process_min(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """PURE min-form process credit (Cheng et al. 2025, arXiv 2504.15275): a token's return is the minimum of the
    step rewards ahead of it plus process_outcome_weight x the outcome score; A = whitened (return - group mean of
    the samples' whole returns). Needs rewards.step_reward."""
    return _process_credit(inp, cfg, "min"), None


@ADVANTAGES.register("process_sum", needs={"step_rewards"})
def process_sum(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """Sum-form process credit (the canonical return that PURE shows invites reward hacking): a token's return is the
    sum of the step rewards ahead of it plus process_outcome_weight x the outcome score; A = whitened (return - group
    mean of the samples' whole returns). Needs rewards.step_reward."""
    return _process_credit(inp, cfg, "sum"), None
