"""KEP-5526 admission check of a pod budget against its exclusive containers.

``validatePodScopeResources`` in the kubelet runs once per resource (``cpu`` in
whole CPUs; ``memory`` and each ``hugepages-<size>`` in bytes) before a pod
bubble is carved. It walks the init containers in order, keeping the exclusive
amount held by sidecars declared so far, because a regular init container runs
beside the sidecars started before it, and sidecars and app containers run
together for the pod's whole life. The messages are the kubelet's.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.alloc.errors import EmptyPodSharedPoolError
from agent.pods import ContainerKind, ContainerView, PodView

__all__ = ["validate_pod_budget"]


def _unit(resource: str) -> str:
    return "cpus" if resource == "cpu" else resource


def validate_pod_budget(pod: PodView, resource: str, total: int, exclusive: Callable[[ContainerView], int]) -> None:
    """Reject a pod whose exclusive containers leave no room for the rest.

    Args:
        pod: the pod.
        resource: ``"cpu"``, ``"memory"`` or ``"hugepages-<size>"`` (used in the messages).
        total: the pod-level budget T of that resource.
        exclusive: the exclusive amount a container asks for (0 = it shares the pod pool).

    Raises:
        EmptyPodSharedPoolError: with the kubelet's message for the failed rule.
    """
    sidecars = 0
    shared_long_running = False
    for container in pod.init_containers:
        amount = exclusive(container)
        if container.kind == ContainerKind.SIDECAR:
            if amount > 0:
                sidecars += amount
            else:
                shared_long_running = True
            continue
        if amount > 0:
            if amount > total - sidecars:
                raise EmptyPodSharedPoolError(
                    f"pod rejected, largest exclusive init container requests {amount} {_unit(resource)}, "
                    f"but only {total - sidecars} available"
                )
        elif sidecars >= total:
            what = "cpus" if resource == "cpu" else resource
            raise EmptyPodSharedPoolError(
                f"pod rejected, pod has shared init containers but no {what} available for them"
            )
    long_running = sidecars
    for container in pod.containers:
        amount = exclusive(container)
        if amount > 0:
            long_running += amount
        else:
            shared_long_running = True
    if shared_long_running and long_running >= total:
        if resource == "cpu":
            raise EmptyPodSharedPoolError(
                "pod rejected, sum of exclusive container cpu requests equals pod budget, "
                "leaving no cpus for shared containers"
            )
        raise EmptyPodSharedPoolError(
            f"pod rejected, sum of exclusive container {resource} requests equals pod budget, "
            "leaving no memory for shared containers"
        )
