"""One prompt forward for a prompt's samples (rlvr.models.prompt_prefix) gives the per-sample forward's logprobs and
gradients, whatever the micro-batches."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig

from rlvr.algorithms import KL_ESTIMATORS, POLICY_LOSSES
from rlvr.config import AlgorithmConfig, TinyModelConfig
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.models.prompt_prefix import PromptPrefix, shares_prompt_forward
from rlvr.rollout.base import Completion
from rlvr.training.batch import RolloutBatch
from rlvr.training.scoring import BatchScorer
from rlvr.training.update import LossSetup, accumulate_gradients


@pytest.fixture(scope="module")
def model():
    tok = train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40)
    m = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64), tok, 0)
    return m.double()


def grouped_batch(vocab: int) -> RolloutBatch:
    """Five groups of three samples over four distinct prompts (groups 0 and 3 repeat one prompt), completions of
    1 to 8 tokens, one sample an episode whose middle tokens the environment wrote."""
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, vocab, (int(torch.randint(2, 7, (1,), generator=g)),), generator=g).tolist()
               for _ in range(4)]
    prompts.append(list(prompts[0]))
    groups = []
    for p in range(len(prompts)):
        group = []
        for s in range(3):
            length = 1 if (p, s) == (1, 0) else int(torch.randint(2, 9, (1,), generator=g))
            toks = torch.randint(3, vocab, (length,), generator=g).tolist()
            policy = [i not in (1, 2) for i in range(length)] if (p, s) == (2, 1) else None
            logps = [(-float(torch.rand(1, generator=g))) if policy is None or policy[i] else 0.0 for i in range(length)]
            group.append(Completion(toks, "", logps, False, policy_mask=policy))
        groups.append(group)
    batch = RolloutBatch.from_completions(prompts, groups, pad_id=0, metadata=[{}] * len(prompts))
    mask = batch.completion_mask.double()
    batch.advantages = torch.randn(len(batch), 1, generator=g, dtype=torch.float64) * mask
    batch.loss_mask = mask
    batch.old_logprobs = batch.rollout_logprobs.double()
    batch.ref_logprobs = batch.rollout_logprobs.double() - 0.1 * mask
    return batch


def setup_for(share: bool, micro: int) -> LossSetup:
    a = AlgorithmConfig(entropy_coef=0.01, kl_coef=0.05)
    return LossSetup(algorithm=a, policy_loss=POLICY_LOSSES.get(a.policy_loss), kl_estimator=KL_ESTIMATORS.get("k3"),
                     kl_coef=0.05, temperature=0.7, norm_constant=8.0, micro_batch_size=micro, on_policy=False,
                     share_prompts=share)


def gradients(model, batch: RolloutBatch, share: bool, micro: int) -> tuple[dict[str, torch.Tensor], dict]:
    model.zero_grad(set_to_none=True)
    sums = accumulate_gradients(model, batch, setup_for(share, micro))
    return {n: p.grad.clone() for n, p in model.named_parameters()}, sums


def test_distinct_prompts_are_found_by_their_tokens_and_each_row_points_at_its_own():
    batch = grouped_batch(40)
    ids, mask, index = batch.distinct_prompts()
    assert len(ids) == 4 and len(index) == len(batch) == 15
    width = batch.input_ids.shape[1] - batch.completion_width
    for row in range(len(batch)):
        own = batch.input_ids[row, :width][batch.attention_mask[row, :width] > 0]
        assert torch.equal(ids[index[row]][mask[index[row]] > 0], own)
    assert torch.equal(index[:3], index[12:])  # groups 0 and 4 ask the same prompt
    assert (mask.sum(0) > 0).all()  # no column is padding in every prompt


@pytest.mark.parametrize("micro", [1, 4, 15])
def test_shared_prompt_gradients_equal_the_per_sample_forward(model, micro):
    batch = grouped_batch(model.config.vocab_size)
    model.train()
    per_sample, plain_sums = gradients(model, batch, share=False, micro=micro)
    shared, shared_sums = gradients(model, batch, share=True, micro=micro)
    assert sum(float(g.abs().sum()) for g in per_sample.values()) > 0
    # float64 weights, but RMSNorm computes in float32: the paths agree to float32 rounding, not float64's.
    for name, g in per_sample.items():
        torch.testing.assert_close(shared[name], g, rtol=1e-6, atol=1e-8, msg=name)
    for key in ("loss", "entropy", "kl_ref", "logprob_diff"):
        assert shared_sums[key] == pytest.approx(plain_sums[key], rel=1e-7), key


def test_the_prompt_share_of_the_gradient_goes_through_the_prompt_forward(model, monkeypatch):
    """Without the backward through the prompt forward, the gradient misses what reaches parameters through the
    prompt's keys and values: the equality above rests on that path."""
    batch = grouped_batch(model.config.vocab_size)
    model.train()
    per_sample, _ = gradients(model, batch, share=False, micro=4)
    monkeypatch.setattr(PromptPrefix, "backward", lambda self: None)
    cut, _ = gradients(model, batch, share=True, micro=4)
    name = "model.layers.0.self_attn.v_proj.weight"
    assert not torch.allclose(cut[name], per_sample[name], rtol=1e-3)


