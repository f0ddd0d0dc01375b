import pytest
import torch

from rlvr.config import TinyModelConfig
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.rollout import SamplingParams, make_engine
from rlvr.rollout.sampling import filter_logits


@pytest.fixture(scope="module")
def policy():
    tok = train_tokenizer([f"{a}+{b}={a + b} done" for a in range(20) for b in range(20)], 48)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), tok, 0)
    return model.eval(), tok


def encode(tok, texts):
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampling_logprobs_match_a_full_forward_pass(policy, temperature):
    model, tok = policy
    engine = make_engine("hf", model, tok, batch_size=64)
    prompts = encode(tok, ["3+4=", "12+19=", "7+1="])  # different lengths exercise left padding
    torch.manual_seed(0)
    groups = engine.generate(prompts, SamplingParams(n=3, temperature=temperature, max_new_tokens=6,
                                                     return_entropy=True))
    assert [len(g) for g in groups] == [3, 3, 3]
    worst = 0.0
    for p, group in zip(prompts, groups):
        for c in group:
            ids = torch.tensor([p + c.token_ids])
            logp, entropy = completion_logprobs(model, ids, torch.ones_like(ids), len(c.token_ids), temperature,
                                                with_entropy=True)
            worst = max(worst, float((logp[0] - torch.tensor(c.logprobs)).abs().max()),
                        float((entropy[0] - torch.tensor(c.entropies)).abs().max()))
    assert worst < 1e-4, worst


def test_eos_truncation_and_text(policy):
    model, tok = policy
    engine = make_engine("hf", model, tok, batch_size=64)
    torch.manual_seed(1)
    groups = engine.generate(encode(tok, ["1+1="] * 8), SamplingParams(n=4, max_new_tokens=3))
    for c in (c for g in groups for c in g):
        ends_with_eos = bool(c.token_ids) and c.token_ids[-1] == tok.eos_token_id
        assert c.truncated == (not ends_with_eos)
        assert c.truncated == (len(c.token_ids) == 3) or ends_with_eos
        assert tok.eos_token_id not in c.token_ids[:-1]
        assert c.text == tok.decode(c.token_ids, skip_special_tokens=True)
        assert len(c.logprobs) == len(c.token_ids)


def test_stop_strings_end_the_completion(policy):
    model, tok = policy
    engine = make_engine("hf", model, tok, batch_size=64)
    torch.manual_seed(2)
    params = SamplingParams(n=16, max_new_tokens=12, temperature=1.5, stop=["1"])
    stopped = 0
    for c in engine.generate(encode(tok, ["2+2="]), params)[0]:
        if "1" in c.text:
            stopped += 1
            assert c.text.endswith("1") and not c.truncated  # ends right at the stop string
    assert stopped > 0


def test_greedy_is_deterministic_and_prefill_is_shared(policy):
    model, tok = policy
    engine = make_engine("hf", model, tok, batch_size=4)  # forces several batches
    prompts = encode(tok, ["5+5=", "9+9=", "1+2="])
    a = engine.generate(prompts, SamplingParams(n=2, greedy=True, max_new_tokens=5))
    b = engine.generate(prompts, SamplingParams(n=2, greedy=True, max_new_tokens=5))
    assert [[c.token_ids for c in g] for g in a] == [[c.token_ids for c in g] for g in b]
    assert all(g[0].token_ids == g[1].token_ids for g in a)


def test_filter_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isinf(filter_logits(logits, 2, 1.0)).tolist() == [[False, False, True, True]]
    # top_p=0.7: 0.5 alone is below 0.7, 0.5+0.3 crosses it -> keep two
    assert torch.isinf(filter_logits(logits, 0, 0.7)).tolist() == [[False, False, True, True]]
    assert torch.isinf(filter_logits(logits, 0, 0.5)).tolist() == [[False, True, True, True]]
