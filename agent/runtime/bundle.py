"""Reading a container's OCI bundle ``config.json`` from the runtime's state directory (the I/O edge).

Where each runtime keeps the bundle of a Kubernetes container (under ``--runtime-root``, default ``/``, so a
DaemonSet can mount the host's runtime state read-only anywhere, like ``--sysfs-root``; the directories are the
``runtimePaths`` setting, :mod:`agent.runtime.paths`, shown here with their defaults):

* containerd (CRI plugin, namespace ``k8s.io``): ``/run/containerd/io.containerd.runtime.v2.task/k8s.io/<id>/``
  (containerd's ``runtime/v2`` bundle directory; ``config.json`` is written before the shim runs
  ``runc create``, which makes the cgroup: checked on containerd 1.7 and 2.x in ``tests/vm``), then, for a pod
  sandbox under containerd 2.x's ``shim`` sandboxer, ``/run/containerd/io.containerd.sandbox.controller.v1.shim/
  k8s.io/<id>/``;
* CRI-O: ``/run/containers/storage/overlay-containers/<id>/userdata/`` (written in CreateContainer, before
  ``runc create``).

A lookup answers one of four ways, and the caller decides what to do:

* :class:`Found`: the identity (:mod:`agent.runtime.annotations`);
* :class:`NotYet`: the runtime keeps bundles here but this one is missing, empty or not complete JSON
  (containerd writes the file in place, not by rename, so a reader can catch it half-written): try again a
  little later;
* :class:`Unavailable`: this runtime's bundle directory does not exist under the root (another runtime, or
  its state is not mounted into the agent): no point retrying, the pod status will name the container;
* :class:`Invalid`: the bundle exists but says nothing usable (an id that is not 64 hex digits, a file that
  is not a regular file or larger than ``max_bytes``, unreadable, a JSON document without the annotations):
  report it; the pod status stays the last resort.

The id is validated before it becomes a path component (no ``/``, no ``..``), the file is opened with
``O_NOFOLLOW | O_NONBLOCK`` and checked to be a regular file, and at most ``max_bytes + 1`` bytes are read.
"""

from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from agent.hostfile import open_regular, read_regular_fd
from agent.runtime.annotations import AnnotationError, BundleIdentity, identity_from_spec
from agent.runtime.paths import RuntimePaths
from agent.runtime.vocabulary import IdentityErrorReason
from agent.safeparse import MAX_DEPTH, DocumentError, check_depth
from agent.vocabulary import Runtime

__all__ = [
    "DEFAULT_RUNTIME_ROOT",
    "MAX_BUNDLE_BYTES",
    "BundleLookup",
    "BundleReader",
    "Found",
    "Invalid",
    "NotYet",
    "Unavailable",
    "bundle_locations",
]

DEFAULT_RUNTIME_ROOT = Path("/")
"""``--runtime-root``: the host's root, where ``run/containerd`` and ``run/containers`` are."""
MAX_BUNDLE_BYTES = 1 << 20
"""The largest ``config.json`` read (a Kubernetes container's is 3-30 KB; huge env lists stay far below)."""


def bundle_locations(paths: RuntimePaths, runtime: Runtime) -> tuple[tuple[str, str], ...]:
    """Where ``runtime`` keeps bundles, in the order looked at: (directory relative to the runtime root holding one
    entry per container id, the spec's path inside that entry); empty for a runtime without CRI bundles."""
    if runtime is Runtime.CONTAINERD:
        dirs = (paths.containerd_tasks, paths.containerd_sandboxes)
        return tuple((str(d).lstrip("/"), "config.json") for d in dirs)
    if runtime is Runtime.CRIO:
        return ((str(paths.crio_containers).lstrip("/"), "userdata/config.json"),)
    return ()


_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """The bundle names the container."""

    identity: BundleIdentity
    path: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class NotYet:
    """The bundle is not (completely) there yet; ``reason`` says what was seen."""

    path: Path
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Unavailable:
    """This runtime's bundles are not visible under the runtime root (``directory`` does not exist)."""

    runtime: Runtime | None
    directory: Path | None
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Invalid:
    """The bundle cannot name the container; ``reason`` is the metric label, ``message`` says what was wrong."""

    path: Path | None
    reason: IdentityErrorReason
    message: str


BundleLookup = Found | NotYet | Unavailable | Invalid
"""What :meth:`BundleReader.read` answers."""


