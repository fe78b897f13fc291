"""Rejected pods under churn: each rejection is one warning line, however many releases retry it.

Issue "hold under attack" item 6, reproduced on the code before: every rejected pod was logged again at warning
level on every release (50 unfit pods with churn wrote 3,050 lines in 30 s). Now a rejection is a warning once
per change of its reason; the retries after each release are debug lines ``pod.rejected_again``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from tests.support.agentfixture import lines, make_node, running, wait_until
from tests.support.podfactory import container, make_pod

UNFIT = 12
CHURN = 6


def _released_more_than(logs: Sequence[Any], n: int) -> bool:
    return len(lines(logs, "pod.released")) > n


def test_unfit_pods_are_logged_once_under_churn(tmp_path: Path) -> None:
    """12 pods that can never fit, 6 small pods added and deleted one after another: 12 warning lines, and each
    unfit pod was retried after the releases (debug lines)."""
    node = make_node(tmp_path)
    node.write_config(reconcilePeriod="300ms")
    for n in range(UNFIT):
        node.add_pod(
            make_pod(
                f"huge-{n}",
                containers=[container("app", cpu="40", memory="1Gi")],
                states={"app": "running"},
                creation_timestamp=f"2026-01-01T00:00:{n:02d}Z",
            )
        )
    with capture_logs() as logs, running(node.agent()) as agent:
        wait_until(lambda: len(lines(logs, "pod.rejected")) >= UNFIT, what="the first rejections")
        for n in range(CHURN):
            small = make_pod(
                f"small-{n}",
                containers=[container("app", cpu="1", memory="64Mi")],
                states={"app": "running"},
                creation_timestamp=f"2026-01-01T00:01:{n:02d}Z",
            )
            node.add_pod(small)
            uid: str = small["metadata"]["uid"]
            wait_until(partial(agent.reconciler.planner.is_admitted, uid), what="admitted")
            node.remove_pod(small)
            wait_until(partial(_released_more_than, logs, n), what="released")
        wait_until(lambda: len(lines(logs, "pod.rejected_again")) >= UNFIT * CHURN, what="the retries")
    warnings = [e for e in logs if e["log_level"] == "warning" and e["event"] == "pod.rejected"]
    assert (UNFIT, sorted({f"huge-{n}" for n in range(UNFIT)})) == (
        len(warnings),
        sorted({e["pod"] for e in warnings}),
    )
