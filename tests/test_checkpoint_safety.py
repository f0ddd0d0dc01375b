"""Checkpoint safety: manifest checked on resume, damaged checkpoints skipped by --resume auto, retention of the
last K (never a protected one), interrupted saves leave the previous checkpoint whole, one run per directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from safetensors.torch import load_file

import rlvr.training.checkpoint as checkpoint
from rlvr.config import TinyModelConfig, build_config
from rlvr.errors import RlvrError
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.training.checkpoint import checkpoint_damage, list_checkpoints, load_state, resolve_resume, save_checkpoint
from rlvr.training.setup import output_dir_holder
from rlvr.training.trainer import Trainer


@pytest.fixture(scope="module")
def model_and_tokenizer():
    tokenizer = train_tokenizer(["1+2=3", "4+5=9"], 30)
    spec = TinyModelConfig(hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    return build_tiny_model(spec, tokenizer, seed=0), tokenizer


@pytest.fixture
def save(tmp_path, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    root = tmp_path / "run" / "checkpoints"

    def write(step: int, keep_last: int = 5, protected=()):
        return save_checkpoint(root, step, model, tokenizer, {"marker": step}, keep_last, protected)

    return write


def _flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_intact_checkpoint_passes_its_manifest_and_loads(save):
    path = save(3)
    assert checkpoint_damage(path) is None
    assert load_state(path)["marker"] == 3 and load_file(path / "model.safetensors")
    assert resolve_resume(str(path), path.parent.parent) == path


def test_damaged_file_is_named_on_resume(save):
    path = save(1)
    _flip_a_byte(path / "model.safetensors")
    with pytest.raises(RlvrError, match=r"model\.safetensors is damaged.*--resume auto"):
        resolve_resume(str(path), path.parent.parent)
    other = save(2)
    (other / "trainer_state.pt").unlink()
    with pytest.raises(RlvrError, match=r"trainer_state\.pt is missing"):
        resolve_resume(str(other), other.parent.parent)


def test_resume_auto_skips_a_damaged_newest_checkpoint_with_a_warning(save, capsys):
    older, newest = save(1), save(2)
    _flip_a_byte(newest / "trainer_state.pt")
    assert resolve_resume("auto", newest.parent.parent) == older
    assert f"skipping damaged checkpoint: {newest / 'trainer_state.pt'} is damaged" in capsys.readouterr().err


def test_resume_auto_refuses_when_every_checkpoint_is_damaged(save):
    paths = [save(step) for step in (1, 2)]
    for path in paths:
        (path / checkpoint.MANIFEST).unlink()
    with pytest.raises(RlvrError, match="every checkpoint of .* is damaged"):
        resolve_resume("auto", paths[0].parent.parent)


def test_retention_keeps_the_last_k_and_every_protected_checkpoint(save):
    for step in range(1, 6):
        path = save(step, keep_last=2)
    root = path.parent
    assert [p.name for p in list_checkpoints(root)] == ["step-0000004", "step-0000005"]
    for step in (6, 7):
        save(step, keep_last=2, protected=[root / "step-0000004"])
    assert [p.name for p in list_checkpoints(root)] == ["step-0000004", "step-0000006", "step-0000007"]


@pytest.mark.parametrize("phase", ["save_pretrained", "_save_state", "write_manifest", "_mark_complete"])
def test_a_save_that_fails_midway_leaves_the_previous_checkpoint_and_is_cleaned_up(save, monkeypatch, phase):
    previous = save(1)

    def fail(*args, **kwargs):
        raise OSError("disk vanished")

    monkeypatch.setattr(checkpoint, phase, fail)
    with pytest.raises(RlvrError, match=r"Could not write checkpoint .*step-0000002: disk vanished \(.* GiB free on its disk\)\. The earlier "
                                        r"checkpoints under .* are intact"):
        save(2)
    assert list_checkpoints(previous.parent) == [previous] and checkpoint_damage(previous) is None
    monkeypatch.undo()
    save(3)
    assert sorted(p.name for p in previous.parent.iterdir()) == ["step-0000001", "step-0000003"]


class WriterError(Exception):
    """What a writer that is not Python's file API raises when the disk fills (as safetensors' SafetensorError)."""


@pytest.mark.parametrize("free", [10**6, 10**12])
def test_a_writer_failing_in_its_own_words_is_a_disk_error_only_when_the_disk_is_full(save, monkeypatch, free):
    """A full disk can fail a save with any exception type: it gets the checkpoint message and its space back; the
    same exception with the disk not full is a defect, raised as it is (not dressed as a disk problem)."""
    previous = save(1)

    def fail(*args, **kwargs):
        raise WriterError("I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(checkpoint, "save_pretrained", fail)
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**13, 10**13, free))
    expected = (RlvrError, r"Could not write checkpoint .*step-0000002: I/O error.* \(0\.00 GiB free on its disk\)\. "
                r"The earlier checkpoints under .* are intact") if free < 2**30 else (WriterError, "os error 28")
    with pytest.raises(expected[0], match=expected[1]):
        save(2)
    assert sorted(p.name for p in previous.parent.iterdir()) == ["step-0000001"]  # no half-written .tmp left


def test_a_second_run_on_a_directory_in_use_is_refused_until_the_first_one_exits(fast_config, tmp_path):
    """Two runs writing one output directory (e.g. `--resume auto` while the first run still trains) would
    interleave their metrics and overwrite each other's checkpoints: the second is refused with the holder named,
    and the directory is free again the moment the holder dies, without any clean-up."""
    cfg = build_config(fast_config(steps=1))
    out = tmp_path / "run"
    out.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from rlvr.training.setup import hold_output_dir; hold_output_dir(Path(sys.argv[1])); "
                               "print('held', flush=True); time.sleep(60)", str(out)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert output_dir_holder(out) == f"pid {holder.pid} on {os.uname().nodename}"
        with pytest.raises(RlvrError, match=rf"in use by another run \(pid {holder.pid} on .*tracking.output_dir"):
            Trainer(cfg)
        assert not (out / "config.yaml").exists()  # refused before writing anything
    finally:
        holder.kill()
        holder.wait()
    assert output_dir_holder(out) is None
    Trainer(cfg).fit()  # the dead holder's lock went with it
    Trainer(build_config(fast_config(steps=2)), resume="auto").fit()  # and a finished run in this process let go
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
