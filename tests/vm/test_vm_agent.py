"""``podpin run`` end to end on a real cgroup v2 kernel: 8 vCPUs on 2 and on 4 NUMA nodes, no capabilities.

One VM boot per layout runs ``scenario_agent.py`` (see its docstring for the steps). The expected values
come from ``podpin plan`` run here on the host with the guest's topology JSON, the same configuration and
the same pods (``agentpods.e2e_pods``, admitted in creation order), so every fact below compares what the
kernel reports with the planner's answer: each process's ``sched_getaffinity``, each cgroup's
``cpuset.cpus``, ``cpuset.cpus.effective`` and ``cpu.max``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from agent.cpuset import CPUSet
from tests.vm import harness
from tests.vm.agentpods import CFS_PERIOD_US, SANDBOX, E2EPods, PodSpec, e2e_pods
from tests.vm.harness import GuestRun, VMConfig
from tests.vm.planexpect import (
    MAX,
    Expected,
    expected_cpu_max,
    expected_pod_cgroups,
    interim_sets,
    pinned_pools,
    plan_pod,
    planned_cpus,
    pod_key,
    run_plan,
)

LAYOUT_TIMEOUT_S = 900
"""A hang guard only (a frozen guest is caught by its heartbeat): 2-6 min per layout here, by host and load."""
LAYOUTS = [VMConfig(cpus=8, nodes=2, timeout_s=LAYOUT_TIMEOUT_S), VMConfig(cpus=8, nodes=4, timeout_s=LAYOUT_TIMEOUT_S)]
agent_run = harness.scenario_fixture("scenario_agent.py", params=LAYOUTS)

PODS: E2EPods = e2e_pods()
ZERO_CAPS = "0000000000000000"


@pytest.fixture(scope="module")
def expected(agent_run: GuestRun, tmp_path_factory: pytest.TempPathFactory) -> Expected:
    """The host's ``podpin plan`` over the guest's topology and configuration (written by the ``setup`` step)."""
    agent_run.step("setup")
    directory = tmp_path_factory.mktemp(f"plan-{agent_run.config.label}")
    manifests = []
    for spec in PODS.every:
        path = directory / spec.file_name
        path.write_text(yaml.safe_dump(spec.manifest()))
        manifests.append(path)
    topology, config = agent_run.workdir / "topology.json", agent_run.workdir / "config.yaml"
    return Expected(
        initial=run_plan(topology, config, manifests[: len(PODS.initial)]), every=run_plan(topology, config, manifests)
    )


def observed(step: harness.Step, field: str, specs: tuple[PodSpec, ...], key: str = "observed") -> dict[str, Any]:
    """Per pod, per container: one field of what the guest observed (pod cgroups and sandboxes left out)."""
    views: Mapping[str, Any] = step[key]
    return {
        pod_key(s): {name: value[field] for name, value in views[pod_key(s)].items() if not name.startswith("(")}
        for s in specs
    }


def sandboxes(step: harness.Step, field: str, specs: tuple[PodSpec, ...]) -> dict[str, Any]:
    """Per pod: one field of what the guest observed on its sandbox scope."""
    views: Mapping[str, Any] = step["observed"]
    return {pod_key(s): views[pod_key(s)][SANDBOX][field] for s in specs}


def observed_pod_cgroups(step: harness.Step, specs: tuple[PodSpec, ...], key: str = "observed") -> dict[str, Any]:
    """What the guest saw on the pod cgroups (``cpuset.cpus`` and ``cpu.max``)."""
    views: Mapping[str, Any] = step[key]
    return {pod_key(s): {f: views[pod_key(s)]["(pod)"][f] for f in ("cpuset.cpus", "cpu.max")} for s in specs}


class TestOnce:
    """``podpin run --once`` over the three pods that exist before the agent."""

    def test_exits_zero_and_writes_a_checkpoint(self, agent_run: GuestRun) -> None:
        """One full pass, exit status 0, and the checkpoint exists afterwards."""
        step = agent_run.step("once")
        assert (0, True) == (step["returncode"], step["checkpoint_written"]), step.explain

    def test_every_process_runs_where_the_plan_says(self, agent_run: GuestRun, expected: Expected) -> None:
        """Each process's ``sched_getaffinity`` is its container's CPUs in the plan (node shared pool for ``web``)."""
        step = agent_run.step("once")
        want = planned_cpus(expected.initial, PODS.initial)
        assert want == observed(step, "affinity", PODS.initial), step.explain

    def test_cpusets_written_and_effective(self, agent_run: GuestRun, expected: Expected) -> None:
        """Containers of managed pods hold their plan CPUs in ``cpuset.cpus`` and ``cpuset.cpus.effective``."""
        step = agent_run.step("once")
        want = pinned_pools(expected.initial, PODS.initial)
        specs = tuple(s for s in PODS.initial if pod_key(s) in want)
        actual = (observed(step, "cpuset.cpus", specs), observed(step, "effective", specs))
        assert (want, want) == actual, step.explain

    def test_burstable_pod_is_confined_by_its_qos_slice(self, agent_run: GuestRun, expected: Expected) -> None:
        """Nothing is written on the Burstable pod's container; its QoS slices hold the node shared pool."""
        step = agent_run.step("once")
        shared = expected.initial["node"]["shared_pool"]
        actual = (observed(step, "cpuset.cpus", (PODS.web,)), step["qos_cpus"])
        assert ({"default/web": {"nginx": ""}}, {"burstable": shared, "besteffort": shared}) == actual, step.explain

    def test_cpu_max_lifted_only_for_exclusive_containers(self, agent_run: GuestRun, expected: Expected) -> None:
        """Exclusive containers get ``max 100000``; sidecars and the Burstable container keep the kubelet's quota."""
        step = agent_run.step("once")
        want = expected_cpu_max(expected.initial, PODS.initial)
        assert want == observed(step, "cpu.max", PODS.initial), step.explain

    def test_kubelet_quota_was_there_before(self, agent_run: GuestRun) -> None:
        """Before the agent, the database ran under the quota a kubelet with policy ``none`` sets (2 CPUs)."""
        step = agent_run.step("setup")
        actual = observed(step, "cpu.max", (PODS.story,), key="before_agent")["trading/trading-engine"]["database"]
        assert f"{2 * CFS_PERIOD_US} {CFS_PERIOD_US}" == actual, step.explain

    def test_pod_cgroups(self, agent_run: GuestRun, expected: Expected) -> None:
        """Pod cgroups: bubble or containers plus the node shared pool, ``max`` with an exclusive container."""
        step = agent_run.step("once")
        want = expected_pod_cgroups(expected.initial, PODS.initial)
        assert want == observed_pod_cgroups(step, PODS.initial), step.explain


