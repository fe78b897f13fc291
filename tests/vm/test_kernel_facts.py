"""The kernel facts podpin relies on, proven on a real cgroup v2 kernel: 8 vCPUs on 2 NUMA nodes.

One VM boot runs ``scenario_kernel_facts.py``, which only measures; the expected values are stated here.
See ``docs/design.md``, "cgroup v2 facts" and "cgroup values", for why each fact matters.
"""

from __future__ import annotations

from tests.vm import harness
from tests.vm.harness import GuestRun, VMConfig

LAYOUT = VMConfig(cpus=8, nodes=2)
facts = harness.scenario_fixture("scenario_kernel_facts.py", LAYOUT)

POD_G = "kubepods.slice/kubepods-pod0f1e2d3c_4b5a_4978_8695_a4b3c2d1e0f9.slice"
BURSTABLE = "kubepods.slice/kubepods-burstable.slice"
POD_B = f"{BURSTABLE}/kubepods-burstable-pod11111111_2222_4333_8444_555555555555.slice"


class TestLayout:
    """The guest's /sys shows the machine the qemu arguments describe."""

    def test_numa_node_cpulists_match_qemu_arguments(self, facts: GuestRun) -> None:
        """Node 0 holds CPUs 0-3 and node 1 CPUs 4-7, as ``-numa node,cpus=`` says."""
        step = facts.step("sysfs_layout")
        assert {"0": "0-3", "1": "4-7"} == LAYOUT.node_cpulists() == step["node_cpulists"], step.explain

    def test_all_cpus_online(self, facts: GuestRun) -> None:
        """All 8 vCPUs are online and the scenario may run on all of them."""
        step = facts.step("sysfs_layout")
        assert ("0-7", "0-7") == (step["online"], step["affinity_of_scenario"]), step.explain

    def test_one_socket_per_node(self, facts: GuestRun) -> None:
        """``-smp 8,sockets=2`` puts CPUs 0-3 in package 0 and 4-7 in package 1."""
        step = facts.step("sysfs_layout")
        expected = {str(c): "0" if c < 4 else "1" for c in range(8)}
        assert expected == step["packages"], step.explain

    def test_one_thread_per_core(self, facts: GuestRun) -> None:
        """Without ``VM_THREADS`` every core has a single thread (no SMT siblings)."""
        step = facts.step("sysfs_layout")
        assert {str(c): str(c) for c in range(8)} == step["core_cpus"], step.explain

    def test_distances(self, facts: GuestRun) -> None:
        """qemu's default SLIT: 10 local, 20 remote."""
        step = facts.step("sysfs_layout")
        assert {"0": ["10", "20"], "1": ["20", "10"]} == step["node_distances"], step.explain

    def test_podpin_topology_sees_two_nodes_of_four_cpus(self, facts: GuestRun) -> None:
        """``podpin topology --sysfs-root /sys --output json``, run in the guest as ``background.podpin()`` builds
        it (the venv interpreter, ``-m agent``), reports 2 nodes x 4 online CPUs."""
        step = facts.step("podpin_topology")
        actual = (step["available"], step["returncode"], step["numa_nodes"], step["cpus_online"])
        assert (True, 0, {"0": "0-3", "1": "4-7"}, 8) == actual, step.explain

    def test_root_enables_cpuset_and_cpu(self, facts: GuestRun) -> None:
        """The guest's init enabled exactly ``cpuset cpu`` at the cgroup2 root, like a systemd host delegating both."""
        step = facts.step("root_cgroup")
        assert ["cpuset", "cpu"] == step["subtree_control"], step.explain


