"""The built wheel carries the recipes: installed into a fresh virtual environment, `rlvr quickstart --help`
and `rlvr train quickstart --dry-run` work from any directory (no source checkout on the path)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from conftest import ROOT


def _run(*args, cwd=None) -> subprocess.CompletedProcess:
    """Run a command without this checkout on PYTHONPATH (pip would take it for an installed rlvr)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)
    assert proc.returncode == 0, f"{' '.join(map(str, args))}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_the_installed_wheel_finds_its_recipes_from_any_directory(tmp_path):
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"),
         str(ROOT))
    (wheel,) = (tmp_path / "dist").glob("rlvr-*.whl")
    with zipfile.ZipFile(wheel) as archive:  # the license as an SPDX expression (PEP 639), not a deprecated table
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel))
    # Then the fresh environment sees this one's dependencies (torch, transformers, ...) through a .pth line, after
    # its own site-packages, so nothing is downloaded and the wheel's rlvr is the one imported.
    site = Path(_run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "shared_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    located = _run(str(python), "-c", "import rlvr; print(rlvr.__file__)", cwd=elsewhere).stdout.strip()
    assert Path(located).is_relative_to(site)
    help_text = _run(str(venv / "bin" / "rlvr"), "quickstart", "--help", cwd=elsewhere).stdout
    recipe = Path(" ".join(help_text.split()).split("Recipe: ")[1].split()[0])
    assert recipe.is_relative_to(site) and recipe.is_file()
    dry = _run(str(venv / "bin" / "rlvr"), "train", "quickstart", "--dry-run", "steps=1", cwd=elsewhere)
    assert "eval 200 problems" in dry.stdout
