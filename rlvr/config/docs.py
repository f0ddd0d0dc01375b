"""docs/config.md from the config schema: every key with its type, default and meaning.

    python -m rlvr.config.docs > docs/config.md

A test compares the file with this output, so the reference cannot go stale."""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal

from annotated_types import Ge, Gt, Le, Lt, MinLen
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from rlvr.config.base import NamedPart
from rlvr.config.run import RunConfig

HEADER = """# Configuration reference

Generated from the schema in `rlvr/config/` by `python -m rlvr.config.docs > docs/config.md`; a test fails
when this file is stale. Set keys in a YAML recipe, as `key.sub=value` on the command line (anywhere after the
recipe; list items by index: `data.tasks.0.args.path=x.jsonl`), or as keyword arguments of `rlvr.train`
(`steps=50`, `optim={"lr": 1e-6}`, `**{"rollout.max_new_tokens": 512}`). `rlvr train RECIPE --dry-run` prints
the resolved configuration. Recipes and override values are read as YAML 1.2: only `true`/`false` are booleans
(`off`, `yes` stay words; boolean keys take them too), `1e-5` is a number, `010` is 10. Coming from TRL or verl:
docs/coming_from_trl_verl.md.
"""


def _section(ann: Any) -> type[BaseModel] | None:
    """The section class of an annotation (optional sections included), else None. A named part (data.sampler:
    a name, or {name, args}) is a value, not a section."""
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        ann = next((a for a in typing.get_args(ann) if a is not type(None)), None)
    is_section = isinstance(ann, type) and issubclass(ann, BaseModel) and not issubclass(ann, NamedPart)
    return ann if is_section else None


def _optional(field) -> bool:
    return typing.get_origin(field.annotation) in (typing.Union, types.UnionType) and field.default is None


def _list_of_sections(ann: Any) -> type[BaseModel] | None:
    if typing.get_origin(ann) is list:
        (item,) = typing.get_args(ann)
        return _section(item)
    return None


def type_name(ann: Any) -> str:
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if ann is type(None):
        return "null"
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        if name == "Callable":
            return "callable"
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    if ann is Any:
        return "any"
    return getattr(ann, "__name__", str(ann))


def constraints(metadata: list) -> str:
    parts = []
    for m in metadata:
        if isinstance(m, Gt):
            parts.append(f"> {m.gt}")
        elif isinstance(m, Ge):
            parts.append(f">= {m.ge}")
        elif isinstance(m, Lt):
            parts.append(f"< {m.lt}")
        elif isinstance(m, Le):
            parts.append(f"<= {m.le}")
        elif isinstance(m, MinLen):
            parts.append(f"at least {m.min_length} item(s)")
    return ", ".join(parts)


def default_text(field) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif isinstance(value, list):
        value = [v.model_dump(mode="json", exclude_defaults=True) if isinstance(v, BaseModel) else v for v in value]
    return f"`{json.dumps(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def rows(model: type[BaseModel], prefix: str) -> list[str]:
    """Table rows of a section's values; subsections come back as their own tables."""
    out = []
    for name, field in model.model_fields.items():
        section = _section(field.annotation)
        if section is not None and not _optional(field):
            continue  # a subsection: its own table
        kind = "section | null" if section is not None else type_name(field.annotation)
        if isinstance(field.annotation, type) and issubclass(field.annotation, NamedPart):
            kind = "name | {name, args}"
        limits = constraints(field.metadata)
        out.append(f"| `{prefix}{name}` | {_cell(kind)}{f' ({limits})' if limits else ''} | {default_text(field)} | "
                   f"{_cell(field.description or '')} |")
    return out


def tables(model: type[BaseModel] = RunConfig, prefix: str = "", title: str = "Top level") -> list[str]:
    doc = (model.__doc__ or "").strip() if model.__doc__ != BaseModel.__doc__ else ""
    lines = [f"## {title}", ""]
    if doc and model is not RunConfig:
        lines += [" ".join(doc.split()), ""]
    lines += ["| key | type | default | meaning |", "|---|---|---|---|", *rows(model, prefix), ""]
    for name, field in model.model_fields.items():
        section = _section(field.annotation)
        if section is not None and not _optional(field):
            lines += tables(section, f"{prefix}{name}.", f"`{prefix}{name}`")
        elif section is not None:  # an optional section, off by default (model.lora)
            lines += tables(section, f"{prefix}{name}.", f"`{prefix}{name}` (optional: null turns it off)")
        item = _list_of_sections(field.annotation)
        if item is not None:
            lines += tables(item, f"{prefix}{name}[].", f"`{prefix}{name}[]` (each item)")
    return lines


def config_reference() -> str:
    return "\n".join([HEADER, *tables()]).rstrip() + "\n"


if __name__ == "__main__":
    print(config_reference(), end="")
