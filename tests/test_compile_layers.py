"""model.compile_layers: decoder layers through torch.compile for the passes with gradient, eager otherwise."""

import copy

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rlvr.errors import ConfigError
from rlvr.models.compile import compile_training_layers, decoder_layers
from rlvr.models.loading import enable_activation_checkpointing
from rlvr.models.logprobs import completion_logprobs


def small_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=100, max_position_embeddings=128)
    return LlamaForCausalLM(config)


def test_calls_without_gradient_stay_eager_and_a_model_without_decoder_layers_is_refused():
    import torch._dynamo

    model = small_llama().eval()
    ids = torch.randint(0, 100, (2, 9))
    with torch.no_grad():
        before = model(ids).logits
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    assert compile_training_layers(model) == len(decoder_layers(model)) == 3
    with torch.no_grad():
        after = model(ids).logits
    assert torch.equal(before, after)
    assert torch._dynamo.utils.counters["stats"]["calls_captured"] == 0  # nothing compiled, nothing traced
    with pytest.raises(ConfigError, match="model.compile_layers=true .* Sequential .* model.compile_layers=false"):
        compile_training_layers(torch.nn.Sequential(torch.nn.Linear(2, 2)))


def test_the_trainer_and_sft_compile_the_policy_when_asked(fast_config, tmp_path, monkeypatch):
    import json

    import rlvr.training.sft as sft
    from rlvr.config import build_config
    from rlvr.training.trainer import Trainer

    trainer = Trainer(build_config(fast_config(model={"compile_layers": True})))
    layers = decoder_layers(trainer.model)
    assert layers and all(layer.forward.func.__name__ == "_by_grad_mode" for layer in layers)
    plain = Trainer(build_config(fast_config(tracking={"output_dir": str(tmp_path / "plain")})))
    assert not any(hasattr(layer.forward, "func") for layer in decoder_layers(plain.model))
    compiled = []  # SFT: the policy it trains is handed over (not compiled here: a minute of C++ on a CPU)
    monkeypatch.setattr(sft, "compile_training_layers", compiled.append)
    path = tmp_path / "demos.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"{i}+{i}=", "completion": str(2 * i)}) + "\n" for i in range(4)))
    sft.run_sft(build_config(fast_config(model={"compile_layers": True}, sft={
        "data_file": str(path), "epochs": 1, "output_dir": str(tmp_path / "sft")})))
    assert len(compiled) == 1 and decoder_layers(compiled[0])


@pytest.mark.slow
def test_compiled_layers_give_the_eager_logprobs_and_gradients_under_checkpointing_with_one_graph():
    """Activation checkpointing around the compiled forward, micro-batches of three lengths with left padding: the
    same logprobs and parameter gradients as eager (float rounding), from one compiled graph (about a minute of C++
    compilation on a 2-core CPU)."""
    import torch._dynamo

    eager = small_llama()
    enable_activation_checkpointing(eager)
    compiled = copy.deepcopy(eager)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compile_training_layers(compiled)
    eager.train(), compiled.train()
    for width in (20, 27, 33):
        ids = torch.randint(0, 100, (3, width))
        mask = torch.ones_like(ids)
        mask[0, :4] = 0
        results = []
        for model in (eager, compiled):
            model.zero_grad()
            logp, _ = completion_logprobs(model, ids, mask, 8, 1.0, with_entropy=True)
            logp.sum().backward()
            results.append((logp.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])))
        (logp_e, grad_e), (logp_c, grad_c) = results
        assert torch.allclose(logp_c, logp_e, atol=1e-5)
        assert torch.allclose(grad_c, grad_e, atol=1e-5, rtol=1e-4)
        assert grad_e.abs().max() > 1  # gradients that say something
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    copied = copy.deepcopy(compiled)  # a copy's layers run its own weights, compiled
    with torch.no_grad():
        for p in copied.parameters():
            p.mul_(0.5)
    copied.zero_grad(set_to_none=True)
    compiled.zero_grad(set_to_none=True)
    logp_copy, _ = completion_logprobs(copied, ids, mask, 8, 1.0)
    assert not torch.allclose(logp_copy, logp_c, atol=1e-3)
    logp_copy.sum().backward()
    assert all(p.grad is not None for p in copied.parameters())
    assert all(p.grad is None for p in compiled.parameters())
