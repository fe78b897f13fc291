"""The harness's pure parts without a cluster: the configurations of both runs, pods made ready to apply, what each
side's pod says about admission, and the guest's reading of a container (on a fixture tree)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cluster import diff_config, diff_pods
from tests.cluster.guest_observe import observe
from tests.cluster.scenario_format import SCENARIOS, load_all, load_scenario

_SIDECAR = load_scenario(SCENARIOS / "kep5526-exclusive-sidecar")


def _pod(phase: str = "Running", reason: str | None = None, **extra: Any) -> dict[str, Any]:
    manifest = diff_pods.bound_manifest(_SIDECAR.pods[0], node="n", ready_gate=False)
    running = {"running": {"startedAt": "x"}}
    statuses = [{"name": n, "containerID": f"containerd://id-{n}", "state": running} for n in ("app", "helper")]
    status: dict[str, Any] = {
        "phase": phase,
        "initContainerStatuses": [{"name": "proxy", "containerID": "containerd://id-proxy", "state": running}],
        "containerStatuses": statuses,
        **extra,
    }
    if reason is not None:
        status["reason"] = reason
    return {**manifest, "status": status}


class TestConfigs:
    def test_run_a_turns_the_gates_on(self) -> None:
        """Run (a): the scenario's fields, the kubelet's defaults where silent, both pod-level gates on."""
        config = diff_config.kubelet_config_a(_SIDECAR)
        assert ("static", "pod", "0") == (
            config["cpuManagerPolicy"],
            config["topologyManagerScope"],
            config["reservedSystemCPUs"],
        )
        assert {"PodLevelResources": True, "PodLevelResourceManagers": True} == config["featureGates"]

    def test_alpha_options_get_their_gate(self) -> None:
        """A scenario with an alpha CPU manager option gets CPUManagerPolicyAlphaOptions in run (a)."""
        alpha = [
            s
            for s in load_all()
            if diff_config.ALPHA_CPU_OPTIONS & set(s.kubelet.fields.get("cpuManagerPolicyOptions", {}))
        ]
        assert alpha, "the corpus has a scenario with an alpha option"
        assert diff_config.kubelet_config_a(alpha[0])["featureGates"]["CPUManagerPolicyAlphaOptions"]

    def test_run_b_keeps_reservations_and_turns_managers_off(self) -> None:
        """Run (b): the kubelet decides nothing but reserves the same, so allocatable is the same in both runs."""
        config = diff_config.kubelet_config_b(_SIDECAR)
        assert {
            "reservedSystemCPUs": "0",
            "cpuManagerPolicy": "none",
            "memoryManagerPolicy": "None",
            "topologyManagerPolicy": "none",
            "featureGates": {"PodLevelResources": True, "PodLevelResourceManagers": True},
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        } == config

    def test_podpin_gets_the_scenario_fields(self) -> None:
        """podpin's configuration holds the scenario's fields with the kubelet's defaults, and its own places."""
        config = diff_config.podpin_config(_SIDECAR, node_name="n", state_dir="/run/s", metrics="127.0.0.1:1")
        assert ("best-effort", "pod", "/run/s", "n") == (
            config["topologyManagerPolicy"],
            config["topologyManagerScope"],
            config["stateDir"],
            config["nodeName"],
        )

    def test_node_spec_is_the_machine(self) -> None:
        """The guest is the scenario's machine: 8 CPUs, 2 sockets and NUMA nodes, no SMT, 4 GiB."""
        spec = diff_config.node_spec(_SIDECAR.machine)
        assert (8, 2, 2, 1, 4096) == (spec.cpus, spec.sockets, spec.numa_nodes, spec.threads, spec.memory_mb)


