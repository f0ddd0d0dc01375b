"""Rollout correction: formulas, conformance with verl on fixed inputs, config presets, and a sampler that draws at
another temperature than the trainer scores at."""

import math

import pytest
import torch

from rlvr.algorithms import KL_ESTIMATORS, POLICY_LOSSES
from rlvr.algorithms.correction import (
    CORRECTION_PRESETS,
    CorrectionSpec,
    importance_weights,
    keep_mask,
    ratio_summary,
    rollout_correction,
    truncate,
)
from rlvr.config import AlgorithmConfig, TinyModelConfig, build_config
from rlvr.errors import ConfigError
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.rollout import SamplingParams, make_engine
from rlvr.training.batch import RolloutBatch
from rlvr.training.update import LossSetup, accumulate_gradients

# Fixed inputs: trainer (old/proximal) and rollout logprobs of three sequences with 4, 3 and 2 valid tokens.
TRAINER = torch.tensor([[-0.5, -1.2, -0.1, -2.0], [-0.3, -0.9, -3.0, -0.7], [-1.0, -0.2, -0.4, -0.05]],
                       dtype=torch.float64)
ROLLOUT = torch.tensor([[-0.6, -0.4, -0.1, -2.5], [-0.3, -1.6, -1.5, -0.7], [-1.1, -0.25, -0.3, -0.2]],
                       dtype=torch.float64)
MASK = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.float64)


def test_weights_follow_their_formulas():
    log_ratio = TRAINER - ROLLOUT
    token = importance_weights(log_ratio, MASK, "token")
    for b in range(3):
        for t in range(4):
            expected = math.exp(TRAINER[b, t] - ROLLOUT[b, t]) if MASK[b, t] else 0.0
            assert token[b, t].item() == pytest.approx(expected, rel=1e-12)
    seq = importance_weights(log_ratio, MASK, "sequence")
    geo = importance_weights(log_ratio, MASK, "geometric")
    for b in range(3):
        valid = [t for t in range(4) if MASK[b, t]]
        total = sum(TRAINER[b, t].item() - ROLLOUT[b, t].item() for t in valid)
        assert seq[b, valid].tolist() == pytest.approx([math.exp(total)] * len(valid), rel=1e-12)
        assert geo[b, valid].tolist() == pytest.approx([math.exp(total / len(valid))] * len(valid), rel=1e-12)
        assert (seq[b, len(valid):] == 0).all() and (geo[b, len(valid):] == 0).all()
    assert truncate(token, 2.0).max().item() == 2.0
    assert truncate(token, 2.0)[0, 0].item() == token[0, 0].item()  # below the cap: unchanged
    kept = keep_mask(token, MASK, 0.5, 2.0)
    assert kept.tolist() == [[1 if MASK[b, t] and 0.5 <= token[b, t] <= 2.0 else 0 for t in range(4)] for b in range(3)]
    # Log ratios past +-20 are clamped before exp (verl's safety bound): no inf.
    huge = importance_weights(torch.tensor([[50.0, 50.0]]), torch.ones(1, 2), "sequence")
    assert torch.isfinite(huge).all() and huge[0, 0].item() == pytest.approx(math.exp(20.0))


# Expected values: obtained once by running verl's own functions (volcengine/verl @ b178a3cd5,
# verl/trainer/ppo/rollout_corr_helper.py: compute_rollout_correction_weights with threshold 2.0,
# compute_rollout_rejection_mask with token_k1 "0.5_2.0" and seq_mean_k1 "0.9_1.1111111111111112",
# compute_offpolicy_metrics) on TRAINER/ROLLOUT/MASK above, in a scratch script outside this repository. The
# definitions coincide where verl's thresholds are symmetric (lower = 1/upper): its k1 rejection bounds
# log(pi_rollout/pi_train), ours bound pi_train/pi_rollout.
VERL_TOKEN_TIS = [[1.1051709180756475, 0.4493289641172216, 1.0, 1.6487212707001282],
                  [1.0, 2.0, 0.22313016014842982, 0.0], [1.1051709180756477, 1.0512710963760241, 0.0, 0.0]]
