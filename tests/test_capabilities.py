"""Capabilities that declare what they need: tree rollouts as a wrapper over an engine with cache sessions."""

from __future__ import annotations

import pytest

from rlvr.config import RolloutConfig, TreeConfig, build_config
from rlvr.errors import ConfigError
from rlvr.rollout import SamplingParams, group_engine, make_engine
from rlvr.rollout.tree import TreeRollout
from tests.test_static_engine import encode, tiny


@pytest.fixture(scope="module")
def tokenizer():
    from rlvr.models.loading import train_tokenizer

    return train_tokenizer([f"{a}+{b}={a + b} done" for a in range(20) for b in range(20)], 48)


def test_tree_rollouts_over_an_engine_without_cache_sessions_are_refused_naming_the_engine(tokenizer):
    hf = make_engine("hf", tiny(tokenizer, "llama"), tokenizer, 8)
    with pytest.raises(ConfigError, match=r"rollout.tree decodes a group as a tree in the engine's cache sessions, "
                                          r"but rollout.engine=auto generates with HFRolloutEngine here, which has "
                                          r"none .* Set rollout.engine=static .*or drop rollout.tree"):
        group_engine(hf, RolloutConfig(tree=TreeConfig()))
    assert group_engine(hf, RolloutConfig()) is hf  # no tree: the engine itself


def test_a_run_with_tree_rollouts_on_the_hf_engine_stops_at_set_up(fast_config):
    from rlvr.training.trainer import Trainer

    # rollout.engine=auto is the hf engine on a CPU
    cfg = build_config(fast_config(rollout={"samples_per_prompt": 4, "max_new_tokens": 4, "tree": {"roots": 1}}))
    with pytest.raises(ConfigError, match="rollout.engine=auto generates with HFRolloutEngine"):
        Trainer(cfg)


def test_calls_inside_a_tree_rollouts_session_sample_independently(tokenizer):
    """Episodes play inside the engine's session: their turns are samples, not trees, as the engine gives them."""
    static = make_engine("static", tiny(tokenizer, "llama"), tokenizer, 64)
    trees = TreeRollout(static, TreeConfig(segment_tokens=2, roots=1, fork_fraction=1.0), "static")
    prompts = encode(tokenizer, ["3+4=", "12+19="])
    params = SamplingParams(n=3, greedy=True, max_new_tokens=6, min_new_tokens=6)
    with trees.session():
        inside = trees.generate(prompts, params)
    alone = static.generate(prompts, params)
    assert [[c.token_ids for c in g] for g in inside] == [[c.token_ids for c in g] for g in alone]
    assert all(c.tree_path == () for g in inside for c in g)
    grown = trees.generate(prompts, params)  # outside a session: a tree of 1 root forked into 3 leaves
    assert all(sorted(c.tree_path for c in g) == [(0, 0, 0), (0, 0, 1), (0, 1, 0)] for g in grown)
    assert sum(c.decoded for c in grown[0]) < 3 * 6
