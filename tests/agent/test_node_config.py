"""The running agent's configuration: the kubelet's file, the node's group by its label, changes followed live.

``podpin run`` reads the node's kubelet configuration (``kubeletConfigPath``): it refuses to start next to a
kubelet that pins CPUs, and takes its reservations when podpin's configuration states none. With group sections
in the file it reads its Node's labels from the API server (the emulator) to choose one. While it runs, a change of
a live key is taken and any other named, with ``podpin_config_restart_needed``.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from agent.cli import main
from agent.runner import AgentError
from tests.support.agentfixture import NODE, AgentNode, kubeconfig, lines, running, sample, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator


def _kubelet(node: AgentNode, **fields: Any) -> None:
    node.kubelet_config.parent.mkdir(parents=True, exist_ok=True)
    node.kubelet_config.write_text(yaml.safe_dump({"kind": "KubeletConfiguration", **fields}))


def test_refuses_to_start_next_to_a_pinning_kubelet(node: AgentNode, capsys: pytest.CaptureFixture[str]) -> None:
    """cpuManagerPolicy static in the kubelet's file: exit 2 with the reason, before anything is written."""
    _kubelet(node, cpuManagerPolicy="static", reservedSystemCPUs="0")
    before = node.files()
    with pytest.raises(AgentError) as err:
        node.agent()
    status = main(node.cli_args("--once")[1:])
    assert (True, 2, before) == (
        str(err.value).startswith(
            f"kubelet: the kubelet pins CPUs itself (cpuManagerPolicy: static in {node.kubelet_config})"
        ),
        status,
        node.files(),
    )
    assert capsys.readouterr().err.splitlines()[-1].startswith("podpin run: kubelet: the kubelet pins CPUs itself")


def test_takes_the_kubelets_reservations(node: AgentNode) -> None:
    """podpin's configuration without reservations: the kubelet's 2 reserved CPUs are podpin's too, and it says so."""
    node.write_config(systemReserved=None)
    _kubelet(node, systemReserved={"cpu": "1500m"})
    with capture_logs() as logs:
        agent = node.run_once()
    assert (2, [["systemReserved"]]) == (
        len(agent.reconciler.snapshot.state.reserved) if agent.reconciler.snapshot else None,
        [line["keys"] for line in lines(logs, "config.inherited")],
    )


def test_the_node_label_chooses_the_group_section(node: AgentNode, api: ApiServerEmulator) -> None:
    """The Node labelled podpin.io/config-group=trading runs the trading section (single-numa-node)."""
    node.write_config(groups={"trading": {"topologyManagerPolicy": "single-numa-node"}})
    api.objects.add_node(NODE, labels={"podpin.io/config-group": "trading"})
    with capture_logs() as logs:
        agent = node.agent(pods_dir=None, kubeconfig=str(kubeconfig(node.base / "kubeconfig", api.url)))
        agent.shutdown()
    assert ("single-numa-node", "trading", [("trading", "podpin.io/config-group")]) == (
        str(agent.config.planner.topology_manager_policy),
        agent.config.group,
        [(line["group"], line["label"]) for line in lines(logs, "config.group")],
    )


def test_changes_are_followed_live_or_named(node: AgentNode) -> None:
    """While running: a new reconcilePeriod is taken (no restart), a new topologyManagerPolicy is named as needing
    one and the gauge says so; the running policy stays."""
    with capture_logs() as logs, running(node.agent()) as agent:
        node.write_config(reconcilePeriod="2s", topologyManagerPolicy="single-numa-node")
        wait_until(lambda: lines(logs, "config.restart_needed"), timeout=10, what="the change seen")
        found = (
            [line["keys"] for line in lines(logs, "config.reloaded")],
            [line["keys"] for line in lines(logs, "config.restart_needed")],
            agent.config.reconcile_period,
            str(agent.config.planner.topology_manager_policy),
            sample(agent, "podpin_config_restart_needed"),
        )
    assert ([["reconcilePeriod"]], [["topologyManagerPolicy"]], 2.0, "best-effort", 1.0) == found
