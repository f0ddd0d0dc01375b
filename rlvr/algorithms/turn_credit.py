"""Turn-level credit for multi-turn episodes: `fn(TurnInputs, AlgorithmSettings) -> per-turn advantages [E, T]`.

An episode of T assistant turns has turn rewards r_0..r_{T-1} that sum to its score (the environment's turn rewards,
the rest of the score on the last turn). The estimators give each turn one advantage, which every token the policy
sampled in that turn receives (`turn_token_advantages`); episode-level credit instead gives the whole score's
advantage to every token. Formulas and papers: docs/algorithms.md ("Turn-level credit").

Every estimator is a pure function; `apply_turn_credit` is the one call `compute_advantages` makes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass

import torch
from torch import Tensor

from rlvr.algorithms.groups import group_moments, group_stats
from rlvr.algorithms.settings import AlgorithmSettings
from rlvr.registry import Registry

TURN_CREDIT: Registry = Registry("turn credit")


@dataclass
class TurnInputs:
    """The episodes of a step, turn by turn. Row e is batch row `rows[e]`."""

    rows: Tensor  # [E] long, the batch rows that are episodes
    rewards: Tensor  # [E, T] reward of each turn (0 past an episode's last turn); a row sums to the sample's score
    turn_mask: Tensor  # [E, T] float, 1 on the turns the episode played
    group_ids: Tensor  # [E] long, episodes of one prompt share an id
    token_turns: Tensor  # [E, C] long, the turn each completion token was sampled in; -1 on environment tokens/padding
    anchors: list[list[Hashable]]  # per episode and turn: the environment state the turn starts from


def turn_returns(rewards: Tensor, turn_mask: Tensor, gamma: float) -> Tensor:
    """G_t = r_t + gamma G_{t+1} over each episode's turns (0 past its last turn)."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        running = (rewards[:, t] + gamma * running) * turn_mask[:, t]
        returns[:, t] = running
    return returns


def keyed_normalize(values: Tensor, keys: list[Hashable], unbiased: bool, eps: float) -> Tensor:
    """(x - mean_k) / (std_k + eps) over the entries sharing key k; 0 for a key held by one entry (no baseline to
    compare with: the entry carries no signal of its own)."""
    index = {key: i for i, key in enumerate(dict.fromkeys(keys))}
    ids = torch.tensor([index[k] for k in keys], dtype=torch.long, device=values.device)
    means, stds, inverse = group_moments(values, ids, unbiased)
    out = (values - means[inverse]) / (stds[inverse] + eps)
    counts = torch.bincount(inverse)
    return torch.where(counts[inverse] > 1, out, torch.zeros_like(out))


def _per_turn(inp: TurnInputs, values: Tensor, key_of, cfg: AlgorithmSettings) -> Tensor:
    """`keyed_normalize` over the played turns, key_of(e, t) naming each turn's baseline group; [E, T]."""
    played = inp.turn_mask.nonzero().tolist()
    keys = [key_of(e, t) for e, t in played]
    out = torch.zeros_like(values)
    if played:
        e, t = torch.tensor(played, device=values.device).T
        out[e, t] = keyed_normalize(values[e, t], keys, cfg.std_unbiased, cfg.advantage_epsilon)
    return out


@TURN_CREDIT.register("returns")
def returns_credit(inp: TurnInputs, cfg: AlgorithmSettings) -> Tensor:
    """Per-turn discounted returns against the episode baseline: A_{i,t} = (G_{i,t} - mean_g R) / (std_g R + eps),
    G_{i,t} = sum_{k>=t} turn_gamma^(k-t) r_{i,k}, R_j = G_{j,0}. A turn is not credited with rewards earned before
    it; with turn_gamma = 1 and the reward on the last turn this is GRPO exactly."""
    g = turn_returns(inp.rewards, inp.turn_mask, cfg.turn_gamma)
    mean, std = group_stats(g[:, 0], inp.group_ids, cfg.std_unbiased)  # GRPO's: a group of one has mean 0, std 1
    return (g - mean[:, None]) / (std[:, None] + cfg.advantage_epsilon) * inp.turn_mask


