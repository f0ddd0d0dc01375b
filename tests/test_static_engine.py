"""The static-cache engine against the hf engine (greedy, token for token) and against a full forward pass
(sampling logprobs), on tiny config-built Llama, Qwen2, Qwen3 and Mistral decoders."""

import json
from pathlib import Path

import pytest
import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from rlvr.models.loading import train_tokenizer
from rlvr.models.logprobs import completion_logprobs
from rlvr.rollout import SamplingParams, group_generator, make_engine
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.rollout.static import StaticCacheEngine

FAMILIES = {
    "llama": (LlamaConfig, LlamaForCausalLM, {}),
    "llama-rope-llama3": (LlamaConfig, LlamaForCausalLM, {"rope_parameters": {
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16}}),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM, {"tie_word_embeddings": True}),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM, {"head_dim": 16}),
    "mistral-window-4": (MistralConfig, MistralForCausalLM, {"sliding_window": 4}),
}


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer([f"{a}+{b}={a + b} done" for a in range(20) for b in range(20)], 48)


def tiny(tokenizer, family: str, seed: int = 0):
    config_class, model_class, extra = FAMILIES[family]
    config = config_class(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                          pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
                          **extra)
    torch.manual_seed(seed)
    return model_class(config).eval()


def encode(tok, texts):
    return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def token_ids(groups):
    return [[c.token_ids for c in g] for g in groups]


def often_generated_token(model, tok, prompts) -> int:
    """A token greedy decoding produces early: made an extra EOS so rows finish at different steps (compaction)."""
    first = make_engine("hf", model, tok, 64).generate(prompts, SamplingParams(greedy=True, max_new_tokens=3))
    return first[0][0].token_ids[1]


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_is_token_identical_to_the_hf_engine(tokenizer, family):
    model = tiny(tokenizer, family)
    equal_lengths = family.startswith("mistral")  # transformers' windows count left padding; ours count tokens
    texts = ["3+4=", "1+9=", "7+1=", "5+5="] if equal_lengths else ["3+4=", "12+19=", "7+1=", "1", "19+19=5"]
    prompts = encode(tokenizer, texts)
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, often_generated_token(model, tokenizer, prompts)]
    params = SamplingParams(n=2, greedy=True, max_new_tokens=16)
    static = make_engine("static", model, tokenizer, batch_size=6)  # several batches
    assert isinstance(static, StaticCacheEngine)
    expected = make_engine("hf", model, tokenizer, batch_size=6).generate(prompts, params)
    got = static.generate(prompts, params)
    assert token_ids(got) == token_ids(expected)
    assert [[c.truncated for c in g] for g in got] == [[c.truncated for c in g] for g in expected]
    assert {len(c.token_ids) for g in got for c in g} != {16}  # some rows finished early: compaction ran
    # a second call reuses the cache (and must not see the first call's keys)
    assert token_ids(static.generate(prompts[::-1], params)) == token_ids(expected)[::-1]


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_the_cuda_layout_runs_eagerly_on_a_cpu(tokenizer, family):
    """Power-of-two batch buckets with padding slots, compaction between buckets and rounded-up cache columns (what
    CUDA graphs are captured for), run eagerly: still token-identical to the hf engine."""
    model = tiny(tokenizer, family)
    prompts = encode(tokenizer, ["3+4=", "12+19=", "7+1=", "1", "19+19=5"])
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, often_generated_token(model, tokenizer, prompts)]
    params = SamplingParams(n=3, greedy=True, max_new_tokens=20)  # 15 rows: a bucket of 16 with a padding slot
    static = make_engine("static", model, tokenizer, batch_size=64)
    static.static_shapes = True
    steps = []
    original = static._run_step
    static._run_step = lambda b, width: steps.append((b, width)) or original(b, width)
    got = static.generate(prompts, params)
    assert token_ids(got) == token_ids(make_engine("hf", model, tokenizer, 64).generate(prompts, params))
    assert steps[0] == (16, 64) and len({b for b, _ in steps}) > 1 and all(b & (b - 1) == 0 for b, _ in steps)


