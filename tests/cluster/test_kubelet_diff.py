"""The differential harness on the real cluster (issue 17), a representative part of the corpus: a pod-level pod
with an exclusive sidecar, an exclusive app container and a sharing one (KEP-5526), and classic pods across a
kubelet restart (run a) / podpin restart (run b) and a delete after it. One guest boot (both share a machine shape);
every container must be equal on the kubelet and on podpin. The whole corpus: `scripts/kubelet_diff.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.controlplane import ControlPlane
from tests.cluster.diff_run import run_scenarios
from tests.cluster.node import guest_modules
from tests.cluster.procs import require_setup
from tests.cluster.scenario_format import SCENARIOS, load_scenario
from tests.vm.harness import require_vm

pytestmark = pytest.mark.cluster

REPRESENTATIVE = ("kep5526-exclusive-sidecar", "restart-then-delete")


def _quiet(text: str) -> None:
    """The harness's progress lines are not wanted here: a failing assertion shows the rows."""
    del text


def test_representative_scenarios_are_equal(control_plane: ControlPlane, tmp_path: Path) -> None:
    """Each container of the representative scenarios: admitted alike, the same CPUs and memory nodes, as the
    process sees them and as its cgroup says, on the kubelet's pod-level managers and on podpin."""
    require_vm()
    modules = guest_modules()
    if modules is not None:
        require_setup(modules)
    scenarios = [load_scenario(SCENARIOS / name) for name in REPRESENTATIVE]
    outcomes = list(run_scenarios(control_plane, tmp_path, scenarios, say=_quiet))
    assert [(name, None) for name in REPRESENTATIVE] == [(o.scenario, o.error) for o in outcomes]
    rows = [row for outcome in outcomes for row in outcome.rows]
    assert 5 == len(rows), [row.as_json() for row in rows]
    assert [] == [row.as_json() for row in rows if not row.equal]