@TURN_CREDIT.register("turn_baseline")
def turn_baseline_credit(inp: TurnInputs, cfg: AlgorithmSettings) -> Tensor:
    """Per-turn returns against a per-turn baseline: A_{i,t} = (G_{i,t} - mean_{j in g, T_j > t} G_{j,t}) / (std + eps)
    over the group's episodes that reached turn t (0 where only one did); a second attempt is compared with the
    other second attempts, not with first-attempt successes (turn-level advantages in the spirit of MT-GRPO, Zeng et
    al. 2025, "Reinforcing Multi-Turn Reasoning in LLM Agents via Turn-Level Credit Assignment", arXiv 2505.11821,
    with the group baseline taken per turn index)."""
    g = turn_returns(inp.rewards, inp.turn_mask, cfg.turn_gamma)
    groups = inp.group_ids.tolist()
    return _per_turn(inp, g, lambda e, t: (groups[e], t), cfg)


@TURN_CREDIT.register("gigpo")
def gigpo_credit(inp: TurnInputs, cfg: AlgorithmSettings) -> Tensor:
    """GiGPO (Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training", arXiv 2505.10978):
    A_{i,t} = A^E_i + omega A^S_{i,t}. Episode level: A^E_i = (R_i - mean_g R) / (std_g R + eps), R_i = sum_t r_{i,t}.
    Step level: turns of the group's episodes that start from the same anchor state (the environment's observation)
    form a step group, A^S_{i,t} = (G_{i,t} - mean_step G) / (std_step G + eps) with discounted returns G (0 for a
    step group of one); omega = gigpo_step_weight."""
    total = (inp.rewards * inp.turn_mask).sum(-1)
    mean, std = group_stats(total, inp.group_ids, cfg.std_unbiased)
    episode = (total - mean) / (std + cfg.advantage_epsilon)
    g = turn_returns(inp.rewards, inp.turn_mask, cfg.turn_gamma)
    groups = inp.group_ids.tolist()
    step = _per_turn(inp, g, lambda e, t: (groups[e], inp.anchors[e][t]), cfg)
    return (episode[:, None] + cfg.gigpo_step_weight * step) * inp.turn_mask


def step_group_metrics(inp: TurnInputs) -> dict[str, float]:
    """The step groups GiGPO forms from a step's episodes (turns of one group sharing an anchor state): their mean
    size, the largest, and the share of groups of one turn (no baseline: their step advantage is 0), logged as
    credit/step_group_size_mean, credit/step_group_size_max and credit/singleton_step_groups."""
    groups = inp.group_ids.tolist()
    keys = [(groups[e], inp.anchors[e][t]) for e, t in inp.turn_mask.nonzero().tolist()]
    if not keys:
        return {}
    sizes = Counter(keys).values()
    return {"credit/step_group_size_mean": sum(sizes) / len(sizes), "credit/step_group_size_max": float(max(sizes)),
            "credit/singleton_step_groups": sum(n == 1 for n in sizes) / len(sizes)}


def turn_token_advantages(per_turn: Tensor, token_turns: Tensor) -> Tensor:
    """[E, C] token advantages: each token gets its turn's advantage (0 where token_turns is -1)."""
    picked = per_turn.gather(1, token_turns.clamp(min=0))
    return torch.where(token_turns >= 0, picked, torch.zeros_like(picked))


def apply_turn_credit(advantages: Tensor, inp: TurnInputs, cfg: AlgorithmSettings) -> Tensor:
    """`advantages` with the episode rows replaced by the configured turn credit (other rows unchanged)."""
    if not len(inp.rows):
        return advantages
    per_turn = TURN_CREDIT.get(cfg.turn_credit)(inp, cfg)
    out = advantages.clone()
    out[inp.rows] = turn_token_advantages(per_turn, inp.token_turns).to(out.dtype)
    return out
