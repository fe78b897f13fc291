"""The loop's side of NRI: answer the runtime's requests from the plan, on the reconcile loop's thread.

The plugin's connection thread queues each handler call for the loop (``nri_handler.py``), which runs it here:
this is the agent's :class:`~agent.nri.NRIHandler`. Everything below runs on the loop, so it may plan, name
containers in the identity book and write cgroups like any pass; it reads and asks the reconciler only through
:class:`NRIPlans`.

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
  ``nri.podWaitTimeout`` (the request is parked, :class:`~agent.nri.Later`; the loop keeps turning); then the
  container is answered
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
from typing import Protocol

import structlog

from agent.alloc import Plan, PodPlan
from agent.cgroups import CgroupPathError, validate_uid
from agent.cpuset import CPUSet
from agent.nri import (
    Container,
    ContainerAdjustment,
    ContainerUpdate,
    CPUResources,
    CreateResult,
    Later,
    NRIMethod,
    PodSandbox,
)
from agent.reconcile.identity import Identity, IdentityBook
from agent.reconcile.nri_handler import NRIInputError
from agent.runtime import ContainerType, IdentitySource

__all__ = ["NRIDesk", "NRIPlans"]

_RUNTIME_ID = re.compile(r"[0-9a-f]{64}")

Pending = Callable[[], bool]
"""Whether targeted work waits for the loop (``Agent.work_waiting``): a pass run here yields to it."""


class NRIPlans(Protocol):
    """What the desk reads and asks of the reconciler: the plan, a pod decided now, the identity book."""

    @property
    def identities(self) -> IdentityBook:
        """Who each runtime id is: the desk names containers and sandboxes in it (NRI is the most trusted)."""

    @property
    def blocked(self) -> str | None:
        """Why podpin writes nothing (the kubelet pins CPUs), or None."""

    @property
    def plan(self) -> Plan | None:
        """The current plan (None before the first pass)."""

    def pod_plan(self, uid: str) -> PodPlan | None:
        """A pod's part of the current plan."""

    def prepare_pod(self, uid: str, pending: Pending | None = None) -> PodPlan | None:
        """Decide a pod now (admit it if new) and widen its cgroup; None when the API has not delivered it."""

    def request_full(self) -> None:
        """Make the next pass a full one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Parked:
    """A request for a pod the API watch has not delivered yet: answered through ``later``."""

    method: NRIMethod
    pod: PodSandbox
    container: Container | None
    later: Later
    since: float
    deadline: float


class NRIDesk:
    """Answers NRI requests on the loop: the agent's :class:`~agent.nri.NRIHandler` (module docstring).

    Every method runs on the loop (``agent/reconcile/nri_handler.py``). A RunPodSandbox or CreateContainer
    for a pod the API has not delivered raises :class:`~agent.nri.Later`: the desk answers it from
    :meth:`revisit` once the pod is known or ``pod_wait`` passed.

    Args:
        plans: the reconciler's plan, decisions and identity book (:class:`NRIPlans`).
        node: this node's name (log lines).
        pod_wait: seconds to wait for a pod the API watch has not delivered (``nri.podWaitTimeout``).
        pending: the agent's "targeted work waits" question, for the passes run here.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        plans: NRIPlans,
        *,
        node: str,
        pod_wait: float,
        pending: Pending | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._plans = plans
        self._pod_wait = pod_wait
        self._pending = pending
        self._clock = clock
        self._parked: list[_Parked] = []
        self._log = structlog.get_logger("podpin.nri").bind(node=node)

    # -- the runtime's requests (NRIHandler) ---------------------------------------------------
    def synchronize(self, pods: Sequence[PodSandbox], containers: Sequence[Container]) -> Sequence[ContainerUpdate]:
        """Adopt what runs: name every sandbox and container; differences from the plan go to a full pass."""
        return self._synchronize(pods, containers)

    def run_pod_sandbox(self, pod: PodSandbox) -> None:
        """Write the pod cgroup (planned set if admitted, else interim); parked while the pod is unknown."""
        self._checked(NRIMethod.RUN_POD_SANDBOX, pod, None)
        self._learn(pod, None)
        self._answer_or_park(NRIMethod.RUN_POD_SANDBOX, pod, None)

    def stop_pod_sandbox(self, pod: PodSandbox) -> None:
        """Nothing: CPUs are released when the pod is gone from the API."""

    def remove_pod_sandbox(self, pod: PodSandbox) -> None:
        """Forget the sandbox's identity; requests still parked for the pod are answered now."""
        if self._invalid(NRIMethod.REMOVE_POD_SANDBOX, pod, None) is not None:
            return  # logged; a removal has nothing to answer
        self._plans.identities.forget(pod.id, IdentitySource.NRI)
        self._release(pod.uid)

    def create_container(self, pod: PodSandbox, container: Container) -> CreateResult:
        """The container's planned values (the pod decided first if new); parked while the pod is unknown."""
        self._checked(NRIMethod.CREATE_CONTAINER, pod, container)
        self._learn(pod, container)
        answer = self._answer_or_park(NRIMethod.CREATE_CONTAINER, pod, container)
        return answer if answer is not None else CreateResult()

    def update_container(
        self, pod: PodSandbox, container: Container, requested: CPUResources | None
    ) -> Sequence[ContainerUpdate]:
        """podpin's planned values again, whatever the request carries."""
        del requested  # answered from the plan, always (see _update)
        self._checked(NRIMethod.UPDATE_CONTAINER, pod, container)
        return self._update(pod, container)

    def stop_container(self, pod: PodSandbox, container: Container) -> Sequence[ContainerUpdate]:  # noqa: ARG002
        """Nothing is released when a container stops."""
        return ()

    def remove_container(self, pod: PodSandbox, container: Container) -> None:
        """Forget the container's identity."""
        if self._invalid(NRIMethod.REMOVE_CONTAINER, pod, container) is not None:
            return  # logged; a removal has nothing to answer
        self._plans.identities.forget(container.id, IdentitySource.NRI)

    # -- what the loop calls -------------------------------------------------------------------
    def revisit(self, now: float | None = None) -> None:
        """Answer the parked requests whose pod is known now, or whose wait is over."""
        if not self._parked:
            return
        now = self._clock() if now is None else now
        parked, self._parked = self._parked, []
        for entry in parked:
            if entry.later.answered:
                continue
            known, answer = self._try(entry.method, entry.pod, entry.container)
            if known:
                entry.later.give(answer)
            elif now >= entry.deadline:
                self._give_up(entry, now)
            else:
                self._parked.append(entry)

    def next_deadline(self) -> float | None:
        """When the earliest parked request must be answered (``clock()`` time), or None."""
        return min((entry.deadline for entry in self._parked), default=None)

    # -- requests ------------------------------------------------------------------------------
    def _answer_or_park(self, method: NRIMethod, pod: PodSandbox, container: Container | None) -> CreateResult | None:
        """The answer when the pod is known; else the request is parked and :class:`Later` raised."""
        known, answer = self._try(method, pod, container)
        if known:
            return answer
        later = Later()
        now = self._clock()
        self._parked.append(
            _Parked(method=method, pod=pod, container=container, later=later, since=now, deadline=now + self._pod_wait)
        )
        raise later

    def _try(self, method: NRIMethod, pod: PodSandbox, container: Container | None) -> tuple[bool, CreateResult | None]:
        """``(known, answer)`` for a RunPodSandbox or CreateContainer: known False while the pod is not (yet)."""
        planned = self._plans.prepare_pod(pod.uid, self._pending)
        if planned is None:
            return False, None
        if method is NRIMethod.RUN_POD_SANDBOX or container is None:
            return True, None
        return True, CreateResult(adjustment=self._adjustment(planned, container.name))

    def _adjustment(self, planned: PodPlan, name: str) -> ContainerAdjustment:
        """The container's planned values (the pod's interim set for a container the plan does not hold)."""
        if self._plans.blocked is not None:  # the kubelet pins CPUs: podpin writes nothing
            return ContainerAdjustment()
        container = next((c for c in planned.containers if c.name == name), None)
        if container is None:
            return ContainerAdjustment(cpuset_cpus=planned.interim or None)
        return ContainerAdjustment.of(container.desired)

    def _give_up(self, entry: _Parked, now: float) -> None:
        """The pod did not arrive in time: the shared pool now, the planned set when it arrives."""
        pod = entry.pod
        plan = self._plans.plan
        interim = plan.shared_pool if plan is not None and self._plans.blocked is None else None
        creating = entry.method is NRIMethod.CREATE_CONTAINER and entry.container is not None
        self._log.warning(
            "nri.pod_not_known",
            method=entry.method,
            pod=f"{pod.namespace}/{pod.name}",
            uid=pod.uid,
            container=entry.container.name if entry.container is not None else None,
            waited=round(now - entry.since, 3),
            interim=str(interim) if creating and interim else None,
            action="the API watch has not delivered the pod: the container starts on the interim set and is "
            "corrected when the pod arrives"
            if creating
            else "the pod cgroup is written when the pod arrives",
        )
        if creating and interim:
            entry.later.give(CreateResult(adjustment=ContainerAdjustment(cpuset_cpus=interim)))
        else:
            entry.later.give(CreateResult() if creating else None)

    def _release(self, uid: str) -> None:
        """The pod was removed while requests for it were parked: answer them now."""
        now = self._clock()
        for entry in [e for e in self._parked if e.pod.uid == uid]:
            self._parked.remove(entry)
            self._give_up(entry, now)

    def _learn(self, pod: PodSandbox, container: Container | None) -> None:
        """Name the sandbox (RunPodSandbox) or the container (CreateContainer) in the identity book."""
        if container is None:
            if _RUNTIME_ID.fullmatch(pod.id):  # a sandbox id that names no cgroup is only the pod's key
                self._plans.identities.learn(_sandbox_identity(pod))
        else:
            self._plans.identities.learn(_container_identity(pod, container))

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
        self._plans.identities.replace(IdentitySource.NRI, identities)
        named = sum(1 for i in identities if i.kind is ContainerType.CONTAINER)
        self._log.info("nri.adopted", pods=len(by_id), containers=named)
        if differs:
            self._log.warning("nri.synchronize_differs", containers=differs, action="rewritten by a full pass")
        self._plans.request_full()
        return ()

    def _update(self, pod: PodSandbox, container: Container) -> tuple[ContainerUpdate, ...]:
        """Every update is answered from the plan: cpuset, mems and CFS quota/period go back as planned.

        containerd sends the container's full resources on UpdateContainerResources, including the cpuset it
        was created with, and ``runc update`` writes all of them back: answering only when the kubelet's
        request carries a cpuset (never with ``cpuManagerPolicy: none``) let an in-place resize re-apply a
        stale cpuset after the pools changed, until the next pass.
        """
        plan = self._plans.pod_plan(pod.uid)
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
        plan = self._plans.pod_plan(uid)
        container = next((c for c in plan.containers if c.name == name), None) if plan is not None else None
        return container.desired.cpuset_cpus if container is not None else None

    # -- input checks --------------------------------------------------------------------------
    def _invalid(self, method: NRIMethod, pod: PodSandbox, container: Container | None) -> NRIInputError | None:
        """Why podpin cannot act on a request (logged ``nri.invalid_input``), or None."""
        try:
            _check_pod(pod)
            if container is not None:
                _check_container(pod, container)
        except NRIInputError as err:
            self._log.warning("nri.invalid_input", method=method, error=str(err))
            return err
        return None

    def _checked(self, method: NRIMethod, pod: PodSandbox, container: Container | None) -> None:
        """Refuse a request that needs an answer podpin cannot give: raised to the plugin, which reports it."""
        problem = self._invalid(method, pod, container)
        if problem is not None:
            raise problem


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
