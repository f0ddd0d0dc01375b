"""LoRA: only adapter weights train, checkpoints hold the adapter and a merged model, the reference is the
policy with its adapters disabled, and a LoRA run resumes."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from rlvr.config import build_config
from rlvr.models.lora import ADAPTER_DIR
from rlvr.training.trainer import Trainer

pytest.importorskip("peft")

LORA = {"r": 4, "alpha": 8.0}


def test_lora_trains_only_adapters_saves_adapter_and_merged_model_and_loads_no_reference_copy(
        fast_config, tmp_path, monkeypatch, length_reward):
    settings = {"steps": 3, "model": {"lora": LORA}, "algorithm": {"kl_coef": 0.05}, "optim": {"lr": 5e-2},
                "checkpoint": {"every_steps": 1, "keep_last": 5},
                "rewards": {"functions": [{"function": "task"}, {"function": length_reward}]}}
    cfg = build_config(fast_config(**settings))
    loads = []
    import rlvr.training.trainer as trainer_module

    real_load = trainer_module.load_model
    monkeypatch.setattr(trainer_module, "load_model", lambda *a, **k: loads.append(k.get("name")) or real_load(*a, **k))
    trainer = Trainer(cfg)
    assert trainer.ref_model is None and len(loads) == 1  # one copy of the base model, no reference model
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    base_before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if not p.requires_grad}
    adapters_before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.fit()
    params = dict(trainer.model.named_parameters())
    assert all(torch.equal(params[n], p) for n, p in base_before.items())  # the base never moves
    assert any(not torch.equal(params[n], p) for n, p in adapters_before.items())
    rows = [json.loads(line) for line in open(f"{cfg.tracking.output_dir}/metrics.jsonl")]
    assert all(r["actor/kl_ref"] is not None for r in rows if r["step"] > 0)
    assert rows[-1]["actor/kl_ref"] > 0  # the adapters moved the policy away from the reference

    last = f"{cfg.tracking.output_dir}/checkpoints/step-0000003"
    merged = AutoModelForCausalLM.from_pretrained(last)  # plain transformers, no peft
    initial = AutoModelForCausalLM.from_pretrained(f"{cfg.tracking.output_dir}/initial-model")
    ids = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad(), trainer.model.disable_adapter():
        assert torch.allclose(trainer.model(ids).logits, initial(ids).logits, atol=1e-6)
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, trainer.model(ids).logits, atol=1e-4)
        assert not torch.allclose(merged(ids).logits, initial(ids).logits, atol=1e-4)
    assert (tmp_path / "run" / "checkpoints" / "step-0000003" / ADAPTER_DIR / "adapter_config.json").is_file()

    # resuming rebuilds the base plus the checkpoint's adapters, and goes on to the same place as a straight run
    resumed = Trainer(build_config(fast_config(**settings)), resume=f"{cfg.tracking.output_dir}/checkpoints/step-0000002")
    assert resumed.step == 2 and resumed.ref_model is None
    resumed.fit()
    again = dict(resumed.model.named_parameters())
    assert all(torch.allclose(again[n], params[n], atol=1e-6) for n in trainable)