class TestLongRunning:
    """The long-running agent, started after ``--once``."""

    def test_runs_without_any_capability(self, agent_run: GuestRun) -> None:
        """The agent process is uid 0 with every capability set empty, at start and after the restart."""
        zero = {"Uid": "0", **dict.fromkeys(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), ZERO_CAPS)}
        start, restart = agent_run.step("start"), agent_run.step("restart")
        caps = {k: v for k, v in start["capabilities"].items() if k != "NoNewPrivs"}
        caps_restart = {k: v for k, v in restart["capabilities"].items() if k != "NoNewPrivs"}
        assert (zero, zero) == (caps, caps_restart), start.explain

    def test_runs_the_agent_itself(self, agent_run: GuestRun) -> None:
        """The process checked for capabilities is ``python -m agent run`` (setpriv exec'd it)."""
        step = agent_run.step("start")
        assert ["-m", "agent", "run"] == step["cmdline"][1:4], step.explain

    def test_watches_with_inotify(self, agent_run: GuestRun) -> None:
        """``agent.started`` names the inotify watcher and the metrics address given with the flag."""
        step = agent_run.step("start")
        line = step["started_line"]
        assert ("inotify", step["port"]) == (line["watcher"], step["logged_port"]), step.explain

    def test_ready_and_healthy(self, agent_run: GuestRun) -> None:
        """``/readyz`` answered 200 (the step waited for it) and ``/healthz`` answers 200 ``ok``."""
        step = agent_run.step("start")
        assert [200, "ok\n"] == step["healthz"], step.explain

    def test_adopts_the_once_checkpoint_without_a_write(self, agent_run: GuestRun) -> None:
        """Started over ``--once``'s checkpoint, it logs no admission or write, and the kernel shows the same."""
        once, step = agent_run.step("once"), agent_run.step("adopted")
        assert ([], once["observed"]) == (step["changes"], step["observed"]), step.explain

    def test_busy_exclusive_container_is_not_throttled(self, agent_run: GuestRun) -> None:
        """Two spinning processes in the 2-CPU database: ``cpu.max`` is ``max``, no CFS period, no throttling."""
        step = agent_run.step("throttle")
        database = step["database"]
        actual = (database["cpu.max"], database["nr_periods"], database["nr_throttled"], step["pod_cpu_max"])
        assert (MAX, 0, 0, MAX) == actual, step.explain

    def test_busy_sidecar_is_throttled(self, agent_run: GuestRun) -> None:
        """A spinning log collector keeps its 300m limit: throttled, at most ~35% of a CPU over the window.

        The window is 1.5 s or longer, until the first throttled period (a starved guest may need more).
        """
        step = agent_run.step("throttle")
        sidecar = step["log-collector"]
        actual = (sidecar["cpu.max"], sidecar["nr_throttled"] > 0, 0 < sidecar["usage_share"] <= 0.35)
        limit = PODS.story.container("log-collector").kubelet_cpu_max
        assert (limit, True, True) == actual, step.explain

    def test_new_pod_is_pinned(self, agent_run: GuestRun, expected: Expected) -> None:
        """A Guaranteed pod published and started while the agent runs: its process gets its exclusive CPU."""
        step = agent_run.step("new_pod")
        cpus = planned_cpus(expected.every, (PODS.new,))["default/new-guaranteed"]["main"]
        want = {"cpuset.cpus": cpus, "effective": cpus, "affinity": cpus, "cpu.max": MAX}
        assert want == step["pinned"], step.explain

    def test_container_without_status_runs_on_the_interim_set(self, agent_run: GuestRun, expected: Expected) -> None:
        """Before its status names it, a container runs on the node shared pool, never on an exclusive CPU."""
        step = agent_run.step("late_status")
        shared = expected.every["node"]["shared_pool"]
        want = {"cpuset.cpus": shared, "effective": shared, "affinity": shared}
        actual = {k: v for k, v in step["interim"].items() if k != "cpu.max"}
        assert want == actual, step.explain

    def test_container_is_pinned_once_its_status_arrives(self, agent_run: GuestRun, expected: Expected) -> None:
        """When the manifest gains the containerID, the running process moves to its exclusive CPU."""
        step = agent_run.step("late_status")
        cpus = planned_cpus(expected.every, (PODS.late,))["default/late-status"]["main"]
        want = {"cpuset.cpus": cpus, "effective": cpus, "affinity": cpus, "cpu.max": MAX}
        assert want == step["pinned"], step.explain

    def test_drift_is_visible_to_the_process(self, agent_run: GuestRun, expected: Expected) -> None:
        """Someone rewrites the database's ``cpuset.cpus`` to the whole bubble: its process may use all of it."""
        step = agent_run.step("drift")
        bubble = plan_pod(expected.every, PODS.story)["bubble"]
        assert {"cpuset.cpus": bubble, "affinity": bubble} == {
            k: step["during"][k] for k in ("cpuset.cpus", "affinity")
        }, step.explain

    def test_drift_is_repaired(self, agent_run: GuestRun, expected: Expected) -> None:
        """The next resync puts the planned CPUs back and logs one ``cgroup.drift_repaired`` naming old and new."""
        step = agent_run.step("drift")
        cpus = planned_cpus(expected.every, (PODS.story,))["trading/trading-engine"]["database"]
        bubble = plan_pod(expected.every, PODS.story)["bubble"]
        want_event = {
            "event": "cgroup.drift_repaired",
            "namespace": "trading",
            "pod": "trading-engine",
            "container": "database",
            "cgroup_level": "container",
            "cpus": cpus,
            "files": {"cpuset.cpus": {"old": bubble, "new": cpus, "result": "ok"}},
        }
        events = [{k: v for k, v in e.items() if k != "path"} for e in step["changes"]]
        want = ({"cpuset.cpus": cpus, "effective": cpus, "affinity": cpus, "cpu.max": MAX}, [want_event])
        assert want == (step["repaired"], events), step.explain

    def test_every_process_matches_the_final_plan(self, agent_run: GuestRun, expected: Expected) -> None:
        """After both new pods, every process runs on its plan CPUs; the Burstable one on the shrunk shared pool."""
        step = agent_run.step("everything")
        assert planned_cpus(expected.every, PODS.every) == observed(step, "affinity", PODS.every), step.explain

    def test_sandboxes_run_on_the_interim_sets(self, agent_run: GuestRun, expected: Expected) -> None:
        """Each pod's pause process runs on its pod shared pool, or the node shared pool: never an exclusive CPU."""
        step = agent_run.step("everything")
        assert interim_sets(expected.every, PODS.every) == sandboxes(step, "affinity", PODS.every), step.explain

    def test_sandbox_cpusets_written_for_managed_pods_only(self, agent_run: GuestRun, expected: Expected) -> None:
        """Sandboxes of managed pods hold their interim set in ``cpuset.cpus``; the Burstable pod's is untouched."""
        step = agent_run.step("everything")
        want = {**interim_sets(expected.every, PODS.every), pod_key(PODS.web): ""}
        assert want == sandboxes(step, "cpuset.cpus", PODS.every), step.explain

    def test_final_cpu_max(self, agent_run: GuestRun, expected: Expected) -> None:
        """Every container's ``cpu.max`` after the new pods: ``max`` for exclusive ones, the kubelet's otherwise."""
        step = agent_run.step("everything")
        assert expected_cpu_max(expected.every, PODS.every) == observed(step, "cpu.max", PODS.every), step.explain

    def test_final_pod_cgroups(self, agent_run: GuestRun, expected: Expected) -> None:
        """Pod cgroups narrowed as the node shared pool shrank; QoS slices hold the final shared pool."""
        step = agent_run.step("everything")
        shared = expected.every["node"]["shared_pool"]
        want = (expected_pod_cgroups(expected.every, PODS.every), {"burstable": shared, "besteffort": shared})
        assert want == (observed_pod_cgroups(step, PODS.every), step["qos_cpus"]), step.explain

    def test_metrics(self, agent_run: GuestRun, expected: Expected) -> None:
        """``/metrics``: ready, no kubelet pinning, no pinning error, containers by assignment type, CPUs held."""
        step = agent_run.step("metrics")
        samples = step["samples"]
        # The kubelet's meaning: CPUs of exclusive containers only; a pod's shared pool
        # inside its bubble is not counted.
        containers = [c for p in expected.every["pods"] for c in p["containers"]]
        held = sum(len(CPUSet.parse(c["cpus"])) for c in containers if c["pool"] == "exclusive")
        names = [f'podpin_containers{{assignment_type="{t}"}}' for t in ("node_exclusive", "pod_exclusive")]
        names += [f'podpin_containers{{assignment_type="{t}"}}' for t in ("pod_shared", "node_shared")]
        names += ["podpin_ready", "podpin_kubelet_pinning", "podpin_pinning_errors_total"]
        names += ["podpin_exclusive_cpu_allocation_count"]
        want = dict(zip(names, [3.0, 1.0, 2.0, 1.0, 1.0, 0.0, 0.0, float(held)], strict=True))
        assert want == {name: samples.get(name) for name in names}, step.explain

    def test_state_names_every_pod(self, agent_run: GuestRun) -> None:
        """``/state`` lists the five admitted pods."""
        step = agent_run.step("metrics")
        assert (200, sorted(s.uid for s in PODS.every)) == (step["state_status"], step["state_pods"]), step.explain


