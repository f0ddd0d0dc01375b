"""Samples whose advantage is zero everywhere are not computed (optim.skip_zero_advantage): the gradient stays the one
of the whole batch, and the decision rests on a probe of the policy loss, not on its name."""

from __future__ import annotations

import math

import pytest
import torch
from test_prompt_prefix import grouped_batch, setup_for

from rlvr.algorithms import POLICY_LOSSES
from rlvr.config import AlgorithmConfig, RunConfig, TinyModelConfig
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.training.scoring import BatchScorer
from rlvr.training.update import accumulate_gradients, trained_rows, vanishes_without_advantage


@pytest.fixture(scope="module")
def model():
    tok = train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40)
    m = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64), tok, 0)
    return m.double().train()


def gradients(model, batch, skip: bool, share: bool = True):
    setup = setup_for(share=share, micro=4)
    setup.kl_coef, setup.algorithm = 0.0, AlgorithmConfig()
    setup.skip_zero_advantage = skip
    model.zero_grad(set_to_none=True)
    sums = accumulate_gradients(model, batch, setup)
    return {n: p.grad for n, p in model.named_parameters()}, sums


@pytest.mark.parametrize("share", [False, True])
def test_skipping_zero_advantage_rows_leaves_the_gradient_unchanged(model, share):
    batch = grouped_batch(model.config.vocab_size)
    batch.advantages[3:9] = 0  # two groups whose samples all scored alike
    whole, whole_sums = gradients(model, batch, skip=False, share=share)
    skipped, sums = gradients(model, batch, skip=True, share=share)
    assert sums["skipped_rows"] == 6 and whole_sums["skipped_rows"] == 0
    assert sums["loss"] == pytest.approx(whole_sums["loss"], rel=1e-7)
    for name, g in whole.items():
        torch.testing.assert_close(skipped[name], g, rtol=1e-6, atol=1e-8, msg=name)
    assert sum(float(g.abs().sum()) for g in whole.values()) > 0


def test_a_batch_without_any_advantage_still_gives_every_parameter_a_zero_gradient(model):
    batch = grouped_batch(model.config.vocab_size)
    batch.advantages.zero_()
    whole, _ = gradients(model, batch, skip=False)
    skipped, sums = gradients(model, batch, skip=True)
    rows, stand_in = trained_rows(batch)
    assert len(rows) == 1 and stand_in and sums["skipped_rows"] == len(batch) - 1
    assert sums["entropy_tokens"] == float(batch.completion_mask.sum())  # the stand-in's entropy is the sampler's
    assert {n for n, g in whole.items() if g is not None} == {n for n, g in skipped.items() if g is not None}
    assert all(float(g.abs().max()) == 0 for g in skipped.values() if g is not None)  # AdamW still takes its step


def test_entropy_stays_over_every_sampled_token_through_the_samplers_entropy(model):
    """Skipped samples bring the sampler's entropy (here the policy's own, as an on-policy sampler's is), so the logged
    entropy is the one of the whole batch."""
    batch = grouped_batch(model.config.vocab_size)
    batch.advantages[3:9] = 0
    with torch.no_grad():
        rows = torch.arange(len(batch))
        _, entropy = BatchScorer(model, batch, torch.device("cpu"), 0.7, False, 4, grad=False)(
            rows, batch.select(rows), with_entropy=True)
    batch.rollout_entropy = torch.zeros_like(batch.completion_mask)
    batch.rollout_entropy[:, : entropy.shape[1]] = entropy * batch.completion_mask[:, : entropy.shape[1]]
    _, whole = gradients(model, batch, skip=False)
    _, skipped = gradients(model, batch, skip=True)
    assert skipped["entropy_tokens"] == whole["entropy_tokens"] == float(batch.completion_mask.sum())
    assert skipped["tokens"] < whole["tokens"]  # the trainer computed fewer tokens
    assert skipped["entropy"] == pytest.approx(whole["entropy"], rel=1e-7)


@pytest.mark.parametrize("name", POLICY_LOSSES.names())
def test_every_built_in_policy_loss_vanishes_without_advantage(name):
    assert vanishes_without_advantage(POLICY_LOSSES.get(name), AlgorithmConfig(dual_clip_c=3.0))


def test_a_loss_with_a_term_independent_of_the_advantage_is_never_skipped():
    def with_length_penalty(logp, old, advantages, mask, cfg):
        return -advantages * logp + 0.01 * logp, {}

    def constant_offset(logp, old, advantages, mask, cfg):
        return -advantages * logp + 1.0, {}

    assert not vanishes_without_advantage(with_length_penalty, AlgorithmConfig())
    assert not vanishes_without_advantage(constant_offset, AlgorithmConfig())


def test_the_trainer_skips_only_when_nothing_but_the_policy_loss_acts(fast_config):
    from rlvr.training.trainer import Trainer

    for algorithm, expect_skips in (({}, True), ({"entropy_coef": 0.01}, False)):
        trainer = Trainer(RunConfig.model_validate(fast_config(steps=1, algorithm=algorithm)))
        batch, _ = trainer.rollout()
        batch.advantages[: trainer.params.n] = 0  # one group without signal
        metrics = trainer.update(batch)
        assert math.isfinite(metrics["actor/loss"])
        skipped = metrics["actor/zero_advantage_skip_frac"]
        assert (skipped >= trainer.params.n / len(batch)) if expect_skips else skipped == 0
        trainer.pool.close()