class TestKubeTree:
    """``kubetree`` builds the tree the kubelet (systemd driver) and containerd would."""

    def test_cgroup_paths(self, facts: GuestRun) -> None:
        """QoS slices, a Guaranteed and a Burstable pod slice, and one containerd scope in each."""
        step = facts.step("kubetree_shape")
        expected = sorted(
            [
                "kubepods.slice/kubepods-besteffort.slice",
                BURSTABLE,
                POD_B,
                f"{POD_B}/cri-containerd-{'cd' * 32}.scope",
                POD_G,
                f"{POD_G}/cri-containerd-{'ab' * 32}.scope",
            ]
        )
        assert expected == step["cgroups"], step.explain

    def test_controllers_enabled_down_to_pods(self, facts: GuestRun) -> None:
        """``cpuset cpu`` are in ``cgroup.subtree_control`` from the root down to each pod slice."""
        step = facts.step("kubetree_shape")
        expected = dict.fromkeys(("/", "kubepods.slice", BURSTABLE, POD_B, POD_G), "cpuset cpu")
        assert expected == step["subtree_control"], step.explain

    def test_container_has_cpu_and_cpuset_files(self, facts: GuestRun) -> None:
        """A container scope has the 6.1 cpu and cpuset interface files (no ``cpuset.cpus.exclusive``)."""
        step = facts.step("kubetree_shape")
        expected = [
            "cpu.idle",
            "cpu.max",
            "cpu.max.burst",
            "cpu.pressure",
            "cpu.stat",
            "cpu.weight",
            "cpu.weight.nice",
            "cpuset.cpus",
            "cpuset.cpus.effective",
            "cpuset.cpus.partition",
            "cpuset.mems",
            "cpuset.mems.effective",
        ]
        assert expected == step["container_files"], step.explain

    def test_process_runs_in_its_container_cgroup(self, facts: GuestRun) -> None:
        """A started process is in the container scope (``/proc/<pid>/cgroup``)."""
        step = facts.step("kubetree_shape")
        assert f"{POD_G}/cri-containerd-{'ab' * 32}.scope" == step["process_cgroup"], step.explain

    def test_teardown_removes_everything(self, facts: GuestRun) -> None:
        """``KubeTree.close`` kills its processes and removes every cgroup it made, ``kubepods.slice`` included."""
        step = facts.step("teardown")
        assert False is step["kubepods_left"], step.explain


class TestCpusetSemantics:
    """How ``cpuset.cpus`` and ``cpuset.cpus.effective`` relate (``docs/design.md``, "cgroup v2 facts")."""

    def test_child_outside_parent_is_accepted_but_not_effective(self, facts: GuestRun) -> None:
        """Parent 0-1, child writes 2-3: the write succeeds, the file says 2-3, effective and affinity are 0-1."""
        step = facts.step("child_outside_parent")
        actual = (step["child_cpus"], step["child_effective"], step["affinity"])
        assert ("2-3", "0-1", "0-1") == actual, step.explain

    def test_effective_follows_parent(self, facts: GuestRun) -> None:
        """The parent widening to 0-3 makes the child's 2-3 effective; moving the parent to 5 makes it 5."""
        step = facts.step("child_outside_parent")
        actual = (
            step["child_effective_after_parent_widened"],
            step["affinity_after_parent_widened"],
            step["child_effective_after_parent_moved_away"],
        )
        assert ("2-3", "2-3", "5") == actual, step.explain

    def test_cpu_that_does_not_exist_is_refused(self, facts: GuestRun) -> None:
        """Writing CPU 99 on an 8-CPU guest fails with ERANGE."""
        step = facts.step("child_outside_parent")
        assert "Numerical result out of range" == step["invalid_cpu_write"], step.explain

    def test_newline_write_unpins_a_cgroup_without_tasks(self, facts: GuestRun) -> None:
        """``echo "" > cpuset.cpus`` on a cgroup without tasks succeeds: the file is empty, effective = parent's 0-5."""
        step = facts.step("empty_write")
        actual = (
            step["unpopulated_newline_write"],
            step["unpopulated_newline_cpus"],
            step["unpopulated_newline_effective"],
        )
        assert ("ok", "", "0-5") == actual, step.explain

    def test_task_joining_an_unpinned_cgroup_gets_the_parents_cpus(self, facts: GuestRun) -> None:
        """A process entering the un-pinned cgroup may run on all of the parent's CPUs."""
        step = facts.step("empty_write")
        assert "0-5" == step["affinity_of_task_joining_unpinned"], step.explain

    def test_newline_write_is_refused_with_tasks(self, facts: GuestRun) -> None:
        """With a task inside, the empty write fails with ENOSPC and the pinning (file and affinity) stays."""
        step = facts.step("empty_write")
        actual = (step["populated_newline_write"], step["populated_cpus_after"], step["populated_affinity_after"])
        assert ("No space left on device", "2-3", "2-3") == actual, step.explain

    def test_zero_byte_write_changes_nothing(self, facts: GuestRun) -> None:
        """A zero-byte ``write(2)`` returns success without reaching the parser: the value stays 2-3."""
        step = facts.step("empty_write")
        actual = (step["unpopulated_zero_byte_write"], step["unpopulated_zero_byte_cpus"])
        assert ("ok", "2-3") == actual, step.explain

    def test_affinity_follows_effective_cpuset(self, facts: GuestRun) -> None:
        """After each write, a running process's ``sched_getaffinity`` equals its cgroup's effective cpus."""
        step = facts.step("affinity_follows_cpuset")
        expected = {v: {"effective": v, "affinity": v} for v in ("1-2", "4-6", "0,7", "3")}
        assert ("0-7", expected) == (step["unpinned"], step["after_write"]), step.explain

    def test_self_pinned_task_is_reset_only_by_its_own_cpuset_change(self, facts: GuestRun) -> None:
        """A task pinned to CPU 3 keeps it across a same-value rewrite and a parent change; its own change resets it."""
        step = facts.step("affinity_follows_cpuset")
        actual = (
            step["self_pinned"],
            step["self_pinned_after_same_value"],
            step["self_pinned_after_parent_widened"],
            step["self_pinned_after_own_change"],
        )
        assert ("3", "3", "3", "2-6") == actual, step.explain


