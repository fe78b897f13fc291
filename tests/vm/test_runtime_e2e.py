"""podpin against a real containerd + runc in the VM, the suite playing the kubelet over CRI, per runtime of the matrix.

The matrix (``matrix.py``): containerd 1.7 (Debian's) and containerd 2.2, 2.3, 2.4 built from their Go modules with
runc 1.5.3; ``PODPIN_RUNTIMES=ci`` (the default: 1.7 and 2.4), ``all``, or names. The built ones are built (or found
built) before the first boot. Per runtime, one VM boot (8 vCPUs, 2 NUMA nodes) runs ``scenario_runtime.py`` (see its
docstring for the steps). The
expected CPUs come from ``podpin plan`` run here on the host with the guest's topology and the agent's
configuration; everything else is what the kernel reported in the guest: the ``Cpus_allowed_list`` each
container printed as its first action, each cgroup's ``cpuset.cpus.effective``, and every value its
``cpuset.cpus`` held from the moment runc created it.

The three modes differ in one thing: what may tell podpin who a new container is. ``nri``: containerd's
NRI, which asks podpin for the container's CPUs before runc creates it; ``bundle``: containerd's OCI bundle
(``--runtime-root /``); ``api``: only the pod status, which the scenario publishes 2 s after each container
started (the API lag). Exclusive containers show the difference: in API mode they start on their pod's
interim set and are moved seconds later; in bundle mode they start on their own CPUs, podpin racing runc;
in NRI mode runc creates the cgroup with the CPUs podpin answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from agent.cpuset import CPUSet
from tests.vm import harness, matrix, ociimage
from tests.vm.harness import GuestRun, Step, VMConfig
from tests.vm.planexpect import interim_sets, planned_cpus, pod_key, run_plan
from tests.vm.runtimepods import STATUS_DELAY, cache_pod, doomed_pod, story_pod

_RUNTIMES = matrix.selected()


@pytest.fixture(scope="module", params=_RUNTIMES, ids=[r.name for r in _RUNTIMES])
def runtime(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> GuestRun:
    """One VM boot per runtime of the matrix running the whole scenario."""
    harness.require_vm()
    choice: matrix.RuntimeChoice = request.param
    matrix.build((choice,))
    workdir = tmp_path_factory.mktemp(f"vm-runtime-{choice.name}")
    return harness.run_scenario(
        harness.VM_TESTS / "scenario_runtime.py",
        VMConfig(cpus=8, nodes=2, timeout_s=1800),  # a hang guard: 7-15 min per runtime, by load
        workdir,
        args=[choice.name, str(matrix.runtimes_dir())],
        env={"VM_ENV": "PODPIN_VM_DIR"},
        stall_retries=1,  # a guest livelocked by TCG (harness.kernel_stalled, GuestFrozenError) boots once more
    )


MODES = ("api", "bundle", "nri")
SUFFIX = {"api": "a", "bundle": "b", "nri": "d"}
EXCLUSIVE = {("trading-engine", "database"), ("cache", "main")}
"""(pod name without its mode suffix, container) of the containers with exclusive CPUs."""


def _specs(mode: str) -> tuple[Any, Any]:
    return (story_pod(1, suffix=SUFFIX[mode]), cache_pod(2, suffix=SUFFIX[mode]))


def _base(pod: str) -> str:
    return pod.rsplit("-", 1)[0]


@pytest.fixture(scope="module")
def plans(runtime: GuestRun, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Mapping[str, Any]]:
    """Per mode: ``podpin plan`` on the host of that mode's two pods, with the guest's topology and config."""
    runtime.step("runtime")
    directory = tmp_path_factory.mktemp("runtime-plan")
    result = {}
    for mode in MODES:
        manifests = []
        for spec in _specs(mode):
            path = directory / f"{mode}-{spec.file_name}"
            path.write_text(yaml.safe_dump(spec.manifest(started=())))
            manifests.append(path)
        result[mode] = run_plan(runtime.workdir / "topology.json", runtime.workdir / "config.yaml", manifests)
    return result


def _records(step: Step, key: str = "records") -> dict[tuple[str, str], Mapping[str, Any]]:
    values = step[key]
    rows = values.values() if isinstance(values, Mapping) else values
    return {(_base(r["pod"]), r["container"]): r for r in rows}


def _planned(plan: Mapping[str, Any], mode: str) -> dict[tuple[str, str], str]:
    cpus = planned_cpus(plan, _specs(mode))
    return {(_base(pod.split("/")[1]), name): value for pod, names in cpus.items() for name, value in names.items()}


def test_containerd_serves_cri(runtime: GuestRun) -> None:
    """The matrix's containerd (1.7 from Debian 13 with Debian 12's runc, or 2.x built with runc 1.5.3) answers CRI v1
    in the guest, at its version; the images are local."""
    step = runtime.step("runtime")
    choice = matrix.MATRIX[step["matrix"]]
    actual = (step["runtime"].startswith(f"containerd {choice.version}"), step["runtime_api"], step["images"])
    assert (True, "v1", sorted(i.ref for i in ociimage.IMAGES)) == actual, step.explain


def test_no_deprecated_state_change_warning(runtime: GuestRun) -> None:
    """containerd logs no deprecated-StateChange warning for podpin: with NRI v0.12+ it calls the dedicated
    RunPodSandbox/StopPodSandbox/RemovePodSandbox/RemoveContainer, which podpin serves (earlier NRI sends them as
    StateChange, which is not deprecated there)."""
    step = runtime.step("runtime_log")
    assert [] == step["deprecated_state_change"], step.explain


@pytest.mark.parametrize("mode", MODES)
def test_bundle_exists_before_the_cgroup(runtime: GuestRun, mode: str) -> None:
    """containerd writes each container's ``config.json`` before runc creates its cgroup (what bundle naming uses)."""
    step = runtime.step(f"mode_{mode}")
    actual = {key: r["bundle_at_appearance"] for key, r in _records(step).items()}
    assert dict.fromkeys(actual, True) == actual, step.explain


