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

__all__ = ["COMMANDS", "build_parser", "main"]

# argparse names the type of ``add_subparsers()`` only privately.
Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]  # noqa: SLF001
"""A command module's ``register(subparsers)``."""


def _discover() -> list[Register]:
    """Every ``register`` of the modules in ``agent.commands``, in module name order."""
    found: list[Register] = []
    for info in sorted(pkgutil.iter_modules(agent.commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{agent.commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            found.append(register)
    return found


COMMANDS: list[Register] = _discover()


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog="podpin",
        description="Exclusive, NUMA-aligned CPUs for Kubernetes pods, with a pod-level shared pool for sidecars.",
    )
    parser.add_argument("--version", action="version", version=f"podpin {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in COMMANDS:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``podpin``; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    status: int = func(args)
    return status
