"""The Kubernetes side of podpin: pod sources (API list+watch, manifest directory) and Events.

Sources only translate the outside world into :class:`PodEvent` values carrying
raw pod dicts; they never decide anything (DESIGN §2). Events are posted off
the caller's thread and never fail the caller.

The names below are resolved on first use: ``agent.kube.manifests`` (what
``podpin plan`` needs) must not pull in the Kubernetes client, which costs a
command seconds of start-up and tens of MiB.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "KubeConfigError": "agent.kube.client",
    "load_api": "agent.kube.client",
    "DirSource": "agent.kube.dirsource",
    "EventOutcome": "agent.kube.events",
    "EventRecorder": "agent.kube.events",
    "EventStats": "agent.kube.events",
    "PodRef": "agent.kube.events",
    "ManifestError": "agent.kube.manifests",
    "parse_manifest": "agent.kube.manifests",
    "stable_uid": "agent.kube.manifests",
    "KubeSource": "agent.kube.source",
    "PodEvent": "agent.kube.source",
    "PodSource": "agent.kube.source",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
