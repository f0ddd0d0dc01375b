"""Every preset trains the quickstart task, and the loop features they rely on behave as specified."""

import json
from pathlib import Path

import pytest

from rlvr.algorithms import PRESETS
from rlvr.config import build_config
from rlvr.rewards.shaping import overlong_penalty
from rlvr.training.trainer import Trainer

LOGGED = ["actor/clip_frac_low", "actor/clip_frac_high", "tokens/selected_frac", "actor/ppo_kl", "actor/kl_ref",
          "actor/entropy", "advantage/zero_frac"]


def rows_of(cfg) -> list[dict]:
    return [json.loads(line) for line in (Path(cfg.tracking.output_dir) / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_trains_twenty_steps_and_logs_its_metrics(fast_config, length_reward, preset):
    cfg = build_config(fast_config(
        steps=20, algorithm={"preset": preset},
        rewards={"functions": [{"function": "task"}, {"function": length_reward, "weight": 0.1}]},
        optim={"ppo_epochs": 2, "mini_batches": 2, "micro_batch_size": 4},  # makes ratios move, so clipping can act
    ))
    trainer = Trainer(cfg)
    trainer.fit()
    rows = rows_of(cfg)
    assert [r["step"] for r in rows] == list(range(1, 21))
    for r in rows:
        assert all(k in r for k in LOGGED), [k for k in LOGGED if k not in r]
        assert r["actor/entropy"] > 0
    if cfg.algorithm.kl_coef > 0:
        assert all(r["actor/kl_ref"] is not None for r in rows)
    if preset == "forking_tokens":
        assert all(0.15 < r["tokens/selected_frac"] <= 0.3 for r in rows)
    if preset == "dapo":
        # the filter DAPO implies is resolved at set-up (RunConfig.resolved), not written into the recipe's data section
        assert trainer.cfg.data.filter.name == "dynamic_sampling" and all("sampling/wasted_frac" in r for r in rows)
        assert all("reward/overlong/mean" in r for r in rows)


def test_explicit_settings_beat_the_preset_and_features_can_be_turned_off(fast_config):
    cfg = build_config(fast_config(algorithm={"preset": "dapo", "clip_eps_high": 0.3},
                                   data={"filter": "none"}))
    assert cfg.algorithm.clip_eps_high == 0.3 and cfg.algorithm.clip_eps_low == 0.2
    assert cfg.data.filter.name == "none"


def test_dynamic_sampling_never_trains_on_a_flat_group_while_prompts_remain(fast_config, tmp_path):
    reward = tmp_path / "parity.py"
    # Groups of prompts with an even answer all get 1.0 (no variance); odd answers get varied rewards.
    reward.write_text("def parity(prompt, completion, answer, **f):\n"
                      "    return 1.0 if int(answer) % 2 == 0 else float(len(completion))\n")
    cfg = build_config(fast_config(steps=3, data={"filter": "dynamic_sampling", "max_sampling_rounds": 8},
                                   rewards={"functions": [{"function": f"{reward}:parity"}]}))
    trainer = Trainer(cfg)
    wasted, rounds = [], []
    try:
        for _ in range(3):
            batch, metrics = trainer.rollout()
            groups = batch.scores.view(cfg.data.prompts_per_step, cfg.rollout.samples_per_prompt)
            assert (groups.std(-1) > 0).all(), groups  # every trained group has reward variance
            assert metrics["sampling/filled_frac"] == 1.0
            wasted.append(metrics["sampling/wasted_frac"])
            rounds.append(metrics["sampling/rounds"])
    finally:
        trainer.pool.close()
    # even-answer groups were generated and dropped, and made the sampler go another round
    assert sum(wasted) > 0 and max(rounds) >= 2


def test_dynamic_sampling_stops_at_its_round_limit(fast_config, tmp_path):
    reward = tmp_path / "flat.py"
    reward.write_text("def flat(prompt, completion, **f):\n    return 1.0\n")
    cfg = build_config(fast_config(steps=2, data={"filter": "dynamic_sampling", "max_sampling_rounds": 3},
                                   rewards={"functions": [{"function": f"{reward}:flat"}]}))
    Trainer(cfg).fit()  # goes on: the step is topped up with flat groups that carry no gradient
    for r in rows_of(cfg):
        assert r["sampling/rounds"] == 3 and r["sampling/filled_frac"] == 0.0
        assert r["advantage/zero_frac"] == 1.0


def test_overlong_penalty_follows_dapo():
    kw = dict(prompt="", completion="", max_new_tokens=100, buffer_tokens=20)
    assert overlong_penalty(completion_tokens=80, **kw) == 0.0
    assert overlong_penalty(completion_tokens=90, **kw) == pytest.approx(-0.5)
    assert overlong_penalty(completion_tokens=100, **kw) == pytest.approx(-1.0)
    assert overlong_penalty(completion_tokens=101, **kw) == -1.0
