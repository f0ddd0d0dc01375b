"""Recipes, overrides and a run's config.yaml read as YAML 1.2 (its core schema): a bare word stays a word.

PyYAML resolves plain scalars by YAML 1.1, under which `on`, `off`, `yes`, `no` are booleans (so `tensorboard: off`
fails as a tensorboard mode, a judge's `yes: [Yes, yes]` becomes `{True: [True, True]}`), `1e-5` is a string, `010` is
8, `1:30` is 90 and `2026-11-28` a date. YAML 1.2's core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution)
keeps each what it looks like, as verl's and TRL's YAML users expect. PyYAML is already the dependency and takes these
resolvers in a few lines; ruamel.yaml, which reads 1.2, would be a second YAML library for the same job.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_CORE_SCHEMA = [  # (tag, pattern, first characters), in the order they are tried
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    ("float", r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
     "-+.0123456789"),
    ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
    ("merge", r"<<", "<"),  # `<<: *defaults`, kept from YAML 1.1: recipes may use it
]


class CoreSchemaLoader(yaml.SafeLoader):
    """yaml.SafeLoader resolving plain scalars by the YAML 1.2 core schema only."""

    yaml_implicit_resolvers: dict = {}


class CoreSchemaDumper(yaml.SafeDumper):
    """yaml.SafeDumper that quotes a string whenever YAML 1.1 or 1.2 would read its plain form as something else, so
    what it writes reads back the same here and in any other YAML reader."""


for _tag, _pattern, _first in _CORE_SCHEMA:
    for _cls in (CoreSchemaLoader, CoreSchemaDumper):
        _cls.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(f"^(?:{_pattern})$"), list(_first))


def _core_int(loader: CoreSchemaLoader, node: yaml.ScalarNode) -> int:
    """A 1.2 integer: decimal (a leading zero is still decimal), 0o octal or 0x hexadecimal."""
    text = loader.construct_scalar(node)
    try:
        return int(text[2:], 8) if text.startswith("0o") else int(text, 16 if text.startswith("0x") else 10)
    except ValueError:
        raise yaml.constructor.ConstructorError(None, None, f"{text!r} is not an integer", node.start_mark) from None


CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", _core_int)


def load_yaml(text: str) -> Any:
    """The YAML document in `text`, scalars resolved by the YAML 1.2 core schema (raises yaml.YAMLError)."""
    return yaml.load(text, Loader=CoreSchemaLoader)


def dump_yaml(data: Any) -> str:
    """`data` as YAML, keys in their order, every string that could be misread quoted."""
    return yaml.dump(data, Dumper=CoreSchemaDumper, sort_keys=False)
