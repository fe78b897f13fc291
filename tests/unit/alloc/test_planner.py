"""The planner: admission outcomes (KEP-5526 worked examples included), atomicity, release, plans."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from agent.alloc import Planner, PlannerError
from agent.alloc.state import Observed
from agent.config import config_from_mapping
from agent.cpuset import CPUSet
from agent.pods.model import pod_from_dict
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod, resources, sidecar


def planner(topology: Any = None, **config: Any) -> Planner:
    base = {"reservedSystemCPUs": "0"}
    base.update(config)
    return Planner(topology or machine(threads=1), config_from_mapping(base, env={}).planner)


def pod(*args: Any, **kwargs: Any) -> Any:
    return pod_from_dict(make_pod(*args, **kwargs))


def kep_pod_one_exclusive() -> Any:
    """The KEP's first example: a 5-CPU pod, c1 3 CPUs exclusive, c2 and c3 shared."""
    return pod(
        "kep",
        containers=[
            container("c1", cpu="3", memory="1Gi"),
            container("c2", cpu_request="500m", cpu_limit="1", memory="1Gi"),
            container("c3"),
        ],
        pod_resources=resources(cpu="5", memory="5Gi"),
    )


def kep_pod_no_shared_room() -> Any:
    """The KEP's second example: exclusive c1 (3) and c2 (2) use the whole 5-CPU budget, c3 is shared."""
    return pod(
        "kep-full",
        containers=[container("c1", cpu="3", memory="1Gi"), container("c2", cpu="2", memory="1Gi"), container("c3")],
        pod_resources=resources(cpu="5", memory="5Gi"),
    )


class TestKEPWorkedExamples:
    def test_bubble_slice_and_pod_shared_pool(self) -> None:
        """A 5-CPU bubble on NUMA 0 = {1..5}; c1 gets {1,2,3}; c2 and c3 share {4,5}."""
        p = planner(topologyManagerPolicy="single-numa-node")
        decision = p.admit(kep_pod_one_exclusive())
        assert (True, (0,)) == (decision.admitted, decision.numa_affinity)
        plan = p.plan([kep_pod_one_exclusive()]).pods[0]
        assert CPUSet.parse("1-5") == plan.bubble
        assert ("exclusive", CPUSet.parse("1-3")) == (plan.container("c1").pool, plan.container("c1").cpus)
        assert ("pod_shared", CPUSet.parse("4-5")) == (plan.container("c2").pool, plan.container("c2").cpus)
        assert ("pod_shared", CPUSet.parse("4-5")) == (plan.container("c3").pool, plan.container("c3").cpus)

    def test_no_shared_room_single_numa_node_is_topology_affinity_error(self) -> None:
        """Under single-numa-node the pod-scope merge fails first: TopologyAffinityError, pod-level message."""
        decision = planner(topologyManagerPolicy="single-numa-node").admit(kep_pod_no_shared_room())
        assert (False, "TopologyAffinityError") == (decision.admitted, decision.reason)
        assert (
            "Pod Scope pod with pod-level resources failed admission under pod-scope topology manager"
            == decision.message
        )

    def test_no_shared_room_best_effort_is_empty_pod_shared_pool_error(self) -> None:
        """Under best-effort the merge admits and AllocatePod's validation rejects the pod."""
        decision = planner(topologyManagerPolicy="best-effort").admit(kep_pod_no_shared_room())
        assert (False, "EmptyPodSharedPoolError") == (decision.admitted, decision.reason)
        assert (
            "pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared "
            "containers" == decision.message
        )


