"""Coexistence: reading the kubelet's cpu_manager_state to know whether it pins CPUs itself."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.kubelet_state import KubeletPolicyReader, parse_kubelet_cpu_policy, read_kubelet_cpu_policy


@pytest.mark.parametrize(
    ("text", "policy", "pinning"),
    [
        ('{"policyName":"none","defaultCpuSet":"","checksum":1353318690}', "none", False),
        ('{"policyName":"static","defaultCpuSet":"0-1,6-7","entries":{"u":{"c":"2-5"}},"checksum":1}', "static", True),
        ('{"PolicyName":"Static","DefaultCPUSet":"0-7","checksum":1}', "Static", True),
        (
            json.dumps(
                {
                    "policyName": "static",
                    "data": json.dumps({"policyName": "none", "defaultCpuSet": ""}),
                    "dataChecksum": 1,
                }
            ),
            "none",
            False,
        ),
    ],
)
def test_policy_from_every_format(text: str, policy: str, pinning: bool) -> None:
    """V2/V3 top-level policyName, Go's case-insensitive keys, and the V4 data string are understood."""
    result = parse_kubelet_cpu_policy(text)
    assert (policy, pinning) == (result.policy, result.pinning)


def test_static_explains_what_to_do() -> None:
    """The reason tells the operator how to hand CPUs over to podpin."""
    reason = parse_kubelet_cpu_policy('{"policyName":"static"}', "/var/lib/kubelet/cpu_manager_state").reason
    assert reason.startswith("/var/lib/kubelet/cpu_manager_state: the kubelet runs cpuManagerPolicy static")
    assert "set cpuManagerPolicy: none" in reason


@pytest.mark.parametrize("text", ["{", "[]", '{"defaultCpuSet":""}', '{"policyName": 3}'])
def test_unreadable_state_is_treated_as_pinning(text: str) -> None:
    """When podpin cannot tell, it does not write (writing over a pinning kubelet would move CPUs)."""
    result = parse_kubelet_cpu_policy(text)
    assert (None, True) == (result.policy, result.pinning)


def test_missing_file_is_not_pinning(tmp_path: Path) -> None:
    """No mounted state file: the kubelet is not known to pin."""
    result = read_kubelet_cpu_policy(tmp_path / "cpu_manager_state")
    assert (None, False) == (result.policy, result.pinning)


def test_unreadable_file_is_pinning(tmp_path: Path) -> None:
    """A path that cannot be read (here a directory) is reported and treated as pinning."""
    (tmp_path / "cpu_manager_state").mkdir()
    result = read_kubelet_cpu_policy(tmp_path / "cpu_manager_state")
    assert (True, True) == (result.pinning, "cannot read" in result.reason)


def test_a_checkpoint_replaced_under_its_file_mount_stops_the_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chart mounts cpu_manager_state itself (issue 22, finding 9); the kubelet writes it by rename, after
    which the mount shows the old, unlinked file (no links left, emulated here): podpin writes nothing and says
    a restart is needed (the agent's /healthz then fails, so the kubelet restarts it onto the new file)."""

    path = tmp_path / "cpu_manager_state"
    path.write_text('{"policyName":"none","defaultCpuSet":"","checksum":1}')
    real_fstat = os.fstat

    def unlinked(fd: int) -> os.stat_result:
        info = list(real_fstat(fd))
        info[3] = 0  # st_nlink
        return os.stat_result(info)

    monkeypatch.setattr(os, "fstat", unlinked)
    policy = read_kubelet_cpu_policy(path)
    assert (None, True, True) == (policy.policy, policy.pinning, policy.replaced)
    assert "replaced on the node since the agent started" in policy.reason


def test_reader_parses_again_only_when_the_file_changed(tmp_path: Path) -> None:
    """The per-pass reader keeps its answer while the file is the same and reads a replaced file again."""
    path = tmp_path / "cpu_manager_state"
    path.write_text(json.dumps({"policyName": "none", "defaultCpuSet": "", "checksum": 1}))
    reader = KubeletPolicyReader()
    first, again = reader(path), reader(path)
    replacement = tmp_path / "next"
    replacement.write_text(json.dumps({"policyName": "static", "defaultCpuSet": "0-3", "checksum": 2}))
    replacement.replace(path)  # the kubelet writes a new file and renames it into place
    changed = reader(path)
    assert (True, "none", "static") == (first is again, first.policy, changed.policy)


def test_reader_reports_a_missing_file_every_time(tmp_path: Path) -> None:
    """A file that cannot be stat'ed is read each time: its removal and its return are both seen."""
    path = tmp_path / "cpu_manager_state"
    reader = KubeletPolicyReader()
    missing = reader(path)
    path.write_text(json.dumps({"policyName": "static", "defaultCpuSet": "0-3", "checksum": 2}))
    assert (False, "static") == (missing.pinning, reader(path).policy)


def test_reader_sees_the_mounted_file_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file mount keeps showing the old file after the kubelet's rename; only its link count drops to 0
    (emulated here). The link count is part of the reader's key: it reads again and says the file was replaced."""
    path = tmp_path / "cpu_manager_state"
    path.write_text(json.dumps({"policyName": "none", "defaultCpuSet": "", "checksum": 1}))
    reader = KubeletPolicyReader()
    before = reader(path)
    real_stat, real_fstat = os.stat, os.fstat

    def unlinked(result: os.stat_result) -> os.stat_result:
        info = list(result)
        info[3] = 0  # st_nlink
        return os.stat_result(info)

    monkeypatch.setattr(os, "stat", lambda p, *a, **k: unlinked(real_stat(p, *a, **k)))
    monkeypatch.setattr(os, "fstat", lambda fd: unlinked(real_fstat(fd)))
    after = reader(path)
    assert (False, True) == (before.replaced, after.replaced)