@pytest.mark.slow
def test_compiled_layers_are_token_identical_on_a_cpu(tokenizer):
    """compile_layers(): one torch.compile graph for the decoder layer, reused by every layer (about 30 s of C++
    compilation on a CPU)."""
    model = tiny(tokenizer, "qwen3")
    prompts = encode(tokenizer, ["3+4=", "12+19=", "7+1="])
    params = SamplingParams(n=2, greedy=True, max_new_tokens=10)
    static = make_engine("static", model, tokenizer, batch_size=64)
    static.static_shapes = True  # one bucket shape, one compilation
    static.compile_layers()
    assert token_ids(static.generate(prompts, params)) == token_ids(
        make_engine("hf", model, tokenizer, 64).generate(prompts, params))


def test_rollout_compile_layers_compiles_a_static_engine_and_is_refused_elsewhere(tokenizer, fast_config):
    from rlvr.config import build_config
    from rlvr.errors import ConfigError

    model = tiny(tokenizer, "qwen2")
    assert make_engine("static", model, tokenizer, 64, compile_layers=True).compiled_layer is not None
    assert make_engine("static", model, tokenizer, 64).compiled_layer is None
    with pytest.raises(ConfigError, match="rollout.compile_layers=true .* rollout.engine=hf generates with "
                                          "HFRolloutEngine"):
        make_engine("hf", model, tokenizer, 64, compile_layers=True)
    with pytest.raises(ConfigError, match="compile_layers .* max_staleness"):
        build_config(fast_config(rollout={"compile_layers": True, "max_staleness": 1}))


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3", "mistral-window-4"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampling_logprobs_and_entropy_match_a_full_forward_pass(tokenizer, family, temperature):
    model = tiny(tokenizer, family)
    engine = make_engine("static", model, tokenizer, batch_size=64)
    prompts = encode(tokenizer, ["3+4=", "12+19=", "7+1="])
    torch.manual_seed(0)
    groups = engine.generate(prompts, SamplingParams(n=3, temperature=temperature, max_new_tokens=10, top_k=20,
                                                     return_entropy=True))
    worst = 0.0
    for p, group in zip(prompts, groups):
        for c in group:
            ids = torch.tensor([p + c.token_ids])
            with torch.no_grad():
                logp, entropy = completion_logprobs(model, ids, torch.ones_like(ids), len(c.token_ids), temperature,
                                                    with_entropy=True)
            worst = max(worst, float((logp[0] - torch.tensor(c.logprobs)).abs().max()),
                        float((entropy[0] - torch.tensor(c.entropies)).abs().max()))
    print(f"static engine vs full forward, {family}, T={temperature}: max |logprob/entropy diff| = {worst:.2e}")
    assert worst < 1e-4, worst


@pytest.mark.parametrize("static_shapes", [False, True])
def test_a_groups_samples_do_not_depend_on_what_shares_the_batch(tokenizer, static_shapes):
    model = tiny(tokenizer, "qwen3")
    engine = make_engine("static", model, tokenizer, batch_size=64)
    engine.static_shapes = static_shapes
    a, b, c = encode(tokenizer, ["3+4=", "12+19=", "7+1"])
    params = SamplingParams(n=4, temperature=1.5, max_new_tokens=12)

    def sample(prompts, keys):
        return engine.generate(prompts, params, [group_generator(torch.device("cpu"), 0, k) for k in keys])

    alone = sample([a], ["a"])
    assert token_ids(sample([b, a, c], ["b", "a", "c"]))[1] == token_ids(alone)[0]
    assert token_ids(sample([a, c], ["a", "c"]))[0] == token_ids(alone)[0]
    assert len({tuple(x) for x in token_ids(alone)[0]}) > 1  # the samples of a group differ from each other