class TestAdmission:
    def test_rejection_changes_nothing(self) -> None:
        """A rejected pod holds nothing: the state before and after is the same object."""
        p = planner(topologyManagerPolicy="best-effort")
        before = p.snapshot()
        assert not p.admit(kep_pod_no_shared_room()).admitted
        assert before is p.snapshot()

    def test_release_restores_the_shared_pool(self) -> None:
        """Admit then release gives back exactly the previous pools."""
        p = planner()
        before = p.snapshot()
        assert p.admit(kep_pod_one_exclusive()).admitted
        assert p.release(kep_pod_one_exclusive().uid)
        after = p.snapshot()
        assert (before.cpu.default, before.cpu.assignments, before.cpu.pod_entries) == (
            after.cpu.default,
            after.cpu.assignments,
            after.cpu.pod_entries,
        )

    def test_readmission_keeps_cpus(self) -> None:
        """Admitting an admitted pod again moves nothing (restart safety)."""
        p = planner()
        p.admit(kep_pod_one_exclusive())
        before = p.snapshot()
        decision = p.admit(kep_pod_one_exclusive())
        assert (True, True) == (decision.admitted, decision.already_admitted)
        assert before is p.snapshot()

    def test_container_scope_puts_shared_containers_in_node_pool(self) -> None:
        """Container scope: eligible containers exclusive from the node, the rest in the node shared pool."""
        p = planner(topologyManagerScope="container")
        p.admit(kep_pod_one_exclusive())
        plan = p.plan([kep_pod_one_exclusive()]).pods[0]
        assert None is plan.bubble
        assert ["exclusive", "node_shared", "node_shared"] == [c.pool for c in plan.containers]
        assert CPUSet.parse("0,4-15") == plan.container("c2").cpus

    def test_classic_guaranteed_pod(self) -> None:
        """A classic Guaranteed pod: integer containers exclusive, the fractional one in the node shared pool."""
        p = planner()
        classic = pod(
            "classic", containers=[container("db", cpu="2", memory="1Gi"), container("proxy", cpu="500m", memory="1Gi")]
        )
        assert p.admit(classic).admitted
        plan = p.plan([classic]).pods[0]
        assert ("exclusive", CPUSet.parse("1-2")) == (plan.container("db").pool, plan.container("db").cpus)
        assert "node_shared" == plan.container("proxy").pool

    def test_not_enough_cpus_is_unexpected_admission_error(self) -> None:
        """An allocation that cannot fit is reported with the kubelet's reason and the whole request and supply.

        The kubelet would take the 7 + 8 free CPUs of the all-nodes hint and fail on the remainder
        ("requested=1, available=0"); podpin states the pod's 16 against the 15 it could have had.
        """
        p = planner()
        big = pod("big", containers=[container("c", cpu="16", memory="1Gi")])
        decision = p.admit(big)
        assert (
            "UnexpectedAdmissionError",
            (
                "Allocate failed due to not enough cpus available to satisfy request: requested=16, available=15, "
                "which is unexpected"
            ),
            False,
        ) == (decision.reason, decision.message, p.is_admitted(big.uid))

    def test_rejection_states_the_whole_request_and_what_was_free(self) -> None:
        """A refused pod carries its request (pod-level and per container) and the CPUs free per NUMA node."""
        p = planner()
        assert p.admit(pod("first", containers=[container("c", cpu="5", memory="1Gi")])).admitted
        huge = pod(
            "huge",
            containers=[container("db", cpu="12", memory="4Gi"), container("proxy", cpu="100m", memory="64Mi")],
            pod_resources=resources(cpu="13", memory="5Gi"),
        )
        facts = p.admit(huge).facts
        assert facts is not None
        assert (
            13000,
            5 * 2**30,
            13,
            [("db", 12000, 4 * 2**30, 12), ("proxy", 100, 64 * 2**20, 0)],
            [(0, 2, None), (1, 8, None)],
        ) == (
            facts.pod_cpu,
            facts.pod_memory,
            facts.exclusive_cpus,
            [(c.name, c.cpu, c.memory, c.exclusive_cpus) for c in facts.containers],
            [(f.numa, f.cpus, f.memory) for f in facts.free],
        )

    def test_node_shared_pool_never_emptied_with_strict_reservation(self) -> None:
        """With strict-cpu-reservation the last shared CPU is never handed out (kubelet #141196)."""
        p = planner(cpuManagerPolicyOptions={"strict-cpu-reservation": "true"})
        assert p.admit(pod("a", containers=[container("c", cpu="14", memory="1Gi")])).admitted
        decision = p.admit(pod("b", containers=[container("c", cpu="1", memory="1Gi")]))
        assert "UnexpectedAdmissionError" == decision.reason
        assert "the node shared pool would be left empty" in (decision.message or "")

    def test_sidecar_slices_stay_out_of_the_app_pool(self) -> None:
        """An exclusive sidecar keeps its slice; app slices and the pod pool come from the rest."""
        p = planner()
        sidecar_pod = pod(
            "sc",
            init_containers=[sidecar("mesh", cpu="1", memory="1Gi")],
            containers=[container("app", cpu="2", memory="1Gi"), container("log")],
            pod_resources=resources(cpu="4", memory="4Gi"),
        )
        assert p.admit(sidecar_pod).admitted
        plan = p.plan([sidecar_pod]).pods[0]
        mesh, app, log = plan.container("mesh"), plan.container("app"), plan.container("log")
        assert ("exclusive", "exclusive", "pod_shared") == (mesh.pool, app.pool, log.pool)
        assert (True, True, True) == (
            mesh.cpus.is_disjoint(app.cpus),
            mesh.cpus.is_disjoint(log.cpus),
            app.cpus.is_disjoint(log.cpus),
        )
        assert plan.bubble == mesh.cpus | app.cpus | log.cpus


