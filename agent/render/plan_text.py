"""The text form of a plan: a table per pod, rejections, and a CPU map.

The CPU map answers "who runs where" at a glance: socket -> NUMA node -> core
-> CPU, each CPU tagged with its owner (``E<n>`` an exclusive container, ``P<n>``
a pod shared pool), ``.`` for the node shared pool, ``R`` for reserved CPUs and
``x`` for offline ones, with a legend naming every owner. An init container's
slice is reused by its pod once it finished: those CPUs show both owners
(``P1/E1``), so every owner in the legend is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.alloc import Plan, PodPlan, Pool
from agent.cpuset import CPUSet
from agent.pods import ContainerKind
from agent.quantity import count_of
from agent.render.devices import devices_text
from agent.render.reasons import reason_text, rejection_text
from agent.topology import Topology

__all__ = ["render_plan_text", "owner_tags"]


@dataclass(frozen=True, slots=True)
class _Owner:
    tag: str
    what: str
    cpus: CPUSet
    init: bool = False


def _cpus_named(cpus: CPUSet) -> str:
    """``none``, ``CPU 0`` or ``CPUs 0,16``: a set that reads the same whether it is empty, one CPU or more."""
    if not cpus:
        return "none"
    return f"CPU {cpus}" if len(cpus) == 1 else f"CPUs {cpus}"


def _table(rows: list[list[str]], indent: str) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def _pod_lines(pod: PodPlan, show_mems: bool) -> list[str]:
    head = f"{pod.namespace}/{pod.name}  (uid {pod.uid}, {pod.qos})"
    if not pod.admitted:
        lines = [f"{head}  REJECTED", f"  reason:  {pod.reason}", f"  message: {pod.message}"]
        if pod.rejection is not None:
            lines.append(f"  request: {rejection_text(pod.rejection)}")
        lines.append("  its containers keep running in the node shared pool")
        return lines
    facts = []
    if pod.numa_affinity is not None:
        facts.append(f"NUMA {','.join(map(str, pod.numa_affinity))}")
    if pod.bubble is not None:
        facts.append(f"pod CPUs {pod.bubble}")
    lines = [f"{head}  admitted" + (f"  {'  '.join(facts)}" if facts else "")]
    header = ["CONTAINER", "KIND", "POOL", "CPUS", "NUMA"] + (["MEMS"] if show_mems else []) + ["CPU.MAX", "WHY"]
    rows = [header]
    for c in pod.containers:
        mems = c.desired.cpuset_mems
        row = [c.name, c.kind, c.pool, str(c.cpus) or "-", ",".join(map(str, c.numa)) or "-"]
        if show_mems:
            row.append(str(mems) if mems is not None else "-")
        row.append(str(c.desired.cpu_max) if c.desired.cpu_max is not None else "-")
        row.append(reason_text(c.reason))
        rows.append(row)
    return lines + _table(rows, "  ") + _device_lines(pod)


def _device_lines(pod: PodPlan) -> list[str]:
    """One line per container holding devices: which, on which NUMA nodes, and whether its CPUs follow."""
    return [f"  devices of {c.name}: {devices_text(c)}" for c in pod.containers if c.devices]


def owner_tags(plan: Plan) -> list[_Owner]:
    """Exclusive containers (``E1``...) and pod shared pools (``P1``...), in plan order."""
    owners: list[_Owner] = []
    exclusive = pools = 0
    for pod in plan.pods:
        pool_cpus = CPUSet()
        pool_users: list[str] = []
        for c in pod.containers:
            if c.pool == Pool.EXCLUSIVE:
                exclusive += 1
                what = f"{pod.namespace}/{pod.name}/{c.name}" + (
                    " (init container)" if c.kind == ContainerKind.INIT else ""
                )
                owners.append(_Owner(f"E{exclusive}", what, c.cpus, c.kind == ContainerKind.INIT))
            elif c.pool == Pool.POD_SHARED:
                pool_cpus = pool_cpus | c.cpus
                pool_users.append(c.name)
        if pool_users:
            pools += 1
            owners.append(
                _Owner(f"P{pools}", f"{pod.namespace}/{pod.name} pod shared pool ({', '.join(pool_users)})", pool_cpus)
            )
    return owners


def _tags_by_cpu(owners: list[_Owner], reserved: CPUSet) -> dict[int, str]:
    """Each owned CPU's cell: its owners' tags, the long-running owner first (``P1/E1``: the pod shared pool P1,
    used by the init container E1 before), so an init container's slice is drawn where the legend says it is."""
    tags: dict[int, list[str]] = {}
    for owner in sorted(owners, key=lambda o: o.init):
        for cpu in owner.cpus:
            tags.setdefault(cpu, []).append(owner.tag)
    for cpu in reserved:
        tags.setdefault(cpu, ["R"])
    return {cpu: "/".join(each) for cpu, each in tags.items()}


def _legend(owners: list[_Owner], tag_of: dict[int, str]) -> list[str]:
    """One row per owner; an init container's says which owner takes its CPUs once it finished."""
    rows = []
    for owner in owners:
        what = owner.what
        if owner.init:
            later = sorted({t for cpu in owner.cpus for t in tag_of[cpu].split("/")} - {owner.tag})
            what += f": its CPUs go to {', '.join(later)} once it finished" if later else ""
        rows.append([owner.tag, count_of(len(owner.cpus), "CPU"), what])
    return _table(rows, "  ")


def _cpu_map(plan: Plan, topology: Topology) -> list[str]:
    owners = owner_tags(plan)
    tag_of = _tags_by_cpu(owners, plan.reserved)
    lines = [
        (
            "CPU map  (E<n> exclusive container, P<n> pod shared pool, A/B: A's CPUs, used by the init container B "
            "before, . node shared pool, R reserved, x offline)"
        )
    ]
    width = max((len(t) for t in tag_of.values()), default=1)
    for socket in topology.socket_ids:
        lines.append(f"socket {socket}")
        socket_cpus = topology.cpus_in_sockets(socket)
        for numa in topology.numa_ids:
            cpus = socket_cpus & topology.cpus_in_numa(numa)
            if not cpus:
                continue
            lines.append(f"  NUMA node {numa}")
            for core in topology.cores_of(cpus):
                cells = [f"{cpu:>4} {tag_of.get(cpu, '.'):<{width}}" for cpu in topology.cpus_in_cores(core) & cpus]
                lines.append((f"    core {core:<4}" + "  ".join(cells)).rstrip())
    if topology.offline_cpus:
        lines.append(f"offline: {topology.offline_cpus} (x)")
    if owners:
        lines.append("legend")
        lines.extend(_legend(owners, tag_of))
    return lines


def render_plan_text(plan: Plan, topology: Topology, *, show_mems: bool) -> str:
    """The whole plan as text: node pools, one block per pod, the CPU map."""
    lines = [
        (
            f"node: {count_of(len(plan.online), 'CPU')} ({plan.online}), reserved {_cpus_named(plan.reserved)}, "
            f"node shared pool {plan.shared_pool} ({count_of(len(plan.shared_pool), 'CPU')})"
        ),
        "",
    ]
    for pod in plan.pods:
        lines.extend(_pod_lines(pod, show_mems))
        lines.append("")
    lines.extend(_cpu_map(plan, topology))
    return "\n".join(lines) + "\n"
