"""Guest side: where containers run, as their processes see it and as their cgroups say (issue 17's harness).

Run in the guest through the command channel: ``python -m tests.cluster.guest_observe containers <id>...`` prints
one JSON object mapping each CRI container id to ``{cpus, mems, cgroup_cpus, cgroup_mems}`` (or ``{error}``): the
init process of the container (``init.pid`` in its runc bundle under containerd's state) and its
``Cpus_allowed_list`` / ``Mems_allowed_list``, and its cgroup v2 directory (``/proc/<pid>/cgroup``) and
``cpuset.cpus.effective`` / ``cpuset.mems.effective``. ``python -m tests.cluster.guest_observe http <url>`` prints
the status and body of a GET on the guest's loopback (podpin's ``/readyz``). Reading is all it does.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["BUNDLES", "observe", "status_field"]

BUNDLES = Path("/run/containerd/io.containerd.runtime.v2.task/k8s.io")
"""containerd's runc bundles of the CRI namespace (tests/vm/containerd.py's state directory)."""


def status_field(status: str, key: str) -> str:
    """One field of a /proc/<pid>/status text (``Cpus_allowed_list`` ...).

    Raises:
        KeyError: the field is absent.
    """
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return value.strip()
    raise KeyError(key)


def _cgroup_dir(proc: Path, cgroup_root: Path) -> Path:
    for line in (proc / "cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return cgroup_root / line[3:].lstrip("/")
    raise ValueError(f"{proc}/cgroup: no cgroup v2 line")


def observe(
    container_id: str,
    *,
    bundles: Path = BUNDLES,
    proc_root: Path = Path("/proc"),
    cgroup_root: Path = Path("/sys/fs/cgroup"),
) -> dict[str, Any]:
    """What one container's init process and cgroup say (``{error}`` naming the file that could not be read)."""
    try:
        pid = (bundles / container_id / "init.pid").read_text().strip()
        proc = proc_root / pid
        status = (proc / "status").read_text()
        cgroup = _cgroup_dir(proc, cgroup_root)
        return {
            "pid": int(pid),
            "cpus": status_field(status, "Cpus_allowed_list"),
            "mems": status_field(status, "Mems_allowed_list"),
            "cgroup_cpus": (cgroup / "cpuset.cpus.effective").read_text().strip(),
            "cgroup_mems": (cgroup / "cpuset.mems.effective").read_text().strip(),
        }
    except (OSError, KeyError, ValueError) as err:
        return {"error": f"{type(err).__name__}: {err}"}


def _http(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return {"status": answer.status, "body": answer.read().decode(errors="replace")}
    except urllib.error.HTTPError as err:
        return {"status": err.code, "body": err.read().decode(errors="replace")}
    except OSError as err:
        return {"status": None, "body": str(err)}


def main(argv: list[str]) -> int:
    """``containers <id>...`` or ``http <url>``; prints JSON."""
    if len(argv) >= 1 and argv[0] == "containers":
        sys.stdout.write(json.dumps({cid: observe(cid) for cid in argv[1:]}) + "\n")
        return 0
    if len(argv) == 2 and argv[0] == "http":
        sys.stdout.write(json.dumps(_http(argv[1])) + "\n")
        return 0
    sys.stderr.write("usage: guest_observe containers <id>... | http <url>\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
