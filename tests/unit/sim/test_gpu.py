"""``podpin simulate --preset gpu``: GPU pods' CPUs on their GPU's NUMA node, with and without device hints."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.cli import main
from agent.config import config_from_mapping
from agent.sim.gpu import GPUModelResult, gpu_simulation
from agent.sim.machines import example_machine


def run(policy: str, trials: int = 60, seed: int = 3) -> dict[str, GPUModelResult]:
    """Both models' results by model name."""
    raw = {"topologyManagerPolicy": policy, "topologyManagerScope": "pod", "kubeReserved": {"cpu": "1"}}
    sim = gpu_simulation(example_machine(), config_from_mapping(raw, env={}).planner, trials=trials, seed=seed)
    return {r.model: r for r in sim.results}


def test_podpin_aligns_every_gpu_pod_whose_gpu_node_has_room() -> None:
    """best-effort with device hints: each GPU pod whose GPU's node had the CPUs free is aligned; without, fewer."""
    results = run("best-effort")
    podpin, blind = results["podpin"], results["without device hints"]
    assert podpin.had_room == podpin.aligned_with_room
    assert podpin.aligned > blind.aligned


@pytest.mark.parametrize("policy", ["restricted", "single-numa-node"])
def test_strict_policies_reject_rather_than_misalign(policy: str) -> None:
    """restricted and single-numa-node with device hints: no GPU pod is admitted unaligned."""
    podpin = run(policy)["podpin"]
    assert (0, podpin.gpu_pods) == (podpin.unaligned, podpin.aligned + podpin.rejected)


def test_policy_none_is_the_same_in_both_models() -> None:
    """Policy none merges no hints: device facts change nothing."""
    results = run("none")
    podpin, blind = results["podpin"], results["without device hints"]
    assert (podpin.aligned, podpin.unaligned) == (blind.aligned, blind.unaligned)


def test_same_seed_same_counts() -> None:
    """The preset is deterministic for a seed."""
    assert run("best-effort", trials=20, seed=9) == run("best-effort", trials=20, seed=9)


def test_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    """The command prints both models as JSON, one GPU pod pair per node."""
    status = main(["simulate", "--preset", "gpu", "--nodes", "10", "--seed", "1", "--output", "json"])
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert (0, ["podpin", "without device hints"], [20, 20]) == (
        status,
        [m["model"] for m in document["models"]],
        [m["gpu_pods"] for m in document["models"]],
    )


def test_command_refuses_png(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    """The gpu preset writes text or JSON only: png is a usage error (status 2)."""
    status = main(["simulate", "--preset", "gpu", "--output", "png", str(tmp_path / "x.png")])
    assert 2 == status
    assert "--preset gpu" in capsys.readouterr().err
