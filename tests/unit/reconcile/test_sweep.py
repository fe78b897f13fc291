"""The steps of a full pass: QoS levels first, then the pods something happened to, then the rest in scan order."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.alloc import Pool
from agent.cgroups import ScannedPod
from agent.pods import QOSClass
from agent.reconcile import QoSLevels, Sweep

ROOT = Path("/sys/fs/cgroup/kubepods")


def pod(uid: str) -> ScannedPod:
    """A pod cgroup without children, named after ``uid``."""
    return ScannedPod(qos=QOSClass.GUARANTEED, uid=uid, path=ROOT / f"pod{uid}", containers=())


def test_order_of_the_steps() -> None:
    """The QoS levels, then the pods named first in the order given (unknown keys ignored), then the scan order."""
    sweep = Sweep.of_scan([pod("a"), pod("b"), pod("c"), pod("d")], ["c", "gone", "a", "c"])
    steps = []
    while not sweep.done:
        step = sweep.next_step()
        steps.append("qos" if isinstance(step, QoSLevels) else step.uid)
    assert ["qos", "c", "a", "b", "d"] == steps


def test_an_empty_tree_still_writes_the_qos_levels() -> None:
    """A scan that found no pod leaves one step; after it the sweep is done and has no next step."""
    sweep = Sweep.of_scan([], [])
    first = sweep.next_step()
    with pytest.raises(IndexError):
        sweep.next_step()
    assert (QoSLevels(), True) == (first, sweep.done)


def test_usage_adds_up_over_the_steps() -> None:
    """Each step's cpu.stat samples are summed per (pool, namespace, pod)."""
    sweep = Sweep.of_scan([pod("a")], [])
    sweep.add_usage({(Pool.EXCLUSIVE, "default", "web"): 1.5, (Pool.POD_SHARED, "default", "web"): 0.25})
    sweep.add_usage({(Pool.EXCLUSIVE, "default", "web"): 2.0})
    assert {(Pool.EXCLUSIVE, "default", "web"): 3.5, (Pool.POD_SHARED, "default", "web"): 0.25} == sweep.usage
