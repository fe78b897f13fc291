"""The boundary between the NRI plugin and whoever decides: one narrow ``Protocol``.

The plugin (``agent.nri.plugin``) speaks the protocol and never decides which
CPUs a container gets: the planner alone decides CPUs (``docs/design.md``,
"Data flow"). For every runtime request it calls one method of an
:class:`NRIHandler` with typed values (``agent.nri.model``) and translates the
answer back. The integrator - the reconciler - implements the handler; tests
implement it with a recorder.

Calls come from one plugin thread, one at a time, in the order the runtime sent
the requests, across reconnects. A call that raises, returns the wrong type or
takes longer than the plugin's answer budget is answered with no adjustment and
reported (:class:`agent.nri.report.CallOutcome`); the handler is never called
concurrently with itself, so its state needs no lock against the plugin (it
may against its own other threads).

Mirrors the hooks of containerd/nri ``pkg/stub/stub.go`` (``Synchronize``,
``RunPodSandbox``, ``StopPodSandbox``, ``RemovePodSandbox``,
``CreateContainer``, ``UpdateContainer``, ``StopContainer``,
``RemoveContainer``), with podpin's types. It is wider than podpin's usual
boundary of one to three methods (``docs/style.md``, "Types and values")
because it is NRI's event set, and one integrator answers all of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agent.nri.model import Container, ContainerUpdate, CPUResources, CreateResult, PodSandbox

__all__ = ["NRIHandler"]


class NRIHandler(Protocol):
    """What podpin does when the runtime reports a pod or container event."""

    def synchronize(self, pods: Sequence[PodSandbox], containers: Sequence[Container]) -> Sequence[ContainerUpdate]:
        """Every pod and container the runtime has, once per connection, before any event.

        Adopt what runs; return updates for containers whose values must change.
        """

    def run_pod_sandbox(self, pod: PodSandbox) -> None:
        """A pod sandbox is starting; its cgroup exists, no container of it runs yet.

        NRI adjusts containers only: this is the moment to write the pod cgroup directly.
        """

    def stop_pod_sandbox(self, pod: PodSandbox) -> None:
        """A pod sandbox was stopped (its containers are stopped)."""

    def remove_pod_sandbox(self, pod: PodSandbox) -> None:
        """A pod sandbox was removed."""

    def create_container(self, pod: PodSandbox, container: Container) -> CreateResult:
        """A container is being created: return its values, and updates of other containers if pools change."""

    def update_container(
        self, pod: PodSandbox, container: Container, requested: CPUResources | None
    ) -> Sequence[ContainerUpdate]:
        """The kubelet asks to update a container's resources to ``requested``.

        Return updates (one for this container overrides what is applied to it).
        """

    def stop_container(self, pod: PodSandbox, container: Container) -> Sequence[ContainerUpdate]:
        """A container stopped; return updates of other containers if its CPUs go back to a pool."""

    def remove_container(self, pod: PodSandbox, container: Container) -> None:
        """A container was removed."""
