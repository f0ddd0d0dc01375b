import math

import pytest
import torch

from rlvr.algorithms import (
    ADVANTAGES,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    PRESETS,
    AdaptiveKLController,
    AdvantageInputs,
    aggregate,
    compute_advantages,
    high_entropy_token_mask,
    kl_penalized_rewards,
    last_token_rewards,
    overlong_mask,
)
from rlvr.algorithms.advantages import apply_sign_weights, discounted_returns, group_stats
from rlvr.algorithms.losses import dcpo_ratio_bounds
from rlvr.algorithms.presets import apply_preset
from rlvr.config import AlgorithmConfig, build_config, load_config
from rlvr.errors import ConfigError

F64 = torch.float64


def t(values, dtype=F64):
    return torch.tensor(values, dtype=dtype)


def inputs(scores, groups, mask=None, **kw) -> AdvantageInputs:
    scores = t(scores)
    mask = torch.ones(len(scores), 2, dtype=F64) if mask is None else t(mask)
    return AdvantageInputs(scores=scores, group_ids=torch.tensor(groups), mask=mask, **kw)


def advantage(name, inp, **cfg):
    adv, history = ADVANTAGES.get(name)(inp, AlgorithmConfig(**cfg))
    return adv, history


# ---------------------------------------------------------------- advantage estimators


def test_grpo_advantage_matches_the_formula():
    adv, history = advantage("grpo", inputs([1.0, 0.0, 0.0, 1.0, 5.0], [0, 0, 0, 1, 2]), advantage_epsilon=1e-6)
    mu = 1 / 3
    sd = math.sqrt(((1 - mu) ** 2 + 2 * mu**2) / 2)  # unbiased, N-1
    assert adv[:3, 0].tolist() == pytest.approx([(1 - mu) / (sd + 1e-6), -mu / (sd + 1e-6), -mu / (sd + 1e-6)])
    # groups of one: mean 0, std 1 (verl convention)
    assert adv[3, 0].item() == pytest.approx(1 / (1 + 1e-6))
    assert adv[4, 1].item() == pytest.approx(5 / (1 + 1e-6))
    assert history is None


def test_group_stats_biased_std():
    mean, std = group_stats(torch.tensor([0.0, 2.0]), torch.tensor([0, 0]), unbiased=False)
    assert mean.tolist() == [1.0, 1.0] and std.tolist() == [1.0, 1.0]


def test_dr_grpo_and_rloo():
    mask = [[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]]
    inp = inputs([3.0, 1.0, 2.0], [0, 0, 0], mask)
    assert advantage("dr_grpo", inp)[0].tolist() == [[1.0, 1.0], [-1.0, 0.0], [0.0, 0.0]]
    rloo, _ = advantage("rloo", inp)
    assert rloo[:, 0].tolist() == pytest.approx([3 - 1.5, 1 - 2.5, 2 - 2.0])
    assert rloo[1, 1].item() == 0.0
    assert advantage("rloo", inputs([4.0], [0]))[0].tolist() == [[0.0, 0.0]]  # a group of one


def test_grpo_batch_std_centres_per_group_and_scales_by_the_batch_std():
    adv, _ = advantage("grpo_batch_std", inputs([1.0, 0.0, 0.0, 1.0], [0, 0, 1, 1]), advantage_epsilon=0.0)
    batch_std = math.sqrt(4 * 0.25 / 3)  # scores 1,0,0,1: mean 0.5, unbiased
    assert adv[:, 0].tolist() == pytest.approx([0.5 / batch_std, -0.5 / batch_std, -0.5 / batch_std, 0.5 / batch_std])


def test_reinforce_subtracts_the_constant_baseline():
    adv, _ = advantage("reinforce", inputs([1.0, 0.0], [0, 1], [[1.0, 1.0], [1.0, 0.0]]), reward_baseline=0.5)
    assert adv.tolist() == [[0.5, 0.5], [-0.5, 0.0]]


def test_last_token_rewards_put_the_score_on_the_last_valid_token():
    rewards = last_token_rewards(t([2.0, 3.0, 4.0]), t([[1, 1, 0], [0, 0, 0], [1, 1, 1]]))
    assert rewards.tolist() == [[0, 2, 0], [0, 0, 0], [0, 0, 4]]


