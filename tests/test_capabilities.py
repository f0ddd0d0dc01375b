"""Capabilities that declare what they need: estimators registered with their needs and the config checked against
them at load, tree rollouts as a wrapper over an engine with cache sessions, and settings that others imply
resolved at set-up rather than written into the user's sections by a validator."""

from __future__ import annotations

import pytest

from rlvr.algorithms import ADVANTAGES, estimator_needs
from rlvr.algorithms.advantages import grpo
from rlvr.config import AlgorithmConfig, RolloutConfig, RunConfig, Section, TreeConfig, build_config
from rlvr.errors import ConfigError
from rlvr.rollout import SamplingParams, group_engine, make_engine
from rlvr.rollout.tree import TreeRollout
from tests.test_static_engine import encode, tiny

STEP_REWARD = {"step_reward": {"function": "arithmetic_steps"}}


def test_the_built_in_estimators_declare_what_they_need():
    assert estimator_needs("process_min") == estimator_needs("process_sum") == {"step_rewards"}
    assert estimator_needs("tree") == {"tree_paths"}
    assert estimator_needs("task_relative") == estimator_needs("role_baseline") == {"roles"}
    assert estimator_needs("grpo") == estimator_needs("dcpo_smooth") == frozenset()
    with pytest.raises(ConfigError, match="Unknown advantage estimator 'grpoo'. Did you mean 'grpo'"):
        estimator_needs("grpoo")


def test_the_tree_estimator_without_tree_rollouts_is_refused_at_load():
    with pytest.raises(ConfigError, match=r"algorithm.advantage=tree reads the tree paths of tree rollouts, but "
                                          r"rollout.tree is not set: set rollout.tree"):
        build_config({"algorithm": {"advantage": "tree"}})
    cfg = build_config({"algorithm": {"advantage": "tree"}, "rollout": {"engine": "static", "tree": {}}})
    assert cfg.rollout.tree == TreeConfig()


@pytest.mark.parametrize("estimator", ["process_min", "process_sum"])
def test_each_process_estimator_without_a_step_reward_is_refused_at_load(estimator):
    with pytest.raises(ConfigError, match=rf"algorithm.advantage={estimator} needs rewards.step_reward \(a reward "
                                          r"per step, e.g. \{function: arithmetic_steps\}"):
        build_config({"algorithm": {"advantage": estimator}})
    assert build_config({"algorithm": {"advantage": estimator}, "rewards": STEP_REWARD}).rewards.step_reward


@pytest.mark.parametrize("estimator", ["task_relative", "role_baseline"])
def test_each_role_estimator_without_a_task_that_gives_roles_is_refused_at_load(estimator):
    with pytest.raises(ConfigError, match=rf"algorithm.advantage={estimator} compares samples by their role, but no "
                                          r"task in data.tasks gives roles: add one that does \(absolute_zero, "
                                          r"kuhn_poker, tictactoe"):
        build_config({"algorithm": {"advantage": estimator}, "data": {"tasks": [{"name": "arithmetic"}]}})
    for role_task in ("absolute_zero", "tictactoe", "kuhn_poker"):  # a mixture holding one is enough
        cfg = build_config({"algorithm": {"advantage": estimator},
                            "data": {"tasks": [{"name": "arithmetic"}, {"name": role_task}]}})
        assert cfg.algorithm.advantage == estimator


def test_a_plug_in_estimator_is_held_to_the_needs_it_registers():
    name = "needs_probe"
    if name not in ADVANTAGES:
        ADVANTAGES.register(name, needs={"step_rewards"})(grpo)
    if "needs_typo" not in ADVANTAGES:
        ADVANTAGES.register("needs_typo", needs={"step_reward"})(grpo)
    with pytest.raises(ConfigError, match=f"algorithm.advantage={name} needs rewards.step_reward"):
        build_config({"algorithm": {"advantage": name}})
    assert build_config({"algorithm": {"advantage": name}, "rewards": STEP_REWARD}).algorithm.advantage == name
    with pytest.raises(ConfigError, match="needs 'step_reward', which no setting of this config provides"):
        build_config({"algorithm": {"advantage": "needs_typo"}, "rewards": STEP_REWARD})


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


def sections(user: dict, cfg: RunConfig) -> None:
    """Every section of `cfg` equals that section validated alone from what the user wrote: no validator of the
    whole config rewrote a section."""
    for name, field in RunConfig.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, Section):
            assert getattr(cfg, name) == field.annotation.model_validate(user.get(name, {})), name


@pytest.mark.parametrize("user", [
    {"data": {"hints": {}}},
    {"algorithm": {"preset": "dapo"}},
    {"algorithm": {"advantage": "tree"}, "rollout": {"engine": "static", "tree": {"roots": 1}}},
    {"algorithm": {"advantage": "process_min"}, "rewards": STEP_REWARD, "data": {"hints": {}}},
])
def test_no_validator_rewrites_a_section_the_user_wrote(user):
    cfg = build_config(user)
    sections(user, cfg)
    assert cfg.implied == ()


def test_hints_train_with_tis_resolved_at_set_up_and_said_so():
    user = {"data": {"hints": {}}}
    cfg = build_config(user)
    assert cfg.algorithm == AlgorithmConfig()  # as written: the user chose no correction
    assert not cfg.algorithm.rollout_correction.spec().active
    resolved = cfg.resolved()
    assert resolved.algorithm.rollout_correction.preset == "tis"
    assert resolved.algorithm.rollout_correction.spec() == build_config(
        {"algorithm": {"rollout_correction": "tis"}}).algorithm.rollout_correction.spec()
    assert resolved.implied == ("algorithm.rollout_correction=tis: hinted samples (data.hints) are off-policy; set "
                                "algorithm.rollout_correction to choose another (docs/credit.md)",)
    assert resolved.resolved() == resolved and resolved.resolved().implied == resolved.implied  # once is enough
    assert cfg.algorithm == AlgorithmConfig()  # resolving copies
    chosen = build_config({"data": {"hints": {}}, "algorithm": {"rollout_correction": "none"}}).resolved()
    assert not chosen.algorithm.rollout_correction.spec().active and chosen.implied == ()


def test_a_presets_loop_features_are_resolved_at_set_up():
    cfg = build_config({"algorithm": {"preset": "dapo"}})
    assert cfg.data.filter.name == "none" and [f.function for f in cfg.rewards.functions] == ["task"]
    resolved = cfg.resolved()
    assert resolved.data.filter.name == "dynamic_sampling"
    assert [f.function for f in resolved.rewards.functions] == ["task", "rlvr.rewards.shaping:overlong_penalty"]
    assert [line.split(":")[0] for line in resolved.implied] == ["data.filter=dynamic_sampling",
                                                                 "rewards.functions + overlong (rlvr.rewards.shaping"]
    kept = build_config({"algorithm": {"preset": "dapo"}, "data": {"filter": "none"}}).resolved()
    assert kept.data.filter.name == "none"


def test_the_run_facts_list_what_was_implied(fast_config):
    from rlvr.reporting.run_facts import describe_run

    facts = describe_run(build_config(fast_config(data={"hints": {}})))  # `--dry-run`, as the start banner shows them
    assert facts["implied"].startswith("algorithm.rollout_correction=tis: hinted samples (data.hints) are off-policy")
    assert "implied" not in describe_run(build_config(fast_config()))
