"""The guest helpers on the real kernel: ``background`` (start/SIGKILL/restart a daemon), ``kubetree`` extras,
and how ``scenario`` + ``harness`` report a step that fails in the guest.

One VM boot (8 vCPUs, 2 NUMA nodes) runs ``scenario_guest_tools.py``. The pure naming helpers of
``kubetree`` are checked on the host, without a VM.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.vm import harness, kubetree
from tests.vm.harness import GuestRun, GuestStepError

tools = harness.scenario_fixture("scenario_guest_tools.py", args=("extra", "--mode=x"))

POD_55 = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod55555555_6666_4777_8888_999999999999.slice"


class TestBackground:
    """``Background`` does what end-to-end scenarios will do with ``podpin run``."""

    def test_waits_for_readiness_line(self, tools: GuestRun) -> None:
        """``wait_for_output`` returns the first line matching the pattern."""
        step = tools.step("background")
        assert "ready pid <pid1>" == step["first_ready"], step.explain

    def test_sigkill(self, tools: GuestRun) -> None:
        """``kill`` SIGKILLs the running pid and reaps it (returncode -9)."""
        step = tools.step("background")
        assert {"returncode": -9, "same_pid": True, "running": False} == step["killed"], step.explain

    def test_restart_gives_new_process_and_fresh_output(self, tools: GuestRun) -> None:
        """After a restart the pid differs and ``output()`` holds only the new run's lines."""
        step = tools.step("background")
        actual = (step["second_pid_differs"], step["second_ready"], step["second_output_only"])
        assert (True, "ready pid <pid2>", "ready pid <pid2>\n") == actual, step.explain

    def test_missing_output_times_out_with_message(self, tools: GuestRun) -> None:
        """Waiting for a line that never comes fails after the timeout, naming the pattern."""
        step = tools.step("background")
        expected = "/bin/sh: no line matching /never printed/ after 0.3 s; output tail:"
        assert expected == step["missing_output"], step.explain

    def test_stop_sends_sigterm(self, tools: GuestRun) -> None:
        """``stop`` sends SIGTERM; the daemon's trap exits 3; two runs are recorded."""
        step = tools.step("background")
        assert (3, 2) == (step["stopped_returncode"], step["runs"]), step.explain

    def test_log_has_one_header_per_run(self, tools: GuestRun) -> None:
        """The shared log file separates runs with ``=== run N: argv`` headers."""
        step = tools.step("background")
        argv = '/bin/sh -c echo "ready pid $$"; trap "echo got TERM; exit 3" TERM; while :; do sleep 0.05; done'
        assert [f"=== run 1: {argv}", f"=== run 2: {argv}"] == step["log_headers"], step.explain

    def test_daemon_log_reaches_the_host(self, tools: GuestRun) -> None:
        """The log written in the guest's work dir is readable on the host after the run."""
        lines = (tools.workdir / "daemon.log").read_text().splitlines()
        assert ["ready pid", "got TERM"] == [lines[3].rsplit(" ", 1)[0], lines[4]]

    def test_signal_to_stopped_daemon_is_an_error(self, tools: GuestRun) -> None:
        """Signalling a daemon that is not running raises ``BackgroundError``."""
        step = tools.step("background")
        assert "/bin/sh: not running, cannot send signal 15" == step["signal_when_stopped"], step.explain


class TestKubeTreeInGuest:
    """``kubetree`` parts not used by the kernel-facts scenario."""

    def test_besteffort_pod_path(self, tools: GuestRun) -> None:
        """A BestEffort pod slice lives in ``kubepods-besteffort.slice``."""
        step = tools.step("kubetree_extras")
        expected = (
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod44444444_5555_4666_8777_888888888888.slice"
        )
        assert expected == step["besteffort_pod"], step.explain

    def test_pod_and_container_values(self, tools: GuestRun) -> None:
        """``cpu.max`` of the pod and ``cpu.max`` + ``cpuset.cpus`` of the container are written as given."""
        step = tools.step("kubetree_extras")
        actual = (step["pod_cpu_max"], step["container_values"])
        assert ("150000 100000", ["50000 100000", "1-2"]) == actual, step.explain

    def test_fresh_cpu_stat(self, tools: GuestRun) -> None:
        """A new container cgroup with no task reports no throttling (its period timer may already have ticked once)."""
        step = tools.step("kubetree_extras")
        periods, throttled, throttled_usec = step["fresh_cpu_stat"]
        assert (True, 0, 0) == (periods <= 1, throttled, throttled_usec), step.explain

    def test_threaded_controllers_allow_a_process_in_a_pod_slice(self, tools: GuestRun) -> None:
        """With only cpuset+cpu (threaded controllers) enabled, a pod slice accepts a process: the guest does
        not enforce the no-internal-process rule a node with ``memory`` enabled would, so scenarios must put
        processes in container scopes themselves."""
        step = tools.step("kubetree_extras")
        assert "started" == step["process_in_pod_slice"], step.explain

    def test_process_in_missing_cgroup_is_an_error(self, tools: GuestRun) -> None:
        """Starting a process in a cgroup that does not exist raises, with the shell's reason."""
        step = tools.step("kubetree_extras")
        path = f"<root>/{POD_55}/cri-containerd-missing.scope"
        expected = (
            f"{path}: process exited with 97 before running: "
            f"kubetree-join: 1: cannot create {path}/cgroup.procs: Directory nonexistent"
        )
        assert expected == step["process_in_missing_cgroup"], step.explain

    def test_write_to_missing_cgroup_is_an_error(self, tools: GuestRun) -> None:
        """A write never creates a file: a missing cgroup gives ENOENT naming the file and value."""
        step = tools.step("kubetree_extras")
        expected = (
            f"<root>/{POD_55}/cri-containerd-missing.scope/cpu.max: cannot write 'max': No such file or directory"
        )
        assert expected == step["write_to_missing_cgroup"], step.explain

    def test_close_removes_the_tree(self, tools: GuestRun) -> None:
        """``close`` removes ``kubepods.slice`` and everything made below it."""
        step = tools.step("kubetree_extras")
        assert False is step["kubepods_left"], step.explain


