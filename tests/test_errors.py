"""Each user mistake fails with one clear message (and no traceback from the CLI)."""

import json
import subprocess

import pytest
from conftest import ROOT, rlvr_command

from rlvr.errors import ConfigError, DataError, RlvrError
from rlvr.tasks import make_task
from rlvr.training.trainer import Trainer


def run_cli(*args):
    return subprocess.run(rlvr_command(*args), capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_cli_unknown_key_is_one_message_without_traceback():
    proc = run_cli("train", "optim.learning_rate=1e-5")
    assert proc.returncode == 2
    assert "unknown key 'optim.learning_rate'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_wrong_type():
    proc = run_cli("train", "steps=many")
    assert proc.returncode == 2 and "'steps'" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_model_path(fast_config, tmp_path):
    from rlvr.config import build_config

    cfg = build_config(fast_config(model={"name": str(tmp_path / "no-such-model")}))
    with pytest.raises(RlvrError, match="does not exist"):
        Trainer(cfg)


def test_cli_missing_model_path(tmp_path):
    proc = run_cli("train", f"model.name={tmp_path}/missing", "tracking.console=false",
                   f"tracking.output_dir={tmp_path}/out")
    assert proc.returncode == 2 and "does not exist" in proc.stderr and "Traceback" not in proc.stderr


def test_misspelt_task_suggests_nearest():
    with pytest.raises(ConfigError, match="Unknown task 'arithmatic'. Did you mean 'arithmetic'?"):
        make_task("arithmatic", 0, {})


def test_dataset_row_missing_answer_names_file_row_and_columns(tmp_path):
    path = tmp_path / "problems.jsonl"
    rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2=", "answr": "4"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as err:
        make_task("dataset", 0, {"path": str(path)})
    msg = str(err.value)
    assert "problems.jsonl, line 2" in msg and "'answer'" in msg and "answr, prompt" in msg
    assert "answer_column" in msg


def test_dataset_bad_json_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "a", "answer": "b"}\n{not json\n')
    with pytest.raises(DataError, match="bad.jsonl, line 2: not valid JSON"):
        make_task("dataset", 0, {"path": str(path)})


def test_reward_function_that_cannot_be_found(fast_config, tmp_path):
    from rlvr.config import build_config

    cfg = build_config(fast_config(rewards={"functions": [{"function": "rlvr.tasks.arithmetic:scroe"}]}))
    with pytest.raises(ConfigError, match="Did you mean 'score'"):
        Trainer(cfg)