class TestHoldsObserved:
    """``Planner.holds_observed``: which pods seen on their cgroups keep those CPUs as they are (admitted first)."""

    @staticmethod
    def two(name: str) -> Any:
        return pod(name, containers=[container("app", cpu="2", memory="1Gi")])

    def test_a_free_set_of_the_right_size_is_held(self) -> None:
        """A new pod whose exclusive container holds two free CPUs on its cgroup keeps them."""
        p = planner()
        assert p.holds_observed(self.two("recent"), Observed(containers={"app": CPUSet.parse("3-4")}))

    @pytest.mark.parametrize(
        ("why", "seen"),
        [
            ("another pod claims CPU 2", Observed(containers={"app": CPUSet.parse("2-3")})),
            ("the wrong size", Observed(containers={"app": CPUSet.parse("5-7")})),
            ("a reserved CPU", Observed(containers={"app": CPUSet.parse("0,5")})),
            (
                "only the pod cgroup (a refused pod holds the node shared pool there)",
                Observed(pod=CPUSet.parse("0,5-15")),
            ),
            ("nothing", Observed()),
        ],
    )
    def test_what_cannot_be_kept_as_it_is_is_not_held(self, why: str, seen: Observed) -> None:
        """A set claimed by a pod in the state, of another size, on a reserved CPU, or no container set at all."""
        p = planner()
        first = self.two("first")
        assert p.admit(first).admitted
        assert CPUSet.parse("1-2") == p.snapshot().cpu.get(first.uid, "app")
        assert not p.holds_observed(self.two("recent"), seen), why

    def test_an_admitted_pod_is_not_offered_its_cgroups(self) -> None:
        """A pod already in the state (restored from the checkpoint) keeps what the state says: not held."""
        p = planner()
        first = self.two("first")
        p.admit(first)
        assert not p.holds_observed(first, Observed(containers={"app": CPUSet.parse("1-2")}))

    def test_every_exclusive_container_must_keep_its_set(self) -> None:
        """One container of two keeping its set is not enough: the other one would be placed afresh first."""
        p = planner()
        pair = pod("pair", containers=[container("a", cpu="2", memory="1Gi"), container("b", cpu="2", memory="1Gi")])
        assert (True, False) == (
            p.holds_observed(pair, Observed(containers={"a": CPUSet.parse("3-4"), "b": CPUSet.parse("5-6")})),
            p.holds_observed(pair, Observed(containers={"a": CPUSet.parse("3-4"), "b": CPUSet.parse("5")})),
        )

    def test_policy_none_holds_nothing(self) -> None:
        """Without the static CPU policy there are no exclusive CPUs to keep."""
        p = planner(cpuManagerPolicy="none")
        assert not p.holds_observed(self.two("recent"), Observed(containers={"app": CPUSet.parse("3-4")}))


