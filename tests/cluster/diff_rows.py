"""The differential harness's verdicts: one container seen by the kubelet and by podpin, compared (issue 17).

The harness (``scripts/kubelet_diff.py``) runs a scenario twice — (a) on the kubelet's own pod-level resource
managers, (b) on the kubelet with its managers off and podpin deciding — and observes every container on each
side: whether its pod was admitted and why not, and the CPUs and memory nodes as the container's process sees them
(``Cpus_allowed_list``, ``Mems_allowed_list``) and as its cgroup says (``cpuset.cpus.effective``,
``cpuset.mems.effective``). This module is the pure part: it turns those observations into the JSON rows the
harness prints and into the summary, so the rule of "equal" is written once and tested without a cluster.

The rule: both sides admit the pod and give the container the same CPUs and memory nodes; or both reject it with
the same reason (the kubelet fails the pod, podpin keeps it running unpinned and says why in an Event: the CPUs are
then not compared). A side whose process and cgroup disagree is never equal: that is a bug on that side (a cpuset
written but not propagated), whatever the other side says.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CAUSES", "Observation", "Row", "compare", "summary"]

CAUSES = ("inconsistent", "admission", "reason", "cpus", "mems")
"""Why a row is not equal, in the order a row is checked: the first that applies is its cause."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """One container on one side.

    ``reason`` is the kubelet's pod status reason (a failed pod) or podpin's Event reason (a rejected pod); None
    for an admitted pod. The CPU and memory lists are canonical cpulist strings (``"1-3,5"``); None where nothing
    runs to be read (a pod the kubelet failed).
    """

    admitted: bool
    reason: str | None = None
    cpus: str | None = None
    mems: str | None = None
    cgroup_cpus: str | None = None
    cgroup_mems: str | None = None

    @property
    def consistent(self) -> bool:
        """The process and its cgroup agree (or there is no cgroup view to hold against it)."""
        cpus_ok = self.cgroup_cpus is None or self.cgroup_cpus == self.cpus
        mems_ok = self.cgroup_mems is None or self.cgroup_mems == self.mems
        return cpus_ok and mems_ok

    def as_json(self) -> dict[str, Any]:
        """The row's view of this side: ``{admitted, reason, cpus, mems}``, plus ``cgroup`` where it disagrees."""
        out: dict[str, Any] = {"admitted": self.admitted, "reason": self.reason, "cpus": self.cpus, "mems": self.mems}
        if not self.consistent:
            out["cgroup"] = {"cpus": self.cgroup_cpus, "mems": self.cgroup_mems}
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One container compared: the harness prints :meth:`as_json` as one line."""

    scenario: str
    pod: str
    container: str
    kubelet: Observation
    podpin: Observation
    cause: str | None

    @property
    def equal(self) -> bool:
        """Both sides decided the same (see the module docstring for the rule)."""
        return self.cause is None

    def as_json(self) -> dict[str, Any]:
        """``{scenario, pod, container, kubelet, podpin, equal}``, and ``cause`` when not equal."""
        out: dict[str, Any] = {
            "scenario": self.scenario,
            "pod": self.pod,
            "container": self.container,
            "kubelet": self.kubelet.as_json(),
            "podpin": self.podpin.as_json(),
            "equal": self.equal,
        }
        if self.cause is not None:
            out["cause"] = self.cause
        return out


def _cause(kubelet: Observation, podpin: Observation) -> str | None:
    if not (kubelet.consistent and podpin.consistent):
        return "inconsistent"
    if kubelet.admitted != podpin.admitted:
        return "admission"
    if not kubelet.admitted:
        return None if kubelet.reason == podpin.reason else "reason"
    if kubelet.cpus != podpin.cpus:
        return "cpus"
    if kubelet.mems != podpin.mems:
        return "mems"
    return None


def compare(scenario: str, pod: str, container: str, *, kubelet: Observation, podpin: Observation) -> Row:
    """The row of one container: both observations and the first cause of difference, if any."""
    return Row(
        scenario=scenario,
        pod=pod,
        container=container,
        kubelet=kubelet,
        podpin=podpin,
        cause=_cause(kubelet, podpin),
    )


def summary(rows: Iterable[Row], *, version: str) -> dict[str, Any]:
    """The summary line: scenarios, containers, equal, and the differences counted by cause."""
    rows = list(rows)
    causes: Mapping[str, int] = Counter(row.cause for row in rows if row.cause is not None)
    return {
        "summary": True,
        "kubernetes": version,
        "scenarios": len({row.scenario for row in rows}),
        "containers": len(rows),
        "equal": sum(row.equal for row in rows),
        "differences": {cause: causes.get(cause, 0) for cause in CAUSES},
    }
