"""Fixture runtime state: OCI bundle ``config.json`` files where containerd and CRI-O keep them.

The agent names a new container cgroup from its runtime's bundle under ``--runtime-root``
(``agent/runtime/bundle.py``). These helpers write such bundles into a temp dir, with the annotations each
runtime really writes (containerd's checked against containerd 1.7.24 in ``tests/vm``), or with any raw
content for the broken cases.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["bundle_path", "containerd_annotations", "crio_annotations", "write_bundle", "write_raw_bundle"]

_DIRS = {
    "containerd": ("run/containerd/io.containerd.runtime.v2.task/k8s.io", "config.json"),
    "cri-o": ("run/containers/storage/overlay-containers", "userdata/config.json"),
    # Other installations (``runtimePaths``): k3s/RKE2's containerd, containerd 2.x's shim sandboxer, a CRI-O with
    # its own runroot and the vfs driver.
    "k3s": ("run/k3s/containerd/io.containerd.runtime.v2.task/k8s.io", "config.json"),
    "shim-sandboxer": ("run/containerd/io.containerd.sandbox.controller.v1.shim/k8s.io", "config.json"),
    "cri-o-vfs": ("var/lib/crio-run/vfs-containers", "userdata/config.json"),
}


def bundle_path(root: Path, container_id: str, runtime: str = "containerd") -> Path:
    """Where ``runtime`` keeps container ``container_id``'s ``config.json`` under ``root``."""
    directory, name = _DIRS[runtime]
    return root / directory / container_id / name


def containerd_annotations(
    uid: str, name: str | None, *, pod: str = "web", namespace: str = "default", sandbox_id: str = "0" * 64
) -> dict[str, str]:
    """What containerd's CRI plugin writes for a container (``name``) or the sandbox (``name=None``)."""
    annotations = {
        "io.kubernetes.cri.container-type": "sandbox" if name is None else "container",
        "io.kubernetes.cri.sandbox-id": sandbox_id,
        "io.kubernetes.cri.sandbox-name": pod,
        "io.kubernetes.cri.sandbox-namespace": namespace,
        "io.kubernetes.cri.sandbox-uid": uid,
    }
    if name is not None:
        annotations["io.kubernetes.cri.container-name"] = name
        annotations["io.kubernetes.cri.image-name"] = f"registry.example.com/{name}:1"
    return annotations


def crio_annotations(uid: str, name: str | None, *, pod: str = "web", namespace: str = "default") -> dict[str, str]:
    """What CRI-O writes for a container (``name``) or the infra container (``name=None``: ``POD``)."""
    return {
        "io.kubernetes.cri-o.ContainerType": "sandbox" if name is None else "container",
        "io.kubernetes.container.name": "POD" if name is None else name,
        "io.kubernetes.pod.name": pod,
        "io.kubernetes.pod.namespace": namespace,
        "io.kubernetes.pod.uid": uid,
    }


def write_bundle(
    root: Path, container_id: str, annotations: Mapping[str, str] | None, *, runtime: str = "containerd"
) -> Path:
    """Write a plausible OCI spec with these ``annotations`` (None: no annotations key); returns its path."""
    spec: dict[str, Any] = {
        "ociVersion": "1.1.0",
        "process": {"args": ["/bin/sleep", "infinity"], "cwd": "/"},
        "root": {"path": "rootfs"},
        "linux": {"resources": {"cpu": {"shares": 1024, "quota": 100000, "period": 100000}}},
    }
    if annotations is not None:
        spec["annotations"] = dict(annotations)
    return write_raw_bundle(root, container_id, json.dumps(spec, indent=1).encode(), runtime=runtime)


def write_raw_bundle(root: Path, container_id: str, content: bytes, *, runtime: str = "containerd") -> Path:
    """Write ``content`` as the bundle's ``config.json`` (directories made as needed); returns its path."""
    path = bundle_path(root, container_id, runtime)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path
