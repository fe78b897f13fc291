"""The ``Pinned`` Event's one line: where each container runs, why, and which devices it holds.

Planned on the two-NUMA test machine (CPU 0 reserved) with a GPU on each node;
the device wording is the one ``podpin plan`` prints (``agent/render/devices.py``).
"""

from __future__ import annotations

from agent.reconcile.reporter import pinned_summary
from tests.support.gpu_node import NODE_GPUS, gpu_pod, holding, planner


def test_a_container_holding_a_gpu_names_it_and_its_alignment() -> None:
    """best-effort pulls the CPUs onto the GPU's node: the line says which GPU, its node, and "CPUs aligned"."""
    p, pod = planner("best-effort"), gpu_pod()
    decision = p.admit(pod, devices=holding({"main": [NODE_GPUS[1]]}))
    summary = pinned_summary(p.plan([pod], {pod.uid: decision}).pods[0])
    assert summary.startswith("main on 8-9 (NUMA 1): ")
    assert summary.endswith(" [devices: example.com/gpu gpu1 (NUMA 1); CPUs aligned]")


def test_a_container_without_devices_says_nothing_of_them() -> None:
    """No device held, no device words (the summary stays as short as before)."""
    p, pod = planner("best-effort"), gpu_pod(gpus={})
    decision = p.admit(pod, devices=holding({}))
    summary = pinned_summary(p.plan([pod], {pod.uid: decision}).pods[0])
    assert summary.startswith("main on ")
    assert "devices" not in summary
