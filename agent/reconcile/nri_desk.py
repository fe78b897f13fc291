"""The loop's side of NRI: answer the runtime's requests from the plan, on the reconcile loop's thread.

The plugin thread queues each request (``nri_handler.py``); the loop hands it here. Everything below runs
on the loop, so it may plan, name containers in the identity book and write cgroups like any pass.

* **Synchronize** (once per connection): every sandbox and container the runtime has is named in the
  identity book with ``replace(IdentitySource.NRI, ...)``; no NRI updates are returned. A running
  container whose cpuset differs from the plan is logged (``nri.synchronize_differs``) and a full pass
  rewrites it directly, as without NRI.
* **RunPodSandbox**: the pod cgroup's values are written directly (NRI adjusts containers only, never the
  pod or QoS cgroups): the planned set once the pod is admitted, else its interim set.
* **CreateContainer**: the container is named (NRI is the most trusted source), its pod decided (admitted
  if new) and its pod cgroup widened, then the answer carries ``cpuset.cpus``, ``cpuset.mems`` (set by the
  plan only with the Static memory policy, as the cgroup writer writes it) and the CFS quota and period
  from the plan's ``cpu.max``. A pod the API watch has not delivered yet is waited for up to
  ``nri.podWaitTimeout`` (the request is parked; the loop keeps turning); then the container is answered
  with the node's shared pool (what an unknown pod's containers run on, ``docs/design.md``) and a warning
  ``nri.pod_not_known`` says so. When the pod arrives, its pass writes the container's cgroup, which the
  identity book already names: the correction is an ordinary targeted write.
* **UpdateContainer**: always answered with an update for that container carrying its planned cpuset, mems
  and CFS quota/period (the pod's interim set for a container the plan does not hold yet), whatever the
  request carries: containerd re-sends the creation-time cpuset on every UpdateContainerResources (an
  in-place resize), so neither that nor the kubelet's value ever lands.
* **RemoveContainer / RemovePodSandbox**: the identity is forgotten; a request still parked for a removed
  pod is answered at once.

**Other containers when pools change** are rewritten by the reconciler's direct cgroup writes, not by NRI
updates: one writer for every level (QoS, pod, container) in the widen-then-narrow order; the same drift
repair whichever way a container was named; and a write is verified against ``cpuset.cpus.effective``,
which an NRI update does not report. The runtime's record of such a container keeps its creation-time
cpuset: a runtime restart re-applies nothing (runc does not rewrite a running container's cgroup), and a
resync rewrites any drift within ``reconcilePeriod``.

Bad input (a pod uid that names no cgroup, a container id that is not 64 hex digits, a container whose
sandbox id is not its pod's) is logged ``nri.invalid_input`` and answered with an :class:`NRIInputError`,
which the plugin reports as an ``error`` outcome (``podpin_nri_requests_total{result="error"}``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from agent.alloc import PodPlan
from agent.cgroups import CgroupPathError, validate_uid
from agent.cpuset import CPUSet
from agent.nri import (
    Container,
    ContainerAdjustment,
    ContainerUpdate,
    CreateResult,
    NRIMethod,
    PodSandbox,
)
from agent.reconcile.identity import Identity
from agent.reconcile.nri_handler import NRIInputError, NRIRequest, Reply
from agent.reconcile.reconciler import Pending, Reconciler
from agent.runtime import ContainerType, IdentitySource

__all__ = ["NRIDesk"]

_RUNTIME_ID = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Parked:
    """A request for a pod the API watch has not delivered yet."""

    request: NRIRequest
    reply: Reply
    since: float
    deadline: float


class NRIDesk:
    """Answers NRI requests on the loop (module docstring).

    Args:
        reconciler: the agent's reconciler (plans, identity book, cgroup writes).
        pod_wait: seconds to wait for a pod the API watch has not delivered (``nri.podWaitTimeout``).
        pending: the agent's "targeted work waits" question, for the passes run here.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        reconciler: Reconciler,
        *,
        pod_wait: float,
        pending: Pending | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reconciler = reconciler
        self._pod_wait = pod_wait
        self._pending = pending
        self._clock = clock
        self._parked: list[_Parked] = []
        self._log = structlog.get_logger("podpin.nri").bind(node=reconciler.reporter.node)

    # -- what the loop calls -------------------------------------------------------------------
    def handle(self, request: NRIRequest, reply: Reply) -> None:
        """Answer ``request`` now, or park it until its pod is known (at most ``pod_wait``)."""
        try:
            self._check(request)
        except NRIInputError as err:
            self._log.warning("nri.invalid_input", method=request.method, error=str(err))
            reply.give(err)
            return
        method = request.method
        if method is NRIMethod.SYNCHRONIZE:
            reply.give(self._synchronize(request.pods, request.containers))
        elif method is NRIMethod.UPDATE_CONTAINER:
            reply.give(self._update(request))
        elif method is NRIMethod.REMOVE_CONTAINER and request.container is not None:
            self._reconciler.identities.forget(request.container.id, IdentitySource.NRI)
            reply.give(None)
        elif method is NRIMethod.REMOVE_POD_SANDBOX and request.pod is not None:
            self._reconciler.identities.forget(request.pod.id, IdentitySource.NRI)
            self._release(request.pod.uid)
            reply.give(None)
        elif method in (NRIMethod.RUN_POD_SANDBOX, NRIMethod.CREATE_CONTAINER):
            self._learn(request)
            if not self._try(request, reply):
                now = self._clock()
                self._parked.append(_Parked(request=request, reply=reply, since=now, deadline=now + self._pod_wait))
        else:
            reply.give(None)

    def revisit(self, now: float | None = None) -> None:
        """Answer the parked requests whose pod is known now, or whose wait is over."""
        if not self._parked:
            return
        now = self._clock() if now is None else now
        parked, self._parked = self._parked, []
        for entry in parked:
            if entry.reply.answered or self._try(entry.request, entry.reply):
                continue
            if now >= entry.deadline:
                self._give_up(entry, now)
            else:
                self._parked.append(entry)

    def next_deadline(self) -> float | None:
        """When the earliest parked request must be answered (``clock()`` time), or None."""
        return min((entry.deadline for entry in self._parked), default=None)

    # -- requests ------------------------------------------------------------------------------
    def _try(self, request: NRIRequest, reply: Reply) -> bool:
        """Answer a RunPodSandbox or CreateContainer when its pod is known; False when it is not (yet)."""
        pod = request.pod
        if pod is None:
            reply.give(None)
            return True
        planned = self._reconciler.prepare_pod(pod.uid, self._pending)
        if planned is None:
            return False
        if request.method is NRIMethod.RUN_POD_SANDBOX or request.container is None:
            reply.give(None)
            return True
        reply.give(CreateResult(adjustment=self._adjustment(planned, request.container.name)))
        return True

    def _adjustment(self, planned: PodPlan, name: str) -> ContainerAdjustment:
        """The container's planned values (the pod's interim set for a container the plan does not hold)."""
        if self._reconciler.blocked is not None:  # the kubelet pins CPUs: podpin writes nothing
            return ContainerAdjustment()
        container = next((c for c in planned.containers if c.name == name), None)
        if container is None:
            return ContainerAdjustment(cpuset_cpus=planned.interim or None)
        return ContainerAdjustment.of(container.desired)

    def _give_up(self, entry: _Parked, now: float) -> None:
        """The pod did not arrive in time: the shared pool now, the planned set when it arrives."""
        request = entry.request
        pod = request.pod
        plan = self._reconciler.plan
        interim = plan.shared_pool if plan is not None and self._reconciler.blocked is None else None
        creating = request.method is NRIMethod.CREATE_CONTAINER and request.container is not None
        self._log.warning(
            "nri.pod_not_known",
            method=request.method,
            pod=f"{pod.namespace}/{pod.name}" if pod is not None else None,
            uid=pod.uid if pod is not None else None,
            container=request.container.name if request.container is not None else None,
            waited=round(now - entry.since, 3),
            interim=str(interim) if creating and interim else None,
            action="the API watch has not delivered the pod: the container starts on the interim set and is "
            "corrected when the pod arrives"
            if creating
            else "the pod cgroup is written when the pod arrives",
        )
        if creating and interim:
            entry.reply.give(CreateResult(adjustment=ContainerAdjustment(cpuset_cpus=interim)))
        else:
            entry.reply.give(CreateResult() if creating else None)

    def _release(self, uid: str) -> None:
        """The pod was removed while requests for it were parked: answer them now."""
        now = self._clock()
        for entry in [e for e in self._parked if e.request.pod is not None and e.request.pod.uid == uid]:
            self._parked.remove(entry)
            self._give_up(entry, now)

    def _learn(self, request: NRIRequest) -> None:
        """Name the sandbox (RunPodSandbox) or the container (CreateContainer) in the identity book."""
        pod = request.pod
        if pod is None:
            return
        container = request.container
        if container is None:
            if _RUNTIME_ID.fullmatch(pod.id):  # a sandbox id that names no cgroup is only the pod's key
                self._reconciler.identities.learn(_sandbox_identity(pod))
        else:
            self._reconciler.identities.learn(_container_identity(pod, container))

    def _synchronize(self, pods: Sequence[PodSandbox], containers: Sequence[Container]) -> tuple[ContainerUpdate, ...]:
        """Adopt what runs: name every sandbox and container; differences from the plan go to a full pass."""
        by_id: dict[str, PodSandbox] = {}
        identities = []
        for sandbox in pods:
            try:
                _check_pod(sandbox)
            except NRIInputError as err:
                self._log.warning("nri.invalid_input", method=NRIMethod.SYNCHRONIZE, error=str(err))
                continue
            by_id[sandbox.id] = sandbox
            if _RUNTIME_ID.fullmatch(sandbox.id):
                identities.append(_sandbox_identity(sandbox))
        differs: dict[str, dict[str, str]] = {}
        for container in containers:
            pod = by_id.get(container.pod_sandbox_id)
            try:
                if pod is None:
                    raise NRIInputError(
                        f"container {container.id!r} ({container.name!r}): pod_sandbox_id "
                        f"{container.pod_sandbox_id!r} names no pod of the synchronization"
                    )
                _check_container(pod, container)
            except NRIInputError as err:
                self._log.warning("nri.invalid_input", method=NRIMethod.SYNCHRONIZE, error=str(err))
                continue
            identities.append(_container_identity(pod, container))
            running = container.resources.cpus if container.resources is not None else None
            planned = self._planned_cpus(pod.uid, container.name)
            if running is not None and planned is not None and running != planned:
                differs[f"{pod.namespace}/{pod.name}/{container.name}"] = {
                    "runtime": str(running),
                    "plan": str(planned),
                }
        self._reconciler.identities.replace(IdentitySource.NRI, identities)
        named = sum(1 for i in identities if i.kind is ContainerType.CONTAINER)
        self._log.info("nri.adopted", pods=len(by_id), containers=named)
        if differs:
            self._log.warning("nri.synchronize_differs", containers=differs, action="rewritten by a full pass")
        self._reconciler.request_full()
        return ()

    def _update(self, request: NRIRequest) -> tuple[ContainerUpdate, ...]:
        """Every update is answered from the plan: cpuset, mems and CFS quota/period go back as planned.

        containerd sends the container's full resources on UpdateContainerResources, including the cpuset it
        was created with, and ``runc update`` writes all of them back: answering only when the kubelet's
        request carries a cpuset (never with ``cpuManagerPolicy: none``) let an in-place resize re-apply a
        stale cpuset after the pools changed, until the next pass.
        """
        pod, container = request.pod, request.container
        if pod is None or container is None:
            return ()
        plan = self._reconciler.pod_plan(pod.uid)
        if plan is None:
            return ()
        planned = self._adjustment(plan, container.name)
        if planned.is_empty():
            return ()
        return (
            ContainerUpdate(
                container_id=container.id,
                cpuset_cpus=planned.cpuset_cpus,
                cpuset_mems=planned.cpuset_mems,
                cpu_quota=planned.cpu_quota,
                cpu_period=planned.cpu_period,
            ),
        )

    def _planned_cpus(self, uid: str, name: str) -> CPUSet | None:
        plan = self._reconciler.pod_plan(uid)
        container = next((c for c in plan.containers if c.name == name), None) if plan is not None else None
        return container.desired.cpuset_cpus if container is not None else None

    # -- input checks --------------------------------------------------------------------------
    def _check(self, request: NRIRequest) -> None:
        if request.pod is not None:
            _check_pod(request.pod)
            if request.container is not None:
                _check_container(request.pod, request.container)


