"""Sub-commands of ``podpin``; each module registers one parser.

Add a command by writing ``agent/commands/<name>.py`` with a ``register``
function and listing it here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

COMMANDS: list[Register] = []