def test_eos_truncation_min_new_tokens_and_text(tokenizer):
    model = tiny(tokenizer, "llama")
    eos = often_generated_token(model, tokenizer, encode(tokenizer, ["1+1="]))
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, eos]
    engine = make_engine("static", model, tokenizer, batch_size=64)
    torch.manual_seed(1)
    completions = [c for g in engine.generate(encode(tokenizer, ["1+1="] * 4), SamplingParams(n=4, max_new_tokens=5))
                   for c in g]
    assert any(not c.truncated for c in completions) and any(c.truncated for c in completions)
    for c in completions:
        ends_with_eos = c.token_ids[-1] in (tokenizer.eos_token_id, eos)
        assert c.truncated == (not ends_with_eos)
        assert c.truncated == (len(c.token_ids) == 5) or ends_with_eos
        assert not {tokenizer.eos_token_id, eos} & set(c.token_ids[:-1])
        assert c.text == tokenizer.decode(c.token_ids, skip_special_tokens=True)
        assert len(c.logprobs) == len(c.token_ids)
    fixed = engine.generate(encode(tokenizer, ["1+1="]), SamplingParams(n=16, max_new_tokens=5, min_new_tokens=5))
    assert all(len(c.token_ids) == 5 and c.truncated for c in fixed[0])


def test_stop_strings_end_the_completion(tokenizer):
    model = tiny(tokenizer, "qwen2")
    engine = make_engine("static", model, tokenizer, batch_size=64)
    torch.manual_seed(2)
    stopped = 0
    for c in engine.generate(encode(tokenizer, ["2+2="]), SamplingParams(n=16, max_new_tokens=12, temperature=1.5,
                                                                         stop=["1"]))[0]:
        if "1" in c.text:
            stopped += 1
            assert c.text.endswith("1") and not c.truncated
    assert stopped > 0


def test_in_place_weight_updates_are_seen_by_the_next_generation(tokenizer):
    model = tiny(tokenizer, "llama")
    engine = make_engine("static", model, tokenizer, batch_size=64)
    prompts = encode(tokenizer, ["3+4=", "12+19="])
    params = SamplingParams(greedy=True, max_new_tokens=8)
    before = token_ids(engine.generate(prompts, params))
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    model(torch.tensor([prompts[0]]), labels=torch.tensor([prompts[0]])).loss.backward()
    optimizer.step()  # in place
    after = token_ids(engine.generate(prompts, params))
    assert after != before
    assert after == token_ids(make_engine("hf", model, tokenizer, 64).generate(prompts, params))


def test_lora_adapters_apply(tokenizer):
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(tiny(tokenizer, "qwen2"), peft.LoraConfig(r=4, target_modules="all-linear",
                                                                         init_lora_weights=False))
    prompts = encode(tokenizer, ["3+4=", "12+19="])
    params = SamplingParams(n=2, greedy=True, max_new_tokens=8)
    engine = make_engine("static", model, tokenizer, batch_size=64)
    assert isinstance(engine, StaticCacheEngine)
    with_adapters = token_ids(engine.generate(prompts, params))
    assert with_adapters == token_ids(make_engine("hf", model, tokenizer, 64).generate(prompts, params))
    with model.disable_adapter():
        assert token_ids(engine.generate(prompts, params)) != with_adapters


def test_other_architectures_fall_back_to_the_hf_engine_with_a_message(tokenizer, capsys):
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=2,
                                       bos_token_id=None, eos_token_id=tokenizer.eos_token_id))
    assert isinstance(make_engine("static", gpt2, tokenizer, 8), HFRolloutEngine)
    assert "does not cover model type 'gpt2'" in capsys.readouterr().err
    dynamic = tiny(tokenizer, "llama")
    dynamic.model.rotary_emb.rope_type = "dynamic"
    assert isinstance(make_engine("static", dynamic, tokenizer, 8), HFRolloutEngine)
    assert "length-dependent RoPE scaling 'dynamic'" in capsys.readouterr().err


