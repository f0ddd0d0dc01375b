"""Dotted overrides (`optim.lr=1e-5`, `data.tasks.0.args.path=x`) applied to a config mapping, remembering which
override set which key so that errors can name it."""

from __future__ import annotations

from typing import Any

import yaml

from rlvr.config.run import RunConfig
from rlvr.config.yaml_io import load_yaml
from rlvr.errors import ConfigError

Origins = dict[tuple[str, ...], str]  # dotted key path -> the override that set it


def override_of(loc: tuple[str, ...], origins: Origins) -> str | None:
    """The override that set the value at `loc` (or a section or list holding it, or a key inside it)."""
    matches = [k for k in origins if loc[: len(k)] == k or (loc and k[: len(loc)] == loc)]
    return origins[max(matches, key=len)] if matches else None


def parse_override(text: str) -> tuple[list[str], Any]:
    """'optim.lr=1e-5' -> (['optim', 'lr'], 1e-05). Values are parsed as YAML 1.2 scalars/lists
    (`off` stays a word, `1e-5` is a number)."""
    if "=" not in text:
        raise ConfigError(f"Override '{text}' is not of the form key.sub=value (e.g. optim.lr=1e-5).")
    key, raw = text.split("=", 1)
    if not key or any(not p for p in key.split(".")):
        raise ConfigError(f"Override '{text}' has an empty key; write it as key.sub=value.")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def _default_at(path: list[str]) -> Any:
    """The schema's default value at a dotted path (None when there is none), e.g. the default data.tasks list."""
    node: Any = RunConfig().model_dump(mode="json")
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _list_item(items: list, part: str, text: str, where: str) -> int:
    if not part.isdigit():
        raise ConfigError(f"Override '{text}': '{where}' is a list; address an item by its index, e.g. "
                          f"{where}.0.{part}=..., or give the whole list: {where}='[...]'.")
    if int(part) >= len(items):
        raise ConfigError(f"Override '{text}': '{where}' has {len(items)} item(s), so there is no item {part}. "
                          f"To add items, give the whole list: {where}='[{{...}}, {{...}}]' (YAML).")
    return int(part)


def apply_overrides(data: dict, overrides: list[str], origins: Origins | None = None) -> dict:
    """Set each `key.sub=value` in `data`. List items are addressed by index (data.tasks.0.args.path=x); a list
    the recipe leaves out starts from the schema's default (a section starts empty, so presets still fill it). `origins` records which override set
    which key, so errors can name it."""
    return _apply(data, [(*parse_override(text), text) for text in overrides], origins)


def _apply(data: dict, settings: list[tuple[list[str], Any, str]], origins: Origins | None) -> dict:
    for path, value, text in settings:
        node: Any = data
        for i, part in enumerate(path[:-1]):
            where = ".".join(path[:i])
            if isinstance(node, list):
                node = node[_list_item(node, part, text, where)]
                if not isinstance(node, dict):
                    raise ConfigError(f"Override '{text}': '{where}.{part}' is a value, not a section.")
                continue
            child = node.get(part)
            if child is None:
                default = _default_at(path[: i + 1])  # a list the recipe leaves out starts from its default
                child = node[part] = default if isinstance(default, list) else {}
            elif not isinstance(child, (dict, list)):
                raise ConfigError(f"Override '{text}': '{'.'.join(path[: i + 1])}' is a value, not a section.")
            node = child
        if isinstance(node, list):
            node[_list_item(node, path[-1], text, ".".join(path[:-1]))] = value
        else:
            node[path[-1]] = value
        if origins is not None:
            origins[tuple(path)] = text
    return data


def set_value(data: dict, key: str, value: Any, origins: Origins | None = None) -> dict:
    """Set the dotted `key` to a Python value (rlvr.train's keyword overrides); a dict value merges key by key."""
    if isinstance(value, dict) and value:
        for sub, item in value.items():
            set_value(data, f"{key}.{sub}", item, origins)
        return data
    text = f"{key}={value!r}"
    return _apply(data, [(key.split("."), value, text)], origins)
