"""What a run shows people: the console (banner, progress, summary; files and 80-column terminals), the sampled
completions, the trackers (wandb offline, an MLflow file store, trackio local, read back through their own
APIs), evaluation settings that cannot take effect, and resumes."""

import importlib.util
import json
import math
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, rlvr_command
from test_trainer import rows_of

from rlvr.config import build_config
from rlvr.envs import make_tasks
from rlvr.errors import ConfigError
from rlvr.evaluation.checks import eval_setting_warnings
from rlvr.training.trainer import Trainer

STYLE = re.compile(r"\x1b\[[0-9;]*m")  # colours and weights
CURSOR = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")  # redraws: each starts a new frame
FIELDS = {"step", "task", "uid", "sample", "prompt", "completion", "reward", "reward/verifier", "reward/length",
          "correct", "advantage", "length", "truncated", "answer", "answer_from", "reference", "answer_matches"}
OFFLINE = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1",
           "MLFLOW_DISABLE_TELEMETRY": "true", "WANDB_DISABLE_GIT": "true"}


KEYS = ("reward/mean", "actor/entropy", "response_length/mean", "optim/lr", "perf/step_s")  # read back per tracker


def assert_series(points: list[tuple[int, float]], logged: list[dict], key: str) -> None:
    """A tracker's (step, value) points of `key` are metrics.jsonl's, every step."""
    assert [s for s, _ in points] == [r["step"] for r in logged], key
    assert [v for _, v in points] == pytest.approx([r[key] for r in logged], rel=1e-6), key


def console_run(fast_config, write_recipe, **extra):
    """A recipe for a short run that prints (console on), and the environment to run it in."""
    recipe = write_recipe(fast_config(steps=5, tracking={"console": True, "log_every": 2, "report": True,
                                                         "output_dir": fast_config()["tracking"]["output_dir"]},
                                      **extra))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "LINES": "24", "TERM": "xterm-256color"}
    return recipe, env


def test_a_run_writing_to_a_file_prints_a_banner_a_line_per_log_every_steps_and_a_summary(
        fast_config, write_recipe, tmp_path):
    recipe, env = console_run(fast_config, write_recipe)
    log = tmp_path / "run.log"
    with log.open("w") as out:
        done = subprocess.run(rlvr_command("train", str(recipe)), stdout=out, stderr=subprocess.STDOUT, env=env,
                              timeout=300)
    text = log.read_text()
    assert done.returncode == 0, text
    assert "== rlvr train ==" in text
    for label in ("output", "model", "device", "task arithmetic", "batch", "steps", "algorithm", "rewards",
                  "first prompt"):
        assert re.search(rf"^{label}\s+\S", text, re.M), f"banner lacks {label}:\n{text}"
    assert "4 prompts x 4 samples = 16 completions per step" in text and re.search(r"^steps\s+5 ", text, re.M)
    progress = re.findall(r"^train step (\d+)/5 \(\d+%\)  elapsed \d:\d\d:\d\d  eta \d:\d\d:\d\d  reward=\S+",
                          text, re.M)
    assert progress == ["1", "2", "4", "5"], text  # the first step, every log_every=2 steps, the last
    summary = text[text.index("== rlvr train: done =="):]
    for label in ("final", "wall time", "reward failures", "checkpoint", "report", "next"):
        assert re.search(rf"^{label}\s+\S", summary, re.M), f"summary lacks {label}:\n{summary}"
    assert "rlvr eval " in summary and "rlvr report " in summary and "step-0000005" in summary


def test_the_same_run_in_an_80_column_terminal_keeps_step_total_and_eta_uncut(fast_config, write_recipe):
    recipe, env = console_run(fast_config, write_recipe)
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdout is the pseudo-terminal
        os.execvpe(sys.executable, rlvr_command("train", str(recipe)), env)
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    raw = b"".join(chunks).decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, raw[-3000:]
    lines = [line for line in CURSOR.sub("\n", STYLE.sub("", raw)).split("\n") if line.strip()]
    bars = [line for line in lines if line.lstrip().startswith("train ")]
    assert bars, raw[-3000:]
    assert max(len(line) for line in bars) <= 80
    final = bars[-1]
    assert re.search(r" 5/5 +\d:\d\d:\d\d eta \d:\d\d:\d\d$", final.rstrip()), final
    assert not any("…" in line for line in bars), bars
    assert any(re.match(r"reward=\S+ +acc=\S+", line) for line in lines)  # metrics: a line of their own
    assert "== rlvr train: done ==" in raw