def test_discounted_returns_stop_at_the_end_of_the_completion():
    returns = discounted_returns(t([[1.0, 2.0, 3.0]]), t([[1.0, 1.0, 0.0]]), gamma=0.5)
    assert returns.tolist() == [[1 + 0.5 * 2, 2.0, 0.0]]


def test_reinforce_pp_whitens_discounted_returns_over_the_batch():
    inp = inputs([1.0, 0.0], [0, 1], [[1, 1, 1], [1, 1, 0]])
    adv, _ = advantage("reinforce_pp", inp, gamma=0.5, advantage_epsilon=0.0)
    # returns: [0.25, 0.5, 1] and [0, 0, -]; valid mean 0.35, unbiased var 0.7 / 4
    sd = math.sqrt(0.7 / 4)
    expected = [[-0.1 / sd, 0.15 / sd, 0.65 / sd], [-0.35 / sd, -0.35 / sd, 0.0]]
    assert adv.flatten().tolist() == pytest.approx(sum(expected, []))


def test_reinforce_pp_baseline_centres_per_group_then_whitens():
    inp = inputs([1.0, 0.0, 1.0], [0, 0, 1], [[1, 1], [1, 0], [1, 1]])
    adv, _ = advantage("reinforce_pp_baseline", inp, advantage_epsilon=0.0)
    # centred per sample: 0.5, -0.5, 1 (group of one: mean 0); tokens 0.5,0.5,-0.5,1,1: mean 0.5, var 1.5/4
    sd = math.sqrt(1.5 / 4)
    assert adv.flatten().tolist() == pytest.approx([0.0, 0.0, -1 / sd, 0.0, 0.5 / sd, 0.5 / sd])


def test_ngrpo_gives_an_all_wrong_group_negative_advantages():
    adv, _ = advantage("ngrpo", inputs([0.0, 0.0, 0.0, 1.0, 0.0], [0, 0, 0, 1, 1]), advantage_epsilon=0.0)
    # group 0 with the virtual 1: {0,0,0,1} mean 0.25, unbiased std 0.5
    # group 1 with the virtual 1: {1,0,1} mean 2/3, unbiased std sqrt(1/3)
    sd1 = math.sqrt(1 / 3)
    assert adv[:, 0].tolist() == pytest.approx([-0.5, -0.5, -0.5, (1 / 3) / sd1, (-2 / 3) / sd1])
    wider, _ = advantage("ngrpo", inputs([0.0, 0.0], [0, 0]), advantage_epsilon=0.0, ngrpo_max_reward=2.0)
    # {0,0,2}: mean 2/3, unbiased std sqrt((4/9 * 2 + 16/9) / 2)
    assert wider[0, 0].item() == pytest.approx((-2 / 3) / math.sqrt((8 / 9 + 16 / 9) / 2))


def test_dcpo_smooth_mixes_step_and_cumulative_statistics():
    cfg = {"advantage_epsilon": 0.0}
    s2 = math.sqrt(0.5)  # unbiased std of {1, 0}
    # step 1: first sight, plain GRPO
    adv1, h1 = advantage("dcpo_smooth", inputs([1.0, 0.0], [0, 0], uids=["a", "a"]), **cfg)
    assert adv1[:, 0].tolist() == pytest.approx([0.5 / s2, -0.5 / s2])
    assert h1 == {"a": {"steps": 1, "mean": 0.5, "std": pytest.approx(s2)}}
    # step 2: all wrong. Cumulative mean 0.25, var (0.5 + 0) / 2 + 1/4 * 0.25^2 = 0.3125; w = 1/2
    step2 = inputs([0.0, 0.0], [0, 0], uids=["a", "a"], history=h1)
    adv2, h2 = advantage("dcpo_smooth", step2, **cfg)
    assert adv2[:, 0].tolist() == pytest.approx([0.5 * -0.25 / math.sqrt(0.3125)] * 2)
    assert h1["a"]["steps"] == 1  # the input history is not modified
    assert h2["a"]["mean"] == pytest.approx(0.25) and h2["a"]["std"] == pytest.approx(math.sqrt(0.3125))
    # step 3: {1, 0} again, w = 1/3. Cumulative mean 1/3, var (2 * 0.3125 + 0.5) / 3 + 2/9 * 0.25^2
    adv3, h3 = advantage("dcpo_smooth", inputs([1.0, 0.0], [0, 0], uids=["a", "a"], history=h2), **cfg)
    sd_tot = math.sqrt((2 * 0.3125 + 0.5) / 3 + 2 / 9 * 0.25**2)
    new, tot = 0.5 / s2, (1 - 1 / 3) / sd_tot
    assert adv3[0, 0].item() == pytest.approx(2 / 3 * new + 1 / 3 * tot)  # A1 has the smaller magnitude
    new, tot = -0.5 / s2, (0 - 1 / 3) / sd_tot
    assert adv3[1, 0].item() == pytest.approx(1 / 3 * new + 2 / 3 * tot)  # A2 has the smaller magnitude
    assert h3["a"]["steps"] == 3


