"""Where the container runtimes keep their state on a node: the ``runtimePaths`` setting (pure values).

podpin reads a new container's OCI bundle ``config.json`` to learn who it is (:mod:`agent.runtime.bundle`).
Where the bundle lies depends on how the runtime is installed:

* containerd keeps a task's bundle in ``<state>/io.containerd.runtime.v2.task/k8s.io/<id>/``; ``state`` is
  ``/run/containerd`` by default, ``/run/k3s/containerd`` under k3s and RKE2 (both embed containerd with that
  state directory);
* with containerd 2.x's ``shim`` sandboxer (``sandboxer = "shim"`` in a runtime handler) the pod sandbox's
  bundle is written by the sandbox controller plugin, in its own state directory
  ``<state>/io.containerd.sandbox.controller.v1.shim/k8s.io/<id>/`` (containerd's plugin state directories
  are ``<state>/<plugin type>.<plugin id>``); the default ``podsandbox`` sandboxer keeps it with the tasks;
* CRI-O keeps ``<runroot>/<storage driver>-containers/<id>/userdata/config.json``; ``runroot`` is
  ``/run/containers/storage`` and the driver ``overlay`` by default (``storage.conf``: ``runroot``, ``driver``).

Every path is absolute on the node and read under ``runtimeRoot`` (where the host's root is mounted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath

__all__ = ["DEFAULT_RUNTIME_PATHS", "PRESETS", "RuntimePathPreset", "RuntimePaths", "RuntimePathsError"]

_CONTAINERD_TASKS = "io.containerd.runtime.v2.task"
_SHIM_SANDBOXER = "io.containerd.sandbox.controller.v1.shim"
_K8S_NAMESPACE = "k8s.io"
_CONTAINERD_STATE = PurePosixPath("/run/containerd")
_CRIO_RUNROOT = PurePosixPath("/run/containers/storage")
_DRIVER = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


class RuntimePathsError(ValueError):
    """A runtime path setting that cannot be used; the message names it."""


class RuntimePathPreset(StrEnum):
    """``runtimePaths.preset``: the defaults of one kind of installation, under the keys given beside it."""

    DEFAULT = "default"
    K3S = "k3s"
    RKE2 = "rke2"


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimePaths:
    """The runtimes' state locations (absolute node paths).

    ``sandboxer_dir`` None means containerd's own: ``<containerd_state>/io.containerd.sandbox.controller.v1.shim``.
    """

    containerd_state: PurePosixPath = _CONTAINERD_STATE
    crio_runroot: PurePosixPath = _CRIO_RUNROOT
    crio_storage_driver: str = "overlay"
    sandboxer_dir: PurePosixPath | None = None

    def __post_init__(self) -> None:
        for name in ("containerd_state", "crio_runroot", "sandboxer_dir"):
            value = getattr(self, name)
            if value is not None and (not value.is_absolute() or ".." in value.parts):
                raise RuntimePathsError(f"{name}: {str(value)!r} must be an absolute path without '..'")
        if not _DRIVER.fullmatch(self.crio_storage_driver):
            raise RuntimePathsError(
                f"crio_storage_driver: {self.crio_storage_driver!r} is not a storage driver name (overlay, vfs, ...)"
            )

    @property
    def containerd_tasks(self) -> PurePosixPath:
        """The directory of containerd's task bundles in the CRI namespace."""
        return self.containerd_state / _CONTAINERD_TASKS / _K8S_NAMESPACE

    @property
    def containerd_sandboxes(self) -> PurePosixPath:
        """The directory of the ``shim`` sandboxer's sandbox bundles in the CRI namespace."""
        base = self.sandboxer_dir if self.sandboxer_dir is not None else self.containerd_state / _SHIM_SANDBOXER
        return base / _K8S_NAMESPACE

    @property
    def crio_containers(self) -> PurePosixPath:
        """CRI-O's per-container directories (each holds ``userdata/config.json``)."""
        return self.crio_runroot / f"{self.crio_storage_driver}-containers"


DEFAULT_RUNTIME_PATHS = RuntimePaths()
"""containerd's and CRI-O's own defaults."""

PRESETS: dict[RuntimePathPreset, RuntimePaths] = {
    RuntimePathPreset.DEFAULT: DEFAULT_RUNTIME_PATHS,
    RuntimePathPreset.K3S: RuntimePaths(containerd_state=PurePosixPath("/run/k3s/containerd")),
    RuntimePathPreset.RKE2: RuntimePaths(containerd_state=PurePosixPath("/run/k3s/containerd")),
}
"""Each preset's paths; keys given beside ``preset`` replace its values."""
