"""``podpin uninstall`` against the API server emulator: agents deleted, every node's reset waited for, in order."""

from __future__ import annotations

import io
from typing import Any

from agent.kube.workloads import WorkloadCalls
from agent.uninstaller import uninstall
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.podfactory import make_pod

NS = "infra"
LABELS = {"app.kubernetes.io/name": "podpin", "app.kubernetes.io/component": "uninstall"}


def _daemonset(name: str, *, desired: int = 0, ready: int = 0, observed: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "generation": 1},
        "spec": {"selector": {"matchLabels": LABELS}},
        "status": {
            "desiredNumberScheduled": desired,
            "numberReady": ready,
            "updatedNumberScheduled": desired,
            "observedGeneration": observed,
        },
    }


class Clock:
    """Time that passes only when the command sleeps; each sleep lets ``on_sleep`` play the controller."""

    def __init__(self, on_sleep: Any) -> None:
        self.now = 0.0
        self.on_sleep = on_sleep

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.on_sleep(self.now)


def _run(api: ApiServerEmulator, clock: Clock, timeout: float = 60) -> tuple[int, str]:
    out = io.StringIO()
    status = uninstall(
        WorkloadCalls(api.api().configuration),
        namespace=NS,
        agents="pp",
        resets="pp-uninstall",
        timeout=timeout,
        out=out,
        clock=clock,
        sleep=clock.sleep,
    )
    return status, out.getvalue()


def test_the_agents_go_first_and_every_reset_is_waited_for() -> None:
    """The agents' DaemonSet is deleted, then the command waits until the resets of all 3 nodes are ready."""
    with ApiServerEmulator() as api:
        api.objects.put_daemonset(NS, _daemonset("pp", desired=3, ready=3))
        api.objects.put_daemonset(NS, _daemonset("pp-uninstall", desired=3, ready=0, observed=0))
        seen_agents: list[bool] = []

        def controller(now: float) -> None:
            seen_agents.append(api.objects.daemonset(NS, "pp") is not None)
            api.objects.put_daemonset(NS, _daemonset("pp-uninstall", desired=3, ready=min(3, int(now // 5))))

        status, out = _run(api, Clock(controller))
    assert (0, [False, False, False]) == (status, seen_agents)
    assert [
        "deleted the agents' DaemonSet infra/pp: each node's reset runs once its agent stopped",
        "nodes reset: 0 of 3",
        "nodes reset: 1 of 3",
        "nodes reset: 2 of 3",
        "nodes reset: 3 of 3",
        "every node podpin served is restored (3)",
    ] == out.splitlines()


def test_without_the_reset_daemonset_nothing_is_deleted() -> None:
    """No reset DaemonSet: exit 2 and the agents keep running (nothing would restore the nodes)."""
    with ApiServerEmulator() as api:
        api.objects.put_daemonset(NS, _daemonset("pp", desired=1, ready=1))
        status, out = _run(api, Clock(lambda _: None))
        agents = api.objects.daemonset(NS, "pp")
    assert (2, True) == (status, agents is not None)
    assert out.startswith("podpin uninstall: cannot read the reset DaemonSet infra/pp-uninstall: ")


def test_a_node_that_is_not_restored_in_time_is_named() -> None:
    """Past the timeout: exit 1 and each reset pod that is not ready, with its node and what it shows."""
    with ApiServerEmulator() as api:
        api.objects.put_daemonset(NS, _daemonset("pp-uninstall", desired=2, ready=1))
        stuck = make_pod("pp-uninstall-x7", namespace=NS, node_name="worker-9")
        stuck["metadata"]["labels"] = LABELS
        stuck["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "Ready", "status": "False"}],
            "initContainerStatuses": [
                {
                    "name": "reset",
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": 1}},
                }
            ],
        }
        done = make_pod("pp-uninstall-a1", namespace=NS, node_name="worker-1")
        done["metadata"]["labels"] = LABELS
        done["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        api.add_pod(stuck)
        api.add_pod(done)
        status, out = _run(api, Clock(lambda _: None), timeout=20)
    assert 1 == status
    assert [
        "podpin uninstall: not every node was restored within 20s:",
        (
            "  node worker-9: pod pp-uninstall-x7 not ready (reset: CrashLoopBackOff, last exit 1); see kubectl logs "
            "pp-uninstall-x7 -c reset"
        ),
    ] == out.splitlines()[-2:]