def test_dcpo_smooth_keeps_other_prompts_history_and_needs_uids():
    history = {"b": {"steps": 4, "mean": 0.1, "std": 0.2}}
    _, updated = advantage("dcpo_smooth", inputs([1.0, 1.0], [0, 0], uids=["a", "a"], history=history))
    assert updated["b"] == history["b"] and updated["a"]["steps"] == 1
    with pytest.raises(ValueError, match="uid"):
        advantage("dcpo_smooth", inputs([1.0, 0.0], [0, 0]))


def test_token_rewards_replace_scores_as_the_sample_totals():
    inp = inputs([9.0, 9.0], [0, 0], [[1, 1], [1, 0]], token_rewards=t([[1.0, -0.5], [0.0, 7.0]]))
    adv, _ = advantage("dr_grpo", inp)  # totals over valid tokens: 0.5 and 0 (7.0 is padding)
    assert adv.tolist() == [[0.25, 0.25], [-0.25, 0.0]]


def test_sign_weights_scale_positive_and_negative_advantages():
    weighted = apply_sign_weights(t([[1.0, -2.0], [0.0, 3.0]]), 0.2, 2.0)
    assert weighted.flatten().tolist() == pytest.approx([0.2, -4.0, 0.0, 0.6])


def test_w_reinforce_preset_gives_lambda_for_correct_and_minus_one_for_wrong():
    adv, history = compute_advantages(inputs([1.0, 0.0], [0, 0]), AlgorithmConfig(preset="w_reinforce"))
    assert adv[:, 0].tolist() == pytest.approx([0.1, -1.0]) and history is None


# ---------------------------------------------------------------- policy losses


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
    assert stats["ppo_kl"].tolist() == pytest.approx((-logp).tolist())


def test_ppo_clip_gradient_is_minus_advantage_times_ratio_inside_the_range_and_zero_when_clipped():
    cfg = AlgorithmConfig(clip_eps_low=0.2, clip_eps_high=0.2, dual_clip_c=3.0)
    # inside, inside, clipped high (A>0), clipped low (A<0), dual-clipped (A<0, rho=5)
    logp = t([0.05, -0.1, math.log(1.5), math.log(0.5), math.log(5.0)]).requires_grad_()
    adv = t([2.0, -1.0, 1.0, -1.0, -1.0])
    loss, _ = POLICY_LOSSES.get("ppo_clip")(logp, torch.zeros(5, dtype=F64), adv, torch.ones(5), cfg)
    loss.sum().backward()
    ratio = logp.detach().exp()
    assert logp.grad.tolist() == pytest.approx([-2.0 * ratio[0].item(), 1.0 * ratio[1].item(), 0.0, 0.0, 0.0])


def _gspo_case():
    logp = t([[0.1, 0.3], [-0.05, 4.0]])
    old = torch.zeros(2, 2, dtype=F64)
    old[1, 1] = -1.0  # padding: its log-ratio 5 must not reach the sequence ratio
    return logp, old, t([[1.0, 1.0], [-1.0, -1.0]]), t([[1.0, 1.0], [1.0, 0.0]])


def test_gspo_uses_the_masked_mean_sequence_ratio():
    logp, old, adv, mask = _gspo_case()
    loss, stats = POLICY_LOSSES.get("gspo")(logp, old, adv, mask, AlgorithmConfig())
    s1 = math.exp(-0.05)  # s0 = exp(0.2) = 1.221 > 1.2: clipped for A > 0
    assert loss.flatten().tolist() == pytest.approx([-1.2, -1.2, s1, s1])
    assert stats["clip_frac_high"].tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert stats["clip_frac_low"].tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_gspo_gradient_reaches_each_token_through_its_own_logprob_only():
    logp, old, adv, mask = _gspo_case()
    logp.requires_grad_()
    loss, _ = POLICY_LOSSES.get("gspo")(logp, old, adv, mask, AlgorithmConfig())
    (loss * mask).sum().backward()
    # clipped sequence: no gradient; unclipped: d(-A s_i,t)/d logp_t = -A s_i on each valid token
    assert logp.grad.flatten().tolist() == pytest.approx([0.0, 0.0, math.exp(-0.05), 0.0])
    logp.grad = None
    loss, _ = POLICY_LOSSES.get("gspo")(logp, old, adv, mask, AlgorithmConfig(clip_eps_high=0.5))
    (loss * mask).sum().backward()
    assert logp.grad.flatten().tolist() == pytest.approx([-math.exp(0.2), -math.exp(0.2), math.exp(-0.05), 0.0])


