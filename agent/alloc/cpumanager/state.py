"""The CPU manager's state, in the kubelet's shape, and its start-up validation.

``CPUState`` mirrors the kubelet's ``state.State``: the shared (default) cpuset,
per-container assignments ``{pod uid: {container name: cpuset}}`` and, for pods
with pod-level resources, the pod bubble ``{pod uid: cpuset}``. It is a mutable
working copy: the planner copies it at the start of an admission, lets the
policies mutate the copy, and keeps the copy only if the whole pod was admitted,
so a failed admission never leaves half a pod behind.

Invariants (checked by :func:`validate_cpu_state`, worded like ``validateState``):

* SHARED (default) and every container assignment are disjoint;
* reserved CPUs are all in the default set (none of them with
  ``strict-cpu-reservation``);
* default ∪ assignments ∪ pod bubbles equals the machine's CPUs (minus reserved
  when strict).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.cpuset import CPUSet

__all__ = ["CPUState", "CPUStateError", "validate_cpu_state"]


class CPUStateError(ValueError):
    """A CPU state that contradicts the machine or itself; the message names the sets."""


@dataclass(slots=True)
class CPUState:
    """Shared pool, container assignments and pod bubbles (mutable working copy)."""

    default: CPUSet = field(default_factory=CPUSet)
    assignments: dict[str, dict[str, CPUSet]] = field(default_factory=dict)
    pod_entries: dict[str, CPUSet] = field(default_factory=dict)

    def copy(self) -> CPUState:
        """A copy whose dicts can be changed without touching this one."""
        return CPUState(
            default=self.default,
            assignments={uid: dict(containers) for uid, containers in self.assignments.items()},
            pod_entries=dict(self.pod_entries),
        )

    def get(self, pod_uid: str, container: str) -> CPUSet | None:
        """The container's assignment, or None when it has none."""
        return self.assignments.get(pod_uid, {}).get(container)

    def set(self, pod_uid: str, container: str, cpus: CPUSet) -> None:
        self.assignments.setdefault(pod_uid, {})[container] = cpus

    def delete(self, pod_uid: str, container: str) -> None:
        containers = self.assignments.get(pod_uid)
        if containers is None:
            return
        containers.pop(container, None)
        if not containers:
            del self.assignments[pod_uid]

    def assigned(self) -> CPUSet:
        """Every CPU held by a container assignment or a pod bubble."""
        mask = 0
        for containers in self.assignments.values():
            for cpus in containers.values():
                mask |= cpus.mask
        for bubble in self.pod_entries.values():
            mask |= bubble.mask
        return CPUSet.from_mask(mask)


def validate_cpu_state(state: CPUState, all_cpus: CPUSet, reserved: CPUSet, *, strict: bool) -> None:
    """The kubelet's ``validateState``; initialises an empty state in place.

    Args:
        state: the state to check (an empty one is initialised to all CPUs).
        all_cpus: the machine's online CPUs.
        reserved: the reserved CPUs.
        strict: ``strict-cpu-reservation`` is on (reserved CPUs are never shared).

    Raises:
        CPUStateError: with the kubelet's message for the first violated rule.
    """
    expected = all_cpus - reserved if strict else all_cpus
    if not state.default:
        if state.assignments or state.pod_entries:
            raise CPUStateError("default cpuset cannot be empty")
        state.default = expected
        return
    if strict:
        overlap = reserved & state.default
        if overlap:
            raise CPUStateError(
                f'some of strictly reserved cpus: "{overlap}" are present in defaultCpuSet: "{state.default}"'
            )
    elif (reserved & state.default) != reserved:
        raise CPUStateError(f'not all reserved cpus: "{reserved}" are present in defaultCpuSet: "{state.default}"')
    for pod_uid, containers in state.assignments.items():
        for container, cpus in containers.items():
            if not state.default.is_disjoint(cpus):
                raise CPUStateError(
                    f'pod: {pod_uid}, container: {container} cpuset: "{cpus}" overlaps with default cpuset '
                    f'"{state.default}"'
                )
    for pod_uid, bubble in state.pod_entries.items():
        if not state.default.is_disjoint(bubble):
            raise CPUStateError(f'pod: {pod_uid} cpuset: "{bubble}" overlaps with default cpuset "{state.default}"')
    known = state.default | state.assigned()
    if known != expected:
        raise CPUStateError(f'current set of available CPUs "{expected}" doesn\'t match with CPUs in state "{known}"')
