"""Command-line flags that override configuration keys, for ``podpin run`` and ``podpin reset`` alike.

A command's options dataclass names each overriding flag after the key it overrides (``cgroup_root``,
``state_dir``, ...), so one rule applies them all: a flag left unset (None, or a switch not given) keeps the
file's value. Without it, each flag was written three times (the parser, the options, an ``if`` per key) and the
reset repeated the pattern.
"""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from typing import Any, TypeVar

from agent.config import AgentConfig

__all__ = ["OVERRIDING_FLAGS", "options_from", "with_flags"]

OVERRIDING_FLAGS = (
    "cgroup_root",
    "state_dir",
    "metrics_bind_address",
    "state_bind_address",
    "runtime_root",
    "dry_run",
)
"""The :class:`AgentConfig` keys a command-line flag of the same name may override."""

_Options = TypeVar("_Options")


def with_flags(config: AgentConfig, options: object) -> AgentConfig:
    """The configuration with the keys the command's flags set.

    A flag the options do not have, or left at None (a switch: False), keeps the configuration's value. An empty
    ``--state-bind-address`` means "not served" (None), as the configuration's own empty value does.
    """
    overrides: dict[str, Any] = {}
    for key in OVERRIDING_FLAGS:
        value = getattr(options, key, None)
        if value is None or value is False:
            continue
        overrides[key] = value
    if overrides.get("state_bind_address") == "":
        overrides["state_bind_address"] = None
    return replace(config, **overrides)


def options_from(args: argparse.Namespace, options_type: type[_Options]) -> _Options:
    """A command's options dataclass from its parsed arguments: every field the parser has a value for."""
    known = {field.name for field in fields(options_type)}  # type: ignore[arg-type]
    return options_type(**{name: value for name, value in vars(args).items() if name in known})