def _cispo_case():
    logp = t([-1.0, -2.0, -0.5])
    old = logp - torch.log(t([0.5, 1.5, 6.0]))  # ratios 0.5, 1.5, 6
    return logp, old, t([1.0, -1.0, 2.0])


def test_cispo_caps_the_weight_from_above_and_keeps_every_gradient():
    logp, old, adv = _cispo_case()
    logp.requires_grad_()
    loss, stats = POLICY_LOSSES.get("cispo")(logp, old, adv, torch.ones(3), AlgorithmConfig(clip_eps_high=4.0))
    # weights 0.5, 1.5, min(6, 5) = 5; L = -w A logp
    assert loss.tolist() == pytest.approx([0.5, -3.0, 5.0])
    loss.sum().backward()
    assert logp.grad.tolist() == pytest.approx([-0.5, 1.5, -10.0])  # -w A: the weight carries no gradient
    assert stats["clip_frac_high"].tolist() == [0.0, 0.0, 1.0]
    assert stats["clip_frac_low"].tolist() == [0.0, 0.0, 0.0]


def test_cispo_two_sided_also_clips_from_below():
    logp, old, adv = _cispo_case()
    logp.requires_grad_()
    cfg = AlgorithmConfig(clip_eps_low=0.2, clip_eps_high=4.0, cispo_two_sided=True)
    loss, stats = POLICY_LOSSES.get("cispo")(logp, old, adv, torch.ones(3), cfg)
    assert loss.tolist() == pytest.approx([0.8, -3.0, 5.0])
    loss.sum().backward()
    assert logp.grad.tolist() == pytest.approx([-0.8, 1.5, -10.0])
    assert stats["clip_frac_low"].tolist() == [1.0, 0.0, 0.0]


def test_reinforce_loss_is_minus_advantage_times_logprob():
    logp = t([-1.0, -0.5]).requires_grad_()
    loss, stats = POLICY_LOSSES.get("reinforce")(logp, t([-3.0, -3.0]), t([2.0, -1.0]), torch.ones(2), AlgorithmConfig())
    assert loss.tolist() == [2.0, -0.5]
    loss.sum().backward()
    assert logp.grad.tolist() == [-2.0, 1.0]
    assert stats["clip_frac_high"].tolist() == [0.0, 0.0] and stats["ppo_kl"].tolist() == [-2.0, -2.5]


def test_dcpo_bounds_solve_the_probability_weighted_constraint():
    low, high = dcpo_ratio_bounds(torch.log(t([1.0, 0.1, 0.001, 0.8])), eps_low=0.16, eps_high=0.2, ratio_max=10.0)
    assert low[:3].tolist() == pytest.approx([0.5 + 0.5 * math.sqrt(1 - 0.64), 0.5, 0.5])
    assert high[:3].tolist() == pytest.approx([0.5 + 0.5 * math.sqrt(1.8), 0.5 + 0.5 * 3.0, 10.0])
    q, h, lo = 0.8, high[3].item(), low[3].item()
    assert (h - 1) * h * q == pytest.approx(0.2) and (1 - lo) * lo * q == pytest.approx(0.16)


