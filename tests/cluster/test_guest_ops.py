"""The guest node's lifecycle operations (guest_ops.py) without a guest: the checkpoints a fresh kubelet starts
without, the answers of the command channel, named processes (`sleep` stands in for the kubelet and the agent)."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster.guest_node import _run_request
from tests.cluster.guest_ops import KUBELET_STATE_FILES, NodeControls, clear_kubelet_state
from tests.vm.background import Background


@dataclass
class _FakeContainerd:
    restarts: int = 0

    @property
    def pid(self) -> int:
        return 1000 + self.restarts

    def restart(self) -> object:
        self.restarts += 1
        return None


def _controls(tmp_path: Path, kubelet_argv: list[str], healthy: bool = True) -> NodeControls:
    root = tmp_path / "kubelet"
    root.mkdir()
    kubelet = Background(kubelet_argv, log_path=tmp_path / "kubelet.log")
    return NodeControls(
        kubelet=kubelet, containerd=_FakeContainerd(), logs=tmp_path, kubelet_root=root, healthy=lambda: healthy
    )


def _ok(answer: dict[str, Any]) -> dict[str, Any]:
    assert (0, "") == (answer["rc"], answer["stderr"]), answer
    result: dict[str, Any] = json.loads(answer["stdout"])
    return result


class TestClearKubeletState:
    def test_removes_the_checkpoints_and_nothing_else(self, tmp_path: Path) -> None:
        """The decision checkpoints present are deleted and named; the kubelet's other files stay."""
        (tmp_path / "device-plugins").mkdir()
        for name in ("cpu_manager_state", "allocated_pods_state", "device-plugins/kubelet_internal_checkpoint"):
            (tmp_path / name).write_text("{}")
        (tmp_path / "config.yaml").write_text("kind: KubeletConfiguration")
        removed = clear_kubelet_state(tmp_path)
        assert ["cpu_manager_state", "allocated_pods_state", "device-plugins/kubelet_internal_checkpoint"] == removed
        assert [] == [name for name in KUBELET_STATE_FILES if (tmp_path / name).exists()]
        assert (tmp_path / "config.yaml").exists()


class TestRestartKubelet:
    def test_restart_with_cleared_state_starts_a_new_run(self, tmp_path: Path) -> None:
        """The running kubelet is stopped, its checkpoints deleted, a new run started and reported."""
        controls = _controls(tmp_path, ["sleep", "600"])
        first = controls.kubelet.start()
        (controls.kubelet_root / "memory_manager_state").write_text("{}")
        try:
            result = _ok(controls.handle("restart_kubelet", {"clear_state": True}))
            assert ["memory_manager_state"] == result["cleared"]
            assert first != result["pid"]
            assert controls.kubelet.running
            assert -signal.SIGTERM == controls.kubelet.runs[-1].returncode
        finally:
            controls.kubelet.close()

    def test_state_kept_unless_asked(self, tmp_path: Path) -> None:
        """Without clear_state the checkpoints stay (a restart in the middle of a scenario keeps decisions)."""
        controls = _controls(tmp_path, ["sleep", "600"])
        (controls.kubelet_root / "cpu_manager_state").write_text("{}")
        try:
            assert [] == _ok(controls.handle("restart_kubelet", {}))["cleared"]
            assert (controls.kubelet_root / "cpu_manager_state").exists()
        finally:
            controls.kubelet.close()

    def test_a_kubelet_that_exits_is_an_error_with_its_log(self, tmp_path: Path) -> None:
        """A kubelet that dies after its restart (a bad configuration) fails the operation, with its log tail."""
        controls = _controls(tmp_path, ["sh", "-c", "echo bad config; exit 1"], healthy=False)
        answer = controls.handle("restart_kubelet", {"timeout_s": 30})
        assert 1 == answer["rc"]
        assert "exited after its restart" in answer["stderr"]
        assert "bad config" in answer["stderr"]


class TestProcesses:
    def test_start_status_stop(self, tmp_path: Path) -> None:
        """A named process starts, is seen running, stops on SIGTERM, and its run is reported."""
        controls = _controls(tmp_path, ["true"])
        try:
            pid = _ok(controls.handle("start_process", {"name": "podpin", "argv": ["sleep", "600"]}))["pid"]
            assert {"running": True, "pid": pid, "runs": []} == _ok(
                controls.handle("process_status", {"name": "podpin"})
            )
            stopped = _ok(controls.handle("stop_process", {"name": "podpin"}))
            assert {"pid": pid, "returncode": -signal.SIGTERM} == stopped
            status = _ok(controls.handle("process_status", {"name": "podpin"}))
            assert (False, [pid]) == (status["running"], [run["pid"] for run in status["runs"]])
            assert (tmp_path / "podpin.log").exists()
        finally:
            controls.close()

    def test_kill(self, tmp_path: Path) -> None:
        """`kill` ends the process with SIGKILL (a crash)."""
        controls = _controls(tmp_path, ["true"])
        try:
            _ok(controls.handle("start_process", {"name": "helper", "argv": ["sleep", "600"]}))
            assert (
                -signal.SIGKILL == _ok(controls.handle("stop_process", {"name": "helper", "kill": True}))["returncode"]
            )
        finally:
            controls.close()

    def test_a_running_namesake_is_refused(self, tmp_path: Path) -> None:
        """Starting a name that runs is an error naming its pid; the first run is untouched."""
        controls = _controls(tmp_path, ["true"])
        try:
            pid = _ok(controls.handle("start_process", {"name": "podpin", "argv": ["sleep", "600"]}))["pid"]
            answer = controls.handle("start_process", {"name": "podpin", "argv": ["sleep", "600"]})
            assert (1, f"already running as pid {pid}") == (answer["rc"], answer["stderr"].split("is ")[-1])
            assert controls.processes["podpin"].running
        finally:
            controls.close()

    def test_bad_requests_are_named(self, tmp_path: Path) -> None:
        """Unknown operations, bad names, argv and env, and unknown processes get an error saying what was wrong."""
        controls = _controls(tmp_path, ["true"])
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("reboot", {}, "unknown operation 'reboot'"),
            ("start_process", {"name": "Bad Name", "argv": ["true"]}, "a process name is"),
            ("start_process", {"name": "x", "argv": []}, "argv must be a non-empty list"),
            ("start_process", {"name": "x", "argv": ["true"], "env": {"A": 1}}, "env must map names to strings"),
            ("stop_process", {"name": "never"}, "no process named never"),
        ]
        for op, args, words in cases:
            answer = controls.handle(op, args)
            assert (1, True) == (answer["rc"], words in answer["stderr"]), answer


def test_restart_containerd(tmp_path: Path) -> None:
    """containerd is restarted and its new pid reported."""
    controls = _controls(tmp_path, ["true"])
    assert {"pid": 1001} == _ok(controls.handle("restart_containerd", {}))


def test_channel_requests(tmp_path: Path) -> None:
    """The channel runs an argv to its end, hands an operation to the controls, and refuses non-mapping args."""
    controls = _controls(tmp_path, ["true"])
    assert {"rc": 0, "stdout": "hi\n", "stderr": ""} == _run_request({"argv": ["echo", "hi"]}, controls)
    assert 1 == _run_request({"op": "process_status", "args": {"name": "x"}}, controls)["rc"]
    refused = _run_request({"op": "start_process", "args": ["sleep"]}, controls)
    assert (1, "start_process: args must be a mapping, not ['sleep']") == (refused["rc"], refused["stderr"])
