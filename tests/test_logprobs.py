"""The lean token-logprob path (half-precision logits) against plain fp32 log-softmax autograd."""

import pytest
import torch

from rlvr.config import TinyModelConfig
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.models.logprobs import TokenLogprobs, completion_logprobs


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_lean_logprobs_entropy_and_gradient_equal_log_softmax(temperature):
    torch.manual_seed(0)
    logits = torch.randn(3, 7, 50, requires_grad=True)
    targets, weights = torch.randint(0, 50, (3, 7)), torch.randn(3, 7)
    logp, entropy = TokenLogprobs.apply(logits, targets, temperature, 4)  # chunks that split rows
    (logp * weights).sum().backward()
    lean_grad, logits.grad = logits.grad, None
    reference = torch.log_softmax(logits / temperature, -1)
    expected = reference.gather(-1, targets[..., None]).squeeze(-1)
    (expected * weights).sum().backward()
    assert torch.allclose(logp, expected, atol=1e-6)
    assert torch.allclose(entropy, -(reference.exp() * reference).sum(-1), atol=1e-5)
    assert torch.allclose(lean_grad, logits.grad, atol=1e-6)


def test_a_bf16_policy_takes_the_lean_path_with_the_same_values():
    tok = train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), tok, 0)
    model = model.to(torch.bfloat16)
    ids = torch.tensor([tok("3+4=7")["input_ids"], tok("1+1=2")["input_ids"]])
    mask = torch.ones_like(ids)
    logp, entropy = completion_logprobs(model, ids, mask, 2, 0.8, with_entropy=True)
    logp.sum().backward()
    lean = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=3).logits[:, :-1].float() / 0.8
    reference = torch.log_softmax(logits, -1)
    expected = reference.gather(-1, ids[:, -2:, None]).squeeze(-1)
    expected.sum().backward()
    assert logp.dtype == torch.float32 and torch.allclose(logp, expected, atol=1e-5)
    assert torch.allclose(entropy, -(reference.exp() * reference).sum(-1), atol=1e-4)
    for mine, theirs in zip(lean, (p.grad for p in model.parameters())):
        assert torch.allclose(mine.float(), theirs.float(), atol=1e-2, rtol=1e-2)