class TestRestart:
    """SIGKILL and a new start: the checkpoint is adopted and nothing moves."""

    def test_sigkill_ends_the_agent(self, agent_run: GuestRun) -> None:
        """The first long run ends by SIGKILL (exit status -9), not by itself."""
        step = agent_run.step("restart")
        assert -9 == step["killed_returncode"], step.explain

    def test_exclusive_cpusets_do_not_move(self, agent_run: GuestRun, expected: Expected) -> None:
        """Every exclusive container's ``cpuset.cpus`` before the kill, after the restart, and in the plan agree."""
        step = agent_run.step("restart")
        want = {
            f"{pod_key(s)}/{name}": planned_cpus(expected.every, (s,))[pod_key(s)][name] for s, name in PODS.exclusive
        }
        before = {f"{pod_key(s)}/{n}": step["before"][pod_key(s)][n]["cpuset.cpus"] for s, n in PODS.exclusive}
        after = {f"{pod_key(s)}/{n}": step["after"][pod_key(s)][n]["cpuset.cpus"] for s, n in PODS.exclusive}
        assert (want, want) == (before, after), step.explain

    def test_nothing_changes_in_the_kernel(self, agent_run: GuestRun) -> None:
        """Every cgroup file and affinity after the restart (and 2+ resyncs) equals what it was before the kill."""
        step = agent_run.step("restart")
        assert step["before"] == step["after"], step.explain

    def test_restart_logs_no_change(self, agent_run: GuestRun) -> None:
        """The restarted agent logs no admission, release, write, drift repair, error or state rebuild."""
        step = agent_run.step("restart")
        assert [] == step["changes"], step.explain