def test_training_with_the_static_engine_is_on_policy(fast_config):
    from rlvr.config import build_config
    from rlvr.training.trainer import Trainer

    cfg = build_config(fast_config(steps=2, rollout={"engine": "static"}))
    trainer = Trainer(cfg)
    assert isinstance(trainer.engine, StaticCacheEngine)
    trainer.fit()
    rows = [json.loads(line) for line in (Path(cfg.tracking.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "actor/loss" in r] == [1, 2]
    assert all(r["rollout/logprob_abs_diff"] < 1e-4 for r in rows if "actor/loss" in r)


@pytest.mark.slow
def test_quickstart_learns_with_the_static_engine(tmp_path):
    from rlvr.quickstart import run_quickstart

    summary = run_quickstart(seed=0, output_dir=str(tmp_path / "qs"), overrides=["rollout.engine=static"])
    print(f"quickstart with rollout.engine=static: {summary['accuracy_after_sft']:.3f} after SFT, "
          f"{summary['accuracy_after_rl']:.3f} after RL, {summary['wall_seconds']} s")
    # As with the hf engine (docs/results.md): RL gains 20+ points over the SFT start. The SFT start does not depend
    # on the engine (SFT does not generate).
    assert summary["accuracy_after_rl"] >= summary["accuracy_after_sft"] + 0.2


def test_inverse_cdf_draws_each_token_with_its_probability_and_never_a_zero():
    """The static engine's draw: frequencies over 200k rows match the probabilities (within 4 standard errors);
    tokens of probability 0 (masked by top-k/top-p or EOS before min_new_tokens) are never drawn, even at u = 0
    or u just below 1."""
    from rlvr.rollout.static import inverse_cdf

    probs = torch.tensor([0.0, 0.5, 0.0, 0.3, 0.2, 0.0])
    rows = 200_000
    drawn = inverse_cdf(probs.expand(rows, -1), torch.rand(rows, generator=torch.Generator().manual_seed(0)))
    freq = torch.bincount(drawn, minlength=6).double() / rows
    assert (freq - probs.double()).abs().max() < 4 * (0.25 / rows) ** 0.5
    assert freq[[0, 2, 5]].sum() == 0
    edges = inverse_cdf(probs.expand(2, -1), torch.tensor([0.0, 1.0 - 2 ** -24]))
    assert edges.tolist() == [1, 4]


def test_inverse_cdf_in_blocks_draws_what_one_search_over_the_whole_row_draws():
    """Over a vocabulary of several blocks (and a partial last one), with unnormalised weights and zeros at block
    edges, the two-level draw picks the token a float64 search over the whole row picks at the same uniform number
    (all but boundary ties, which float32 block sums may move), never a zero, and the first/last non-zero token at
    the ends of [0, 1)."""
    from rlvr.rollout.static import CDF_BLOCK, inverse_cdf

    vocab, rows = 3 * CDF_BLOCK + 77, 20_000
    g = torch.Generator().manual_seed(1)
    weights = torch.rand(rows, vocab, generator=g) ** 4 * 7.0
    zeros = [0, 1, CDF_BLOCK - 1, CDF_BLOCK, 2 * CDF_BLOCK + 5, 3 * CDF_BLOCK, vocab - 1]
    weights[:, zeros] = 0.0
    weights[: rows // 2, CDF_BLOCK : 2 * CDF_BLOCK] = 0.0  # a whole block without weight in half of the rows
    uniform = torch.rand(rows, generator=g)
    drawn = inverse_cdf(weights, uniform)
    cdf = weights.double().cumsum(-1)
    reference = torch.searchsorted(cdf, (uniform.double() * cdf[:, -1])[:, None], right=True).squeeze(-1)
    assert (drawn == reference).double().mean() > 0.999
    assert (weights.gather(-1, drawn[:, None]) > 0).all()
    assert not ((drawn >= CDF_BLOCK) & (drawn < 2 * CDF_BLOCK))[: rows // 2].any()
    edges = inverse_cdf(weights[:2], torch.tensor([0.0, 1.0 - 2 ** -24]))
    assert edges.tolist() == [2, vocab - 2]
