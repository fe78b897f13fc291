"""The topology manager's scope names (``topologyManagerScope``).

The kubelet's ``pkg/kubelet/cm/topologymanager/scope.go`` names two scopes:
``container`` (each container aligned on its own) and ``pod`` (the whole pod on
one affinity). How podpin admits a pod through either is
:mod:`agent.alloc.admission`.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TopologyManagerScope"]


class TopologyManagerScope(StrEnum):
    """``topologyManagerScope``: ``pod`` gives pod-level pods a bubble and a pod shared pool."""

    CONTAINER = "container"
    POD = "pod"
