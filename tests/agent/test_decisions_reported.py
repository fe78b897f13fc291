"""The reconciler reports exactly what its deciding half returned, right after deciding and before any write.

The real :class:`~agent.runner.Agent`, prepared over a fixture node but not started: the test hands the
reconciler its pod lists and runs its passes itself, listening on the decider's results, the reporter's decision
calls and the cgroup writes in one ordered record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.kube import PodEvent
from agent.reconcile import Decided
from agent.reconcile.outcomes import Admitted, DevicesUnknown, Outcome, Readopted, Rejected, Released
from tests.support.agentfixture import make_node
from tests.support.podfactory import running_pod


def _call(outcome: Outcome) -> tuple[Any, ...]:
    """The reporter call an outcome stands for (method, arguments)."""
    if isinstance(outcome, Admitted):
        return ("admitted", outcome.decision, outcome.plan, outcome.seconds)
    if isinstance(outcome, Rejected):
        return ("rejected", outcome.decision, outcome.seconds)
    if isinstance(outcome, Released):
        return ("released", outcome.record)
    if isinstance(outcome, DevicesUnknown):
        return ("devices_unknown", outcome.decision, outcome.problem, outcome.waited)
    if isinstance(outcome, Readopted):
        return ("readopted", outcome.readoption, outcome.pods)
    return ("faulted", outcome.pod, outcome.error)


def test_the_reconciler_reports_what_the_decider_returned_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two passes (two pods admitted and one rejected; then one gone, released, and the rejected one admitted):
    the reporter hears one call per outcome, with the outcome's values, in the decider's order, and all of them
    before the pass's first cgroup write."""
    node = make_node(tmp_path)
    first, second, big = (running_pod(name, "12", ts=ts) for name, ts in (("first", 1), ("second", 2), ("big", 3)))
    for raw in (first, second, big):
        node.add_pod(raw)
    agent = node.agent()
    reconciler = agent.reconciler
    record: list[tuple[Any, ...]] = []
    decide = reconciler.decider.decide

    def decided_here(*args: Any, **kwargs: Any) -> Decided:
        decided = decide(*args, **kwargs)
        record.append(("decided", decided))
        return decided

    monkeypatch.setattr(reconciler.decider, "decide", decided_here)
    for method in ("admitted", "rejected", "released", "devices_unknown", "readopted"):
        said = getattr(reconciler.reporter, method)

        def heard(*args: Any, _method: str = method, _said: Any = said) -> None:
            record.append((_method, *args))
            _said(*args)

        monkeypatch.setattr(reconciler.reporter, method, heard)
    apply = reconciler.applier.fs.apply

    def written(*args: Any, **kwargs: Any) -> Any:
        record.append(("write",))
        return apply(*args, **kwargs)

    monkeypatch.setattr(reconciler.applier.fs, "apply", written)

    reconciler.on_pods(PodEvent(kind="SYNC", pods=(first, second, big)))
    reconciler.run_pass()
    reconciler.on_pods(PodEvent(kind="DELETE", pods=(first,)))
    reconciler.run_pass()

    passes: list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]] = []
    for i, entry in enumerate(record):
        if entry[0] != "decided":
            continue
        end = next((j for j in range(i + 1, len(record)) if record[j][0] == "decided"), len(record))
        after = record[i + 1 : end]
        reported = [e for e in after if e[0] != "write"]
        passes.append(([_call(o) for o in entry[1].outcomes], after[: len(reported)]))
    assert (
        [
            ["admitted", "admitted", "rejected"],
            ["released", "admitted"],
        ],
        True,
        True,
    ) == (
        [[call[0] for call in expected] for expected, _ in passes],
        all(expected == heard for expected, heard in passes),
        any(e[0] == "write" for e in record),
    )
