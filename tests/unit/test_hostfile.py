"""The one opener for files under host directories podpin does not own (``agent/hostfile.py``)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from agent.hostfile import read_regular
from agent.kubelet_config import KubeletConfigError, read_kubelet_config
from agent.kubelet_state import read_kubelet_cpu_policy


def _planted(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "file"
    if kind == "symlink":
        (tmp_path / "target").write_text("{}")
        path.symlink_to(tmp_path / "target")
    elif kind == "dangling symlink":
        path.symlink_to(tmp_path / "nowhere")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    return path


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("symlink", errno.ELOOP), ("dangling symlink", errno.ELOOP), ("fifo", errno.EINVAL), ("directory", errno.EINVAL)],
)
def test_only_regular_files_are_read(tmp_path: Path, kind: str, expected: int) -> None:
    """A symlink is ELOOP (dangling too), a FIFO or directory EINVAL at once (no wait for a FIFO's writer)."""
    with pytest.raises(OSError) as raised:
        read_regular(_planted(tmp_path, kind), 100)
    assert expected == raised.value.errno


def test_a_device_is_refused() -> None:
    """``/dev/zero`` would never end: not a regular file."""
    with pytest.raises(OSError) as raised:
        read_regular("/dev/zero", 100)
    assert errno.EINVAL == raised.value.errno


def test_reads_are_bounded(tmp_path: Path) -> None:
    """At most ``max_bytes``: one more is EFBIG; exactly that many is read."""
    path = tmp_path / "file"
    path.write_bytes(b"x" * 101)
    with pytest.raises(OSError) as raised:
        read_regular(path, 100)
    assert (errno.EFBIG, b"x" * 101) == (raised.value.errno, read_regular(path, 101))


def test_kubelet_state_as_a_fifo_is_unreadable_and_pins_nothing(tmp_path: Path) -> None:
    """The kubelet's ``cpu_manager_state`` replaced by a FIFO: unreadable, so podpin writes no cpusets (safe)."""
    policy = read_kubelet_cpu_policy(_planted(tmp_path, "fifo"))
    assert (None, True, "not a regular file") == (policy.policy, policy.pinning, policy.reason.split("(")[1][:18])


def test_kubelet_config_as_a_symlink_is_refused(tmp_path: Path) -> None:
    """The kubelet's configuration file as a symlink: an error naming the file, never followed."""
    path = _planted(tmp_path, "symlink")
    with pytest.raises(KubeletConfigError) as raised:
        read_kubelet_config(path)
    assert str(raised.value).startswith(f"{path}: cannot read the kubelet's configuration: Too many levels")
