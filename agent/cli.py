"""The ``podpin`` command line: one sub-command per module in ``agent.commands``.

Each command module exposes ``register(subparsers)``, which adds its parser and
sets ``func`` to a callable taking the parsed arguments and returning the exit
status. This module only finds and assembles them, so each command stays in its
own file.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Callable, Sequence

import agent.commands
from agent import __version__

__all__ = ["build_parser", "main"]

# argparse names the type of ``add_subparsers()`` only privately.
Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]  # noqa: SLF001
"""A command module's ``register(subparsers)``."""


def _command_names() -> list[str]:
    """The modules of ``agent.commands``, in name order (listed, not imported)."""
    return sorted(info.name for info in pkgutil.iter_modules(agent.commands.__path__) if not info.name.startswith("_"))


def _discover(names: Sequence[str] | None = None) -> list[Register]:
    """Every ``register`` of the modules ``names`` of ``agent.commands`` (default: all), in name order."""
    found: list[Register] = []
    for name in _command_names() if names is None else names:
        module = importlib.import_module(f"{agent.commands.__name__}.{name}")
        register = getattr(module, "register", None)
        if callable(register):
            found.append(register)
    return found


def _chosen(argv: Sequence[str]) -> list[str] | None:
    """The one command module ``argv`` names (each module registers the command of its name), or None for all.

    ``podpin run`` then imports only ``agent.commands.run`` and what it needs: the simulator, the plan
    renderers and the other commands' modules stay out of the agent's memory (``docs/design.md``,
    "Footprint"). Anything else (``--help``, ``--version``, no or an unknown command) builds the whole parser.
    """
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return [first] if first is not None and first in _command_names() else None


def build_parser(commands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The top-level parser with the sub-commands ``commands`` (default: every registered one)."""
    parser = argparse.ArgumentParser(
        prog="podpin",
        description="Exclusive, NUMA-aligned CPUs for Kubernetes pods, with a pod-level shared pool for sidecars.",
    )
    parser.add_argument("--version", action="version", version=f"podpin {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in _discover(commands):
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``podpin``; returns the process exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_chosen(argv))
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    status: int = func(args)
    return status
