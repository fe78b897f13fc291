"""Node classes (``agent/sim/fleet.py``) place every pod where placing node by node does, on every preset.

The oracle is the replay as it was before issue 20 (``tests/oracles/sim_replay.py``): one planner per node and a
scan of every node per pod. Outcomes are compared pod by pod (node index, admitted, reason) and the measures
(``agent.sim.measure``) field by field, for each preset, model, scheduler and topology policy.
"""

from __future__ import annotations

import json

import pytest

from agent.cli import main
from agent.config import AgentConfig, config_from_mapping
from agent.sim.derive import MODELS, Model
from agent.sim.engine import replay
from agent.sim.fleet import Fleet
from agent.sim.machines import example_machine
from agent.sim.measure import measure
from agent.sim.presets import PRESETS, preset
from agent.sim.scheduler import SCHEDULERS, Requests, SchedulerName, node_allocatable
from agent.sim.workload import scaled
from tests.oracles.sim_replay import replay_node_by_node


def sim_config(policy: str) -> AgentConfig:
    """The configuration ``podpin simulate`` uses by default, with ``policy``."""
    return config_from_mapping(
        {"topologyManagerPolicy": policy, "topologyManagerScope": "pod", "kubeReserved": {"cpu": "1"}}, env={}
    )


@pytest.mark.parametrize("policy", ["best-effort", "single-numa-node"])
@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_classes_place_like_node_by_node(name: str, model: Model, scheduler: SchedulerName, policy: str) -> None:
    """Same node, admission and reason for every pod, and the same measures, as the node-by-node replay."""
    topology, config, workload = example_machine(), sim_config(policy), preset(name)
    expected = replay_node_by_node(topology, config, workload, model, nodes=workload.nodes, scheduler=scheduler)
    actual = replay(
        topology,
        config.planner,
        workload,
        model,
        allocatable=config.node_allocatable,
        nodes=workload.nodes,
        scheduler=scheduler,
    )
    assert expected.outcomes == actual.outcomes
    assert measure(expected, topology) == measure(actual, topology)


def test_a_scaled_workload_places_like_node_by_node() -> None:
    """seed-mesh x 3 (600 pods) on 90 nodes (room for 540: pods left over) still matches pod by pod."""
    workload = scaled(preset("seed-mesh"), 3)
    topology, config = example_machine(), sim_config("single-numa-node")
    for model in MODELS:
        expected = replay_node_by_node(topology, config, workload, model, nodes=90)
        actual = replay(topology, config.planner, workload, model, allocatable=config.node_allocatable, nodes=90)
        assert (expected.outcomes, measure(expected, topology)) == (actual.outcomes, measure(actual, topology))


def test_nodes_with_one_history_share_one_class() -> None:
    """200 seed-mesh pods (6 per 31-CPU node) on 50 nodes end in three classes: 33 full, one with 2, 16 empty."""
    topology, config, workload = example_machine(), sim_config("best-effort"), preset("seed-mesh")
    result = replay(
        topology, config.planner, workload, "pod-level", allocatable=config.node_allocatable, nodes=workload.nodes + 10
    )
    assert [(0, 33), (33, 1), (34, 16)] == [(n.index, n.count) for n in result.nodes]


def test_scale_multiplies_counts_and_nodes() -> None:
    """--scale N: every template's count and the node count times N; below one is refused, named."""
    workload = scaled(preset("mixed-cluster"), 4)
    original = preset("mixed-cluster")
    assert (4 * original.pod_count, 4 * original.nodes) == (workload.pod_count, workload.nodes)
    with pytest.raises(ValueError, match="--scale: 0 must be at least 1"):
        scaled(original, 0)


def test_a_fleet_needs_a_node() -> None:
    """Zero nodes is refused with the count named."""
    topology, config, workload = example_machine(), sim_config("best-effort"), preset("seed-mesh")
    with pytest.raises(ValueError, match="nodes: 0 must be at least 1"):
        Fleet(
            topology,
            config.planner,
            workload,
            "pod-level",
            nodes=0,
            allocatable=node_allocatable(topology, config.planner, config.node_allocatable),
            scheduler=SchedulerName.FIRST_FIT,
        )
    assert Requests(31_000, 0).cpu == node_allocatable(topology, config.planner, config.node_allocatable).cpu


def test_cli_scale_runs_the_workload_times_n(capsys: pytest.CaptureFixture[str]) -> None:
    """podpin simulate --scale 5: 1,000 seed-mesh pods on 200 nodes, all admitted; --scale 0 is a usage error."""
    assert 0 == main(["simulate", "--preset", "seed-mesh", "--scale", "5", "--output", "json"])
    document = json.loads(capsys.readouterr().out)
    figures = (document["simulation"]["pods"], document["simulation"]["nodes"], document["pod-level"]["pods_admitted"])
    assert (1000, 200, 1000) == figures
    assert 2 == main(["simulate", "--preset", "seed-mesh", "--scale", "0"])
    assert "podpin simulate: --scale: 0 must be at least 1\n" == capsys.readouterr().err