@pytest.mark.parametrize("mode", MODES)
def test_agent_plans_what_podpin_plan_says(runtime: GuestRun, plans: dict[str, Any], mode: str) -> None:
    """The running agent's CPUs for each container equal ``podpin plan``'s for the same pods on this topology."""
    step = runtime.step(f"mode_{mode}")
    actual = {key: r["planned"] for key, r in _records(step).items()}
    assert _planned(plans[mode], mode) == actual, step.explain


@pytest.mark.parametrize("mode", MODES)
def test_final_effective_set_is_the_plan(runtime: GuestRun, plans: dict[str, Any], mode: str) -> None:
    """Once the statuses are in, every container's ``cpuset.cpus.effective`` is its planned set."""
    step = runtime.step(f"mode_{mode}")
    actual = {key: r["effective"] for key, r in _records(step, "after_status").items()}
    assert _planned(plans[mode], mode) == actual, step.explain


@pytest.mark.parametrize("mode", MODES)
def test_sandbox_runs_on_the_interim_set(runtime: GuestRun, plans: dict[str, Any], mode: str) -> None:
    """Each sandbox (pause) container runs on its pod's interim set: the pod shared pool, else the node's."""
    step = runtime.step(f"mode_{mode}")
    interim = interim_sets(plans[mode], _specs(mode))
    expected = {pod_key(spec).split("/")[1]: interim[pod_key(spec)] for spec in _specs(mode)}
    actual = {pod: values["sandbox_effective"] for pod, values in step["sandboxes"].items()}
    assert expected == actual, step.explain


def test_bundle_mode_every_container_starts_on_its_final_set(runtime: GuestRun) -> None:
    """Named from its bundle, each container's first ``Cpus_allowed_list`` already is its planned set."""
    step = runtime.step("mode_bundle")
    actual = {key: r["first_view"] for key, r in _records(step).items()}
    assert {key: r["planned"] for key, r in _records(step).items()} == actual, step.explain


def test_bundle_mode_pins_before_the_status_arrives(runtime: GuestRun) -> None:
    """Every container holds its planned set before its status is published, and the agent counts each pin as
    named by the bundle (none by the status)."""
    step = runtime.step("mode_bundle")
    after = _records(step, "after_status").values()
    early = {(r["pod"], r["container"]): r["window_ms"] < r["status_after_ms"] for r in after}
    pins = (
        step["metrics"]['podpin_container_pins_total{source="bundle"}'],
        step["metrics"]['podpin_container_pins_total{source="status"}'],
    )
    assert (dict.fromkeys(early, True), (4.0, 0.0)) == (early, pins), step.explain