def test_a_chunked_head_behind_a_shared_prompt_gives_the_per_sample_logprobs_and_gradients():
    """With the head applied a chunk at a time (on CUDA by default), the prompt's last hidden state is the leaf the
    completions' backward fills, and the prompt forward carries it on."""
    policy = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64),
                              train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40), 0)
    policy = policy.to(torch.bfloat16).train()
    batch = grouped_batch(policy.config.vocab_size)
    width, weights = batch.completion_width, batch.completion_mask * torch.randn(batch.completion_mask.shape)
    results = []
    for shared in (True, False):
        policy.zero_grad(set_to_none=True)
        if shared:
            ids, mask, row_prompt = batch.distinct_prompts()
            prefix = PromptPrefix(policy, ids, mask, grad=True, chunk=2, chunked_head=True)
            assert prefix.split is not None and prefix.last.shape[-1] == policy.config.hidden_size
            logp, _ = prefix.completion_logprobs(row_prompt, batch.input_ids[:, -width:],
                                                 batch.attention_mask[:, -width:], 0.7)
            (logp * weights).sum().backward()
            prefix.backward()
        else:
            logp, _ = completion_logprobs(policy, batch.input_ids, batch.attention_mask, width, 0.7,
                                          chunked_head=False)
            (logp * weights).sum().backward()
        results.append((logp.detach() * batch.completion_mask, {n: p.grad.float() for n, p in policy.named_parameters()}))
    (logp, grads), (logp_ref, grads_ref) = results
    torch.testing.assert_close(logp, logp_ref, rtol=0, atol=1e-2)  # bf16: the two forwards may round differently
    for name, g in grads_ref.items():
        assert float((grads[name] - g).norm()) <= 0.03 * float(g.norm()) + 1e-4, name


def test_shared_prompt_logprobs_without_gradient_equal_the_per_sample_ones(model):
    batch = grouped_batch(model.config.vocab_size)
    model.eval()
    out = {}
    for share in (False, True):
        with torch.no_grad():
            scorer = BatchScorer(model, batch, torch.device("cpu"), 1.0, share, chunk=2, grad=False)
            assert (scorer.prefix is not None) == share
            rows = torch.arange(len(batch))
            out[share], _ = scorer(rows, batch.select(rows))
    mask = batch.completion_mask > 0
    torch.testing.assert_close(out[True][mask], out[False][mask], rtol=1e-7, atol=1e-9)


def test_models_a_cached_prompt_cannot_reproduce_take_the_per_sample_forward(model):
    assert shares_prompt_forward(model)
    sliding = LlamaConfig(layer_types=["full_attention", "sliding_attention"], num_hidden_layers=2)
    assert not shares_prompt_forward(type("M", (), {"config": sliding})())
    name = "activation_checkpointing" if hasattr(model, "activation_checkpointing_enable") else "gradient_checkpointing"
    getattr(model, f"{name}_enable")()
    try:
        assert not shares_prompt_forward(model)
    finally:
        getattr(model, f"{name}_disable")()
