"""The CPU manager's policy names (``cpuManagerPolicy``).

The kubelet names its policies in ``pkg/kubelet/cm/cpumanager/policy_none.go``
and ``policy_static.go``; podpin implements ``static`` (:mod:`.policy_static`)
and runs ``none`` as "admit everything, pin nothing".
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["CPUManagerPolicy"]


class CPUManagerPolicy(StrEnum):
    """``cpuManagerPolicy``: ``static`` pins exclusive CPUs; ``none`` only reports."""

    STATIC = "static"
    NONE = "none"
