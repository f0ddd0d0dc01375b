"""From a recipe to a validated `RunConfig`: shipped and local YAML recipes, plugins imported before names are
checked, validation errors that name the key and the override that set it, and writing a config back."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from rlvr.config.overrides import Origins, apply_overrides, override_of
from rlvr.config.run import RunConfig
from rlvr.config.yaml_io import dump_yaml, load_yaml
from rlvr.errors import ConfigError, did_you_mean


def _section_keys(model: type[BaseModel], path: tuple[str, ...]) -> list[str]:
    """Valid keys at `path` inside `model`, for suggestions."""
    for part in path:
        field = model.model_fields.get(part)
        ann = getattr(field, "annotation", None) if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)


def _format_validation_error(err: ValidationError, source: str, origins: Origins | None = None) -> str:
    lines, blamed = [], []
    for e in err.errors():
        loc = tuple(str(p) for p in e["loc"])
        dotted = ".".join(loc) or "(top level)"
        if e["type"] == "extra_forbidden":
            hint = did_you_mean(loc[-1], _section_keys(RunConfig, tuple(p for p in loc[:-1] if not p.isdigit())))
            valid = _section_keys(RunConfig, tuple(p for p in loc[:-1] if not p.isdigit()))
            line = f"  unknown key '{dotted}'.{hint} Valid keys here: {', '.join(valid)}."
        elif e["type"] == "missing":
            line = f"  '{dotted}' is required; set it in the recipe or as {dotted}=VALUE."
        else:
            got = e.get("input")
            shown = repr(got) if not isinstance(got, dict) else "a mapping"
            msg = e["msg"].removeprefix("Value error, ")
            line = f"  '{dotted}': {msg} (got {shown})."
        override = override_of(loc, origins or {}) if loc else None
        blamed.append(override)
        lines.append(f"{line} Set by the override {override!r}." if override else line)
    if all(blamed):
        header = f"Invalid override{'s' if len(set(blamed)) > 1 else ''} {', '.join(map(repr, dict.fromkeys(blamed)))}:"
    else:
        header = f"Invalid configuration ({source}):"
    return "\n".join([header, *lines])


RECIPES = Path(__file__).resolve().parent.parent / "recipes"


def shipped_recipes() -> list[str]:
    """Names of the recipes that ship with rlvr (rlvr/recipes/NAME.yaml)."""
    return sorted(p.stem for p in RECIPES.glob("*.yaml"))


def resolve_recipe(path: str | Path) -> Path:
    """A recipe file: the path as given (relative to the working directory), else a shipped recipe by name
    ('grpo', 'quickstart.yaml', 'recipes/grpo.yaml')."""
    p = Path(path).expanduser()
    if p.is_file():
        return p
    shipped = RECIPES / (p.name if p.suffix in (".yaml", ".yml") else f"{p.name}.yaml")
    if (p.parent == Path(".") or p.parent.name == "recipes") and shipped.is_file():
        return shipped
    raise ConfigError(f"Recipe file '{path}' does not exist (resolved against the working directory {Path.cwd()}). "
                      f"Recipes shipped with rlvr can be named alone: {', '.join(shipped_recipes())}.")


def read_yaml(path: str | Path) -> dict:
    p = resolve_recipe(path)
    try:
        data = load_yaml(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"Recipe '{path}' is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Recipe '{path}' must be a mapping of sections (model:, data:, ...), not {type(data).__name__}.")
    return data


def import_plugins(specs: Any) -> None:
    """Import the modules named in `plugins` (dotted names, or .py files relative to the working directory) so
    that what they register is known before names are checked. A file is imported once per process."""
    if not isinstance(specs, list) or not all(isinstance(x, str) and x for x in specs):
        raise ConfigError(f"plugins must be a list of module names or .py files, got {specs!r}.")
    for spec in specs:
        if spec.endswith(".py"):
            path = Path(spec).expanduser().resolve()
            if not path.is_file():
                raise ConfigError(f"plugins: file '{spec}' does not exist (resolved against the working directory "
                                  f"{Path.cwd()}).")
            name = f"rlvr_plugin_{path.stem}_{abs(hash(str(path)))}"
            if name in sys.modules:
                continue
            module_spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            try:
                module_spec.loader.exec_module(module)
            except Exception:
                del sys.modules[name]
                raise
        else:
            try:
                importlib.import_module(spec)
            except ImportError as e:
                raise ConfigError(f"plugins: cannot import module '{spec}': {e}. Is it installed, or on PYTHONPATH?"
                                  ) from None


def build_config(data: dict, source: str = "config", origins: Origins | None = None) -> RunConfig:
    """Validate a config mapping, after importing its plugins; `origins` (from apply_overrides) lets an error
    name the override that caused it."""
    if isinstance(data, dict) and data.get("plugins"):
        import_plugins(data["plugins"])
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, source, origins)) from None


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML recipe (optional; a path, or the name of a shipped recipe), apply `key.sub=value` overrides,
    validate."""
    data = read_yaml(path) if path else {}
    origins: Origins = {}
    data = apply_overrides(data, overrides or [], origins)
    return build_config(data, f"{path}" if path else "overrides", origins)


def dump_config(config: RunConfig, path: str | Path) -> None:
    Path(path).write_text(dump_yaml(config.model_dump(mode="json")))
