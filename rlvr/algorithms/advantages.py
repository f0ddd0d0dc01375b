"""Advantage estimators: `fn(AdvantageInputs, AlgorithmSettings) -> (token advantages [N, C], history | None)`.

Every estimator is a pure function. One that keeps per-prompt statistics across steps (`dcpo_smooth`)
reads them from `inputs.history` and returns an updated copy; the others return None. The trainer
calls `compute_advantages`, which also applies the PSR/NSR per-sign weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from rlvr.algorithms.groups import group_moments, group_stats
from rlvr.algorithms.settings import AlgorithmSettings
from rlvr.algorithms.turn_credit import TurnInputs, apply_turn_credit
from rlvr.registry import Registry

ADVANTAGES: Registry = Registry("advantage estimator")
# An estimator is registered with what it reads that only some runs provide, each named as its AdvantageInputs
# field: "step_rewards" (rewards.step_reward), "tree_paths" (rollout.tree), "roles" (tasks that give roles),
# "teacher_logprobs" (a `teacher` section), e.g. `@ADVANTAGES.register("tree", needs={"tree_paths"})`; the config is
# checked against them at load.


@dataclass
class AdvantageInputs:
    """What an estimator may read about one step's samples."""

    scores: Tensor  # [N] total reward per sample
    group_ids: Tensor  # [N] long, samples of one prompt share an id
    mask: Tensor  # [N, C] float completion mask
    uids: list[str] | None = None  # prompt uid per sample (for history)
    token_rewards: Tensor | None = None  # [N, C]; default: score on each sample's last valid token
    history: dict | None = None  # per-prompt cross-step stats; an estimator that needs it returns the updated copy
    turns: TurnInputs | None = None  # the multi-turn episodes among the samples (for algorithm.turn_credit)
    step_rewards: Tensor | None = None  # [N, C] each step's reward on its last token (process credit)
    step_mask: Tensor | None = None  # [N, C] 1 on the tokens that end a step
    tree_paths: list[tuple[int, ...]] | None = None  # per sample, its path in its group's tree (tree rollouts)
    roles: list[str] | None = None  # per sample, its task and role ('<task label>/<role>'; the label alone without one)
    logprobs: Tensor | None = None  # [N, C] the student's sampling logprobs of its tokens (0 where mask is 0)
    teacher_logprobs: Tensor | None = None  # [N, C] the teacher's logprobs of the same tokens (on-policy distillation)


def estimator_needs(name: str) -> frozenset[str]:
    """What advantage estimator `name` reads that only some runs provide ("step_rewards", "tree_paths", "roles",
    "teacher_logprobs"):
    the config is checked against it at load, and step rewards are computed only for an estimator that needs
    "step_rewards". An unknown name is a ConfigError naming the registered ones."""
    return ADVANTAGES.needs(name)


