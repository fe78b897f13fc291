"""Keep the long-running agent's resident memory small: cap glibc's malloc arenas.

glibc gives each thread that allocates concurrently an arena of its own (up to
8 per core), and memory freed in an arena stays mapped there. ``podpin run``
has a handful of threads (the watch, the HTTP servers, the NRT publisher, the
NRI plugin, the cgroup watcher) that each allocate a little now and then, so
their arenas each keep some of the agent's RSS, for no speed the agent needs:
its threads mostly wait. Two arenas (``M_ARENA_MAX``, what ``MALLOC_ARENA_MAX=2``
sets) keep that memory in the main arena. ``docs/benchmarks.md``, "Agent at
rest", gives the measured difference.

Called once by ``podpin run`` before any thread starts. Elsewhere (musl, macOS,
a libc without ``mallopt``) it does nothing and says so.
"""

from __future__ import annotations

import ctypes

__all__ = ["ARENAS", "cap_malloc_arenas"]

ARENAS = 2
"""Arenas ``podpin run`` allows (glibc's default: 8 per core)."""

_M_ARENA_MAX = -8
"""``M_ARENA_MAX`` in glibc's ``malloc.h``."""


def cap_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Ask glibc for at most ``arenas`` malloc arenas; True when it accepted."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on (no ldconfig lookup)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, arenas))
