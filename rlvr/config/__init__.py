"""The config of a run: the typed schema of each section, YAML recipes, dotted overrides and docs/config.md.

The ground floor of the pipeline: it imports only rlvr.errors, rlvr.registry and rlvr.algorithms (presets). Names
of registered pieces (samplers, filters, environments) are checked against the registries by their kind, through
rlvr.registry, so no plug-in package is imported here."""

from rlvr.config.schema import *  # noqa: F401,F403
from rlvr.config.schema import RunConfig, build_config, load_config

__all__ = ["RunConfig", "build_config", "load_config"]
