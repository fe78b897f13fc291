"""The guest node's watchdog without a guest: a still heartbeat kills QEMU's session (`sleep` stands in for
QEMU), every wait of the tests then fails at once naming the frozen guest, and a guest that froze before its Node
was Ready is booted once more."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from tests.cluster.controlplane import ControlPlane
from tests.cluster.node import GuestNode, NodeFrozenError
from tests.cluster.procs import ClusterError, liveness_checks, wait_for
from tests.vm import matrix
from tests.vm.scenario import HEARTBEAT_FILE

NO_PLANE = cast(ControlPlane, object())
"""The watchdog and the boot loop never touch the control plane."""


@pytest.fixture
def stand_in_qemu() -> Iterator[subprocess.Popen[bytes]]:
    """A process in a session of its own, as run-in-vm.sh is."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(5)


def _node(tmp_path: Path, heartbeat_age: float) -> GuestNode:
    node = GuestNode(NO_PLANE, tmp_path, watchdog_poll=0.02)
    node.shared.mkdir(parents=True)
    beat = node.shared / HEARTBEAT_FILE
    beat.write_text("12.5\n")
    stamp = time.time() - heartbeat_age
    os.utime(beat, (stamp, stamp))
    return node


class TestWatchdog:
    def test_still_heartbeat_kills_the_session(
        self, tmp_path: Path, stand_in_qemu: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A heartbeat older than VM_HEARTBEAT_STALL: QEMU's session is SIGKILLed and the seconds are kept."""
        monkeypatch.setenv("VM_HEARTBEAT_STALL", "30")
        node = _node(tmp_path, heartbeat_age=300.0)
        node.watch(stand_in_qemu, threading.Event())
        assert (-9, True) == (stand_in_qemu.wait(5), 300.0 <= (node.frozen_for or 0) < 330.0)

    def test_fresh_heartbeat_is_left_alone(
        self, tmp_path: Path, stand_in_qemu: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A heartbeat younger than the limit: the watchdog runs until told to stop and kills nothing."""
        monkeypatch.setenv("VM_HEARTBEAT_STALL", "30")
        node = _node(tmp_path, heartbeat_age=1.0)
        stop = threading.Event()
        threading.Timer(0.3, stop.set).start()
        node.watch(stand_in_qemu, stop)
        assert (None, None) == (stand_in_qemu.poll(), node.frozen_for)

    def test_a_guest_that_has_not_beaten_yet_is_left_alone(
        self, tmp_path: Path, stand_in_qemu: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No heartbeat file yet (the guest is booting): run-in-vm.sh's boot guard is the one that holds."""
        monkeypatch.setenv("VM_HEARTBEAT_STALL", "0")
        node = _node(tmp_path, heartbeat_age=0.0)
        (node.shared / HEARTBEAT_FILE).unlink()
        stop = threading.Event()
        threading.Timer(0.2, stop.set).start()
        node.watch(stand_in_qemu, stop)
        assert (None, None) == (stand_in_qemu.poll(), node.frozen_for)

    def test_the_watchdog_ends_with_qemu(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """QEMU exited by itself: the watchdog returns without a verdict."""
        monkeypatch.setenv("VM_HEARTBEAT_STALL", "0")
        node = _node(tmp_path, heartbeat_age=100.0)
        done = subprocess.Popen(["true"], start_new_session=True)
        done.wait(5)
        node.watch(done, threading.Event())
        assert node.frozen_for is None


class TestFrozenNodeEndsEveryWait:
    def test_check_alive_names_the_frozen_guest(self, tmp_path: Path) -> None:
        """Once frozen, check_alive raises with the seconds and where the guest's logs are."""
        node = GuestNode(NO_PLANE, tmp_path)
        node.check_alive()  # alive: nothing raised
        node.frozen_for = 251.4
        with pytest.raises(NodeFrozenError) as info:
            node.check_alive()
        assert str(info.value).startswith(
            f"the guest node froze: its heartbeat ({tmp_path / 'shared' / HEARTBEAT_FILE}) stood still for 251 s "
            "and QEMU was killed"
        )

    def test_wait_for_ends_at_once_on_a_failed_liveness_check(self, tmp_path: Path) -> None:
        """A registered node that froze ends a 60 s wait at its first poll; stopped, it no longer counts."""
        node = GuestNode(NO_PLANE, tmp_path)
        node.frozen_for = 300.0
        liveness_checks.append(node.check_alive)
        try:
            started = time.monotonic()
            with pytest.raises(NodeFrozenError):
                wait_for("a pod to run", lambda: False, timeout=60.0)
            took = time.monotonic() - started
        finally:
            node.stop()
        with pytest.raises(ClusterError, match="timed out after 0 s waiting for a pod to run"):
            wait_for("a pod to run", lambda: False, timeout=0.01, every=0.01)
        assert (True, []) == (took < 5.0, liveness_checks)


class TestBootOnceMore:
    def test_a_guest_frozen_before_ready_boots_again(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The first boot freezes: its shared directory is kept as shared-frozen-1 and the second boot's node is
        returned, alive."""
        boots: list[int] = []

        def boot(node: GuestNode) -> None:
            boots.append(len(boots) + 1)
            node.shared.mkdir(parents=True)
            (node.shared / "kubelet.log").write_text(f"boot {len(boots)}\n")
            if len(boots) == 1:
                node.frozen_for = 240.0
                node.check_alive()

        monkeypatch.setattr(matrix, "build", lambda _runtimes: None)
        monkeypatch.setattr(GuestNode, "_boot", boot)
        node = GuestNode(NO_PLANE, tmp_path).start()
        actual = (
            boots,
            (tmp_path / "shared-frozen-1" / "kubelet.log").read_text(),
            (node.shared / "kubelet.log").read_text(),
            node.frozen_for,
        )
        assert ([1, 2], "boot 1\n", "boot 2\n", None) == actual

    def test_two_frozen_boots_fail(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Both boots freeze: the second's NodeFrozenError is raised, nothing is booted a third time."""
        boots: list[int] = []

        def boot(node: GuestNode) -> None:
            boots.append(len(boots) + 1)
            node.shared.mkdir(parents=True)
            node.frozen_for = 240.0
            node.check_alive()

        monkeypatch.setattr(matrix, "build", lambda _runtimes: None)
        monkeypatch.setattr(GuestNode, "_boot", boot)
        with pytest.raises(NodeFrozenError):
            GuestNode(NO_PLANE, tmp_path).start()
        assert ([1, 2], True) == (boots, (tmp_path / "shared-frozen-1").is_dir())
