"""Adoption against the live cgroups: which running containers hold exclusive CPUs, and which checkpoint claims
they contradict (issue 22, the soak's last finding: a checkpoint older than the cgroups).

Before ``contradicted_claims`` a restored claim was always honoured: a pod the checkpoint gave CPUs another pod's
running container held took them, and that container moved.
"""

from __future__ import annotations

import pytest

from agent.alloc import Planner
from agent.alloc.cpumanager import CPUState
from agent.alloc.cpumanager.restore import StaleCause
from agent.alloc.state import Observed, contradicted_claims, running_exclusive
from agent.config import config_from_mapping
from agent.cpuset import CPUSet
from agent.pods.model import PodView, pod_from_dict
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources

ASSIGNABLE = CPUSet.parse("1-15")


def gu(name: str, cpus: str = "2", *, state: str = "running") -> PodView:
    return pod_from_dict(make_pod(name, containers=[container("app", cpu=cpus, memory="1Gi")], states={"app": state}))


def seen(**containers: str) -> Observed:
    return Observed(containers={name: CPUSet.parse(cpus) for name, cpus in containers.items()})


def state(**claims: tuple[PodView, str]) -> CPUState:
    """A CPU state where each pod's ``app`` holds the given CPUs (the keys are only labels)."""
    cpu = CPUState(default=CPUSet.parse("0-15"))
    for pod, cpus in claims.values():
        cpu.set(pod.uid, "app", CPUSet.parse(cpus))
        cpu.default = cpu.default - CPUSet.parse(cpus)
    return cpu


class TestRunningExclusive:
    def test_an_exclusive_container_of_its_size_counts(self) -> None:
        """A running container entitled to 2 exclusive CPUs whose cgroup holds 2 assignable CPUs."""
        assert {"app": CPUSet.parse("3-4")} == running_exclusive(gu("web"), seen(app="3-4"), ASSIGNABLE)

    @pytest.mark.parametrize(
        ("why", "pod", "observed"),
        [
            ("a terminated container", gu("web", state="terminated"), seen(app="3-4")),
            ("another size (a pool)", gu("web"), seen(app="0-15")),
            ("a reserved CPU", gu("web"), seen(app="0-1")),
            (
                "a container with no exclusive CPUs",
                pod_from_dict(make_pod("bu", states={"app": "running"})),
                seen(app="3-4"),
            ),
            ("the pod cgroup only", gu("web"), Observed(pod=CPUSet.parse("3-4"))),
        ],
    )
    def test_what_is_not_a_running_exclusive_set(self, why: str, pod: PodView, observed: Observed) -> None:
        """Terminated, of another size, on a reserved CPU, not entitled, or not a container's set: none counts."""
        assert {} == running_exclusive(pod, observed, ASSIGNABLE), why


class TestContradictedClaims:
    def test_a_claim_on_another_pods_running_set_is_named(self) -> None:
        """The checkpoint gives ``db`` 2-3; ``web``'s running container holds 2-3 (and ``db``'s runs on 5-6)."""
        db, web = gu("db"), gu("web")
        found = contradicted_claims(state(db=(db, "2-3")), [(db, seen(app="5-6")), (web, seen(app="2-3"))], ASSIGNABLE)
        assert {
            db.uid: "the checkpoint gives it CPUs 2-3, which the running container app of pod default/web holds on "
            "its cgroup"
        } == found

    def test_a_pod_bubble_is_a_claim_too(self) -> None:
        """A pod-level pod's bubble (its pod shared pool included) is claimed: a running slice inside it contradicts."""
        kep = pod_from_dict(
            make_pod(
                "kep",
                containers=[container("c1", cpu="2", memory="1Gi"), container("c2")],
                pod_resources=resources(cpu="4", memory="2Gi"),
                states={"c1": "running", "c2": "running"},
            )
        )
        cpu = CPUState(default=CPUSet.parse("0,5-15"))
        cpu.set(kep.uid, "c1", CPUSet.parse("1-2"))
        cpu.set(kep.uid, "c2", CPUSet.parse("3-4"))
        cpu.pod_entries[kep.uid] = CPUSet.parse("1-4")
        web = gu("web")
        assert [kep.uid] == list(contradicted_claims(cpu, [(web, seen(app="3-4"))], ASSIGNABLE))

    @pytest.mark.parametrize(
        ("why", "holder"),
        [
            ("its own cgroup disagreeing", None),
            ("a terminated container", gu("web", state="terminated")),
            ("a pool, not a slice", gu("web", "4")),
        ],
    )
    def test_what_does_not_contradict(self, why: str, holder: PodView | None) -> None:
        """The pod's own cgroups, a terminated container, a set of the wrong size: the claim stands."""
        db = gu("db")
        live: list[tuple[PodView, Observed]] = (
            [(db, seen(app="2-3"))] if holder is None else [(holder, seen(app="2-3"))]
        )
        assert {} == contradicted_claims(state(db=(db, "2-3")), live, ASSIGNABLE), why


class TestPlannerRelease:
    @staticmethod
    def planner(*pods: PodView) -> Planner:
        p = Planner(machine(threads=1), config_from_mapping({"reservedSystemCPUs": "0"}, env={}).planner)
        for pod in pods:
            assert p.admit(pod).admitted
        return p

    def test_the_contradicted_pod_is_released_and_keeps_its_own_cgroups_set(self) -> None:
        """``db`` is released with cause ``contradicted_by_cgroups``; admitted again with what its cgroup holds,
        it keeps that, and ``web`` keeps its running set."""
        db, web = gu("db"), gu("web")
        restored = self.planner(db)  # db holds 1-2 in the state: the checkpoint's word
        assert CPUSet.parse("1-2") == restored.snapshot().cpu.get(db.uid, "app")
        released = restored.release_contradicted([(db, seen(app="5-6")), (web, seen(app="1-2"))])
        decisions = (
            restored.admit(web, seen(app="1-2")).admitted,
            restored.admit(db, seen(app="5-6")).admitted,
        )
        assert (
            [(db.uid, StaleCause.CONTRADICTED_BY_CGROUPS, CPUSet.parse("1-2"))],
            (True, True),
            {db.uid: {"app": CPUSet.parse("5-6")}, web.uid: {"app": CPUSet.parse("1-2")}},
        ) == (
            [(uid, s.cause, s.released) for uid, s in released.items()],
            decisions,
            {uid: dict(c) for uid, c in restored.snapshot().cpu.assignments.items()},
        )

    def test_nothing_contradicted_releases_nothing(self) -> None:
        """Running containers on the checkpoint's own sets: no release, the state object unchanged."""
        db = gu("db")
        restored = self.planner(db)
        before = restored.snapshot()
        assert ({}, True) == (restored.release_contradicted([(db, seen(app="1-2"))]), before is restored.snapshot())

    def test_policy_none_releases_nothing(self) -> None:
        """Without the static CPU policy there are no claims."""
        p = Planner(machine(threads=1), config_from_mapping({"cpuManagerPolicy": "none"}, env={}).planner)
        assert {} == p.release_contradicted([(gu("web"), seen(app="1-2"))])
