"""Interference on exclusive CPUs: interrupt and steal time per exclusively assigned CPU, computed at scrape time.

A latency-critical container on "dedicated" CPUs still loses them to hard
interrupts, soft interrupts (network receive, timers, RCU) and, in a virtual
machine, to the hypervisor (steal). The kernel counts each per CPU in
``/proc/stat``; :class:`InterferenceCollector` reads them through the
:class:`~agent.audit.probe.NodeProbe` on every scrape and exposes them only for
the CPUs the planner has handed out exclusively (container slices and pod
bubbles, ``NodeState.cpu.assigned()``):

* ``podpin_exclusive_cpu_interference_seconds_total{cpu, mode}``: seconds since
  boot in ``mode`` (``irq``, ``softirq``, ``steal``); a counter, so
  ``rate()`` gives the share of the CPU lost (0.05 = 5 %).
* ``podpin_exclusive_cpu_owner{cpu, namespace, pod, container, pool}``: 1 for
  each exclusive CPU, naming who holds it (``container`` is empty for a CPU of a
  pod's shared pool), to join the first family on ``cpu``.

Cardinality: at most three interference series and one owner series per
exclusive CPU of the node; shared CPUs have none (the node exporter covers
them). The interference series carry no pod label, so a CPU that changes hands
keeps one continuous counter; the owner series changes instead. The counters
start at the kernel's value since boot (the first ``rate()`` window is right,
``increase()`` over a window that starts before the CPU became exclusive is
not meaningful).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from agent.alloc import Pool
from agent.audit.probe import NodeProbe
from agent.metrics import PassView

__all__ = ["INTERFERENCE_MODES", "InterferenceCollector"]

#: The ``mode`` label values, as ``/proc/stat`` (and the node exporter's ``node_cpu_seconds_total``) name them.
INTERFERENCE_MODES = ("irq", "softirq", "steal")


def _families() -> tuple[CounterMetricFamily, GaugeMetricFamily]:
    return (
        CounterMetricFamily(
            "podpin_exclusive_cpu_interference_seconds",
            "Seconds each exclusively assigned CPU spent in hard interrupts, soft interrupts or stolen, by mode.",
            labels=["cpu", "mode"],
        ),
        GaugeMetricFamily(
            "podpin_exclusive_cpu_owner",
            "1 for each exclusively assigned CPU: the pod, container (empty: the pod's shared pool) and pool.",
            labels=["cpu", "namespace", "pod", "container", "pool"],
        ),
    )


class InterferenceCollector:
    """Yields the interference and owner families for the exclusive CPUs of the latest snapshot."""

    def __init__(self, snapshot: Callable[[], PassView | None], probe: NodeProbe) -> None:
        self._snapshot = snapshot
        self._probe = probe

    def describe(self) -> Iterator[Metric]:
        """The families, without samples (registering the collector reads nothing)."""
        yield from _families()

    def collect(self) -> Iterator[Metric]:
        """Both families; nothing before the first pass (no CPU is known to be exclusive yet)."""
        snapshot = self._snapshot()
        if snapshot is None:
            return
        interference, owner = _families()
        owners: dict[int, tuple[str, str, str, str]] = {}
        for pod in snapshot.plan.pods:
            for cpu in pod.bubble or ():
                owners[cpu] = (pod.namespace, pod.name, "", Pool.POD_SHARED)
            for container in pod.containers:
                if container.pool == Pool.EXCLUSIVE:
                    for cpu in container.cpus:
                        owners[cpu] = (pod.namespace, pod.name, container.name, Pool.EXCLUSIVE)
        exclusive = snapshot.state.cpu.assigned()
        times = self._probe.cpu_times(snapshot.topology.online_cpus) if exclusive else {}
        for cpu in exclusive:
            entry = times.get(cpu)
            if entry is not None:
                for mode, seconds in zip(INTERFERENCE_MODES, (entry.irq, entry.softirq, entry.steal), strict=True):
                    interference.add_metric([str(cpu), mode], seconds)
            if cpu in owners:
                owner.add_metric([str(cpu), *owners[cpu]], 1)
        yield interference
        yield owner
