"""The static-cache engine on CUDA: captured graphs, compaction and in-place updates against the hf engine (float32,
token for token) and bf16 sampling logprobs against a full forward pass. Skipped without CUDA."""

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

from rlvr.models.loading import train_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.rollout import SamplingParams, group_generator, make_engine
from rlvr.rollout.static import StaticCacheEngine

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer([f"{a}+{b}={a + b} done" for a in range(30) for b in range(30)], 64)


def model_on_gpu(tokenizer, family: str, dtype: torch.dtype, seed: int = 0, initializer_range: float = 0.02):
    config_class, model_class = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}[
        family]
    config = config_class(vocab_size=len(tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                          num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
                          tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id,
                          eos_token_id=tokenizer.eos_token_id, bos_token_id=None, initializer_range=initializer_range)
    torch.manual_seed(seed)
    return model_class(config).to("cuda", dtype).eval()


def encode(tok, texts):
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def token_ids(groups):
    return [[c.token_ids for c in g] for g in groups]


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_graphs_are_token_identical_to_the_hf_engine_and_see_in_place_updates(tokenizer, family):
    # Weights drawn wider than the default 0.02 make greedy rows differ and end at different steps (with the
    # default, most rows repeat one token to the end), so finished rows get compacted.
    model = model_on_gpu(tokenizer, family, torch.float32, initializer_range=0.3)
    prompts = encode(tokenizer, ["3+4=", "12+19=", "7+1=", "1", "29+29=5", "8+8="])
    params = SamplingParams(n=3, greedy=True, max_new_tokens=40)
    hf, static = make_engine("hf", model, tokenizer, 64), make_engine("static", model, tokenizer, 64)
    assert isinstance(static, StaticCacheEngine) and static.uses_graphs
    expected = hf.generate(prompts, params)
    assert token_ids(static.generate(prompts, params)) == token_ids(expected)
    assert len({b for b, _ in static.graphs}) > 1  # finished rows were compacted into a smaller bucket
    captured = dict(static.graphs)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))  # an in-place update, as the optimizer makes
    updated = static.generate(prompts, params)
    assert all(static.graphs[key] is graph for key, graph in captured.items())  # nothing recaptured
    assert token_ids(updated) == token_ids(hf.generate(prompts, params)) != token_ids(expected)


def test_bf16_sampling_logprobs_match_a_full_forward_pass(tokenizer):
    model = model_on_gpu(tokenizer, "qwen2", torch.bfloat16)
    engine = make_engine("static", model, tokenizer, 64)
    prompts = encode(tokenizer, ["3+4=", "12+19=", "7+1=", "25+3="])
    generators = [group_generator(torch.device("cuda"), 0, g) for g in range(len(prompts))]
    groups = engine.generate(prompts, SamplingParams(n=8, max_new_tokens=64, return_entropy=True), generators)
    worst, total, count = 0.0, 0.0, 0
    for p, group in zip(prompts, groups):
        for c in group:
            ids = torch.tensor([p + c.token_ids], device="cuda")
            with torch.no_grad():
                logp, _ = completion_logprobs(model, ids, torch.ones_like(ids), len(c.token_ids), 1.0)
            diff = (logp[0].float().cpu() - torch.tensor(c.logprobs)).abs()
            worst, total, count = max(worst, float(diff.max())), total + float(diff.sum()), count + len(diff)
    print(f"bf16 static engine vs full forward: max |logprob diff| = {worst:.3e}, mean {total / count:.3e} "
          f"over {count} tokens")
    assert total / count < 2e-2 and worst < 0.25, (worst, total / count)


def test_a_groups_samples_do_not_depend_on_the_batch_on_cuda(tokenizer):
    model = model_on_gpu(tokenizer, "qwen3", torch.bfloat16)
    engine = make_engine("static", model, tokenizer, 64)
    a, b = encode(tokenizer, ["3+4=", "12+19="])
    params = SamplingParams(n=4, temperature=1.5, max_new_tokens=24)

    def sample(prompts, keys):
        return token_ids(engine.generate(prompts, params, [group_generator(torch.device("cuda"), 0, k)
                                                            for k in keys]))

    assert sample([b, a], ["b", "a"])[1] == sample([a], ["a"])[0]


def test_compiled_layers_are_token_identical_to_the_hf_engine(tokenizer):
    model = model_on_gpu(tokenizer, "qwen2", torch.float32)
    prompts = encode(tokenizer, ["3+4=", "12+19=", "7+1=", "1"])
    params = SamplingParams(n=2, greedy=True, max_new_tokens=32)
    static = make_engine("static", model, tokenizer, 64)
    static.compile_layers()
    assert token_ids(static.generate(prompts, params)) == token_ids(
        make_engine("hf", model, tokenizer, 64).generate(prompts, params))


def test_the_two_level_draw_on_cuda_picks_what_it_picks_on_a_cpu():
    """inverse_cdf over Qwen's vocabulary size (148 full blocks and a partial one) with EOS zeroed: the CUDA kernels
    (float32 block sums, float64 searches) draw the CPU's tokens at the same uniforms, boundary ties aside, and
    never a zero-weight token."""
    from rlvr.rollout.static import inverse_cdf

    g = torch.Generator().manual_seed(0)
    weights = torch.softmax(3 * torch.randn(512, 151_936, generator=g), -1)
    weights[:, 0] = 0.0
    uniform = torch.rand(512, generator=g)
    on_cpu, on_cuda = inverse_cdf(weights, uniform), inverse_cdf(weights.cuda(), uniform.cuda()).cpu()
    assert (on_cpu == on_cuda).double().mean() > 0.99
    assert (weights.gather(-1, on_cuda[:, None]) > 0).all()
