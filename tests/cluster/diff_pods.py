"""The differential harness's view of pods (issue 17), pure: a scenario's pod made ready to apply on the node, the
containers compared, and what each side says about admission, read from the pod as the API server returns it.

Admission: the kubelet fails a pod it cannot admit (phase ``Failed``, ``status.reason`` its reason:
``TopologyAffinityError``, ``SMTAlignmentError`` ...); podpin keeps such a pod running unpinned and says why in
its pod condition ``podpin.io/CPUsPinned`` (``False``, the kubelet's reason) and an Event of that reason.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tests.cluster.diff_config import PODPIN_READY_GATE
from tests.cluster.scenario_format import PodFile

__all__ = [
    "bound_manifest",
    "container_ids",
    "kubelet_admission",
    "observed_containers",
    "podpin_admission",
    "settled",
]

_GRACE_SECONDS = 1
"""The pods' termination grace: `sleep` ignores SIGTERM as PID 1, so a scenario's cleanup would wait 30 s a pod."""


def bound_manifest(pod: PodFile, *, node: str, ready_gate: bool) -> dict[str, Any]:
    """The pod as the harness applies it: bound to `node`, the image never pulled (the guest has it), a short
    termination grace, and in run (b) podpin's readiness gate. Nothing that bears on resources is changed."""
    manifest = copy.deepcopy(dict(pod.manifest))
    manifest.setdefault("metadata", {})["namespace"] = pod.namespace
    spec = manifest["spec"]
    spec["nodeName"] = node
    spec["terminationGracePeriodSeconds"] = _GRACE_SECONDS
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            container["imagePullPolicy"] = "Never"
    if ready_gate:
        gates = [g for g in spec.get("readinessGates") or [] if g.get("conditionType") != PODPIN_READY_GATE]
        spec["readinessGates"] = [*gates, {"conditionType": PODPIN_READY_GATE}]
    return manifest


def observed_containers(manifest: Mapping[str, Any]) -> list[str]:
    """The containers compared: sidecars (init containers with ``restartPolicy: Always``) and app containers, in
    spec order. Regular init containers have exited by the time the pod runs: nothing of theirs is left to read."""
    spec = manifest["spec"]
    sidecars = [c["name"] for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    return [*sidecars, *(c["name"] for c in spec["containers"])]


def _statuses(pod: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    status = pod.get("status") or {}
    return {s["name"]: s for key in ("initContainerStatuses", "containerStatuses") for s in status.get(key) or []}


def container_ids(pod: Mapping[str, Any]) -> dict[str, str]:
    """The running containers' CRI ids by name (``containerd://<id>`` without its scheme)."""
    return {
        name: s["containerID"].split("://", 1)[-1]
        for name, s in _statuses(pod).items()
        if s.get("containerID") and "running" in (s.get("state") or {})
    }


def kubelet_admission(pod: Mapping[str, Any]) -> tuple[bool, str | None]:
    """Run (a): a pod the kubelet failed is not admitted, its status reason says why."""
    status = pod.get("status") or {}
    if status.get("phase") == "Failed":
        return False, status.get("reason") or "Failed"
    return True, None


def _condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == PODPIN_READY_GATE:
            return dict(condition)
    return None


def podpin_admission(pod: Mapping[str, Any]) -> tuple[bool, str | None]:
    """Run (b): podpin's condition False means it did not place the pod, its reason the kubelet's."""
    condition = _condition(pod)
    if condition is not None and condition.get("status") == "False":
        return False, condition.get("reason") or "UnexpectedAdmissionError"
    return True, None


def settled(pod: Mapping[str, Any], *, side: str) -> bool:
    """Whether the pod is where the harness can read it: failed by the kubelet (run a), or every compared
    container running and, in run (b), podpin's condition set."""
    if side == "kubelet" and (pod.get("status") or {}).get("phase") == "Failed":
        return True
    running = container_ids(pod)
    if not all(name in running for name in observed_containers(pod)):
        return False
    return side == "kubelet" or _condition(pod) is not None
