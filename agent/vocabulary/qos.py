"""The pod QoS class: one word every layer uses (the planner decides with it, the cgroup layout names its levels).

Only the word lives here; how the kubelet computes it is ``agent/pods/qos.py``.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["QOSClass"]


class QOSClass(StrEnum):
    """A pod QoS class, spelled as in ``status.qosClass`` (the cgroup layout names its levels after it too)."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BESTEFFORT = "BestEffort"