class TestPods:
    def test_bound_manifest(self) -> None:
        """Bound to the node, never pulled, short grace, podpin's gate in run (b); the resources untouched."""
        manifest = diff_pods.bound_manifest(_SIDECAR.pods[0], node="n", ready_gate=True)
        spec = manifest["spec"]
        assert ("n", 1, [{"conditionType": "podpin.io/CPUsPinned"}]) == (
            spec["nodeName"],
            spec["terminationGracePeriodSeconds"],
            spec["readinessGates"],
        )
        assert {"Never"} == {c["imagePullPolicy"] for c in spec["containers"] + spec["initContainers"]}
        assert _SIDECAR.pods[0].manifest["spec"]["resources"] == spec["resources"]
        assert "nodeName" not in _SIDECAR.pods[0].manifest["spec"]

    def test_observed_containers_are_sidecars_then_apps(self) -> None:
        """Sidecars and app containers, in spec order; a regular init container is not compared."""
        assert ["proxy", "app", "helper"] == diff_pods.observed_containers(_SIDECAR.pods[0].manifest)

    def test_admission_on_each_side(self) -> None:
        """The kubelet's Failed phase and reason; podpin's False condition and reason; otherwise admitted."""
        assert (False, "TopologyAffinityError") == diff_pods.kubelet_admission(_pod("Failed", "TopologyAffinityError"))
        assert (True, None) == diff_pods.kubelet_admission(_pod())
        refused = {"type": "podpin.io/CPUsPinned", "status": "False", "reason": "SMTAlignmentError"}
        assert (False, "SMTAlignmentError") == diff_pods.podpin_admission(_pod(conditions=[refused]))
        pinned = {"type": "podpin.io/CPUsPinned", "status": "True", "reason": "Pinned"}
        assert (True, None) == diff_pods.podpin_admission(_pod(conditions=[pinned]))

    def test_settled(self) -> None:
        """Run (a) settles when all compared containers run or the pod failed; run (b) also needs the condition."""
        assert diff_pods.settled(_pod(), side="kubelet")
        assert diff_pods.settled(_pod("Failed", "SMTAlignmentError", containerStatuses=[]), side="kubelet")
        assert not diff_pods.settled(_pod(containerStatuses=[]), side="kubelet")
        assert not diff_pods.settled(_pod(), side="podpin")
        pinned = {"type": "podpin.io/CPUsPinned", "status": "True", "reason": "Pinned"}
        assert diff_pods.settled(_pod(conditions=[pinned]), side="podpin")

    def test_container_ids_of_running_containers(self) -> None:
        """The CRI ids of running containers, without the runtime's scheme."""
        assert {"proxy": "id-proxy", "app": "id-app", "helper": "id-helper"} == diff_pods.container_ids(_pod())


def test_observe_reads_process_and_cgroup(tmp_path: Path) -> None:
    """A container's init pid from its bundle, its status lists and its cgroup's effective sets; a missing bundle
    is an error naming the file."""
    (tmp_path / "bundles" / "c1").mkdir(parents=True)
    (tmp_path / "bundles" / "c1" / "init.pid").write_text("42\n")
    (tmp_path / "proc" / "42").mkdir(parents=True)
    (tmp_path / "proc" / "42" / "status").write_text("Name:\tsleep\nCpus_allowed_list:\t2-3\nMems_allowed_list:\t0\n")
    (tmp_path / "proc" / "42" / "cgroup").write_text("0::/kubepods/podx/c1\n")
    cgroup = tmp_path / "cg" / "kubepods" / "podx" / "c1"
    cgroup.mkdir(parents=True)
    (cgroup / "cpuset.cpus.effective").write_text("2-3\n")
    (cgroup / "cpuset.mems.effective").write_text("0\n")
    where = {"bundles": tmp_path / "bundles", "proc_root": tmp_path / "proc", "cgroup_root": tmp_path / "cg"}
    assert {"pid": 42, "cpus": "2-3", "mems": "0", "cgroup_cpus": "2-3", "cgroup_mems": "0"} == observe("c1", **where)
    assert "c2/init.pid" in observe("c2", **where)["error"]
