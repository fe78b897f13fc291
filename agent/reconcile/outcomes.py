"""What the deciding half decided, as values: the reconciler hands them to the reporter after deciding (pure).

The decider (``decider.py``) used to say each decision through a reporter port while it decided; it now returns
these values, in the order it made the decisions, and the reconciler (``reconciler.py``) hands them to the
reporter (``reporter.py``: log lines, metrics, Events, the pod condition) and to the fault boundary
(``agent/fault_boundary.py``) right after :meth:`Decider.decide <agent.reconcile.decider.Decider.decide>`
returns, before anything of the pass is written. So the decider calls nothing that logs, counts or posts, and
the reports keep the order the decisions were made in (``docs/design.md``, "Data flow").

Each value carries exactly what the reporter's method of the same name takes, the timing the decider measured
included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agent.alloc import Decision, PodPlan, PodRecord
from agent.alloc.state.readopt import Readoption
from agent.pods import PodView

__all__ = ["Admitted", "DevicesUnknown", "Faulted", "Outcome", "PodRef", "Readopted", "Rejected", "Released"]

PodRef = tuple[str, str, str]
"""A pod as the fault boundary names it: (namespace, name, uid)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Admitted:
    """A pod was admitted (``Reporter.admitted``).

    Attributes:
        decision: the planner's decision.
        plan: the pod's plan as admitted (its containers' pools and CPUs, for the log line).
        seconds: the admission's time by the decider's clock (the admission latency metric).
    """

    decision: Decision
    plan: PodPlan | None
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected:
    """A pod was rejected (``Reporter.rejected``); ``seconds`` as in :class:`Admitted`."""

    decision: Decision
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Released:
    """A pod that is gone or terminal gave its CPUs back (``Reporter.released``)."""

    record: PodRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class DevicesUnknown:
    """A pod was admitted without device hints after the wait for its devices (``Reporter.devices_unknown``).

    Attributes:
        decision: the planner's decision (admitted or not: said before it).
        problem: what was not known (the device gate's words).
        waited: seconds the pod waited for its devices.
    """

    decision: Decision
    problem: str
    waited: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Readopted:
    """The checkpoint's pods were re-adopted onto a new topology or reservation (``Reporter.readopted``).

    Attributes:
        readoption: the moves and the pods dropped.
        pods: the readable pods by uid (to name the dropped ones).
    """

    readoption: Readoption
    pods: Mapping[str, PodView]


@dataclass(frozen=True, slots=True, kw_only=True)
class Faulted:
    """An unexpected exception ended one pod's admission for this pass (``FaultBoundary.caught``, stage ``pod``).

    The decider catches it where the pod's fault boundary used to, so the pass goes on with the other pods; the
    reconciler hands it to the boundary in its place among the reports (logged once, counted, posted on the pod).
    """

    pod: PodRef
    error: Exception


Outcome = Admitted | Rejected | Released | DevicesUnknown | Readopted | Faulted
"""One thing the decider decided (or met), in the order it happened."""