class TestLostCheckpoint:
    """SIGKILL, the checkpoint deleted, a new start: the state is rebuilt from the live cgroups."""

    def test_rebuilt_from_cgroups(self, agent_run: GuestRun) -> None:
        """It says the checkpoint is missing and rebuilt from the cgroups, and writes a new checkpoint."""
        step = agent_run.step("lost_checkpoint")
        states = [e["event"] for e in step["changes"] if e["event"].startswith("state.")]
        assert (["state.missing", "state.rebuilt_from_cgroups"], True) == (states, step["checkpoint_rewritten"]), (
            step.explain
        )

    def test_every_pod_readmitted(self, agent_run: GuestRun) -> None:
        """All five pods are admitted again (the running ones keep their CPUs, see the next test)."""
        step = agent_run.step("lost_checkpoint")
        admitted = sorted(f"{e['namespace']}/{e['pod']}" for e in step["changes"] if e["event"] == "pod.admitted")
        assert sorted(pod_key(s) for s in PODS.every) == admitted, step.explain

    def test_nothing_moves(self, agent_run: GuestRun) -> None:
        """No cgroup is written and every cgroup file and affinity is as before the kill."""
        step = agent_run.step("lost_checkpoint")
        writes = [e for e in step["changes"] if e["event"].startswith("cgroup.")]
        assert ([], step["before"]) == (writes, step["after"]), step.explain