class TestCpuMax:
    """``cpu.max`` formats and CFS throttling."""

    def test_max_round_trip(self, facts: GuestRun) -> None:
        """``max 100000`` written reads back as ``max 100000`` (also the default of a new cgroup)."""
        step = facts.step("cpu_max_formats")
        assert ("max 100000", "max 100000") == (step["initial"], step["after 'max 100000'"]), step.explain

    def test_formats(self, facts: GuestRun) -> None:
        """A quota alone keeps the period; ``max`` alone gives ``max 100000``; quota and period read back as written."""
        step = facts.step("cpu_max_formats")
        expected = {
            "initial": "max 100000",
            "after '20000 100000'": "20000 100000",
            "after 'max 100000'": "max 100000",
            "after '50000'": "50000 100000",
            "after 'max'": "max 100000",
            "after '30000 50000'": "30000 50000",
        }
        assert expected == dict(step.values), step.explain

    def test_quota_throttles_and_max_does_not(self, facts: GuestRun) -> None:
        """A busy process under ``20000 100000`` is throttled (nr_throttled grows); one under ``max`` never is."""
        step = facts.step("throttling")
        actual = {name: step[name]["nr_throttled"] > 0 for name in ("limited", "unlimited")}
        assert {"limited": True, "unlimited": False} == actual, step.explain

    def test_quota_caps_usage(self, facts: GuestRun) -> None:
        """The throttled process ran and used about its 20% quota: at most 35% of one CPU over the window.

        The window is 1.5 s or longer, until the first throttled period (a starved guest may need more).
        """
        step = facts.step("throttling")
        assert 0 < step["limited"]["usage_share"] <= 0.35, step.explain


