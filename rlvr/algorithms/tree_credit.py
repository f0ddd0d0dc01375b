"""Subtree advantages for tree rollouts (TreePO, Li et al. 2025, arXiv 2508.17445, its tree advantage weighted by
subgroup size): a sample is compared with the whole group and with each subtree it belongs to, the samples that
share a prefix of its path (rlvr.rollout.tree), so credit reaches the branch points where siblings diverged.

With s_i the sample's reward, G its group and S_1, S_2, ... the subtrees holding it (the samples whose tree path starts
with its first d entries, d = 1, 2, ...; only those with at least two samples):

    A_i = [ |G| (s_i - mean_G s) + sum_d |S_d| (s_i - mean_{S_d} s) ] / [ |G| + sum_d |S_d| ]  /  (std_G s + eps)

Independent samples (no shared subtree) give GRPO exactly; a group of one has mean 0 and std 1 (GRPO's convention).
"""

from __future__ import annotations

from collections import defaultdict

from torch import Tensor

from rlvr.algorithms.advantages import ADVANTAGES, AdvantageInputs, sample_rewards
from rlvr.algorithms.groups import group_stats
from rlvr.algorithms.settings import AlgorithmSettings


def subtree_centred(scores: Tensor, group_ids: Tensor, paths: list[tuple[int, ...]]) -> Tensor:
    """[N] the size-weighted mean of s_i - mean_S s over the sets S of two or more samples holding sample i: its group
    and the subtrees sharing a prefix of its path; s_i itself for a group of one (GRPO's mean 0)."""
    groups = group_ids.tolist()
    members: dict[tuple, list[int]] = defaultdict(list)
    for i, (g, path) in enumerate(zip(groups, paths)):
        for d in range(len(path) + 1):
            members[(g, path[:d])].append(i)
    out = scores.clone()
    for i, (g, path) in enumerate(zip(groups, paths)):
        sets = [rows for d in range(len(path) + 1) if len(rows := members[(g, path[:d])]) > 1]
        if sets:
            out[i] = sum(len(rows) * (scores[i] - scores[rows].mean()) for rows in sets) / sum(map(len, sets))
    return out


@ADVANTAGES.register("tree", needs={"tree_paths"})
def tree_advantage(inp: AdvantageInputs, cfg: AlgorithmSettings) -> tuple[Tensor, None]:
    """TreePO subtree advantage (Li et al. 2025, arXiv 2508.17445): the size-weighted mean of s_i minus the mean of
    each subtree holding the sample (the group and every shared-prefix subtree of two or more), over the group std;
    GRPO for independent samples. Reads the samples' tree paths (rollout.tree)."""
    scores = sample_rewards(inp)
    _, std = group_stats(scores, inp.group_ids, cfg.std_unbiased)
    centred = subtree_centred(scores, inp.group_ids, inp.tree_paths or [()] * len(scores))
    return (centred / (std + cfg.advantage_epsilon))[:, None] * inp.mask, None
