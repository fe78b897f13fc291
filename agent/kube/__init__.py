"""The Kubernetes side of podpin: pod sources (API list+watch, manifest directory) and Events.

Sources only translate the outside world into :class:`PodEvent` values carrying
raw pod dicts; they never decide anything (DESIGN §2). Events are posted off
the caller's thread and never fail the caller.
"""

from __future__ import annotations

from agent.kube.client import KubeConfigError, load_api
from agent.kube.dirsource import DirSource
from agent.kube.events import EventOutcome, EventRecorder, EventStats, PodRef
from agent.kube.manifests import ManifestError, parse_manifest, stable_uid
from agent.kube.source import KubeSource, PodEvent, PodSource

__all__ = [
    "DirSource",
    "EventOutcome",
    "EventRecorder",
    "EventStats",
    "KubeConfigError",
    "KubeSource",
    "ManifestError",
    "PodEvent",
    "PodRef",
    "PodSource",
    "load_api",
    "parse_manifest",
    "stable_uid",
]