class BundleReader:
    """Reads container bundles under one runtime root.

    Args:
        root: ``--runtime-root`` (``/`` on a node; a fixture tree in tests).
        paths: where each runtime keeps its state (``runtimePaths``).
        max_bytes: the largest ``config.json`` accepted.
    """

    def __init__(
        self, root: Path = DEFAULT_RUNTIME_ROOT, *, paths: RuntimePaths | None = None, max_bytes: int = MAX_BUNDLE_BYTES
    ) -> None:
        self.root = root
        self.paths = paths if paths is not None else RuntimePaths()
        self.max_bytes = max_bytes

    def directory(self, runtime: Runtime) -> Path | None:
        """The directory holding ``runtime``'s bundles under the root (None: the runtime keeps none podpin reads)."""
        locations = bundle_locations(self.paths, runtime)
        return self.root / locations[0][0] if locations else None

    def read(self, container_id: str, runtime: Runtime | None) -> BundleLookup:
        """Who container ``container_id`` is, from its bundle.

        Args:
            container_id: the runtime id (64 lower-case hex digits) taken from the container's cgroup name.
            runtime: the runtime the cgroup name tells; None (a bare id, cgroupfs driver) means containerd or
                docker, and only containerd keeps a CRI bundle.
        """
        if not isinstance(container_id, str) or not _HEX64.fullmatch(container_id):
            return Invalid(
                path=None,
                reason=IdentityErrorReason.INVALID_ID,
                message=f"container id {container_id!r} is not 64 lower-case hex digits",
            )
        chosen = Runtime.CONTAINERD if runtime is None else runtime
        locations = bundle_locations(self.paths, chosen)
        if not locations:
            return Unavailable(runtime=chosen, directory=None, reason=f"{chosen.value} keeps no CRI bundle annotations")
        first: NotYet | None = None
        found: tuple[Path, bytes] | None = None
        for relative, spec_path in locations:
            directory = self.root / relative
            path = directory / container_id / spec_path
            raw = self._read(path)
            if isinstance(raw, Invalid):
                return raw
            if isinstance(raw, bytes):
                found = (path, raw)
                break
            if first is None and directory.is_dir():
                first = raw
        if found is None:
            if first is None:
                directory = self.root / locations[0][0]
                return Unavailable(runtime=chosen, directory=directory, reason=f"{directory} does not exist")
            return first
        path, raw = found
        if not raw.strip():
            return NotYet(path=path, reason="config.json is empty")
        too_deep = Invalid(
            path=path, reason=IdentityErrorReason.MALFORMED, message=f"{path}: nested deeper than {MAX_DEPTH} levels"
        )
        try:
            spec = json.loads(raw)
        except RecursionError:  # the decoder recurses once per bracket: a runtime's bundle is a few levels deep
            return too_deep
        except ValueError as err:  # JSONDecodeError and UnicodeDecodeError: written in place, maybe half done
            return NotYet(path=path, reason=f"config.json is not complete JSON yet ({err})")
        try:
            check_depth(spec, MAX_DEPTH)
        except DocumentError:
            return too_deep
        try:
            identity = identity_from_spec(chosen, container_id, spec)
        except AnnotationError as err:
            return Invalid(path=path, reason=err.reason, message=f"{path}: {err.message}")
        return Found(identity=identity, path=path)

    def _read(self, path: Path) -> bytes | NotYet | Invalid:
        try:
            fd = open_regular(path)  # O_NOFOLLOW | O_NONBLOCK, regular files only (agent/hostfile.py)
        except FileNotFoundError:
            return NotYet(path=path, reason="no config.json yet")
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENOTDIR):
                return Invalid(
                    path=path, reason=IdentityErrorReason.NOT_REGULAR, message=f"{path}: a symlink or not a file"
                )
            if err.errno == errno.EINVAL:
                return Invalid(path=path, reason=IdentityErrorReason.NOT_REGULAR, message=f"{path}: not a regular file")
            return Invalid(
                path=path, reason=IdentityErrorReason.UNREADABLE, message=f"{path}: cannot open: {err.strerror or err}"
            )
        try:
            size = os.fstat(fd).st_size
            if size > self.max_bytes:
                return Invalid(
                    path=path,
                    reason=IdentityErrorReason.OVERSIZE,
                    message=f"{path}: {size} bytes, more than the {self.max_bytes} podpin reads",
                )
            return read_regular_fd(fd, self.max_bytes)
        except OSError as err:
            if err.errno == errno.EFBIG:  # it grew while it was read
                return Invalid(
                    path=path,
                    reason=IdentityErrorReason.OVERSIZE,
                    message=f"{path}: more than the {self.max_bytes} bytes podpin reads",
                )
            return Invalid(
                path=path, reason=IdentityErrorReason.UNREADABLE, message=f"{path}: cannot read: {err.strerror or err}"
            )
        finally:
            os.close(fd)
