"""Guest scenario for ``test_vm_layouts.py``: the CPU/NUMA layout the guest kernel and podpin see.

Records the raw sysfs view (per node and per CPU) and podpin's reading of it: the dict ``podpin topology
--output json`` prints (``read_topology`` + ``topology_to_dict``, called in-process because every CLI start
imports the Kubernetes client, ~10 s under TCG; ``test_kernel_facts.py`` runs the CLI itself). The host test
derives what both must be from the qemu arguments (``VMConfig``).
"""

from __future__ import annotations

import time
from pathlib import Path

from agent.topology.codec import topology_to_dict
from agent.topology.sysfs import read_topology
from tests.vm.scenario import Scenario

SYS_NODE = Path("/sys/devices/system/node")
SYS_CPU = Path("/sys/devices/system/cpu")


def _by_id(paths: list[Path], prefix: str) -> list[Path]:
    return sorted(paths, key=lambda p: int(p.name[len(prefix) :]))


def main() -> int:
    """Record sysfs, then podpin's reading of it."""
    sc = Scenario.from_argv("layout")
    with sc.step("sysfs") as out:
        nodes = _by_id(list(SYS_NODE.glob("node[0-9]*")), "node")
        out["node_cpulists"] = {p.name[4:]: (p / "cpulist").read_text().strip() for p in nodes}
        out["node_distances"] = {p.name[4:]: (p / "distance").read_text().split() for p in nodes}
        cpus = _by_id(list(SYS_CPU.glob("cpu[0-9]*")), "cpu")
        out["online"] = (SYS_CPU / "online").read_text().strip()
        out["packages"] = {p.name[3:]: (p / "topology/physical_package_id").read_text().strip() for p in cpus}
        out["core_cpus"] = {p.name[3:]: (p / "topology/core_cpus_list").read_text().strip() for p in cpus}
    with sc.step("podpin_topology") as out:
        started = time.monotonic()
        data = topology_to_dict(read_topology(Path("/sys")))
        out["seconds"] = round(time.monotonic() - started, 2)
        out["numa_nodes"] = {str(n["id"]): n["cpus"] for n in data["numa_nodes"]}
        out["cpus"] = {
            str(c["id"]): {"core": c["core"], "socket": c["socket"], "numa": c["numa"], "online": c["online"]}
            for c in data["cpus"]
        }
    status: int = sc.finish()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
