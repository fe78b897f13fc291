"""Sub-commands of ``podpin``; each module here registers one parser.

A command is a module ``agent/commands/<name>.py`` exposing
``register(subparsers)``, which adds its parser and sets ``func`` (parsed
arguments -> exit status). Modules are discovered in name order, so adding a
command never touches another command's file.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Callable

SubParsers = "argparse._SubParsersAction[argparse.ArgumentParser]"
Register = Callable[[argparse._SubParsersAction], None]  # type: ignore[type-arg]


def _discover() -> list[Register]:
    found: list[Register] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            found.append(register)
    return found


COMMANDS: list[Register] = _discover()