def test_dcpo_loss_lets_rare_tokens_move_further_than_ppo():
    cfg = AlgorithmConfig(clip_eps_low=0.16, clip_eps_high=0.2)
    old = torch.log(t([0.1, 0.1, 1.0]))
    logp = old + torch.log(t([1.9, 2.5, 0.7]))
    adv = t([1.0, 1.0, -1.0])
    loss, stats = POLICY_LOSSES.get("dcpo")(logp, old, adv, torch.ones(3), cfg)
    # q = 0.1: bounds [0.5, 2.0] -> 1.9 inside, 2.5 clipped to 2.0; q = 1: low 0.8 -> max(0.7, 0.8)
    assert loss.tolist() == pytest.approx([-1.9, -2.0, 0.8])
    assert stats["clip_frac_high"].tolist() == [0.0, 1.0, 0.0]
    assert stats["clip_frac_low"].tolist() == [0.0, 0.0, 1.0]
    ppo_loss, _ = POLICY_LOSSES.get("ppo_clip")(logp, old, adv, torch.ones(3), cfg)
    assert ppo_loss[0].item() == pytest.approx(-1.2)


@pytest.mark.parametrize("name", POLICY_LOSSES.names())
def test_every_loss_reports_uniform_detached_per_token_stats(name):
    logp = torch.randn(2, 3, dtype=F64, generator=torch.Generator().manual_seed(0)).requires_grad_()
    loss, stats = POLICY_LOSSES.get(name)(logp, torch.zeros(2, 3, dtype=F64), t([[1.0] * 3, [-1.0] * 3]),
                                          torch.ones(2, 3, dtype=F64), AlgorithmConfig())
    assert loss.shape == (2, 3) and loss.requires_grad
    assert {"clip_frac_high", "clip_frac_low", "ppo_kl"} <= set(stats)
    for value in stats.values():
        assert value.shape == (2, 3) and not value.requires_grad


# ---------------------------------------------------------------- aggregation