class TestStop:
    """SIGTERM ends the agent cleanly and leaves the placement in place."""

    def test_sigterm_exits_zero_within_5_seconds(self, agent_run: GuestRun) -> None:
        """Exit status 0 within 5 s, after logging ``agent.stopped``."""
        step = agent_run.step("sigterm")
        assert (0, True, True) == (step["returncode"], step["seconds"] < 5.0, step["stopped_logged"]), step.explain

    def test_placement_survives_the_agent(self, agent_run: GuestRun) -> None:
        """After the agent exited, every cgroup and affinity is as it was while it ran."""
        step = agent_run.step("final")
        assert agent_run.step("lost_checkpoint")["after"] == step["observed"], step.explain


def _containers(observed: Mapping[str, Any], field: str) -> dict[str, Any]:
    """``pod/container`` -> one field, for every container scope the guest made (sandboxes included)."""
    return {
        f"{pod}/{name}": view[field]
        for pod, views in observed.items()
        for name, view in views.items()
        if name != "(pod)"
    }


class TestReset:
    """``podpin reset``, the way out: refused while the agent runs, then every CPU and every quota back."""

    def test_refused_while_the_agent_runs(self, agent_run: GuestRun) -> None:
        """With the agent running the reset exits 3, names the lock holder and changes nothing in the kernel."""
        step = agent_run.step("reset_refused")
        assert (3, True, step["before"]) == (
            step["returncode"],
            "another podpin process works on this node" in step["stderr"],
            step["after"],
        ), step.explain

    def test_exits_zero_and_keeps_the_checkpoint(self, agent_run: GuestRun) -> None:
        """Without capabilities, the reset restores the node (exit 0) and keeps the checkpoint for a re-install."""
        step = agent_run.step("reset")
        assert (0, "", True) == (step["returncode"], step["stderr"], step["checkpoint_kept"]), step.explain

    def test_every_process_runs_on_every_online_cpu(self, agent_run: GuestRun) -> None:
        """Every process (pinned, shared and sandbox alike) has every online CPU again: ``sched_getaffinity``."""
        step = agent_run.step("reset")
        affinity = _containers(step["observed"], "affinity")
        assert dict.fromkeys(affinity, step["online"]) == affinity, step.explain

    def test_every_cgroup_has_every_online_cpu_in_effect(self, agent_run: GuestRun) -> None:
        """``cpuset.cpus.effective`` of every pod, container and QoS slice is every online CPU."""
        step = agent_run.step("reset")
        effective = _containers(step["observed"], "effective")
        effective |= {f"{pod}/(pod)": views["(pod)"]["effective"] for pod, views in step["observed"].items()}
        effective |= {f"qos/{qos}": value for qos, value in step["qos_effective"].items()}
        assert dict.fromkeys(effective, step["online"]) == effective, step.explain

    def test_cpu_max_is_the_kubelets_again(self, agent_run: GuestRun) -> None:
        """Every container and pod cgroup holds the quota the kubelet set (``max`` lifted by podpin is gone)."""
        step = agent_run.step("reset")
        want = {pod_key(s): {c.name: c.kubelet_cpu_max for c in s.containers} for s in PODS.every}
        want_pods = {pod_key(s): s.kubelet_cpu_max for s in PODS.every}
        pods = {pod: views["(pod)"]["cpu.max"] for pod, views in step["observed"].items()}
        assert (want, want_pods) == (observed(step, "cpu.max", PODS.every), pods), step.explain

    def test_a_second_reset_writes_nothing(self, agent_run: GuestRun) -> None:
        """Idempotent: the second reset exits 0, says there is nothing to restore, and the kernel shows the same."""
        step = agent_run.step("reset_again")
        assert (0, True, agent_run.step("reset")["observed"]) == (
            step["returncode"],
            "nothing to restore" in step["stdout"],
            step["observed"],
        ), step.explain
