"""The lean token-logprob path (half-precision logits, or hidden states and the head) against plain fp32
log-softmax autograd."""

import pytest
import torch

from rlvr.config import TinyModelConfig
from rlvr.models.loading import build_tiny_model, enable_activation_checkpointing, train_tokenizer
from rlvr.models.logprobs import TokenLogprobs, completion_logprobs


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_lean_logprobs_entropy_and_gradient_equal_log_softmax(temperature):
    torch.manual_seed(0)
    logits = torch.randn(3, 7, 50, requires_grad=True)
    targets, weights = torch.randint(0, 50, (3, 7)), torch.randn(3, 7)
    logp, entropy = TokenLogprobs.apply(logits, None, targets, temperature, 4)  # chunks that split rows
    (logp * weights).sum().backward()
    lean_grad, logits.grad = logits.grad, None
    reference = torch.log_softmax(logits / temperature, -1)
    expected = reference.gather(-1, targets[..., None]).squeeze(-1)
    (expected * weights).sum().backward()
    assert torch.allclose(logp, expected, atol=1e-6)
    assert torch.allclose(entropy, -(reference.exp() * reference).sum(-1), atol=1e-5)
    assert torch.allclose(lean_grad, logits.grad, atol=1e-6)


@pytest.mark.parametrize("head_trains", [True, False])
def test_logprobs_from_hidden_states_and_the_head_equal_log_softmax_of_the_logits(head_trains):
    torch.manual_seed(0)
    hidden = torch.randn(3, 7, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=head_trains)
    targets, weights = torch.randint(0, 50, (3, 7)), torch.randn(3, 7)
    logp, entropy = TokenLogprobs.apply(hidden, weight, targets, 0.7, 4)  # chunks that split rows
    (logp * weights).sum().backward()
    mine = hidden.grad, weight.grad
    hidden.grad, weight.grad = None, None
    reference = torch.log_softmax(hidden @ weight.T / 0.7, -1)
    expected = reference.gather(-1, targets[..., None]).squeeze(-1)
    (expected * weights).sum().backward()
    assert torch.allclose(logp, expected, atol=1e-5)
    assert torch.allclose(entropy, -(reference.exp() * reference).sum(-1), atol=1e-4)
    assert torch.allclose(mine[0], hidden.grad, atol=1e-5)
    if head_trains:
        assert torch.allclose(mine[1], weight.grad, atol=1e-5)
    else:  # a frozen head (LoRA) gets no gradient computed
        assert mine[1] is None and weight.grad is None


def test_a_bf16_policy_takes_the_lean_path_with_the_same_values():
    tok = train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), tok, 0)
    model = model.to(torch.bfloat16)
    ids = torch.tensor([tok("3+4=7")["input_ids"], tok("1+1=2")["input_ids"]])
    mask = torch.ones_like(ids)
    head_calls = []
    model.lm_head.register_forward_hook(lambda *_: head_calls.append(1))
    logp, entropy = completion_logprobs(model, ids, mask, 2, 0.8, with_entropy=True, chunked_head=True)
    assert head_calls == []  # the logits were made chunk by chunk from the hidden states, never as a whole
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


def test_fp32_and_cpu_runs_keep_the_logits_path():
    tok = train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), tok, 0)
    ids = torch.tensor([tok("3+4=7")["input_ids"]])
    head_calls = []
    model.lm_head.register_forward_hook(lambda *_: head_calls.append(1))
    completion_logprobs(model, ids, torch.ones_like(ids), 2, 1.0, chunked_head=True)  # fp32
    completion_logprobs(model.to(torch.bfloat16), ids, torch.ones_like(ids), 2, 1.0)  # on a CPU by default
    assert head_calls == [1, 1]


@pytest.mark.parametrize("entropy_grad", [False, True])
def test_the_chunked_head_gives_the_logits_paths_values_and_gradients_under_checkpointing(entropy_grad):
    tok = train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), tok, 0)
    model = model.to(torch.bfloat16)
    enable_activation_checkpointing(model)
    model.train()
    ids = torch.tensor([tok("3+4=7")["input_ids"], tok("1+1=2")["input_ids"]])
    mask = torch.ones_like(ids)
    mask[1, 0] = 0  # a left-padded row
    results = []
    for chunked in (True, False):
        model.zero_grad()
        logp, entropy = completion_logprobs(model, ids, mask, 2, 0.8, with_entropy=True, entropy_grad=entropy_grad,
                                            chunked_head=chunked)
        (logp.sum() + (entropy.sum() if entropy_grad else 0)).backward()
        results.append((logp.detach(), entropy, [p.grad.clone() for p in model.parameters()]))
    (logp, entropy, grads), (logp_ref, entropy_ref, grads_ref) = results
    assert torch.allclose(logp, logp_ref, atol=1e-6) and torch.allclose(entropy.detach(), entropy_ref.detach(), atol=1e-5)
    for mine, theirs in zip(grads, grads_ref):
        assert torch.allclose(mine.float(), theirs.float(), atol=1e-3, rtol=1e-2)
