import pytest
import torch

from rlvr.algorithms import ADVANTAGES, KL_ESTIMATORS, POLICY_LOSSES, aggregate
from rlvr.algorithms.advantages import group_stats
from rlvr.config import AlgorithmConfig


def test_grpo_advantage_matches_the_formula():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 5.0], dtype=torch.float64)
    groups = torch.tensor([0, 0, 0, 1, 2])
    mask = torch.ones(5, 2, dtype=torch.float64)
    adv = ADVANTAGES.get("grpo")(scores, groups, mask, AlgorithmConfig(advantage_epsilon=1e-6))
    mu, sd = 1 / 3, torch.tensor([1.0, 0.0, 0.0]).std().item()  # unbiased, N-1
    expected0 = [(1 - mu) / (sd + 1e-6), (0 - mu) / (sd + 1e-6), (0 - mu) / (sd + 1e-6)]
    assert adv[:3, 0].tolist() == pytest.approx(expected0)
    # groups of one: mean 0, std 1 (verl convention)
    assert adv[3, 0].item() == pytest.approx(1 / (1 + 1e-6))
    assert adv[4, 1].item() == pytest.approx(5 / (1 + 1e-6))


def test_group_stats_biased_std():
    mean, std = group_stats(torch.tensor([0.0, 2.0]), torch.tensor([0, 0]), unbiased=False)
    assert mean.tolist() == [1.0, 1.0] and std.tolist() == [1.0, 1.0]


def test_dr_grpo_and_rloo():
    scores = torch.tensor([3.0, 1.0, 2.0])
    groups = torch.zeros(3, dtype=torch.long)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    cfg = AlgorithmConfig()
    assert ADVANTAGES.get("dr_grpo")(scores, groups, mask, cfg).tolist() == [[1.0, 1.0], [-1.0, 0.0], [0.0, 0.0]]
    rloo = ADVANTAGES.get("rloo")(scores, groups, mask, cfg)
    assert rloo[:, 0].tolist() == pytest.approx([3 - 1.5, 1 - 2.5, 2 - 2.0])


def test_ppo_clip_values_clip_fractions_and_dual_clip():
    cfg = AlgorithmConfig(clip_eps_low=0.2, clip_eps_high=0.28, dual_clip_c=3.0)
    old = torch.zeros(4)
    logp = torch.log(torch.tensor([1.5, 0.5, 1.1, 5.0]))
    adv = torch.tensor([1.0, -1.0, 2.0, -1.0])
    loss, stats = POLICY_LOSSES.get("ppo_clip")(logp, old, adv, torch.ones(4), cfg)
    # A>0, rho=1.5 > 1.28: clipped -> -1.28; A<0, rho=0.5 < 0.8: max(0.5, 0.8) = 0.8
    # rho=1.1 inside: -2.2; A<0, rho=5: max(5, 1.2)=5, dual clip min(5, 3) = 3
    assert loss.tolist() == pytest.approx([-1.28, 0.8, -2.2, 3.0])
    assert stats["clip_frac_high"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert stats["clip_frac_low"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert stats["clip_frac_dual"].tolist() == [0.0, 0.0, 0.0, 1.0]


def test_ppo_clip_gradient_is_minus_advantage_times_ratio_inside_the_range():
    cfg = AlgorithmConfig()
    logp = torch.tensor([0.05, -0.1], requires_grad=True)
    adv = torch.tensor([2.0, -1.0])
    loss, _ = POLICY_LOSSES.get("ppo_clip")(logp, torch.zeros(2), adv, torch.ones(2), cfg)
    loss.sum().backward()
    assert logp.grad.tolist() == pytest.approx((-adv * logp.detach().exp()).tolist())


@pytest.mark.parametrize("name,expected", [
    ("k1", [0.5, -0.5]),
    ("abs", [0.5, 0.5]),
    ("k2", [0.125, 0.125]),
])
def test_kl_estimators(name, expected):
    logp, ref = torch.tensor([0.0, -0.5]), torch.tensor([-0.5, 0.0])
    assert KL_ESTIMATORS.get(name)(logp, ref).tolist() == pytest.approx(expected)


def test_k3():
    logp, ref = torch.tensor([0.0]), torch.tensor([-0.5])
    d = -0.5
    assert KL_ESTIMATORS.get("k3")(logp, ref).item() == pytest.approx(torch.tensor(d).exp().item() - d - 1)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_aggregation_is_independent_of_micro_batching(mode):
    torch.manual_seed(0)
    per_token = torch.randn(6, 5, dtype=torch.float64)
    mask = (torch.rand(6, 5) > 0.3).double()
    mask[:, 0] = 1
    tokens, seqs = float(mask.sum()), 6.0
    whole = aggregate(per_token, mask, mode, tokens, seqs, norm_constant=5)
    parts = sum(aggregate(per_token[i : i + 2], mask[i : i + 2], mode, tokens, seqs, norm_constant=5)
                for i in range(0, 6, 2))
    assert parts.item() == pytest.approx(whole.item(), rel=1e-12)
    if mode == "token-mean":
        assert whole.item() == pytest.approx(float((per_token * mask).sum() / mask.sum()))
    if mode == "seq-mean-token-mean":
        assert whole.item() == pytest.approx(float(((per_token * mask).sum(1) / mask.sum(1)).mean()))