def test_api_mode_exclusive_containers_start_on_the_interim_set(runtime: GuestRun, plans: dict[str, Any]) -> None:
    """Named only by the pod status, an exclusive container starts on its pod's interim set, not its own CPUs."""
    step = runtime.step("mode_api")
    interim = interim_sets(plans["api"], _specs("api"))
    by_pod = {pod_key(spec).split("/")[1]: interim[pod_key(spec)] for spec in _specs("api")}
    records = _records(step)
    actual = {key: records[key]["first_view"] for key in EXCLUSIVE}
    expected = {key: by_pod[f"{key[0]}-a"] for key in EXCLUSIVE}
    assert expected == actual, step.explain


def test_api_mode_pins_only_after_the_status(runtime: GuestRun) -> None:
    """Without bundles an exclusive container reaches its set only after its status (2 s after its start),
    and every pin is counted as named by the status."""
    step = runtime.step("mode_api")
    records = _records(step, "after_status")
    late = all(
        records[key]["window_ms"] >= max(STATUS_DELAY * 1000, records[key]["status_after_ms"]) for key in EXCLUSIVE
    )
    pins = (
        step["metrics"]['podpin_container_pins_total{source="bundle"}'],
        step["metrics"]['podpin_container_pins_total{source="status"}'],
    )
    assert (True, (0.0, 4.0)) == (late, pins), step.explain


def test_nri_mode_every_container_starts_on_its_final_set(runtime: GuestRun) -> None:
    """Answered through NRI's CreateContainer, each container's first ``Cpus_allowed_list`` is its planned set, and
    each pin is counted as named by NRI (none by the bundle, none by the status)."""
    step = runtime.step("mode_nri")
    records = _records(step, "after_status")
    first = {key: r["first_view"] for key, r in records.items()}
    pins = tuple(step["metrics"][f'podpin_container_pins_total{{source="{s}"}}'] for s in ("nri", "bundle", "status"))
    expected = ({key: r["planned"] for key, r in records.items()}, (4.0, 0.0, 0.0), 1.0)
    assert expected == (first, pins, step["metrics"]["podpin_nri_connected"]), step.explain


@pytest.mark.parametrize("mode", MODES)
def test_only_nri_puts_the_cpuset_in_the_containers_spec(runtime: GuestRun, mode: str) -> None:
    """In NRI mode containerd's OCI spec of each container carries podpin's CPUs (runc applies them when it creates
    the cgroup); in the other modes the spec has no cpuset and podpin writes the cgroup."""
    step = runtime.step(f"mode_{mode}")
    records = _records(step, "after_status")
    actual = {key: r["spec_cpus"] for key, r in records.items()}
    expected = {key: r["planned"] if mode == "nri" else None for key, r in records.items()}
    assert expected == actual, step.explain


def test_nri_mode_cgroup_never_holds_another_set(runtime: GuestRun) -> None:
    """In NRI mode an exclusive container's cgroup holds no set but its planned one: runc writes it at creation
    (before that the file is empty for an instant) and podpin never has to move it."""
    step = runtime.step("mode_nri")
    records = _records(step, "after_status")
    actual = {key: [value for value in records[key]["values"] if value] for key in EXCLUSIVE}
    expected = {key: [records[key]["planned"]] for key in EXCLUSIVE}
    assert expected == actual, step.explain


@pytest.mark.parametrize("mode", ["api", "bundle"])
def test_runtime_without_nri_podpin_says_so_and_pins(runtime: GuestRun, mode: str) -> None:
    """containerd's NRI off (no socket): podpin, NRI enabled, says once that it pins without it, never connects,
    and pins every container (as the mode's other tests show)."""
    step = runtime.step(f"mode_{mode}")
    events = [e["event"] for e in step["nri_events"]]
    actual = (events.count("nri.socket_absent"), "nri.synchronized" in events, step["metrics"]["podpin_nri_connected"])
    assert (1, False, 0.0) == actual, step.explain


