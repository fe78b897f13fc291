"""``podpin run`` with ``nrt.enabled``: the agent publishes its node's NodeResourceTopology and keeps it current.

The in-process agent reads pods from the API server emulator and publishes
through it; the emulator validates every object against the project's CRD.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from agent.nrt import PublishResult
from tests.support.agentfixture import AgentNode, kubeconfig, lines, make_node, running, sample, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.paths import REPO
from tests.support.podfactory import container, make_pod


@pytest.fixture
def api() -> Iterator[ApiServerEmulator]:
    with ApiServerEmulator() as em:
        em.objects.register_crd(yaml.safe_load((REPO / "deploy" / "crds" / "noderesourcetopologies.yaml").read_text()))
        em.objects.add_node("node-1", uid="uid-1")
        yield em


@pytest.fixture
def node(tmp_path: Path) -> AgentNode:
    node = make_node(tmp_path)
    node.write_config(reconcilePeriod="300ms", nrt={"enabled": True, "minInterval": "100ms"})
    return node


def cpu_available(api: ApiServerEmulator) -> list[str] | None:
    obj = api.objects.custom("topology.node.k8s.io", "noderesourcetopologies", "node-1")
    if obj is None:
        return None
    return [next(r["available"] for r in z["resources"] if r["name"] == "cpu") for z in obj["zones"]]


def gu(name: str, cpus: str, ts: int) -> dict[str, Any]:
    return make_pod(
        name,
        containers=[container("app", cpu=cpus, memory="1Gi")],
        states={"app": "running"},
        creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z",
    )


def test_agent_publishes_and_follows_admissions(node: AgentNode, api: ApiServerEmulator) -> None:
    """The agent creates the object at its first pass and updates it when a pod is admitted and when it is gone."""
    first = gu("a", "4", 1)
    api.add_pod(first)
    node.add_pod(first, manifest=False)
    agent = node.agent(pods_dir=None, kubeconfig=str(kubeconfig(node.base / "kubeconfig", api.url)))
    with running(agent):
        wait_until(lambda: cpu_available(api) == ["11", "16"], 10.0, "the first object")
        second = gu("b", "6", 2)
        api.add_pod(second)
        node.add_pod(second, manifest=False)
        wait_until(lambda: cpu_available(api) == ["5", "16"], 10.0, "the object after pod b")
        api.delete_pod("default", "a")
        wait_until(lambda: cpu_available(api) == ["9", "16"], 10.0, "the object after pod a is gone")
        wait_until(
            lambda: (
                3.0
                == sum(
                    sample(agent, "podpin_nrt_publishes_total", result=r) or 0.0
                    for r in (PublishResult.CREATED, PublishResult.UPDATED)
                )
            ),
            5.0,
            "three writes counted",
        )


def test_pods_dir_mode_cannot_publish(node: AgentNode) -> None:
    """With --pods-dir there is no API server: the agent says NRT publishing is off and runs as before."""
    with capture_logs() as logs:
        agent = node.run_once()
    assert agent.nrt is None
    assert 1 == len(lines(logs, "nrt.disabled"))
