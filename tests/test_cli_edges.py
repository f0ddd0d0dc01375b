"""The command line and config without sharp edges: overrides anywhere and into list items, errors that name
the override, missing paths said so, --version, --dry-run, shipped recipes by name, eval of a run directory,
offline hub names, SFT on small datasets."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
import yaml
from conftest import FAST, ROOT, merge, rlvr_command

from rlvr import __version__
from rlvr.cli.main import build_parser, parse_args
from rlvr.config import build_config, load_config
from rlvr.errors import ConfigError, DataError, RlvrError


def run_cli(*args, cwd=ROOT, env=None, timeout=300):
    return subprocess.run(rlvr_command(*args), capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


def test_overrides_are_taken_after_options_too():
    args = parse_args(build_parser(), ["train", "r.yaml", "steps=2", "--resume", "auto", "optim.lr=1e-3", "seed=3"])
    assert args.recipe == "r.yaml" and args.resume == "auto"
    assert args.overrides == ["steps=2", "optim.lr=1e-3", "seed=3"]
    with pytest.raises(SystemExit):  # a stray option is still refused
        parse_args(build_parser(), ["train", "r.yaml", "--bogus", "auto"])


def test_list_items_are_addressed_by_index(write_recipe, tmp_path):
    recipe = write_recipe(merge(FAST, {"data": {"tasks": [{"name": "arithmetic", "args": {"max_operand": 9}},
                                                          {"name": "arithmetic", "label": "b"}]}}))
    cfg = load_config(recipe, ["data.tasks.1.args.max_operand=50", "data.tasks.0.weight=2"])
    assert cfg.data.tasks[0].weight == 2 and cfg.data.tasks[0].args == {"max_operand": 9}
    assert cfg.data.tasks[1].args == {"max_operand": 50}
    # A list the recipe leaves out starts from the default (one arithmetic task).
    assert load_config(None, ["data.tasks.0.args.max_operand=7"]).data.tasks[0].args == {"max_operand": 7}
    with pytest.raises(ConfigError, match=r"has 2 item\(s\), so there is no item 5.*give the whole list"):
        load_config(recipe, ["data.tasks.5.args.path=x.jsonl"])
    with pytest.raises(ConfigError, match=r"'data.tasks' is a list; address an item by its index, e.g. data.tasks.0"):
        load_config(recipe, ["data.tasks.args.path=x.jsonl"])


def test_an_override_error_names_the_override_not_the_recipe(write_recipe):
    recipe = write_recipe(FAST)
    with pytest.raises(ConfigError) as err:
        load_config(recipe, ["optim.lr=-1"])
    assert "Invalid override 'optim.lr=-1'" in str(err.value) and "recipe.yaml" not in str(err.value)
    with pytest.raises(ConfigError, match=r"Set by the override 'data.tasks=\[\{nme: x\}\]'"):
        load_config(recipe, ["data.tasks=[{nme: x}]"])
    bad = write_recipe(merge(FAST, {"optim": {"lr": -1}}), "bad.yaml")
    with pytest.raises(ConfigError, match=r"Invalid configuration \(.*bad.yaml\)") as err:
        load_config(bad, ["steps=2"])
    assert "Set by the override" not in str(err.value)


def test_resume_from_a_missing_path_says_it_does_not_exist(tmp_path):
    proc = run_cli("train", "--resume", str(tmp_path / "nonexistent"), *[f"tracking.output_dir={tmp_path}/run"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"--resume {tmp_path}/nonexistent: no such directory" in proc.stderr
    assert "COMPLETE" not in proc.stderr


def test_resume_auto_without_a_checkpoint_refuses_to_overwrite_a_run(fast_config, tmp_path):
    from rlvr.training.trainer import Trainer

    cfg = build_config(fast_config(steps=1))
    Trainer(cfg).fit()
    run = tmp_path / "run"
    for path in (run / "checkpoints").iterdir():  # a run that ended without a checkpoint (killed, every_steps=0)
        import shutil

        shutil.rmtree(path)
    before = (run / "metrics.jsonl").read_text()
    with pytest.raises(RlvrError, match="holds an earlier run .metrics.jsonl. but no checkpoint"):
        Trainer(cfg, resume="auto")
    assert (run / "metrics.jsonl").read_text() == before


def test_relative_data_path_says_what_it_was_resolved_against(tmp_path):
    from rlvr.tasks import make_task

    with pytest.raises(DataError, match=rf"'data/x.jsonl' \(resolved against the working directory {ROOT}\)"):
        make_task("dataset", 0, {"path": "data/x.jsonl"})


def test_version():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"rlvr {__version__}"


def test_dry_run_prints_config_sizes_and_first_prompt_and_writes_nothing(write_recipe, tmp_path):
    out = tmp_path / "run"
    recipe = write_recipe(merge(FAST, {"tracking": {"output_dir": str(out)}}))
    proc = run_cli("train", str(recipe), "--dry-run", "steps=7")
    assert proc.returncode == 0, proc.stderr
    config_text, facts_text = proc.stdout.split("# run")
    resolved = yaml.safe_load(config_text)
    assert resolved["steps"] == 7 and resolved["optim"]["lr"] == 1e-3
    lines = facts_text.strip().splitlines()
    facts = {m[1]: m[2] for m in (re.match(r"^(\S+(?: \S+)*)  +(.*)$", line) for line in lines) if m}
    assert re.fullmatch(r"tiny \(\d+\.?\d*K parameters, float32\)", facts["model"])
    assert "eval 10 problems" in facts["task arithmetic"] and "procedural" in facts["task arithmetic"]
    assert facts["batch"].startswith("4 prompts x 4 samples = 16 completions per step")
    # The first prompt as encoded (decoded back): 'a+b=' in single-character tokens.
    assert re.fullmatch(r"\d\+\d=", facts["first prompt"]) and facts["first prompt tokens"] == "4"
    assert not out.exists()


def test_shipped_recipe_by_name_from_any_directory(tmp_path):
    proc = run_cli("train", "quickstart", "--dry-run", "steps=1", "model.tiny.vocab_size=32", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "eval 200 problems" in proc.stdout
    proc = run_cli("train", "no_such_recipe", cwd=tmp_path)
    assert proc.returncode == 2 and "shipped with rlvr" in proc.stderr and "quickstart" in proc.stderr


def test_offline_hub_name_fails_at_once_with_how_to_use_a_local_directory(tmp_path):
    """No wait for a hub that cannot answer: about as fast as a run refused for a missing local directory (the
    same imports and start-up; a bound relative to it holds on a loaded machine, where a fixed one did not)."""
    import os

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    start = time.perf_counter()
    local = run_cli("train", f"model.name={tmp_path}/missing", f"tracking.output_dir={tmp_path}/local", env=env)
    baseline = time.perf_counter() - start
    assert local.returncode == 2 and "does not exist" in local.stderr
    start = time.perf_counter()
    proc = run_cli("train", "model.name=Someone/not-cached-model", f"tracking.output_dir={tmp_path}/run", env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "HF_HUB_OFFLINE is set" in proc.stderr and "model.name=DIR" in proc.stderr
    assert time.perf_counter() - start < 2 * baseline + 10


def test_eval_takes_a_run_directory_or_checkpoint_and_reuses_its_config(fast_config, tmp_path):
    from rlvr.training.trainer import Trainer

    Trainer(build_config(fast_config(steps=1))).fit()
    run = tmp_path / "run"
    checkpoint = next((run / "checkpoints").iterdir())
    for target in (checkpoint, run):
        proc = run_cli("eval", str(target), "--num-problems", "3", "--output", str(tmp_path / "eval"))
        assert proc.returncode == 0, proc.stderr
        report = json.loads((tmp_path / "eval" / "eval.json").read_text())
        assert report["task"] == "arithmetic" and report["problems"] == 3


def test_sft_uses_every_row_when_asked_for_more(fast_config, tmp_path, capsys):
    from rlvr.training.sft import demonstrations

    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"{i}+1=", "answer": str(i + 1), "sol": str(i + 1)}) + "\n"
                            for i in range(5)))
    task = {"name": "dataset", "args": {"path": str(path), "solution_column": "sol"}}
    cfg = build_config(fast_config(data={"tasks": [task]}, sft={"num_examples": 256}))
    pairs = demonstrations(cfg)
    assert pairs == [(f"{i}+1=", str(i + 1)) for i in range(5)]
    assert "sft.num_examples=256, but the tasks hold only 5 training rows; using all 5" in capsys.readouterr().err
    no_solutions = build_config(fast_config(data={"tasks": [{"name": "dataset", "args": {"path": str(path)}}]}))
    with pytest.raises(DataError, match=r"data.tasks\[\].args.solution_column=NAME"):
        demonstrations(no_solutions)


def test_rows_given_as_a_dataset_path_point_at_the_python_api():
    from rlvr.tasks import make_task

    with pytest.raises(ConfigError, match=r"args.path must be a file, directory or hub name, not a list.*rlvr.train"):
        make_task("dataset", 0, {"path": [{"prompt": "1+1=", "answer": "2"}]})