class TestStepReporting:
    """A failing guest step explains itself on the host."""

    def test_wait_until_timeout_message(self, tools: GuestRun) -> None:
        """``wait_until`` names the condition, the timeout and the last value."""
        step = tools.step("wait_until_timeout")
        assert "the impossible: not true after 0.2 s (last value 0)" == step["message"], step.explain

    def test_failed_step_raises_with_traceback_values_and_stderr(self, tools: GuestRun) -> None:
        """``GuestRun.step`` of a failed step raises ``GuestStepError`` with the guest traceback, the values
        recorded before the failure and the guest stderr tail."""
        with pytest.raises(GuestStepError) as info:
            tools.step("deliberate_failure")
        lines = str(info.value).splitlines()
        expected = {
            "header": "guest step 'deliberate_failure' of scenario scenario_guest_tools (8cpu-2numa) failed:",
            "exception": True,
            "values": True,
            "stderr": True,
        }
        actual = {
            "header": lines[0],
            "exception": "ValueError: deliberate failure for the harness test" in lines,
            "values": "values recorded before the failure: {" in lines and ' "before_failure": "recorded"' in lines,
            "stderr": "guest stderr marker: about to fail on purpose" in lines,
        }
        assert expected == actual, str(info.value)

    def test_unknown_step(self, tools: GuestRun) -> None:
        """Asking for a step the scenario never ran names the steps it did run."""
        with pytest.raises(GuestStepError) as info:
            tools.step("no_such_step")
        expected = (
            "scenario scenario_guest_tools has no step 'no_such_step' (steps: ['background', 'deliberate_failure', "
            "'kubetree_extras', 'loopback', 'paths', 'wait_until_timeout'])"
        )
        assert expected == str(info.value).splitlines()[0]

    def test_unknown_value(self, tools: GuestRun) -> None:
        """Reading a value a step did not record raises, naming the step and the key."""
        step = tools.step("paths")
        with pytest.raises(GuestStepError) as info:
            step["nope"]
        assert "step 'paths' recorded no value 'nope'" == str(info.value).splitlines()[0]

    def test_steps_after_a_failure_still_run(self, tools: GuestRun) -> None:
        """A failed step does not stop the scenario: the next step ran and the results are complete."""
        step = tools.step("paths")
        assert (True, True) == (step["workdir_is_results_dir"], tools.results["complete"]), step.explain

    def test_fixture_args_reach_the_scenario(self, tools: GuestRun) -> None:
        """Arguments given to ``scenario_fixture`` arrive in ``Scenario.args`` after ``--results``."""
        step = tools.step("paths")
        assert ["extra", "--mode=x"] == step["args"], step.explain

    def test_meta(self, tools: GuestRun) -> None:
        """The guest saw 8 CPUs and ran the host's venv interpreter by its absolute path."""
        assert (8, os.path.abspath(sys.executable)) == (tools.meta["cpus_online"], tools.meta["python"])


class TestGuestEnvironment:
    """What end-to-end scenarios need from the guest besides cgroups."""

    def test_loopback_is_up(self, tools: GuestRun) -> None:
        """127.0.0.1 works in the guest (an API server emulator can listen there)."""
        step = tools.step("loopback")
        assert "ping" == step["received"], step.explain