VERL_SEQ_TIS = [[0.8187307530779819] * 4, [0.4493289641172216] * 3 + [0.0], [1.1618342427282833] * 2 + [0.0] * 2]
VERL_TOKEN_MASK = [[1.0, 0.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]
VERL_GEO_MASK = [[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]
VERL_KL, VERL_K3, VERL_CHI2 = 0.09444444433950615, 0.1607273370395891, 0.39701575578800785


def test_matches_verl_on_fixed_inputs():
    token_w, _, _ = rollout_correction(TRAINER, ROLLOUT, MASK, CORRECTION_PRESETS["tis"])
    seq_w, _, _ = rollout_correction(TRAINER, ROLLOUT, MASK, CORRECTION_PRESETS["seq_tis"])
    assert (token_w * MASK).flatten().tolist() == pytest.approx(sum(VERL_TOKEN_TIS, []), abs=1e-12)
    assert (seq_w * MASK).flatten().tolist() == pytest.approx(sum(VERL_SEQ_TIS, []), abs=1e-12)
    _, token_keep, _ = rollout_correction(TRAINER, ROLLOUT, MASK, CorrectionSpec(mask="token", mask_low=0.5,
                                                                                  mask_high=2.0))
    _, geo_keep, _ = rollout_correction(TRAINER, ROLLOUT, MASK, CorrectionSpec(mask="geometric", mask_low=0.9,
                                                                                mask_high=1 / 0.9))
    assert (token_keep * MASK).tolist() == VERL_TOKEN_MASK
    assert (geo_keep * MASK).tolist() == VERL_GEO_MASK
    _, _, stats = rollout_correction(TRAINER, ROLLOUT, MASK, CorrectionSpec())
    tokens = MASK.sum()
    assert float((stats["rollout_corr/kl_k1"] * MASK).sum() / tokens) == pytest.approx(VERL_KL, rel=1e-7)
    assert float((stats["rollout_corr/kl_k3"] * MASK).sum() / tokens) == pytest.approx(VERL_K3, rel=1e-7)
    summary = ratio_summary((TRAINER - ROLLOUT)[MASK > 0])
    assert summary["rollout_corr/chi2_token"] == pytest.approx(VERL_CHI2, rel=1e-7)


def test_stats_count_truncated_and_masked_tokens():
    spec = CorrectionSpec(weight="token", weight_cap=2.0, mask="token", mask_low=0.5, mask_high=2.0)
    weight, keep, stats = rollout_correction(TRAINER, ROLLOUT, MASK, spec)
    ratio = torch.exp(TRAINER - ROLLOUT)
    assert float((stats["rollout_corr/truncated_frac"] * MASK).sum()) == float(((ratio > 2) * MASK).sum()) == 1
    outside = ((ratio < 0.5) | (ratio > 2)) * MASK
    assert float((stats["rollout_corr/masked_frac"] * MASK).sum()) == float(outside.sum()) == 3
    assert not weight.requires_grad and not keep.requires_grad
    summary = ratio_summary((TRAINER - ROLLOUT)[MASK > 0])
    assert summary["rollout_corr/ratio_max"] == pytest.approx(float(ratio[MASK > 0].max()))
    assert summary["rollout_corr/ratio_min"] == pytest.approx(float(ratio[MASK > 0].min()))
    assert summary["rollout_corr/ratio_p50"] == pytest.approx(float(ratio[MASK > 0].median()))


def test_presets_and_config():
    cfg = build_config({"algorithm": {"rollout_correction": "tis"}})
    assert cfg.algorithm.rollout_correction.spec() == CorrectionSpec(weight="token", weight_cap=2.0)
    cfg = build_config({"algorithm": {"rollout_correction": {"preset": "icepop", "mask_high": 3.0}}})
    spec = cfg.algorithm.rollout_correction.spec()
    assert (spec.mask, spec.mask_low, spec.mask_high, spec.weight) == ("token", 0.5, 3.0, "none")
    assert build_config({}).algorithm.rollout_correction.spec() == CorrectionSpec() == CORRECTION_PRESETS["none"]
    with pytest.raises(ConfigError, match="icepop"):
        build_config({"algorithm": {"rollout_correction": "icepopp"}})
    with pytest.raises(ConfigError, match="mask_low"):
        build_config({"algorithm": {"rollout_correction": {"mask": "token", "mask_low": 3.0, "mask_high": 2.0}}})


@pytest.fixture(scope="module")
def mismatched():
    """A tiny policy, samples drawn at temperature 1.6 (the rollout engine) and the same samples scored at 1.0
    (the trainer): a deliberate sampler/trainer mismatch."""
    tok = train_tokenizer([f"{a}+{b}={a + b} done" for a in range(20) for b in range(20)], 48)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), tok, 0)
    with torch.no_grad():  # a peaked next-token distribution, as a trained model has (an untrained one is ~uniform)
        model.get_output_embeddings().weight.mul_(6.0)
    engine = make_engine("hf", model, tok, batch_size=64)
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ["3+4=", "12+19=", "7+1="]]
    batches = {}
    for temperature in (1.0, 1.6):
        torch.manual_seed(0)
        groups = engine.generate(prompts, SamplingParams(n=4, temperature=temperature, max_new_tokens=8))
        batch = RolloutBatch.from_completions(prompts, groups, tok.pad_token_id, [{}] * len(prompts))
        batch.loss_mask = batch.completion_mask
        batch.advantages = torch.randn(len(batch), 1).expand_as(batch.completion_mask).contiguous()
        batches[temperature] = batch
    return model, batches


