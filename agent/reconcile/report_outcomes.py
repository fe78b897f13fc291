"""The imperative half of deciding: what the decider returned, handed to the reporter and the fault boundary.

The decider (``decider.py``) is pure and returns its outcomes (``outcomes.py``) in the order it made them; the
reconciler calls :func:`report_decided` right after :meth:`Decider.decide <agent.reconcile.decider.Decider.decide>`
(and :func:`report_outcomes` after ``adopt`` and ``rebase``), before the pass checkpoints or writes anything. So
the log lines, metrics, Events and pod conditions come out as they did when the decider said each decision as it
made it: the same calls, with the same arguments, in the same order among themselves and before the pass's
cgroup writes.

A report about one pod runs inside that pod's fault boundary, as it did inside the decider: an unexpected
exception in it is caught, ends that pod's reports for this pass and lets the others go on. A release (and a
re-adoption) was said outside any pod's boundary, and still is: an exception there ends the pass.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent.fault_boundary import FaultBoundary, Stage
from agent.pods import PodView
from agent.reconcile.decider import Decided
from agent.reconcile.outcomes import (
    Admitted,
    DevicesUnknown,
    Faulted,
    Outcome,
    PodRef,
    Readopted,
    Rejected,
    Released,
)
from agent.reconcile.reporter import Reporter

__all__ = ["report_decided", "report_outcomes"]


def report_decided(decided: Decided, views: Iterable[PodView], reporter: Reporter, boundary: FaultBoundary) -> None:
    """Report one round of decisions, then close the boundary of every pod that went through it without a fault.

    Every pod that is not terminal went through its boundary in the decider; the boundary forgets the last
    failure of those that went through (so their next failure is logged again), exactly once per pass.
    """
    faulted = report_outcomes(decided.outcomes, reporter, boundary)
    for view in views:
        if not view.is_terminal and view.uid not in faulted:
            boundary.succeeded(Stage.POD, pod=(view.namespace, view.name, view.uid))


def report_outcomes(outcomes: Iterable[Outcome], reporter: Reporter, boundary: FaultBoundary) -> set[str]:
    """Say each outcome, in order; the uids whose boundary caught an exception (in the decider or here)."""
    faulted: set[str] = set()
    for outcome in outcomes:
        if isinstance(outcome, Faulted):
            boundary.caught(Stage.POD, outcome.error, pod=outcome.pod)
            faulted.add(outcome.pod[2])
            continue
        pod = _pod_of(outcome)
        if pod is None:
            _say(outcome, reporter)
            continue
        if pod[2] in faulted:
            continue  # its work for this pass ended at the exception
        try:
            _say(outcome, reporter)
        except MemoryError:
            raise
        except Exception as err:
            boundary.caught(Stage.POD, err, pod=pod)
            faulted.add(pod[2])
    return faulted


def _pod_of(outcome: Outcome) -> PodRef | None:
    """The pod whose boundary an outcome's report runs in (None: a release or a re-adoption, outside any)."""
    if isinstance(outcome, Admitted | Rejected | DevicesUnknown):
        decision = outcome.decision
        return (decision.namespace, decision.name, decision.uid)
    return None


def _say(outcome: Outcome, reporter: Reporter) -> None:
    """The reporter's call for one outcome: its method of the same name, with the outcome's fields."""
    if isinstance(outcome, Admitted):
        reporter.admitted(outcome.decision, outcome.plan, outcome.seconds)
    elif isinstance(outcome, Rejected):
        reporter.rejected(outcome.decision, outcome.seconds)
    elif isinstance(outcome, Released):
        reporter.released(outcome.record)
    elif isinstance(outcome, DevicesUnknown):
        reporter.devices_unknown(outcome.decision, outcome.problem, outcome.waited)
    elif isinstance(outcome, Readopted):
        reporter.readopted(outcome.readoption, outcome.pods)