def last_token_rewards(scores: Tensor, mask: Tensor) -> Tensor:
    """[N, C] token rewards holding each sample's score on its last valid token (0 elsewhere)."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    last = torch.where(mask > 0, positions, -1).max(dim=1).values
    rewards = torch.zeros(mask.shape, dtype=scores.dtype, device=mask.device)
    rows = (last >= 0).nonzero().squeeze(1)
    rewards[rows, last[rows]] = scores[rows]
    return rewards


def sample_rewards(inp: AdvantageInputs) -> Tensor:
    """s_i: the masked row sums of the token rewards when given (so KL-in-reward reaches every estimator),
    else the scores."""
    if inp.token_rewards is None:
        return inp.scores
    return (inp.token_rewards * inp.mask).sum(-1)


def masked_whiten(values: Tensor, mask: Tensor, unbiased: bool, eps: float) -> Tensor:
    """(x - mean) / (std + eps) with mean and std over the valid tokens of the whole batch; 0 on padding."""
    n = mask.sum()
    mean = (values * mask).sum() / n.clamp(min=1)
    var = (((values - mean) ** 2) * mask).sum() / ((n - 1).clamp(min=1) if unbiased else n.clamp(min=1))
    return (values - mean) / (var.sqrt() + eps) * mask


def _broadcast(per_sample: Tensor, mask: Tensor) -> Tensor:
    return per_sample[:, None] * mask


def apply_sign_weights(advantages: Tensor, positive_weight: float, negative_weight: float) -> Tensor:
    """PSR/NSR split (Zhu et al. 2025, "The Surprising Effectiveness of Negative Reinforcement in LLM
    Reasoning"): A <- w_pos A where A > 0 and w_neg A where A < 0. W-REINFORCE upweights the negatives."""
    if positive_weight == 1.0 and negative_weight == 1.0:
        return advantages
    return torch.where(advantages > 0, positive_weight * advantages, negative_weight * advantages)


def compute_advantages(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, dict | None]:
    """The configured estimator, turn-level credit on the episode rows when `turn_credit` is set (other rows keep
    the estimator's), then the per-sign weights, then the teacher's term weighted by `distill_weight` when it is
    not 0: the one call the trainer makes. Returns the advantages and the history to pass next step (unchanged for
    stateless estimators)."""
    advantages, history = ADVANTAGES.get(cfg.advantage)(inp, cfg)
    if cfg.turn_credit is not None and inp.turns is not None:
        advantages = apply_turn_credit(advantages, inp.turns, cfg)
    weighted = apply_sign_weights(advantages, cfg.positive_weight, cfg.negative_weight)
    if cfg.distill_weight:
        weighted = weighted + cfg.distill_weight * distillation_advantages(inp, cfg.distill_gamma)
    return weighted, (inp.history if history is None else history)


@ADVANTAGES.register("grpo")
def grpo(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """GRPO (DeepSeekMath, Shao et al. 2024): A_i = (s_i - mean_group) / (std_group + eps)."""
    scores = sample_rewards(inp)
    mean, std = group_stats(scores, inp.group_ids, cfg.std_unbiased)
    return _broadcast((scores - mean) / (std + cfg.advantage_epsilon), inp.mask), None


@ADVANTAGES.register("dr_grpo")
def dr_grpo(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"): A_i = s_i - mean_group, no std division."""
    scores = sample_rewards(inp)
    mean, _ = group_stats(scores, inp.group_ids, cfg.std_unbiased)
    return _broadcast(scores - mean, inp.mask), None


@ADVANTAGES.register("grpo_batch_std")
def grpo_batch_std(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """GRPO centred per group, scaled by the batch std (TRL `scale_rewards="batch"`; "Tricks or Traps? A Deep
    Dive into RL for LLM Reasoning", Liu et al. 2025): A_i = (s_i - mean_group) / (std_batch + eps),
    std_batch over all N sample rewards of the step."""
    scores = sample_rewards(inp)
    mean, _ = group_stats(scores, inp.group_ids, cfg.std_unbiased)
    batch_std = scores.std(correction=1 if cfg.std_unbiased else 0) if len(scores) > 1 else scores.new_tensor(1.0)
    return _broadcast((scores - mean) / (batch_std + cfg.advantage_epsilon), inp.mask), None


@ADVANTAGES.register("rloo")
def rloo(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """RLOO (Ahmadian et al. 2024): A_i = s_i - mean of the other samples of the group (0 for a group of one)."""
    scores = sample_rewards(inp)
    means, _, inverse = group_moments(scores, inp.group_ids, cfg.std_unbiased)
    n = torch.bincount(inverse)[inverse].to(scores.dtype)
    others = (means[inverse] * n - scores) / (n - 1).clamp(min=1)
    return _broadcast(torch.where(n > 1, scores - others, torch.zeros_like(scores)), inp.mask), None


@ADVANTAGES.register("reinforce")
def reinforce(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """REINFORCE with a constant baseline (Williams 1992): A_i = s_i - b, b = `reward_baseline`. With 0/1
    rewards and b = 0.5 the sign splits correct (PSR) from incorrect (NSR) samples, as W-REINFORCE needs."""
    return _broadcast(sample_rewards(inp) - cfg.reward_baseline, inp.mask), None


def discounted_returns(token_rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """G_t = r_t + gamma G_{t'} over each completion's valid tokens, t' the next valid token (0 on padding).
    Masked tokens are skipped, not reset at: a reward after an episode's environment tokens reaches the policy
    tokens before them (the bug of returns that restart at tool output, verl PR #6376)."""
    rewards = token_rewards * mask
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        running = torch.where(mask[:, t] > 0, rewards[:, t] + gamma * running, running)
        returns[:, t] = running
    return returns * mask


def distillation_advantages(inp: AdvantageInputs, gamma: float) -> Tensor:
    """On-policy distillation's advantage (Agarwal et al. 2024, "On-Policy Distillation of Language Models: Learning
    from Self-Generated Mistakes" (GKD); Thinking Machines, "On-Policy Distillation", 2025): the per-token reverse KL
    to the teacher on the sampled token (k1), negated, as a reward r_t = -(log p_student(y_t) - log p_teacher(y_t)),
    and its discounted return over the completion's later policy tokens, A_t = sum_{k>=t} gamma^(k-t) r_k
    (gamma = 0: A_t = r_t, per token, Tinker's default). Only tokens under `mask` count (an episode's environment
    tokens carry no distillation signal; returns skip them as `discounted_returns` does)."""
    if inp.logprobs is None or inp.teacher_logprobs is None:
        raise ValueError("the distillation advantage needs the student's sampling logprobs and the teacher's "
                         "(AdvantageInputs.logprobs, .teacher_logprobs): set a `teacher` section")
    rewards = -(inp.logprobs - inp.teacher_logprobs) * inp.mask
    return rewards if gamma == 0 else discounted_returns(rewards, inp.mask, gamma)


@ADVANTAGES.register("distill", needs={"teacher_logprobs"})
def distill(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """On-policy distillation alone (Agarwal et al. 2024, GKD; Thinking Machines 2025): the teacher's per-token
    reverse KL on the student's sampled tokens as the advantage, A_t = sum_{k>=t} gamma^(k-t) -(log p_s(y_k) -
    log p_t(y_k)), gamma = `distill_gamma` (0: per token). The verifier's reward is not read."""
    return distillation_advantages(inp, cfg.distill_gamma), None


@ADVANTAGES.register("reinforce_pp")
def reinforce_pp(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """REINFORCE++ (Hu 2025, arXiv 2501.03262): token returns G_t = sum_{k>=t} gamma^(k-t) r_k of the token
    rewards, whitened over the whole batch: A_t = (G_t - mean) / (std + eps), masked mean/std over valid tokens."""
    token_rewards = inp.token_rewards if inp.token_rewards is not None else last_token_rewards(inp.scores, inp.mask)
    returns = discounted_returns(token_rewards, inp.mask, cfg.gamma)
    return masked_whiten(returns, inp.mask, cfg.std_unbiased, cfg.advantage_epsilon), None


@ADVANTAGES.register("reinforce_pp_baseline")
def reinforce_pp_baseline(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """REINFORCE++-baseline (Hu 2025, arXiv 2501.03262): A_i = s_i - mean_group on every token, then whitened
    over the batch's valid tokens: (A - mean) / (std + eps)."""
    scores = sample_rewards(inp)
    mean, _ = group_stats(scores, inp.group_ids, cfg.std_unbiased)
    centred = _broadcast(scores - mean, inp.mask)
    return masked_whiten(centred, inp.mask, cfg.std_unbiased, cfg.advantage_epsilon), None


@ADVANTAGES.register("ngrpo")
def ngrpo(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """NGRPO advantage calibration (Nan et al. 2025, arXiv 2509.18851): one virtual sample with the maximum
    reward r_max (`ngrpo_max_reward`) joins each group's statistics: mu' = (sum_i s_i + r_max) / (G + 1),
    sigma' = std of {s_1..s_G, r_max}; A_i = (s_i - mu') / (sigma' + eps). An all-wrong group gets A < 0."""
    scores = sample_rewards(inp)
    means, stds, inverse = group_moments(scores, inp.group_ids, cfg.std_unbiased, virtual_reward=cfg.ngrpo_max_reward)
    return _broadcast((scores - means[inverse]) / (stds[inverse] + cfg.advantage_epsilon), inp.mask), None


def _standardize(scores: Tensor, mean: float, std: float, eps: float) -> Tensor:
    return (scores - mean) / (std + eps) if std > 0 else torch.zeros_like(scores)


@ADVANTAGES.register("dcpo_smooth")
def dcpo_smooth(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, dict]:
    """DCPO smooth advantage standardization (Yang et al. 2025, arXiv 2509.02333), as in the authors' code.

    For a prompt seen for the i-th time (i = 1 on first sight), with this step's group mean/std (mu_new,
    sigma_new) and the cumulative statistics of all its steps so far including this one (mu_tot, sigma_tot:
    the equal-weight mixture of the per-step distributions,
        mu_tot = ((i-1) mu_prev + mu_new) / i,
        var_tot = ((i-1) sigma_prev^2 + sigma_new^2) / i + (i-1)/i^2 (mu_new - mu_prev)^2):
        SA_new = (s - mu_new) / (sigma_new + eps),   SA_tot = (s - mu_tot) / (sigma_tot + eps)   (0 if sigma = 0)
        A1 = (i-1)/i SA_new + 1/i SA_tot,   A2 = 1/i SA_new + (i-1)/i SA_tot
        A = A1 if |A1| < |A2| else A2.
    On first sight A = SA_new (plain GRPO); an all-equal group later gets min(1/i, 1-1/i) SA_tot != 0.
    history maps uid -> {"steps": i, "mean": mu_tot, "std": sigma_tot}; a uid drawn twice in one step is
    merged group by group, in group order.
    """
    if inp.uids is None:
        raise ValueError("advantage 'dcpo_smooth' needs the prompt uid of every sample (AdvantageInputs.uids)")
    scores = sample_rewards(inp)
    means, stds, inverse = group_moments(scores, inp.group_ids, cfg.std_unbiased)
    history = dict(inp.history or {})
    advantages = torch.zeros_like(scores)
    eps = cfg.advantage_epsilon
    for g in range(len(means)):
        rows = (inverse == g).nonzero().squeeze(1)
        uid = inp.uids[int(rows[0])]
        mu_new, sd_new = float(means[g]), float(stds[g])
        prev = history.get(uid)
        if prev is None:
            i, mu_tot, sd_tot = 1, mu_new, sd_new
        else:
            k = prev["steps"]
            i = k + 1
            mu_tot = (k * prev["mean"] + mu_new) / i
            var_tot = (k * prev["std"] ** 2 + sd_new**2) / i + k / i**2 * (mu_new - prev["mean"]) ** 2
            sd_tot = math.sqrt(var_tot)
        history[uid] = {"steps": i, "mean": mu_tot, "std": sd_tot}
        sa_new = _standardize(scores[rows], mu_new, sd_new, eps)
        sa_tot = _standardize(scores[rows], mu_tot, sd_tot, eps)
        w = 1.0 / i
        a1 = (1 - w) * sa_new + w * sa_tot
        a2 = w * sa_new + (1 - w) * sa_tot
        advantages[rows] = torch.where(a1.abs() < a2.abs(), a1, a2)
    return _broadcast(advantages, inp.mask), history


def _role_ids(inp: AdvantageInputs, name: str) -> tuple[list[str], Tensor]:
    if inp.roles is None:
        raise ValueError(f"advantage '{name}' needs the task and role of every sample (AdvantageInputs.roles)")
    keys = list(dict.fromkeys(inp.roles))
    index = {k: i for i, k in enumerate(keys)}
    return keys, torch.tensor([index[r] for r in inp.roles], dtype=torch.long, device=inp.scores.device)


@ADVANTAGES.register("task_relative", needs={"roles"})
def task_relative(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """Task-relative REINFORCE++ (Absolute Zero, Zhao et al. 2025, arXiv 2505.03335): one baseline per task and
    role over the step, A_i = (s_i - mean_k) / (std_k + eps), mean and std over the step's samples of the
    sample's role k ('azr/deduction.propose': the six task-type x role baselines of AZR); a role with one sample
    in the step has mean 0, std 1 (GRPO's convention for a group of one). Samples without a role are pooled by
    task."""
    _, ids = _role_ids(inp, "task_relative")
    scores = sample_rewards(inp)
    mean, std = group_stats(scores, ids, cfg.std_unbiased)
    return _broadcast((scores - mean) / (std + cfg.advantage_epsilon), inp.mask), None


@ADVANTAGES.register("role_baseline", needs={"roles"})
def role_baseline(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, dict]:
    """Role-conditioned advantage estimation (SPIRAL, Liu et al. 2025, arXiv 2506.24119): a running baseline per
    role (a game and seat, 'tictactoe/seat1'), the exponential moving average of that role's rewards. Samples are
    taken in batch order: A_i = s_i - b_k, then b_k <- decay b_k + (1 - decay) s_i (decay =
    `role_baseline_decay`), b_k starting at 0 (a zero-sum game's value under symmetric play). The baselines live
    in history["role_baseline"] = {role: b}, carried across steps and saved in checkpoints."""
    keys, ids = _role_ids(inp, "role_baseline")
    scores = sample_rewards(inp)
    history = dict(inp.history or {})
    baselines = dict(history.get("role_baseline", {}))
    decay = cfg.role_baseline_decay
    advantages = torch.zeros_like(scores)
    for i, (k, s) in enumerate(zip(ids.tolist(), scores.tolist())):
        b = baselines.get(keys[k], 0.0)
        advantages[i] = s - b
        baselines[keys[k]] = decay * b + (1 - decay) * s
    history["role_baseline"] = baselines
    return _broadcast(advantages, inp.mask), history