def _check_pod(pod: PodSandbox) -> None:
    try:
        validate_uid(pod.uid)
    except CgroupPathError as err:
        raise NRIInputError(f"pod {pod.namespace}/{pod.name} (sandbox {pod.id!r}): uid: {err.message}") from err


def _check_container(pod: PodSandbox, container: Container) -> None:
    where = f"container {container.name!r} of pod {pod.namespace}/{pod.name}"
    if not _RUNTIME_ID.fullmatch(container.id):
        raise NRIInputError(f"{where}: id {container.id!r} is not 64 lower-case hex digits")
    if not container.name:
        raise NRIInputError(f"{where}: no name")
    if container.pod_sandbox_id != pod.id:
        raise NRIInputError(f"{where}: pod_sandbox_id {container.pod_sandbox_id!r} is not the pod's {pod.id!r}")


def _sandbox_identity(pod: PodSandbox) -> Identity:
    return Identity(
        runtime_id=pod.id, pod_uid=pod.uid, kind=ContainerType.SANDBOX, name=None, source=IdentitySource.NRI
    )


def _container_identity(pod: PodSandbox, container: Container) -> Identity:
    return Identity(
        runtime_id=container.id,
        pod_uid=pod.uid,
        kind=ContainerType.CONTAINER,
        name=container.name,
        source=IdentitySource.NRI,
    )