class TestNRIContainerdRestart:
    """containerd SIGKILLed and restarted while podpin runs as its NRI plugin."""

    def test_reconnects_and_nothing_moves(self, runtime: GuestRun) -> None:
        """podpin registers with the new containerd (Synchronize again); the running containers keep their sets."""
        step = runtime.step("nri_restart_containerd")
        pids = step["containerd_pids"]
        actual = (step["before"] == step["after"], pids[0] != pids[1], step["synchronized"], step["agent_running"])
        assert (True, True, 1, True) == actual, step.explain

    def test_new_pod_is_answered_through_nri(self, runtime: GuestRun) -> None:
        """A pod started after the restart starts on its planned CPU, named by NRI."""
        step = runtime.step("nri_restart_containerd")
        [record] = step["late"]
        actual = (
            record["first_view"],
            record["effective"],
            step["metrics"]['podpin_container_pins_total{source="nri"}'],
        )
        assert (record["planned"], record["planned"], 5.0) == actual, step.explain


def test_nri_takes_the_runtimes_one_second_request_timeout(runtime: GuestRun) -> None:
    """containerd restarted with ``plugin_request_timeout = "1s"``: where its NRI says the timeout (v0.7+), podpin's
    connection reports the runtime's 1 s (its answers are bounded by 75 % of it); containerd 1.7's NRI v0.6 does not
    say it at Configure, and podpin reports it as unknown (None; each request's ttrpc deadline still bounds the answer).
    Either way the pod started afterwards was answered through NRI in time
    (``TestNRIContainerdRestart.test_new_pod_is_answered_through_nri``)."""
    step = runtime.step("nri_restart_containerd")
    choice = matrix.MATRIX[runtime.step("runtime")["matrix"]]
    expected = 1.0 if choice.tells_request_timeout else None
    assert expected == step["request_timeout"], step.explain


class TestNRIBigSynchronize:
    """A Synchronize larger than ttrpc's 4 MiB message (six pods with 900 KiB of annotations, podpin restarted)."""

    @staticmethod
    def _step(runtime: GuestRun) -> Step:
        step = runtime.step("nri_big_sync")
        if "skipped" in step.values:
            pytest.skip(step["skipped"])
        return step

    def test_arrives_in_chunks_and_is_adopted_whole(self, runtime: GuestRun) -> None:
        """containerd resends it in ``more`` chunks; podpin answers them and adopts every pod and container at the
        end: the runtime never refuses it ("plugin does not handle split sync requests") and podpin warns of
        nothing. The runtime runs with a 10 s request timeout here (told at Configure), which NRI gives the whole
        Synchronize (its oversized first attempt and every chunk); ``sync_seconds`` in the record shows how much of
        it went."""
        step = self._step(runtime)
        synced = step["synchronized"] or {}
        actual = (
            step["request_timeout"],
            synced.get("sync_chunks", 0) >= 2,
            synced.get("sync_bytes", 0) > 4 << 20,
            (synced.get("sync_pods"), synced.get("sync_containers")),
            step["split_refused"],
            step["nri_warnings"],
        )
        assert (10.0, True, True, (step["sandboxes"], step["containers"]), [], []) == actual, step.explain

    def test_nothing_moves(self, runtime: GuestRun) -> None:
        """Every pod cgroup, sandbox and container holds the same effective set after the restart."""
        step = self._step(runtime)
        assert step["before"] == step["after"], step.explain


class TestNRIAgentRestart:
    """podpin SIGKILLed and restarted while containerd's NRI is on: adoption through Synchronize."""

    def test_synchronize_names_every_running_container(self, runtime: GuestRun) -> None:
        """The new agent's Synchronize names every container the suite started (sandboxes apart)."""
        step = runtime.step("nri_restart_agent")
        assert [step["running"]] == step["adopted"], step.explain

    def test_nothing_moves(self, runtime: GuestRun) -> None:
        """Every pod cgroup, sandbox and container holds the same effective set after the restart."""
        step = runtime.step("nri_restart_agent")
        assert step["before"] == step["after"], step.explain