def _trainer_logprobs(model, batch):
    with torch.no_grad():
        logp, _ = completion_logprobs(model, batch.input_ids, batch.attention_mask, batch.completion_width, 1.0)
    return logp.float()


def _gradient(model, batch, spec=CorrectionSpec(), loss="ppo_clip", bypass=False):
    a = AlgorithmConfig(loss_aggregation="seq-mean-token-sum")  # normaliser = sequences: masks do not move it
    if bypass:
        batch = RolloutBatch(**{**batch.__dict__, "old_logprobs": batch.rollout_logprobs})
    setup = LossSetup(algorithm=a, policy_loss=POLICY_LOSSES.get(loss), kl_estimator=KL_ESTIMATORS.get("k3"),
                      kl_coef=0.0, temperature=1.0, norm_constant=8, micro_batch_size=5, on_policy=not bypass,
                      correction=spec, bypass=bypass)
    model.zero_grad(set_to_none=True)
    accumulate_gradients(model, batch, setup)
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).clone()


def test_mismatched_sampler_masks_tokens_and_matched_one_does_not(mismatched):
    model, batches = mismatched
    icepop = CORRECTION_PRESETS["icepop"]
    fractions, kls = {}, {}
    for temperature, batch in batches.items():
        trainer = _trainer_logprobs(model, batch)
        _, keep, stats = rollout_correction(trainer, batch.rollout_logprobs, batch.completion_mask, icepop)
        tokens = batch.completion_mask.sum()
        fractions[temperature] = float((stats["rollout_corr/masked_frac"] * batch.completion_mask).sum() / tokens)
        kls[temperature] = float((stats["rollout_corr/kl_k3"] * batch.completion_mask).sum() / tokens)
    assert fractions[1.0] == 0.0 and kls[1.0] < 1e-6  # same distribution: ratio 1 up to float noise
    assert fractions[1.6] > 0.0 and kls[1.6] > 100 * max(kls[1.0], 1e-9)


def test_masked_tokens_get_no_gradient_and_tis_reweights_it(mismatched):
    """IcePop's gradient is the plain gradient over the kept tokens only; TIS on REINFORCE is REINFORCE with the
    advantages scaled by min(r, 2); a matched sampler leaves the gradient as it is."""
    model, batches = mismatched
    batch = batches[1.6]
    ratio = torch.exp(_trainer_logprobs(model, batch) - batch.rollout_logprobs)
    mask = batch.completion_mask
    icepop = CORRECTION_PRESETS["icepop"]
    kept = ((ratio >= 0.5) & (ratio <= 5.0)).float() * mask
    assert 0 < kept.sum() < mask.sum()
    reference = RolloutBatch(**{**batch.__dict__, "loss_mask": kept})
    assert torch.allclose(_gradient(model, batch, icepop), _gradient(model, reference), atol=1e-6)
    assert not torch.allclose(_gradient(model, batch, icepop), _gradient(model, batch), atol=1e-6)

    assert ((ratio > 2.0) & (mask > 0)).any()  # some weights are truncated
    scaled = RolloutBatch(**{**batch.__dict__, "advantages": batch.advantages * ratio.clamp(max=2.0)})
    tis = CORRECTION_PRESETS["tis"]
    assert torch.allclose(_gradient(model, batch, tis, "reinforce"), _gradient(model, scaled, loss="reinforce"),
                          atol=1e-6)

    matched = batches[1.0]
    for spec in (icepop, tis):
        assert torch.allclose(_gradient(model, matched, spec), _gradient(model, matched), atol=1e-5)


def test_bypass_takes_the_ratio_against_the_rollout_policy(mismatched):
    """Bypass: the PPO ratio is pi_theta / pi_rollout. A matched sampler gives the on-policy gradient; a mismatched
    one is clipped where the ratio leaves [1 - eps, 1 + eps], so the gradient changes."""
    model, batches = mismatched
    assert torch.allclose(_gradient(model, batches[1.0], bypass=True), _gradient(model, batches[1.0]), atol=1e-5)
    assert not torch.allclose(_gradient(model, batches[1.6], bypass=True), _gradient(model, batches[1.6]), atol=1e-4)


def test_trainer_logs_the_correction(fast_config):
    from rlvr.training.trainer import Trainer

    cfg = build_config(fast_config(steps=2, algorithm={"rollout_correction": {"preset": "icepop", "loss": "bypass"}}))
    trainer = Trainer(cfg)
    metrics = trainer.fit()
    for key in ("rollout_corr/masked_frac", "rollout_corr/kl_k3", "rollout_corr/ratio_p95", "rollout_corr/ratio_max"):
        assert math.isfinite(metrics[key]), key
    assert metrics["rollout_corr/masked_frac"] == 0.0  # same engine, same temperature: nothing to mask