class TestPlanValues:
    def test_exclusive_and_pod_values(self) -> None:
        """Exclusive containers lift the quota; the pod cgroup is the union and unlimited."""
        p = planner()
        p.admit(kep_pod_one_exclusive())
        plan = p.plan([kep_pod_one_exclusive()]).pods[0]
        assert "max 100000" == str(plan.container("c1").desired.cpu_max)
        assert None is plan.container("c2").desired.cpu_max
        assert CPUSet.parse("1-5") == plan.desired.cpuset_cpus
        assert "max 100000" == str(plan.desired.cpu_max)

    def test_burstable_pod_is_left_to_its_qos_slice(self) -> None:
        """Nothing is written for a Burstable pod; the QoS slice holds the node shared pool."""
        p = planner()
        web = pod(
            "web",
            containers=[
                container("nginx", cpu_request="250m", cpu_limit="1", memory_request="128Mi", memory_limit="256Mi")
            ],
        )
        p.admit(web)
        plan = p.plan([web])
        assert plan.pods[0].desired.is_empty()
        assert all(c.desired.is_empty() for c in plan.pods[0].containers)
        assert plan.shared_pool == plan.qos_desired.cpuset_cpus

    def test_unmanaged_guaranteed_pod_is_confined(self) -> None:
        """A Guaranteed pod with nothing pinned is confined to the node shared pool at the pod cgroup."""
        p = planner()
        fractional = pod("frac", containers=[container("c", cpu="500m", memory="1Gi")])
        p.admit(kep_pod_one_exclusive())
        p.admit(fractional)
        plan = p.plan([kep_pod_one_exclusive(), fractional])
        assert plan.shared_pool == plan.pod(fractional.uid).desired.cpuset_cpus
        assert CPUSet.parse("0,6-15") == plan.shared_pool

    def test_cfs_period_follows_config(self) -> None:
        """``cpu.max`` uses the configured cpuCFSQuotaPeriod."""
        p = planner(cpuCFSQuotaPeriod="50ms")
        p.admit(kep_pod_one_exclusive())
        assert "max 50000" == str(p.plan([kep_pod_one_exclusive()]).pods[0].container("c1").desired.cpu_max)


class TestMemoryStatic:
    CONFIG: ClassVar[dict[str, Any]] = {
        "memoryManagerPolicy": "Static",
        "systemReserved": {"memory": "924Mi"},
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
        "topologyManagerPolicy": "single-numa-node",
    }

    def test_pod_level_memory_blocks_and_mems(self) -> None:
        """Pod-level memory lands on the bubble's NUMA node; every container's cpuset.mems names it."""
        p = planner(machine(threads=1, memory_gib=16), **self.CONFIG)
        assert p.admit(kep_pod_one_exclusive()).admitted
        plan = p.plan([kep_pod_one_exclusive()]).pods[0]
        assert [CPUSet([0])] * 3 == [c.desired.cpuset_mems for c in plan.containers]
        memory = p.snapshot().memory
        assert memory is not None
        assert 5 * 2**30 == memory.machine[0].tables["memory"].reserved

    def test_memory_that_fits_no_single_node_is_rejected(self) -> None:
        """A pod needing more memory than one node has is rejected under single-numa-node."""
        p = planner(machine(threads=1, memory_gib=4), **self.CONFIG)
        decision = p.admit(pod("fat", containers=[container("c", cpu="1", memory="6Gi")]))
        assert (False, "TopologyAffinityError") == (decision.admitted, decision.reason)

    def test_release_gives_memory_back(self) -> None:
        """Releasing the pod frees its memory on the node."""
        p = planner(machine(threads=1, memory_gib=16), **self.CONFIG)
        p.admit(kep_pod_one_exclusive())
        p.release(kep_pod_one_exclusive().uid)
        memory = p.snapshot().memory
        assert memory is not None
        assert (0, 0) == (memory.machine[0].tables["memory"].reserved, memory.machine[0].assignments)