class TestInotify:
    """The agent's watcher: inotify on cgroup2 directories."""

    def test_mkdir_of_child_cgroup_raises_in_create(self, facts: GuestRun) -> None:
        """IN_CREATE|IN_ISDIR fires on a watched cgroup2 dir for a new pod slice and a new container scope."""
        step = facts.step("inotify_events")
        expected = [
            {
                "watch": "kubepods.slice",
                "mask": "0x40000100",
                "in_create": True,
                "is_dir": True,
                "name": "kubepods-pod22222222_3333_4444_8555_666666666666.slice",
            },
            {
                "watch": "pod",
                "mask": "0x40000100",
                "in_create": True,
                "is_dir": True,
                "name": f"cri-containerd-{'ef' * 32}.scope",
            },
        ]
        assert expected == step["create_events"], step.explain

    def test_rmdir_of_child_cgroup_raises_in_delete(self, facts: GuestRun) -> None:
        """IN_DELETE|IN_ISDIR fires on the watched parent when a child cgroup is removed."""
        step = facts.step("inotify_events")
        expected = [
            {"mask": "0x40000200", "in_delete": True, "is_dir": True, "name": f"cri-containerd-{'ef' * 32}.scope"},
            {
                "mask": "0x40000200",
                "in_delete": True,
                "is_dir": True,
                "name": "kubepods-pod22222222_3333_4444_8555_666666666666.slice",
            },
        ]
        assert expected == step["delete_events"], step.explain

    def test_create_event_latency(self, facts: GuestRun) -> None:
        """A blocked watcher wakes within milliseconds of mkdir (median < 20 ms, max < 500 ms even under TCG)."""
        step = facts.step("inotify_events")
        latency = step["latency_ms"]
        actual = {"median < 20 ms": latency["median"] < 20, "max < 500 ms": latency["max"] < 500}
        assert {"median < 20 ms": True, "max < 500 ms": True} == actual, step.explain

    def test_cgroup_events_modified_when_populated_changes(self, facts: GuestRun) -> None:
        """``cgroup.events`` raises IN_MODIFY when the first task enters and the last leaves (populated 0->1->0)."""
        step = facts.step("populated_event")
        actual = (
            step["before"][0],
            step["modify_on_enter"],
            step["after_enter"][0],
            step["modify_on_exit"],
            step["after_exit"][0],
        )
        assert ("populated 0", True, "populated 1", True, "populated 0") == actual, step.explain

    def test_container_dir_watch_reports_another_process_writing_cpu_max(self, facts: GuestRun) -> None:
        """A watch with mask IN_MODIFY on a container cgroup directory reports ``cpu.max`` by name when another
        process writes it (as runc does after podpin pinned the container), also for a rewrite of the same value
        (podpin's own writes are seen too)."""
        step = facts.step("file_modify_event")
        event = [{"name": "cpu.max", "in_modify": True}]
        actual = (step["on_quota_write"], step["cpu_max_after"], step["on_same_value_write"], step["on_max_write"])
        assert (event, "100000 100000", event, event) == actual, step.explain

    def test_rmdir_of_a_watched_cgroup_keeps_the_watch_until_removed(self, facts: GuestRun) -> None:
        """rmdir of a watched cgroup2 directory delivers nothing to its own watch (no IN_DELETE_SELF, no
        IN_IGNORED: the watch holds the inode), so the watch stays until ``inotify_rm_watch``, which then gives
        IN_IGNORED: the agent's watcher removes a container's watch when its pod's watch reports it gone."""
        step = facts.step("file_modify_event")
        actual = (
            step["masks_after_rmdir"],
            step["ignored_on_rmdir"],
            step["rm_watch_after_rmdir"],
            step["ignored_after_rm_watch"],
        )
        assert ([], False, 0, True) == actual, step.explain


class TestWithoutCapabilities:
    """The DaemonSet needs no privileged mode or capability to write cgroup files."""

    def test_process_has_uid_0_and_no_capability(self, facts: GuestRun) -> None:
        """``setpriv --bounding-set=-all --inh-caps=-all --ambient-caps=-all`` leaves uid 0 with empty sets."""
        step = facts.step("no_capabilities")
        expected = {
            "Uid": "0",
            "CapEff": "0000000000000000",
            "CapPrm": "0000000000000000",
            "CapBnd": "0000000000000000",
        }
        assert expected == step["status"], step.explain

    def test_writes_cpuset_and_cpu_max(self, facts: GuestRun) -> None:
        """Both writes succeed and read back: cpuset.cpus 1-2, cpu.max 30000 100000."""
        step = facts.step("no_capabilities")
        actual = (step["returncode"], step["writes"], step["cpus_after"], step["cpu_max_after"])
        assert (0, ["cpuset-ok", "cpumax-ok"], "1-2", "30000 100000") == actual, step.explain
