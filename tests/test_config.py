import pytest

from rlvr.config import RunConfig, load_config, parse_override
from rlvr.errors import ConfigError


def test_defaults_validate_and_units_are_explicit():
    cfg = RunConfig()
    assert cfg.data.prompts_per_step == 16 and cfg.rollout.samples_per_prompt == 8
    assert cfg.optim.micro_batch_size == 8


def test_recipe_and_overrides(write_recipe):
    path = write_recipe({"steps": 7, "optim": {"lr": 1e-5}})
    cfg = load_config(path, ["optim.lr=2e-4", "rollout.stop=['</answer>']", "data.prompts_per_step=3"])
    assert cfg.steps == 7
    assert cfg.optim.lr == pytest.approx(2e-4)
    assert cfg.rollout.stop == ["</answer>"]
    assert cfg.data.prompts_per_step == 3


def test_unknown_key_names_it_and_suggests_the_nearest():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["optim.lrr=1e-5"])
    msg = str(err.value)
    assert "unknown key 'optim.lrr'" in msg and "Did you mean 'lr'?" in msg


def test_wrong_value_type_names_field_and_value():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["rollout.temperature=hot"])
    msg = str(err.value)
    assert "'rollout.temperature'" in msg and "'hot'" in msg and "number" in msg


def test_mini_batches_must_divide_samples():
    with pytest.raises(ConfigError, match="mini_batches=3 must divide"):
        load_config(None, ["data.prompts_per_step=2", "rollout.samples_per_prompt=2", "optim.mini_batches=3"])


def test_override_syntax_errors_are_clear():
    with pytest.raises(ConfigError, match="key.sub=value"):
        parse_override("optim.lr")
    with pytest.raises(ConfigError, match="Recipe file 'nope.yaml' does not exist"):
        load_config("nope.yaml")


def test_ray_rewards_need_a_cluster_address():
    with pytest.raises(ConfigError, match="cluster.ray_address"):
        load_config(None, ["rewards.backend=ray"])
    assert load_config(None, ["rewards.backend=ray", "cluster.ray_address=auto"]).cluster.ray_address == "auto"


def test_without_ray_installed_asking_for_it_names_the_extra(monkeypatch):
    import sys

    from rlvr.assembly import make_reward_pool
    from rlvr.errors import RlvrError
    from rlvr.rewards.pool import RewardPool

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    cfg = load_config(None, [])
    assert isinstance(make_reward_pool(cfg.rewards, cfg.cluster), RewardPool)  # Ray is never imported unless asked
    cfg = load_config(None, ["cluster.ray_address=auto"])
    with pytest.raises(RlvrError, match=r"pip install 'rlvr\[ray\]'"):
        make_reward_pool(cfg.rewards, cfg.cluster)


def test_recipes_and_overrides_read_yaml_1_2_so_a_bare_word_stays_a_word(tmp_path):
    """PyYAML's YAML 1.1 reads on/off/yes/no as booleans, 010 as 8, 1:30 as 90 and a date as a date, so a judge's
    `yes: [Yes, yes]` became `{True: [True, True]}`; YAML 1.2's core schema keeps each what it looks like."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "rewards:\n  functions:\n    - function: judge\n"
        "      args: {model: m, yes: [Yes, yes, On], no: [No, no, Off]}\n"
        "data:\n  tasks:\n    - name: arithmetic\n"
        "      args: {mode: off, code: 010, clock: 1:30, day: 2026-11-28, scale: 1e-3, hex: 0x1F, flag: true, none: ~}\n")
    cfg = load_config(recipe, ["data.tasks.0.args.extra=no", "optim.lr=3e-6", "tracking.tensorboard=off"])
    assert cfg.rewards.functions[0].args == {"model": "m", "yes": ["Yes", "yes", "On"], "no": ["No", "no", "Off"]}
    assert cfg.data.tasks[0].args == {"mode": "off", "code": 10, "clock": "1:30", "day": "2026-11-28", "scale": 1e-3,
                                      "hex": 31, "flag": True, "none": None, "extra": "no"}
    assert cfg.optim.lr == 3e-6 and cfg.tracking.tensorboard == "off"
    assert parse_override("x.y=1e5") == (["x", "y"], 1e5) and parse_override("x.y=model.v2") == (["x", "y"], "model.v2")


def test_a_written_config_reads_back_the_same_with_strings_that_look_like_other_types(tmp_path):
    """config.yaml (what --resume and `rlvr report` read) quotes every string YAML 1.1 or 1.2 could read otherwise."""
    from rlvr.config import dump_config

    args = {"a": "1e-5", "b": "on", "c": "010", "d": "0o17", "e": "true", "f": "2026-11-28", "g": 1e-5, "h": 7}
    cfg = load_config(None, [f"data.tasks.0.args={args!r}".replace("'", '"')])
    assert cfg.data.tasks[0].args == args
    dump_config(cfg, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == cfg
