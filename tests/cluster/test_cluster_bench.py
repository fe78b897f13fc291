"""``scripts/bench_cluster.py --smoke`` runs to the end on the real cluster and records its figures (their presence
only, never their values: the guest is TCG-emulated and the host shared). It builds the release and boots its own
cluster as the deploy test does, so it runs with it (``cluster_deploy``: ``PODPIN_CLUSTER_DEPLOY=1``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.vm.test_vm_benches import run_smoke

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_deploy]


def test_bench_cluster_produces_its_figures_in_smoke_mode(tmp_path: Path) -> None:
    """One round: two pods timed from apply to their final CPUs, their first views counted, the control plane's CPU
    and RSS per program, the slowdown measured before and after."""
    out = tmp_path / "record.json"
    run_smoke([sys.executable, str(REPO / "scripts" / "bench_cluster.py"), "--smoke", "--out", str(out)])
    record = json.loads(out.read_text())
    result = record["result"]
    assert (True, 2, {"kine", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}) == (
        record["smoke"],
        len(result["pods"]),
        set(result["control_plane"]["programs"]),
    )
    assert {"median", "max"} == set(result["apply_to_final_s"])
    assert {"agent_like", "integer_loop"} == set(result["slowdown"]["before"]) == set(result["slowdown"]["after"])
    assert 0 < result["first_views_final"] <= result["containers"] == 4, result["pods"]
