"""The Kubernetes side of podpin: pod sources (API list+watch, manifest directory) and Events.

Sources only translate the outside world into :class:`PodEvent` values carrying
raw pod dicts; they never decide anything (``docs/design.md``, "Data flow"). Events are posted off
the caller's thread and never fail the caller.

Importing this package loads the Kubernetes client (tens of MiB, seconds of
start-up in a VM), so only the agent's ``run`` path imports it; the pure
manifest parsing that ``podpin plan`` needs is :mod:`agent.pods.manifests`.
"""

from agent.kube.api import CoreCalls
from agent.kube.client import KubeConfigError, load_api
from agent.kube.dirsource import DirSource
from agent.kube.events import EventOutcome, EventRecorder, EventStats, PodRef
from agent.kube.source import KubeSource, PodEvent, PodSource

__all__ = [
    "CoreCalls",
    "DirSource",
    "EventOutcome",
    "EventRecorder",
    "EventStats",
    "KubeConfigError",
    "KubeSource",
    "PodEvent",
    "PodRef",
    "PodSource",
    "load_api",
]
