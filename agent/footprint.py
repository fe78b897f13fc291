"""Keep the long-running agent's resident memory small: cap glibc's malloc arenas, and give freed heap back.

glibc gives each thread that allocates concurrently an arena of its own (up to
8 per core), and memory freed in an arena stays mapped there. ``podpin run``
has a handful of threads (the watch, the HTTP servers, the NRT publisher, the
NRI plugin, the cgroup watcher) that each allocate a little now and then, so
their arenas each keep some of the agent's RSS, for no speed the agent needs:
its threads mostly wait. Two arenas (``M_ARENA_MAX``, what ``MALLOC_ARENA_MAX=2``
sets) keep that memory in the main arena. ``docs/benchmarks.md``, "Agent at
rest", gives the measured difference.

Two more habits of glibc keep freed memory resident: the mmap threshold grows
with every large block freed (up to 32 MiB), so the big buffers of a full pass
(cgroup reads, the plan, a pod list) end up on the heap instead of in mappings
of their own; and ``free`` only gives the top of the heap back. A fixed 128 KiB
mmap threshold (which also stops that growth) and trim threshold
(:func:`tune_malloc`), and ``malloc_trim(0)`` after each full pass
(:func:`trim_heap`, which also releases free pages inside the heap), keep what
a pass freed out of the RSS.

Called once by ``podpin run`` before any thread starts. Elsewhere (musl, macOS,
a libc without ``mallopt``) it does nothing and says so.
"""

from __future__ import annotations

import ctypes
from typing import Any

__all__ = ["ARENAS", "THRESHOLD", "cap_malloc_arenas", "trim_heap", "tune_malloc"]

ARENAS = 2
"""Arenas ``podpin run`` allows (glibc's default: 8 per core)."""

THRESHOLD = 128 * 1024
"""The mmap and trim thresholds ``podpin run`` sets (bytes; glibc's initial value, kept from growing)."""

_M_ARENA_MAX = -8
"""``M_ARENA_MAX`` in glibc's ``malloc.h``."""
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _libc_function(name: str) -> Any | None:
    """A function of the C library the interpreter runs on (no ldconfig lookup), or None when it has none."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def _mallopt(param: int, value: int) -> bool:
    mallopt = _libc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(param, value))


def cap_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Ask glibc for at most ``arenas`` malloc arenas; True when it accepted."""
    return _mallopt(_M_ARENA_MAX, arenas)


def tune_malloc(arenas: int = ARENAS, threshold: int = THRESHOLD) -> bool:
    """Cap the arenas and fix the mmap and trim thresholds at ``threshold`` bytes; True when glibc accepted all."""
    return all(
        [
            cap_malloc_arenas(arenas),
            _mallopt(_M_MMAP_THRESHOLD, threshold),
            _mallopt(_M_TRIM_THRESHOLD, threshold),
        ]
    )


def trim_heap() -> bool:
    """Give the heap's free pages back to the kernel (``malloc_trim(0)``); True when some were, False elsewhere."""
    trim = _libc_function("malloc_trim")
    if trim is None:
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))
