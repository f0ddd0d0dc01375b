"""Property test: every invalid configuration (a wrong type, a value out of range, an unknown key or name, a
broken list of sections, a batch split that does not divide), given as a recipe mapping or as command-line
overrides, fails with a ConfigError that names the key, never with another exception."""

from __future__ import annotations

import typing
from typing import Any, Literal

import yaml
from annotated_types import Ge, Gt, Le, MinLen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from rlvr.config import RunConfig, build_config, load_config
from rlvr.config.yaml_io import CoreSchemaDumper
from rlvr.errors import ConfigError

# Letters that cannot spell a number, a boolean ('t', 'no', 'off', ...) or 'inf'/'nan'.
WORDS = st.text(alphabet="abcdghjkmpqrsuvwxz_", min_size=1, max_size=8)
NOT_TEXT = st.one_of(st.integers(), st.lists(st.integers(), min_size=1, max_size=2),
                     st.dictionaries(WORDS, st.integers(), min_size=1, max_size=2))
SECTION_LISTS = st.sampled_from([[], [7], ["text"], [{}], [{"bogus_key": 1}]])


def section_type(ann) -> type[BaseModel] | None:
    """The section class of a field (also of an optional section such as model.lora), else None."""
    if typing.get_origin(ann) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        ann = next((a for a in typing.get_args(ann) if a is not type(None)), None)
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def leaves(model: type[BaseModel] = RunConfig, prefix: tuple[str, ...] = ()):
    """(path, field) of every value in the schema; sections are recursed into."""
    for name, field in model.model_fields.items():
        ann = section_type(field.annotation)
        if ann is not None:
            yield from leaves(ann, (*prefix, name))
        else:
            yield (*prefix, name), field


def sections(model: type[BaseModel] = RunConfig, prefix: tuple[str, ...] = ()):
    yield prefix
    for name, field in model.model_fields.items():
        ann = section_type(field.annotation)
        if ann is not None:
            yield from sections(ann, (*prefix, name))


def out_of_range(kind: type, metadata: list) -> list[st.SearchStrategy]:
    numbers = st.integers if kind is int else lambda **kw: st.floats(allow_nan=False, **kw)
    found = []
    for m in metadata:
        if isinstance(m, Gt):
            found.append(numbers(max_value=int(m.gt) if kind is int else m.gt))
        elif isinstance(m, Ge):
            found.append(numbers(max_value=int(m.ge) - 1) if kind is int else st.floats(max_value=m.ge, exclude_max=True))
        elif isinstance(m, Le):
            found.append(numbers(min_value=int(m.le) + 1) if kind is int else st.floats(min_value=m.le, exclude_min=True))
    return found


def invalid_values(field) -> st.SearchStrategy:
    """Values the field must refuse."""
    ann = field.annotation
    if typing.get_origin(ann) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        ann = next(a for a in typing.get_args(ann) if a is not type(None))  # None is valid; the rest is not
    origin = typing.get_origin(ann)
    if ann is bool:
        return st.one_of(WORDS, NOT_TEXT.filter(lambda v: not isinstance(v, int) or v not in (0, 1)))
    if ann in (int, float):
        options = [WORDS, st.lists(st.integers(), min_size=1, max_size=2), *out_of_range(ann, field.metadata)]
        if ann is int:
            options.append(st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer()))
        return st.one_of(options)
    if origin is Literal:
        return st.one_of(WORDS.filter(lambda w: w not in typing.get_args(ann)), NOT_TEXT)
    if ann is str:
        return NOT_TEXT
    if origin is dict:
        return st.one_of(WORDS, st.integers(), st.lists(st.integers(), min_size=1))
    if origin is tuple:
        return st.one_of(WORDS, st.lists(st.floats(allow_nan=False), max_size=1), st.lists(WORDS, min_size=2, max_size=2))
    if origin is list:
        item = typing.get_args(ann)[0]
        if isinstance(item, type) and issubclass(item, BaseModel):
            return st.one_of(SECTION_LISTS.filter(lambda v: v or any(isinstance(m, MinLen) for m in field.metadata)),
                             WORDS, st.integers())
        return st.one_of(WORDS, st.integers(), st.lists(NOT_TEXT, min_size=1, max_size=2))
    raise AssertionError(f"no invalid values for {ann}")


LEAVES = list(leaves())
SECTIONS = list(sections())


@st.composite
def invalid_setting(draw) -> tuple[tuple[str, ...], Any, str]:
    """(path, value, text that the error must contain)."""
    kind = draw(st.sampled_from(["value", "value", "value", "unknown key", "section", "preset", "batch split"]))
    if kind == "value":
        path, field = draw(st.sampled_from(LEAVES))
        return path, draw(invalid_values(field)), ".".join(path)
    if kind == "unknown key":
        section = draw(st.sampled_from(SECTIONS))
        model = RunConfig
        for part in section:
            model = section_type(model.model_fields[part].annotation)
        key = draw(WORDS.filter(lambda w: w not in model.model_fields))
        dotted = ".".join((*section, key))
        return (*section, key), draw(st.integers()), f"unknown key '{dotted}'"
    if kind == "section":
        path = draw(st.sampled_from([s for s in SECTIONS if s]))
        return path, draw(st.one_of(WORDS, st.integers(), st.lists(st.integers(), min_size=1))), ".".join(path)
    if kind == "preset":
        value = draw(st.one_of(WORDS, st.integers(), st.lists(WORDS, min_size=1, max_size=2)))
        return ("algorithm", "preset"), value, "algorithm.preset"
    prompts, samples = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    minis = draw(st.integers(1, 64).filter(lambda m: (prompts * samples) % m))
    value = {"prompts_per_step": prompts, "samples_per_prompt": samples, "mini_batches": minis}
    return ("batch",), value, "optim.mini_batches"


def as_mapping(path: tuple[str, ...], value: Any) -> dict:
    if path == ("batch",):
        return {"data": {"prompts_per_step": value["prompts_per_step"]},
                "rollout": {"samples_per_prompt": value["samples_per_prompt"]},
                "optim": {"mini_batches": value["mini_batches"]}}
    data: dict = {}
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return data


def as_overrides(path: tuple[str, ...], value: Any) -> list[str]:
    if path == ("batch",):
        return [f"data.prompts_per_step={value['prompts_per_step']}",
                f"rollout.samples_per_prompt={value['samples_per_prompt']}",
                f"optim.mini_batches={value['mini_batches']}"]
    return [f"{'.'.join(path)}={yaml.dump(value, Dumper=CoreSchemaDumper, default_flow_style=True, width=10**6).strip().removesuffix('...').strip()}"]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setting=invalid_setting(), route=st.sampled_from(["mapping", "overrides"]))
def test_invalid_configs_give_a_validation_message_naming_the_key(setting, route):
    path, value, named = setting
    try:
        if route == "mapping":
            build_config(as_mapping(path, value))
        else:
            load_config(None, as_overrides(path, value))
    except ConfigError as e:
        assert named in str(e), f"the message does not name {named!r}:\n{e}"
    else:
        raise AssertionError(f"accepted an invalid config: {path} = {value!r} ({route})")


@given(st.one_of(st.integers(), WORDS, st.lists(st.integers())))
@settings(max_examples=20, deadline=None)
def test_a_recipe_that_is_not_a_mapping_is_a_validation_message(value):
    try:
        build_config(value)
    except ConfigError as e:
        assert "top level" in str(e)
    else:
        raise AssertionError(f"accepted {value!r}")
