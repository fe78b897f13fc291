"""The symlink guard: a cgroup path, with symlinks resolved, must stay inside the cgroup root.

Every path podpin builds under ``--cgroup-root`` is checked before it is read or written, so a symlink planted in
the tree (a fixture root, a bind mount, a host that is not plain cgroupfs) can never lead a write outside. The
check used to be ``os.path.realpath`` of the whole path: one ``lstat`` per component, the root's own included,
about ten times in a targeted pass (each read and write, the QoS levels, the pod's path), which was a fifth of
that pass. Under a TCG guest, where a system call costs far more than Python, it was more.

Two cuts, with the same answer:

* A path spelled below the root (the only kind podpin builds) needs ``lstat`` only for its components below the
  root: the root's own were resolved once, when the layout was made. Any ``.``/``..`` component, a component that
  is a symlink, or a path not spelled below the root falls back to the full ``realpath`` check.
* Inside :func:`checked_once` (a reconcile pass), a directory found real is not looked at again: the QoS level,
  the pod's cgroup and its containers are each ``lstat``-ed once a pass instead of once a read. The scope is one
  pass, so a directory turned into a symlink between passes is caught by the next one; within a pass the check
  was never atomic with the open that follows it anyway (the files themselves are opened with ``O_NOFOLLOW``).

Components that do not exist yet are resolved lexically (and never remembered), so a path to a cgroup that is
about to appear can be checked too.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from agent.cgroups.errors import CgroupPathError

__all__ = ["checked_once", "ensure_inside"]

_seen: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("podpin_checked_dirs", default=None)
"""The directories found real (not symlinks, inside the root) in the current :func:`checked_once` scope."""


@contextlib.contextmanager
def checked_once() -> Iterator[None]:
    """Within this block (on this thread), each directory is checked at most once; nested blocks share one."""
    if _seen.get() is not None:
        yield
        return
    token = _seen.set(set())
    try:
        yield
    finally:
        _seen.reset(token)


def ensure_inside(root: Path, path: Path, *, resolved_root: str | None = None) -> Path:
    """Return ``path`` if, with symlinks resolved, it stays inside ``root``; else raise.

    ``resolved_root`` is ``os.path.realpath(root)`` when the caller has it already.

    Raises:
        CgroupPathError: ``path`` (or a symlink on the way) leads outside ``root``.
    """
    real_root = resolved_root if resolved_root is not None else os.path.realpath(root)
    below = _below(os.fspath(root), real_root, os.fspath(path))
    if below is None or not _all_real(real_root, below, _seen.get()):
        real = os.path.realpath(path)
        if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
            raise CgroupPathError(f"cgroup path {path} resolves to {real}, outside the cgroup root {root}")
    return path


def _below(root: str, real_root: str, path: str) -> list[str] | None:
    """The components of ``path`` below the root, when it is spelled below ``root`` (or ``real_root``) without
    ``.``/``..``; None otherwise (the caller resolves it in full)."""
    for prefix in (root, real_root):
        base = prefix.rstrip(os.sep)
        if path in (prefix, base):
            return []
        if path.startswith(base + os.sep):
            parts = path[len(base) + 1 :].split(os.sep)
            if any(part in ("", ".", "..") for part in parts):
                return None
            return parts
    return None


def _all_real(real_root: str, parts: list[str], seen: set[str] | None) -> bool:
    """True when no existing component of ``real_root/parts`` is a symlink (``lstat`` of each, or ``seen``)."""
    current = real_root.rstrip(os.sep)
    for part in parts:
        current = current + os.sep + part
        if seen is not None and current in seen:
            continue
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return True  # not there (yet): what follows is lexical, as realpath would resolve it
        if stat.S_ISLNK(mode):
            return False
        if seen is not None and stat.S_ISDIR(mode):
            seen.add(current)
    return True