class TestConfigAgainstMachine:
    @pytest.mark.parametrize(
        ("config", "message"),
        [
            ({"reservedSystemCPUs": "40"}, "reservedSystemCPUs: CPUs 40 are not online CPUs of this machine (0-15)"),
            (
                {
                    "reservedMemory": [{"numaNode": 5, "limits": {"memory": "1Gi"}}],
                    "memoryManagerPolicy": "Static",
                    "systemReserved": {"memory": "924Mi"},
                },
                "reservedMemory: NUMA node 5 does not exist on this machine (nodes [0, 1])",
            ),
            (
                {"reservedSystemCPUs": "", "systemReserved": {"cpu": "16"}},
                "kubeReserved/systemReserved: reserving 16 CPUs leaves none of the 16 online CPUs for pods",
            ),
        ],
    )
    def test_bad_combinations_name_the_setting(self, config: dict[str, Any], message: str) -> None:
        """A configuration that does not fit the machine fails with the setting named."""
        with pytest.raises(PlannerError) as err:
            planner(**config)
        assert message == str(err.value)

    def test_more_numa_nodes_than_allowed(self) -> None:
        """More than 8 NUMA nodes need max-allowable-numa-nodes, as in the kubelet."""
        big = machine(sockets=2, numa_per_socket=5, cores_per_numa=2, threads=1)
        with pytest.raises(PlannerError, match="unsupported on machines with more than 8 NUMA Nodes"):
            planner(big)
        assert (
            planner(big, topologyManagerPolicyOptions={"max-allowable-numa-nodes": "16"})
            .admit(kep_pod_one_exclusive())
            .admitted
        )


class TestHotplug:
    @staticmethod
    def offline(topology: Any, *cpus: int) -> Any:
        from dataclasses import replace

        from agent.topology.model import CPU

        changed = tuple(CPU(id=c.id, online=False) if c.id in cpus else c for c in topology.cpus)
        nodes = tuple(replace(n, cpus=n.cpus - CPUSet(cpus)) for n in topology.numa_nodes)
        return replace(topology, cpus=changed, numa_nodes=nodes)

    def test_only_the_offline_cpu_moves_and_the_reservation_stays(self) -> None:
        """One SMT sibling going offline: the pod that held it keeps its other CPU and gets one in place of the lost
        one (it used to be released and re-admitted whole); the other pod and the reserved CPU do not move."""
        topology = machine()
        p = Planner(topology, config_from_mapping({"systemReserved": {"cpu": "1"}}, env={}).planner)
        first = pod("first", containers=[container("c", cpu="2", memory="1Gi")])
        second = pod("second", containers=[container("c", cpu="2", memory="1Gi")])
        p.admit(first)
        p.admit(second)
        before = {uid: dict(c) for uid, c in p.snapshot().cpu.assignments.items()}
        victim = next(uid for uid, c in before.items() if 1 in c["c"])
        survivor = next(uid for uid in before if uid != victim)
        rebased, dropped = p.rebased(self.offline(topology, 17))
        after = rebased.snapshot().cpu.assignments
        assert rebased.readoption is not None
        assert ([], CPUSet([0]), [(victim, "c", "17")]) == (
            dropped,
            rebased.reserved,
            [(m.uid, m.container, str(m.offline)) for m in rebased.readoption.moves],
        )
        assert (before[survivor], True, 2, False) == (
            dict(after[survivor]),
            1 in after[victim]["c"],
            len(after[victim]["c"]),
            17 in rebased.snapshot().cpu.default | after[victim]["c"],
        )
