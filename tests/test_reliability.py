"""Run-level reliability: non-finite updates skipped and counted, too many in a row stop the run; bad dataset
rows counted or refused before any compute; unwritable or full output directories refused up front; a metrics
row torn by a kill is dropped on resume."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import ROOT, rlvr_command

from rlvr.config import build_config
from rlvr.errors import DataError, RlvrError
from rlvr.tracking import MetricsLogger
from rlvr.training.trainer import Trainer


def rows_of(run_dir) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def poison_advantages(trainer: Trainer, steps: set[int]) -> None:
    """Make the loss NaN at the given steps."""
    rollout = trainer.rollout

    def poisoned():
        batch, metrics = rollout()
        if trainer.step in steps:
            batch.advantages = torch.full_like(batch.advantages, float("nan"))
        return batch, metrics

    trainer.rollout = poisoned


def record_weight_changes(trainer: Trainer) -> list[bool]:
    changed = []
    update = trainer.update

    def spy(batch):
        before = [p.detach().clone() for p in trainer.model.parameters()]
        metrics = update(batch)
        changed.append(any(not torch.equal(a, p) for a, p in zip(before, trainer.model.parameters())))
        return metrics

    trainer.update = spy
    return changed


def test_non_finite_update_is_skipped_logged_and_counted(fast_config, length_reward, capsys):
    trainer = Trainer(build_config(fast_config(steps=3, rewards={"functions": [{"function": length_reward}]})))
    poison_advantages(trainer, {2})
    changed = record_weight_changes(trainer)
    trainer.fit()
    assert changed == [True, False, True]
    rows = rows_of(trainer.out)
    assert [r["actor/skipped_updates"] for r in rows] == [0, 1, 0]
    assert rows[1]["actor/grad_norm"] is None and rows[1]["actor/loss"] is None  # NaN is logged as null
    err = " ".join(capsys.readouterr().err.split())
    assert "step 2: non-finite loss or gradient, 1 of 1 updates skipped (1 steps in a row" in err
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_non_finite_steps_in_a_row_stop_the_run_with_finite_weights(fast_config, length_reward):
    trainer = Trainer(build_config(fast_config(steps=6, optim={"max_nonfinite_steps": 3},
                                               rewards={"functions": [{"function": length_reward}]})))
    initial = [p.detach().clone() for p in trainer.model.parameters()]
    poison_advantages(trainer, set(range(1, 7)))
    with pytest.raises(RlvrError, match=r"Stopped at step 3: .*NaN/inf in 3 steps in a row \(optim.max_nonfinite_steps=3\)"):
        trainer.fit()
    assert [r["actor/skipped_updates"] for r in rows_of(trainer.out)] == [1, 1, 1]
    assert all(torch.equal(a, p) for a, p in zip(initial, trainer.model.parameters()))


@pytest.fixture
def dataset_with_bad_rows(tmp_path):
    path = tmp_path / "sums.jsonl"
    good = [json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) for a in range(3) for b in range(3)]
    lines = [*good[:4], '{"prompt": "1+', json.dumps({"prompt": "1+" * 30 + "1=", "answer": "31"}), *good[4:]]
    path.write_text("\n".join(lines) + "\n")
    return path


def dataset_run(fast_config, path, policy):
    return build_config(fast_config(steps=1, data={"tasks": [{"name": "dataset", "args": {"path": str(path)}}],
                                                   "bad_rows": policy, "max_prompt_tokens": 16}))


def test_skipped_rows_are_counted_in_the_metrics(fast_config, dataset_with_bad_rows, capsys):
    trainer = Trainer(dataset_run(fast_config, dataset_with_bad_rows, "skip"))
    assert trainer.tasks[0].size("train") == 9
    trainer.fit()
    assert rows_of(trainer.out)[0]["data/skipped_rows"] == 2
    assert "skipped 2 unusable dataset rows (data.bad_rows=skip" in " ".join(capsys.readouterr().err.split())


def test_bad_row_stops_the_run_before_any_compute(fast_config, dataset_with_bad_rows):
    cfg = dataset_run(fast_config, dataset_with_bad_rows, "error")
    with pytest.raises(DataError, match=r"sums\.jsonl, line 5: not valid JSON"):
        Trainer(cfg)
    dataset_with_bad_rows.write_text("\n".join(dataset_with_bad_rows.read_text().splitlines()[:4] +
                                               dataset_with_bad_rows.read_text().splitlines()[5:]) + "\n")
    with pytest.raises(DataError, match=r"sums\.jsonl, line 5: Prompt has \d+ tokens, over the limit of 16"):
        Trainer(cfg)
    assert not (Path(cfg.tracking.output_dir) / "metrics.jsonl").exists()


def test_output_dir_that_cannot_be_created_is_refused_by_the_cli(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = subprocess.run(rlvr_command("train", f"tracking.output_dir={blocker}/run", "tracking.console=false"),
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"tracking.output_dir '{blocker}/run' is not a writable directory" in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_output_dir_is_refused(fast_config, tmp_path):
    cfg = build_config(fast_config())
    out = Path(cfg.tracking.output_dir)
    out.mkdir()
    out.chmod(0o500)
    try:
        with pytest.raises(RlvrError, match="is not a writable directory"):
            Trainer(cfg)
    finally:
        out.chmod(0o700)


def test_full_disk_is_refused_before_any_compute(fast_config, monkeypatch):
    cfg = build_config(fast_config())
    monkeypatch.setattr("rlvr.training.resources.shutil.disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9, 1000))
    with pytest.raises(RlvrError, match=r"Not enough disk space for a checkpoint in .*: 0\.00 GiB free, one checkpoint "
                                        r"needs about 0\.00 GiB \(weights plus optimizer state\)"):
        Trainer(cfg)
    out = Path(cfg.tracking.output_dir)
    assert not (out / "metrics.jsonl").exists() and not (out / "checkpoints").exists()


def test_a_disk_that_fills_during_the_run_stops_it_at_the_next_checkpoint_with_what_to_do(fast_config, monkeypatch):
    """Space is checked before every checkpoint, not only at the start: a save that ran out part way failed with
    the writer's own error (safetensors' SafetensorError) and a traceback."""
    cfg = build_config(fast_config(steps=3, checkpoint={"every_steps": 1}, eval={"every_steps": 0},
                                   tracking={"console": False, "tensorboard": "off"}))
    trainer = Trainer(cfg)
    saves = []
    real_save = trainer.save

    def save_then_fill_the_disk(*args, **kwargs):
        saves.append(real_save(*args, **kwargs))
        monkeypatch.setattr("rlvr.training.resources.shutil.disk_usage",
                            lambda path: shutil._ntuple_diskusage(10**9, 10**9, 1000))
        return saves[-1]

    monkeypatch.setattr(trainer, "save", save_then_fill_the_disk)
    with pytest.raises(RlvrError, match=r"Not enough disk space for a checkpoint in .*: 0\.00 GiB free.*The "
                                        r"checkpoints already written are intact: free some space and continue "
                                        r"with --resume auto\."):
        trainer.fit()
    assert [p.name for p in saves] == ["step-0000001"]
    assert sorted(p.name for p in (Path(cfg.tracking.output_dir) / "checkpoints").iterdir()) == ["step-0000001"]


def test_a_metrics_row_torn_by_a_kill_is_dropped_on_resume(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "x": 1}\n{"step": 2, "x": 2}\n{"step": 3, "x": 3}\n{"step": 4, "x"')
    MetricsLogger(tmp_path, 10, start_step=3, console=False).close()
    assert [r["step"] for r in rows_of(tmp_path)] == [1, 2, 3]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0c", "\x1e"])
def test_completions_with_unicode_line_separators_survive_resume_and_read_back(tmp_path, separator):
    """json.dumps(ensure_ascii=False) leaves U+2028 and its kin raw inside a completion; str.splitlines splits there.
    A resume keeps such a row, and read_jsonl (the run report's, the Python API's and the benchmarks' reader) reads
    it back whole."""
    from rlvr.reporting.run_report import completions_section
    from rlvr.tracking.jsonl import read_jsonl

    logger = MetricsLogger(tmp_path, 10, start_step=0, console=False)
    text = f"first line{separator}second line \\boxed{{4}}"
    rows = [{"step": s, "prompt": "2 + 2?", "completion": text, "reward": 1.0, "correct": True} for s in (1, 2)]
    for row in rows:
        logger.log_completions(row["step"], [row])
    logger.close()
    MetricsLogger(tmp_path, 10, start_step=1, console=False).close()  # resume from the checkpoint of step 1
    assert read_jsonl(tmp_path / "completions.jsonl") == rows[:1]
    assert "second line" in completions_section(read_jsonl(tmp_path / "completions.jsonl"))
