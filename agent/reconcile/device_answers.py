"""The device gate's answers as values: asked before a pass decides, handed to the decider (pure).

Asking the kubelet which devices a new pod holds (``devices.py``) is I/O that may wait for a PodResources call.
The decider (``decider.py``) does no I/O, so a pass asks first: the decider says which pods it will need
answers for (:class:`DeviceAsks`, from its state alone), the device gate answers them all
(:meth:`DeviceGate.answer <agent.reconcile.devices.DeviceGate.answer>`), and the answers go into
:meth:`Decider.decide <agent.reconcile.decider.Decider.decide>` as a :class:`DeviceAnswers` value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.alloc import PodDevices
from agent.pods import PodView

__all__ = ["DeviceAnswer", "DeviceAnswers", "DeviceAsk", "DeviceAsks"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceAnswer:
    """What to do with a new pod now.

    Attributes:
        ready: admit it now; False: park it and ask again on a later pass.
        devices: the devices its containers hold, for the planner (None: none known, or none asked for).
        unknown: set when the wait ran out: what was not known (for the Warning Event and the log line).
        waited: seconds the pod waited for its devices.
    """

    ready: bool
    devices: PodDevices | None = None
    unknown: str | None = None
    waited: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceAsk:
    """One pod the decider needs the gate's word on this pass.

    Attributes:
        view: the pod.
        restored: admitted from the checkpoint and not yet decided in this run: only the devices it holds are
            asked (``DeviceGate.held``, for its plan, never waited for); False: a new pod, which may wait
            (``DeviceGate.check``).
    """

    view: PodView
    restored: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceAsks:
    """What a pass asks the device gate before it decides (``Decider.device_asks``).

    Attributes:
        live: the uids still on the node (not terminal, or unreadable): the gate stops waiting for the others.
        pods: the pods to ask about, in creation order.
    """

    live: frozenset[str]
    pods: tuple[DeviceAsk, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceAnswers:
    """The gate's answers for one pass, by pod uid (``DeviceGate.answer``).

    Attributes:
        new: the answer for each new pod asked about.
        held: the devices each restored pod holds (None: none known).
        failed: the pods whose question raised an unexpected exception: their admission ends at their fault
            boundary this pass (the decider returns a ``Faulted`` outcome in their place).
    """

    new: Mapping[str, DeviceAnswer]
    held: Mapping[str, PodDevices | None]
    failed: Mapping[str, Exception]