def test_completion_rows_hold_every_field_and_match_the_logged_rewards(fast_config, length_reward):
    cfg = build_config(fast_config(steps=3, rewards={"functions": [{"function": "task"},
                                                                   {"function": length_reward, "weight": 0.5}]},
                                   tracking={"log_completions_every": 2, "log_completions_groups": 4}))
    Trainer(cfg).fit()
    out = Path(cfg.tracking.output_dir)
    rows = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    metrics = {r["step"]: r for r in rows_of(out)}
    assert sorted({r["step"] for r in rows}) == [2, 3]  # every 2 steps, and the last
    for step in (2, 3):
        mine = [r for r in rows if r["step"] == step]
        assert len(mine) == 4 * 4  # all 4 groups of the step, 4 samples each
        assert all(set(r) == FIELDS for r in mine), set(mine[0]) ^ FIELDS
        assert math.isclose(sum(r["reward"] for r in mine) / len(mine), metrics[step]["reward/mean"], abs_tol=1e-6)
        assert math.isclose(sum(r["reward/length"] for r in mine) / len(mine), metrics[step]["reward/length/mean"],
                            abs_tol=1e-6)
        assert math.isclose(sum(r["correct"] for r in mine) / len(mine), metrics[step]["accuracy"], abs_tol=1e-6)
        for r in mine:
            assert math.isclose(r["reward"], r["reward/verifier"] + 0.5 * r["reward/length"], abs_tol=1e-5)
            assert r["reward/length"] == len(r["completion"]) and 0 < r["length"] <= 4
            assert r["prompt"].endswith("=") and r["reference"] == str(eval(r["prompt"][:-1]))  # noqa: S307
            assert r["answer_matches"] is None if r["answer"] is None else r["answer_matches"] == (
                r["answer"] == r["reference"])
            assert r["answer_from"] == "verifier"  # the answer shown is the one the verifier scored
            assert r["reward/verifier"] < 1 or r["answer"] == r["reference"]
        for uid in {r["uid"] for r in mine}:  # GRPO advantages: (reward - group mean) / std, centred per group
            group = [r for r in mine if r["uid"] == uid]
            assert abs(sum(r["advantage"] for r in group)) < 1e-4
            best = max(group, key=lambda r: r["reward"])
            assert best["advantage"] == max(r["advantage"] for r in group)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning")
def test_wandb_mlflow_and_trackio_each_hold_the_config_every_metric_row_and_the_completions(
        fast_config, tmp_path, monkeypatch):
    missing = [name for name in ("wandb", "mlflow", "trackio") if importlib.util.find_spec(name) is None]
    if missing:  # not imported here: trackio reads its store's location once, at import
        pytest.skip(f"not installed: {', '.join(missing)}")
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    trackio_dir = tmp_path / "trackio"
    cfg = build_config(fast_config(steps=3, tracking={
        "report_to": ["wandb", "mlflow", "trackio"], "project": "rlvr-test", "run_name": "sinks", "tags": ["ci"],
        "log_completions_every": 2, "wandb": {"mode": "offline"}, "trackio": {"dir": str(trackio_dir)}}))
    Trainer(cfg).fit()
    out = Path(cfg.tracking.output_dir)
    logged = rows_of(out)
    completions = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == [1, 2, 3] and {r["step"] for r in completions} == {2, 3}

    # MLflow: the file store under <output_dir>/mlruns, read with MlflowClient (metric history, load_table)
    from mlflow.tracking import MlflowClient

    uri = (out / "mlruns").as_uri()
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("rlvr-test").experiment_id])
    assert run.data.params["optim.lr"] == "0.001" and run.data.params["data.prompts_per_step"] == "4"
    assert run.data.tags["mlflow.runName"] == "sinks" and "ci" in run.data.tags
    for key in KEYS:
        history = client.get_metric_history(run.info.run_id, key)
        assert_series([(m.step, m.value) for m in history], logged, key)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # load_table searches runs through the global store
    table = client.load_table(run.info.experiment_id, "completions/step_000003.json", run_ids=[run.info.run_id])
    assert list(table["completion"]) == [r["completion"] for r in completions if r["step"] == 3]
    assert list(table["reward"]) == pytest.approx([r["reward"] for r in completions if r["step"] == 3])

    # trackio: the local SQLite store, read with trackio's storage API
    from trackio.sqlite_storage import SQLiteStorage

    assert SQLiteStorage.get_runs("rlvr-test") == ["sinks"]
    assert SQLiteStorage.get_run_config("rlvr-test", "sinks")["optim.lr"] == 0.001
    entries = SQLiteStorage.get_logs("rlvr-test", "sinks")
    for key in KEYS:
        assert_series([(e["step"], e[key]) for e in entries if key in e], logged, key)
    tables = {e["step"]: e["completions"]["_value"] for e in entries if "completions" in e}
    assert sorted(tables) == [2, 3]
    assert [t["completion"] for t in tables[2]] == [r["completion"] for r in completions if r["step"] == 2]

    # wandb: the offline run's transaction log, read with wandb's own reader (wandb leet inspect --json)
    (run_dir,) = (out / "wandb").glob("offline-run-*")
    dump = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(run_dir)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **OFFLINE})
    records = [json.loads(line) for line in dump.stdout.splitlines() if line.startswith("{")]
    (header,) = [r["run"] for r in records if r["type"] == "run"]
    assert header["display_name"] == "sinks" and header["project"] == "rlvr-test" and header["tags"] == ["ci"]
    assert header["config"]["update"]["optim"]["lr"] == 0.001
    history = [r["history"]["item"] for r in records if r["type"] == "history"]
    for key in KEYS:
        assert_series([(h["_step"], h[key]) for h in history if key in h], logged, key)
    tables = {h["_step"]: h for h in history if h.get("completions._type") == "table-file"}
    assert sorted(tables) == [2, 3] and tables[3]["completions.nrows"] == 8  # 2 groups x 4 samples
    saved = json.loads((run_dir / "files" / tables[3]["completions.path"]).read_text())
    column = saved["columns"].index("completion")
    assert [row[column] for row in saved["data"]] == [r["completion"] for r in completions if r["step"] == 3]


