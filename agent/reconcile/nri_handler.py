"""The agent's NRI handler: the plugin's thread hands each runtime request to the loop and waits for its answer.

podpin decides in one place: the single-threaded reconcile loop (``agent/runner.py``). The NRI plugin
(``agent/nri/plugin.py``) calls an :class:`~agent.nri.handler.NRIHandler` on its own thread, one request
at a time, and must answer within its budget (``min(1 s, 75 % of the runtime's request timeout)``, else the
runtime closes the plugin). :class:`NRIHandoff` is that handler: it turns each call into an
:class:`NRIRequest`, puts it on the loop's queue with a :class:`Reply`, and waits for the loop to fill the
reply (``agent/reconcile/nri_desk.py`` computes it). So the loop stays the one that plans and writes; the
plugin thread never touches the planner, the identity book or a cgroup.

The loop takes queued work between the steps of a full pass (``Agent.work_waiting``), so an answer comes
within one sweep step plus the planning of the pod. The wait is bounded (:data:`ANSWER_WAIT`, below the
plugin's budget): when the loop has not answered by then, the call is answered without adjustment and
logged (``nri.loop_busy``); what the loop decides later still reaches the container through the cgroup
writes, as without NRI.

Requests that need no answer (RemoveContainer, RemovePodSandbox) are queued and not waited for; the queue
keeps them in the runtime's order. StopContainer and StopPodSandbox change nothing: podpin releases CPUs
when the pod is gone from the API, never when a container stops (a restarting container keeps its CPUs,
as with the kubelet's CPU manager).

The kubelet counterpart of this hand-off is the CPU manager's ``Allocate``/``AddContainer`` pair called
from the container runtime's pre-start hook (``pkg/kubelet/cm/internal_container_lifecycle_linux.go``
``PreCreateContainer``); podpin gets the same moment through NRI.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from agent.nri import Container, ContainerUpdate, CPUResources, CreateResult, NRIHandler, NRIMethod, PodSandbox

__all__ = ["ANSWER_WAIT", "Answer", "NRIHandoff", "NRIInputError", "NRIRequest", "Reply", "Submit"]

ANSWER_WAIT = 0.9
"""Seconds the plugin thread waits for the loop's answer: under the plugin's 1 s budget, above
``nri.podWaitTimeout`` (at most 0.8 s)."""


class NRIInputError(ValueError):
    """A runtime request podpin cannot act on (a pod uid that names no cgroup, a container id that is not
    one); the message names the field. Raised to the plugin, which answers without adjustment and reports it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NRIRequest:
    """One runtime request as the loop receives it."""

    method: NRIMethod
    pod: PodSandbox | None = None
    container: Container | None = None
    pods: tuple[PodSandbox, ...] = ()
    containers: tuple[Container, ...] = ()
    requested: CPUResources | None = None


Answer = CreateResult | tuple[ContainerUpdate, ...] | NRIInputError | None
"""What the loop puts in a :class:`Reply`: the method's answer, an input error, or None (nothing to say)."""


class Reply:
    """A one-shot slot the loop fills and the plugin thread waits on (the first answer wins)."""

    __slots__ = ("_event", "_lock", "_value")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._value: Answer = None

    def give(self, value: Answer) -> None:
        """Answer (from the loop); a second answer is ignored."""
        with self._lock:
            if self._event.is_set():
                return
            self._value = value
            self._event.set()

    @property
    def answered(self) -> bool:
        """Whether :meth:`give` was called."""
        return self._event.is_set()

    def wait(self, timeout: float) -> tuple[bool, Answer]:
        """``(answered, value)`` after at most ``timeout`` seconds."""
        if not self._event.wait(timeout):
            return False, None
        with self._lock:
            return True, self._value


Submit = Callable[[NRIRequest, Reply], None]
"""Hands a request to the loop (puts it on the agent's queue); must not block."""


class NRIHandoff(NRIHandler):
    """:class:`~agent.nri.handler.NRIHandler` for the agent: every decision is the loop's (module docstring).

    Args:
        submit: puts a request on the loop's queue.
        wait: seconds to wait for an answer (default :data:`ANSWER_WAIT`).
    """

    def __init__(self, submit: Submit, *, wait: float = ANSWER_WAIT) -> None:
        self._submit = submit
        self._wait = wait
        self._log = structlog.get_logger("podpin.nri")

    def _ask(self, request: NRIRequest) -> Answer:
        reply = Reply()
        self._submit(request, reply)
        answered, value = reply.wait(self._wait)
        if not answered:
            self._log.warning(
                "nri.loop_busy",
                method=request.method,
                waited=self._wait,
                pod=_pod_name(request.pod),
                container=request.container.name if request.container is not None else None,
                action="answered without adjustment; the cgroup writes apply the plan when the loop gets to it",
            )
            return None
        if isinstance(value, NRIInputError):
            raise value
        return value

    def _tell(self, request: NRIRequest) -> None:
        self._submit(request, Reply())

    def synchronize(self, pods: Sequence[PodSandbox], containers: Sequence[Container]) -> Sequence[ContainerUpdate]:
        """Adopt what runs (the loop names every container in the identity book); no NRI updates."""
        answer = self._ask(NRIRequest(method=NRIMethod.SYNCHRONIZE, pods=tuple(pods), containers=tuple(containers)))
        return answer if isinstance(answer, tuple) else ()

    def run_pod_sandbox(self, pod: PodSandbox) -> None:
        """The loop writes the pod cgroup (planned set if admitted, else interim) before answering."""
        self._ask(NRIRequest(method=NRIMethod.RUN_POD_SANDBOX, pod=pod))

    def stop_pod_sandbox(self, pod: PodSandbox) -> None:
        """Nothing: CPUs are released when the pod is gone from the API."""

    def remove_pod_sandbox(self, pod: PodSandbox) -> None:
        """The loop forgets the sandbox's identity (not waited for)."""
        self._tell(NRIRequest(method=NRIMethod.REMOVE_POD_SANDBOX, pod=pod))

    def create_container(self, pod: PodSandbox, container: Container) -> CreateResult:
        """The container's planned values, from the loop (the pod admitted first if new)."""
        answer = self._ask(NRIRequest(method=NRIMethod.CREATE_CONTAINER, pod=pod, container=container))
        return answer if isinstance(answer, CreateResult) else CreateResult()

    def update_container(
        self, pod: PodSandbox, container: Container, requested: CPUResources | None
    ) -> Sequence[ContainerUpdate]:
        """podpin's cpuset again when the kubelet's update carries one."""
        answer = self._ask(
            NRIRequest(method=NRIMethod.UPDATE_CONTAINER, pod=pod, container=container, requested=requested)
        )
        return answer if isinstance(answer, tuple) else ()

    def stop_container(self, pod: PodSandbox, container: Container) -> Sequence[ContainerUpdate]:  # noqa: ARG002
        """Nothing is released when a container stops."""
        return ()

    def remove_container(self, pod: PodSandbox, container: Container) -> None:
        """The loop forgets the container's identity (not waited for)."""
        self._tell(NRIRequest(method=NRIMethod.REMOVE_CONTAINER, pod=pod, container=container))


def _pod_name(pod: PodSandbox | None) -> str | None:
    return f"{pod.namespace}/{pod.name}" if pod is not None else None
