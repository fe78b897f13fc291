"""Which kind of cgroup of the kubepods tree a value is for (the ``cgroup_level`` of log lines).

The reconciler's targets use every level; ``podpin reset`` finds only the
first three (it names no container, so it has no sandbox or unidentified child).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["CgroupLevel"]


class CgroupLevel(StrEnum):
    """Where a cgroup sits in the kubepods tree."""

    QOS = "qos"
    POD = "pod"
    CONTAINER = "container"
    SANDBOX = "sandbox"
    """The pod's sandbox (pause) container, as its runtime names it: it gets the pod's interim set."""
    UNIDENTIFIED = "unidentified"
    """A child of the pod nobody has named yet: it gets the pod's interim set."""