@pytest.mark.parametrize("mode,expected", [
    ("token-mean", (1 + 2 + 4) / 3),
    ("seq-mean-token-sum", (3 + 4) / 2),
    ("seq-mean-token-mean", (1.5 + 4) / 2),
    ("seq-mean-token-sum-norm", 7 / (2 * 4)),
])
def test_aggregation_values(mode, expected):
    per_token, mask = t([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), t([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert aggregate(per_token, mask, mode, 3.0, 2.0, norm_constant=4).item() == pytest.approx(expected)


def test_aggregation_errors():
    with pytest.raises(ValueError, match="normalizing constant"):
        aggregate(torch.ones(1, 1), torch.ones(1, 1), "seq-mean-token-sum-norm", 1.0, 1.0)
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        aggregate(torch.ones(1, 1), torch.ones(1, 1), "mean", 1.0, 1.0)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_aggregation_is_independent_of_micro_batching(mode):
    torch.manual_seed(0)
    per_token = torch.randn(6, 5, dtype=F64)
    mask = (torch.rand(6, 5) > 0.3).double()
    mask[:, 0] = 1
    tokens, seqs = float(mask.sum()), 6.0
    whole = aggregate(per_token, mask, mode, tokens, seqs, norm_constant=5)
    parts = sum(aggregate(per_token[i : i + 2], mask[i : i + 2], mode, tokens, seqs, norm_constant=5)
                for i in range(0, 6, 2))
    assert parts.item() == pytest.approx(whole.item(), rel=1e-12)


# ---------------------------------------------------------------- KL


@pytest.mark.parametrize("name,expected", [
    ("k1", [0.5, -0.5]),
    ("abs", [0.5, 0.5]),
    ("k2", [0.125, 0.125]),
    ("k3", [math.exp(-0.5) + 0.5 - 1, math.exp(0.5) - 0.5 - 1]),
    ("k1+", [0.5, -0.5]),
    ("k3+", [math.exp(-0.5) + 0.5 - 1, math.exp(0.5) - 0.5 - 1]),
])
def test_kl_estimator_values(name, expected):
    logp, ref = t([0.0, -0.5]), t([-0.5, 0.0])
    assert KL_ESTIMATORS.get(name)(logp, ref).tolist() == pytest.approx(expected)


@pytest.mark.parametrize("name,grad", [
    ("k1", [1.0, 1.0]),
    ("k2", [0.5, -0.5]),
    ("k3", [1 - math.exp(-0.5), 1 - math.exp(0.5)]),  # d/dlogp (e^d - d - 1), d = ref - logp
    ("k1+", [0.5, -0.5]),  # straight-through: k2's gradient logp - ref
    ("k3+", [0.5, -0.5]),
])
def test_kl_estimator_gradients(name, grad):
    logp, ref = t([0.0, -0.5]).requires_grad_(), t([-0.5, 0.0])
    KL_ESTIMATORS.get(name)(logp, ref).sum().backward()
    assert logp.grad.tolist() == pytest.approx(grad)


def test_k3_is_clamped():
    assert KL_ESTIMATORS.get("k3")(t([0.0]), t([30.0])).item() == 10.0


def test_kl_penalized_rewards_subtract_the_scaled_kl_on_valid_tokens():
    kl = t([[0.2, 0.4, 9.0]]).requires_grad_()
    rewards = kl_penalized_rewards(t([[0.0, 1.0, 0.0]]), kl, 0.5, t([[1.0, 1.0, 0.0]]))
    assert rewards.flatten().tolist() == pytest.approx([-0.1, 0.8, 0.0]) and not rewards.requires_grad


def test_adaptive_kl_controller_moves_at_most_20_percent_per_horizon_and_resumes():
    ctrl = AdaptiveKLController(init_coef=0.1, target=6.0, horizon=10000)
    assert ctrl.update(current_kl=9.0, n_steps=1000) == pytest.approx(0.1 * (1 + 0.2 * 0.1))  # error 0.5 -> 0.2
    assert ctrl.update(current_kl=5.4, n_steps=1000) == pytest.approx(0.102 * (1 - 0.1 * 0.1))  # error -0.1
    restored = AdaptiveKLController(init_coef=1.0, target=6.0, horizon=10000)
    restored.load_state_dict(ctrl.state_dict())
    assert restored.value == ctrl.value


# ---------------------------------------------------------------- token selection


def test_high_entropy_mask_keeps_the_top_fraction_of_valid_tokens_of_the_step():
    entropy = t([[0.5, 0.9, 0.1], [0.9, 0.3, 7.0]])
    mask = t([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # 7.0 is padding
    assert high_entropy_token_mask(entropy, mask, rho=0.4).tolist() == [[0, 1, 0], [1, 0, 0]]  # ceil(0.4 * 5) = 2
    # ties break towards the earlier sample / token
    assert high_entropy_token_mask(entropy, mask, rho=0.2).tolist() == [[0, 1, 0], [0, 0, 0]]
    assert high_entropy_token_mask(entropy, mask, rho=0.5).tolist() == [[1, 1, 0], [1, 0, 0]]
    assert high_entropy_token_mask(entropy, mask, rho=1.0).tolist() == mask.tolist()
    with pytest.raises(ValueError, match="rho"):
        high_entropy_token_mask(entropy, mask, rho=0.0)


def test_overlong_mask_drops_truncated_completions():
    assert overlong_mask(torch.tensor([True, False]), torch.ones(2, 2)).tolist() == [[0, 0], [1, 1]]


# ---------------------------------------------------------------- presets


def test_the_preset_zoo_is_complete_and_names_registered_functions():
    assert set(PRESETS) == {"grpo", "dr_grpo", "dapo", "gspo", "cispo", "rloo", "reinforce_pp", "w_reinforce",
                            "forking_tokens", "ngrpo", "dcpo"}
    for preset in PRESETS.values():
        cfg = AlgorithmConfig(preset=preset.name)
        assert ADVANTAGES.get(cfg.advantage) and POLICY_LOSSES.get(cfg.policy_loss)
        assert all(getattr(cfg, key) == value for key, value in preset.values.items())
    assert PRESETS["dapo"].requires == ("dynamic_sampling", "overlong_shaping")


def test_preset_fills_unset_keys_and_explicit_keys_win():
    cfg = build_config({"algorithm": {"preset": "dapo", "clip_eps_high": 0.3}}).algorithm
    assert (cfg.clip_eps_low, cfg.clip_eps_high, cfg.loss_aggregation) == (0.2, 0.3, "token-mean")
    cfg = load_config(None, ["algorithm.preset=gspo", "algorithm.loss_aggregation=token-mean"]).algorithm
    assert (cfg.policy_loss, cfg.clip_eps_low, cfg.loss_aggregation) == ("gspo", 3e-4, "token-mean")
    assert apply_preset({"advantage": "rloo"}) == {"advantage": "rloo"}
    assert AlgorithmConfig().policy_loss == "ppo_clip" and AlgorithmConfig().preset is None


def test_unknown_preset_names_the_nearest():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["algorithm.preset=dapoo"])
    assert "'algorithm.preset'" in str(err.value) and "Did you mean 'dapo'?" in str(err.value)
    with pytest.raises(ConfigError, match="Did you mean 'cispo'"):
        apply_preset({"preset": "cipso"})