def test_eval_settings_that_cannot_take_effect_are_named_before_training(fast_config):
    def warnings(**extra):
        cfg = build_config(fast_config(**extra))
        return eval_setting_warnings(cfg, make_tasks(cfg.data.tasks, 0))

    assert warnings() == []
    (ignored,) = warnings(eval={"best_metric": "eval/accuracy"})
    assert "eval.best_metric" in ignored and "eval.every_steps=0" in ignored
    two = {"tasks": [{"name": "arithmetic", "args": {"eval_size": 5}},
                     {"name": "arithmetic", "label": "noeval", "args": {"eval_size": 0}}]}
    (partial,) = warnings(eval={"every_steps": 1}, data=two)
    assert "noeval" in partial and "covers only arithmetic" in partial
    with pytest.raises(ConfigError, match="no task has held-out problems"):
        warnings(eval={"every_steps": 1}, data={"tasks": [{"name": "arithmetic", "args": {"eval_size": 0}}]})


def test_a_resumed_run_names_its_checkpoint_and_a_finished_one_says_so(fast_config, capsys):
    cfg = build_config(fast_config(steps=2, checkpoint={"every_steps": 1}, tracking={"console": True}))
    Trainer(cfg).fit()
    longer = build_config(fast_config(steps=3, tracking={"console": True}))
    capsys.readouterr()
    Trainer(longer, resume="auto").fit()
    text = capsys.readouterr().out
    assert re.search(r"^resumed from\s+\S+step-0000002 \(step 2\)$", text, re.M), text
    assert "train step 3/3" in text
    before = (Path(cfg.tracking.output_dir) / "metrics.jsonl").read_text()
    assert Trainer(longer, resume="auto").fit() == {}
    text = capsys.readouterr().out
    assert "already finished (3/3 steps" in text and "train step" not in text
    assert (Path(cfg.tracking.output_dir) / "metrics.jsonl").read_text() == before


def test_a_run_that_stops_at_a_target_names_the_target_not_an_eta_to_its_cap():
    """SFT with sft.stop_at_accuracy: its step count is only a cap, so the progress lines say what it waits for."""
    import io

    from rlvr.tracking.console import ConsoleProgress

    out = io.StringIO()
    progress = ConsoleProgress(3200, log_every=1, description="sft", stream=out, until="sft/val_accuracy >= 0.45")
    progress.update(8, {"sft/loss": 0.5})
    line = out.getvalue().strip()
    assert re.fullmatch(r"sft step 8 \(at most 3200\)  elapsed \d:\d\d:\d\d  until sft/val_accuracy >= 0.45  "
                        r"loss=0.5", line), line
    capped = io.StringIO()
    ConsoleProgress(3200, log_every=1, description="sft", stream=capped).update(8, {"sft/loss": 0.5})
    assert " eta " in capped.getvalue()


def test_a_bare_yaml_on_or_off_for_tensorboard_means_the_switch_it_spells(tmp_path):
    """`tracking.tensorboard=off` and `tensorboard: off` in a recipe mean off (recipes are read as YAML 1.2, where
    `off` is a word, not YAML 1.1's false)."""
    from rlvr.config import load_config

    assert load_config(None, ["tracking.tensorboard=off"]).tracking.sinks() == []
    assert load_config(None, ["tracking.tensorboard=on"]).tracking.sinks() == ["tensorboard"]
    recipe = tmp_path / "r.yaml"
    recipe.write_text("tracking:\n  tensorboard: off\n")
    assert load_config(recipe).tracking.tensorboard == "off"
    with pytest.raises(ConfigError, match="tracking.tensorboard"):
        load_config(None, ["tracking.tensorboard=sometimes"])
