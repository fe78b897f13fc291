"""Is the kubelet pinning CPUs itself? Read its ``cpu_manager_state`` to know.

podpin only works next to a kubelet running ``cpuManagerPolicy: none``: two
writers of the same cpusets would fight. The kubelet records its policy in the
checkpoint (``policyName``; in the 1.37 V4 format inside the ``data`` string),
and Go's JSON decoder matches keys case-insensitively, so any casing is
accepted. A missing file means "no kubelet state mounted" (not pinning); an
unreadable or unparsable file is reported as unknown and treated as pinning,
because writing over a kubelet that pins would move exclusive CPUs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.hostfile import open_regular, read_regular_fd
from agent.safeparse import MAX_DOCUMENT_BYTES

__all__ = ["KubeletCPUPolicy", "KubeletPolicyReader", "read_kubelet_cpu_policy", "parse_kubelet_cpu_policy"]


@dataclass(frozen=True, slots=True)
class KubeletCPUPolicy:
    """What the kubelet's checkpoint says: ``policy`` (None if unknown) and whether podpin must stand back."""

    policy: str | None
    pinning: bool
    reason: str
    replaced: bool = False
    """The file was replaced on the host after it was mounted: the mount shows the old one (no links left)."""


def _key(document: Mapping[str, Any], name: str) -> Any:
    for key, value in document.items():
        if key.lower() == name.lower():
            return value
    return None


def parse_kubelet_cpu_policy(text: str, path: str = "cpu_manager_state") -> KubeletCPUPolicy:
    """Read the policy out of the checkpoint text (V1-V4 formats)."""
    try:
        document = json.loads(text)
        data = _key(document, "data") if isinstance(document, Mapping) else None
        if isinstance(data, str):
            document = json.loads(data)
    except (ValueError, TypeError, RecursionError) as err:  # RecursionError: brackets nested beyond the C stack
        return KubeletCPUPolicy(
            None, True, f"{path}: cannot parse the kubelet CPU manager state ({err}); not writing cpusets to be safe"
        )
    policy = _key(document, "policyName") if isinstance(document, Mapping) else None
    if not isinstance(policy, str):
        return KubeletCPUPolicy(
            None, True, f"{path}: no policyName in the kubelet CPU manager state; not writing cpusets to be safe"
        )
    if policy.lower() == "static":
        return KubeletCPUPolicy(
            policy,
            True,
            f"{path}: the kubelet runs cpuManagerPolicy static and pins CPUs itself; set cpuManagerPolicy: none "
            "(drain the node, delete the state file, restart the kubelet) for podpin to take over",
        )
    return KubeletCPUPolicy(policy, False, f"{path}: the kubelet runs cpuManagerPolicy {policy}")


def read_kubelet_cpu_policy(path: Path) -> KubeletCPUPolicy:
    """The kubelet's CPU policy from its checkpoint file; a missing file is not pinning."""
    try:
        fd = open_regular(path)  # no symlink, FIFO or device (agent/hostfile.py)
        try:
            links = os.fstat(fd).st_nlink
            text = read_regular_fd(fd, MAX_DOCUMENT_BYTES).decode()
        finally:
            os.close(fd)
    except FileNotFoundError:
        return KubeletCPUPolicy(None, False, f"{path}: not present (no kubelet CPU manager state mounted)")
    except OSError as err:
        return KubeletCPUPolicy(
            None,
            True,
            (
                f"{path}: cannot read the kubelet CPU manager state ({err.strerror or err}); not writing cpusets to be "
                "safe"
            ),
        )
    except UnicodeDecodeError as err:
        return KubeletCPUPolicy(
            None,
            True,
            f"{path}: cannot parse the kubelet CPU manager state (not UTF-8 text: {err.reason} at byte "
            f"{err.start}); not writing cpusets to be safe",
        )
    if links == 0:
        # The chart mounts the file itself; the kubelet writes it by rename, so after a write the mount still
        # shows the unlinked old file. Nothing is written until a restart mounts the new one (/healthz fails).
        return KubeletCPUPolicy(
            None,
            True,
            f"{path}: replaced on the node since the agent started (the mount shows the old file); not writing "
            "cpusets until the agent restarts onto the new one",
            replaced=True,
        )
    return parse_kubelet_cpu_policy(text, str(path))


class KubeletPolicyReader:
    """:func:`read_kubelet_cpu_policy` for every pass, read and parsed again only when the file changed.

    Every reconcile pass asks whether the kubelet pins CPUs itself; on a quiet node its checkpoint does not
    change for days. The answer is kept with the file's identity (inode, link count, size, mtime and ctime in
    ns): the kubelet replaces the file on every checkpoint, so any write changes one of them, and a mounted file
    the kubelet has since replaced (no links left) is read again and said to be replaced. A file that cannot be
    stat'ed (missing, unreadable) is read every time, so its error is never stale.
    """

    def __init__(self) -> None:
        self._key: tuple[str, int, int, int, int, int] | None = None
        self._policy: KubeletCPUPolicy | None = None

    def __call__(self, path: Path) -> KubeletCPUPolicy:
        """The policy in ``path``."""
        try:
            st = os.stat(path)
        except OSError:
            self._key = self._policy = None
            return read_kubelet_cpu_policy(path)
        key = (str(path), st.st_ino, st.st_nlink, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if key != self._key or self._policy is None:
            self._policy = read_kubelet_cpu_policy(path)
            self._key = key
        return self._policy