class TestNaming:
    """Pure naming helpers (host only, no VM)."""

    @pytest.mark.parametrize(
        ("qos", "expected"),
        [
            ("guaranteed", "kubepods-pod0f1e2d3c_4b5a_4978_8695_a4b3c2d1e0f9.slice"),
            ("burstable", "kubepods-burstable-pod0f1e2d3c_4b5a_4978_8695_a4b3c2d1e0f9.slice"),
            ("besteffort", "kubepods-besteffort-pod0f1e2d3c_4b5a_4978_8695_a4b3c2d1e0f9.slice"),
        ],
    )
    def test_pod_slice_name(self, qos: kubetree.QoS, expected: str) -> None:
        """The kubelet's systemd slice name: QoS prefix, uid with ``-`` escaped to ``_``."""
        assert expected == kubetree.pod_slice_name("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9", qos)

    def test_pod_uid_must_be_a_uuid(self) -> None:
        """An upper-case or malformed uid is refused, quoting it."""
        with pytest.raises(kubetree.KubeTreeError) as info:
            kubetree.pod_slice_name("0F1E2D3C-4b5a-4978-8695-a4b3c2d1e0f9", "guaranteed")
        assert "pod uid '0F1E2D3C-4b5a-4978-8695-a4b3c2d1e0f9' is not a lower-case RFC 4122 UUID" == str(info.value)

    def test_container_scope_name(self) -> None:
        """containerd's scope name under the systemd driver."""
        assert f"cri-containerd-{'a1' * 32}.scope" == kubetree.container_scope_name("a1" * 32)

    def test_container_id_must_be_64_hex(self) -> None:
        """A short id is refused, quoting it."""
        with pytest.raises(kubetree.KubeTreeError) as info:
            kubetree.container_scope_name("abc")
        assert "container id 'abc' is not 64 lower-case hex digits" == str(info.value)


class FakeCpuStat:
    """A cgroup's ``cpu.stat`` in a directory on the host, advanced by a fake sleep, with a fake clock."""

    def __init__(self, root: Path, per_tick: dict[str, tuple[int, int, int, int]]) -> None:
        self.now = 0.0
        self.per_tick = per_tick
        self.paths: dict[str, Path] = {}
        self.totals: dict[str, tuple[int, ...]] = {}
        for name in per_tick:
            path = root / name
            path.mkdir()
            self.paths[name] = path
            self.totals[name] = (1000, 10, 1, 500)  # counters since creation: the window reports deltas
            self._write(name)

    def _write(self, name: str) -> None:
        usage, periods, throttled, throttled_usec = self.totals[name]
        text = f"usage_usec {usage}\nuser_usec 0\nsystem_usec 0\nnr_periods {periods}\n"
        (self.paths[name] / "cpu.stat").write_text(
            text + f"nr_throttled {throttled}\nthrottled_usec {throttled_usec}\n"
        )

    def sleep(self, seconds: float) -> None:
        """A tick: time passes and every cgroup's counters grow by its ``per_tick``."""
        self.now += seconds
        for name, step in self.per_tick.items():
            self.totals[name] = tuple(total + grow for total, grow in zip(self.totals[name], step, strict=True))
            self._write(name)


class TestCpuStatWindow:
    """``cpu_stat_window`` on fake ``cpu.stat`` files (host only, no VM)."""

    def test_fixed_window_when_the_condition_already_holds(self, tmp_path: Path) -> None:
        """The condition holds from the first tick: the window is ``seconds`` long, deltas and share per cgroup."""
        fake = FakeCpuStat(tmp_path, {"a": (30_000, 1, 1, 70_000), "b": (100_000, 0, 0, 0)})
        window = kubetree.cpu_stat_window(
            fake.paths, seconds=0.5, until=lambda d: d["a"].nr_throttled > 0, deadline=5.0,
            clock=lambda: fake.now, sleep=fake.sleep,
        )  # fmt: skip
        expected = {
            "elapsed_s": 0.5,
            "a": {"nr_periods": 5, "nr_throttled": 5, "throttled_usec": 350_000, "usage_share": 0.3},
            "b": {"nr_periods": 0, "nr_throttled": 0, "throttled_usec": 0, "usage_share": 1.0},
        }
        assert expected == window

    def test_grows_until_the_condition_holds(self, tmp_path: Path) -> None:
        """Nothing throttled in the first ``seconds``: the window goes on until the condition is first seen."""
        fake = FakeCpuStat(tmp_path, {"a": (5_000, 1, 0, 0)})
        seen: list[int] = []

        def throttled_from_tick_8(deltas: Mapping[str, kubetree.CpuStat]) -> bool:
            seen.append(deltas["a"].nr_periods)
            return deltas["a"].nr_periods >= 8

        window = kubetree.cpu_stat_window(
            fake.paths, seconds=0.5, until=throttled_from_tick_8, deadline=5.0, clock=lambda: fake.now,
            sleep=fake.sleep,
        )  # fmt: skip
        assert ([5, 6, 7, 8], 0.8, 8) == (seen, window["elapsed_s"], window["a"]["nr_periods"])

    def test_stops_at_the_deadline(self, tmp_path: Path) -> None:
        """A condition that never holds ends the window at ``deadline``; the result shows it was not met."""
        fake = FakeCpuStat(tmp_path, {"a": (5_000, 1, 0, 0)})
        window = kubetree.cpu_stat_window(
            fake.paths, seconds=0.5, until=lambda d: d["a"].nr_throttled > 0, deadline=2.0,
            clock=lambda: fake.now, sleep=fake.sleep,
        )  # fmt: skip
        assert (2.0, 0, 0.05) == (window["elapsed_s"], window["a"]["nr_throttled"], window["a"]["usage_share"])