class TestNRIDeleteDuringCreate:
    """A pod deleted while its containers are being created, in NRI mode."""

    def test_released_without_errors(self, runtime: GuestRun) -> None:
        """The agent releases the pod, reports no cgroup or identity error, and keeps running."""
        step = runtime.step("nri_delete_during_create")
        actual = (doomed_pod(8).name in step["released"], step["errors"], step["agent_running"])
        assert (True, [], True) == actual, step.explain

    def test_its_cpus_serve_a_new_pod(self, runtime: GuestRun) -> None:
        """A new pod is pinned, from its first instruction, to a CPU the deleted pod had."""
        step = runtime.step("nri_delete_during_create")
        [fresh] = step["fresh"]
        doomed = CPUSet().union(*(CPUSet.parse(c) for c in step["planned"].values()))
        actual = (step["pod_cgroup_removed"], CPUSet.parse(fresh["planned"]) <= doomed, fresh["first_view"])
        assert (True, True, fresh["planned"]) == actual, step.explain


class TestAgentRestart:
    """podpin SIGKILLed and restarted while containers run (one of them named only by its bundle)."""

    def test_container_without_status_is_pinned(self, runtime: GuestRun) -> None:
        """The pod whose status is never published runs on its planned CPU from its first instruction."""
        step = runtime.step("restart_agent")
        [record] = step["no_status"]
        assert (record["planned"], record["planned"]) == (record["first_view"], record["effective"]), step.explain

    def test_nothing_moves(self, runtime: GuestRun) -> None:
        """Every pod cgroup, sandbox and container holds the same effective set after the restart."""
        step = runtime.step("restart_agent")
        assert step["before"] == step["after"], step.explain


class TestContainerdRestart:
    """containerd SIGKILLed and restarted while podpin runs."""

    def test_nothing_moves(self, runtime: GuestRun) -> None:
        """The running containers keep their sets; a new containerd process serves; the agent keeps running."""
        step = runtime.step("restart_containerd")
        pids = step["containerd_pids"]
        actual = (step["before"] == step["after"], pids[0] != pids[1], step["agent_running"])
        assert (True, True, True) == actual, step.explain

    def test_new_pod_is_named_from_its_bundle(self, runtime: GuestRun) -> None:
        """A pod started after the restart starts on its planned CPU (the new containerd's bundle names it)."""
        step = runtime.step("restart_containerd")
        [record] = step["late"]
        assert (record["planned"], record["planned"]) == (record["first_view"], record["effective"]), step.explain


class TestDeleteDuringCreate:
    """A pod deleted while the kubelet stand-in is still creating its containers."""

    def test_released_without_errors(self, runtime: GuestRun) -> None:
        """The agent releases the pod, reports no cgroup or identity error, and keeps running."""
        step = runtime.step("delete_during_create")
        actual = (doomed_pod(5).name in step["released"], step["errors"], step["agent_running"])
        assert (True, [], True) == actual, step.explain

    def test_its_cpus_serve_a_new_pod(self, runtime: GuestRun) -> None:
        """The pod cgroup is gone and a new pod is pinned to a CPU the deleted pod had."""
        step = runtime.step("delete_during_create")
        [fresh] = step["fresh"]
        doomed = CPUSet().union(*(CPUSet.parse(c) for c in step["planned"].values()))
        actual = (step["pod_cgroup_removed"], CPUSet.parse(fresh["planned"]) <= doomed, fresh["effective"])
        assert (True, True, fresh["planned"]) == actual, step.explain


class TestNRIResize:
    """An in-place resize (UpdateContainerResources, no cpuset) of a shared container after its pool shrank."""

    def test_the_pool_changed_after_creation(self, runtime: GuestRun) -> None:
        """The container was created on the whole shared pool and narrowed directly when another pod took a CPU."""
        step = runtime.step("nri_resize")
        created, narrowed = CPUSet.parse(step["created"]), CPUSet.parse(step["narrowed"])
        actual = (narrowed != created and narrowed <= created, step["narrowed"] == step["planned_before"])
        assert (True, True) == actual, step.explain

    def test_every_read_after_the_resize_is_the_planned_set(self, runtime: GuestRun) -> None:
        """containerd re-sends the creation-time cpuset with the resize; podpin's UpdateContainer answer replaces it,
        so every ``cpuset.cpus`` value read after the resize is the planned one, and the new quota lands."""
        step = runtime.step("nri_resize")
        planned = step["planned_after"]
        stale = [v for v in step["values_after_resize"] if v != planned]
        actual = (stale, step["final"], step["cpu_max"], step["errors"])
        assert ([], planned, "75000 100000", []) == actual, step.explain
