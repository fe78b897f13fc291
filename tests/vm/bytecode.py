"""The checkout's bytecode, written on the host before a guest imports the checkout.

Why: a guest's root is the host's, shared read-only, so the guest's Python cannot cache what it compiles, and this
machine runs with ``PYTHONDONTWRITEBYTECODE`` (CI may too), so the checkout holds no bytecode of its own. Under TCG
every ``podpin`` start, reset and scenario helper then compiled the agent from source again: 5-18 s of each
``podpin`` process in ``scenario_agent`` (its run in the suite 346 -> 293 s on 4 NUMA nodes, 245 -> 196 s on 2), and
three of the cluster node's four minutes to ``/readyz``. Compiled once on the host (about 2 s), the guest reads the
``__pycache__`` files an import looks for, valid while the sources keep their size and mtime.
"""

from __future__ import annotations

import compileall
import functools
from collections.abc import Iterable
from pathlib import Path

from tests.support.paths import REPO

__all__ = ["GUEST_CODE", "precompile", "precompile_checkout"]

GUEST_CODE = ("agent", "tests")
"""The checkout's code a guest imports: podpin, and the scenarios with their helpers (``tests.vm``, ``tests.cluster``,
``tests.support``)."""


def precompile(root: Path, parts: Iterable[str] = GUEST_CODE) -> bool:
    """Write the bytecode of `parts` of the checkout at `root` (``__pycache__``, as an import would).

    Returns whether everything compiled; a module that does not is left to the guest, which compiles it at each import.
    """
    ok = True
    for part in parts:
        path = root / part
        if path.is_dir():
            ok = bool(compileall.compile_dir(path, quiet=1)) and ok
        else:
            ok = bool(compileall.compile_file(path, quiet=1)) and ok
    return ok


@functools.cache
def precompile_checkout() -> bool:
    """:func:`precompile` of this checkout, once per process (a test run does not change its sources)."""
    return precompile(REPO)
