"""Built-in workloads for ``podpin simulate --preset NAME``.

Each preset is written exactly as a workload file would be (and goes through
the same validation), sized for the default topology
(:func:`agent.sim.machines.example_machine`: 32 CPUs, 2 NUMA nodes, 31
allocatable with one reserved CPU) and carrying its default node count.

* ``seed-mesh``: the product story in numbers. 200 mesh pods, each a 4-CPU
  main and two sidecars needing 0.4 CPU together. Per container, the sidecars
  burn 2 whole exclusive CPUs per pod (6 per pod: 1200 exclusive, 1200 total);
  pod-level, the pod is a 5-CPU bubble with a 1-CPU pod shared pool (800
  exclusive, 1000 total). 40 nodes admit all 200 pods in both models.
* ``mixed-cluster``: databases, mesh services, ML data loaders and batch jobs
  arriving interleaved on 20 nodes, more than fit: the report says how many
  more pods fit with pod-level resources.
* ``mixed-ml``: an ML platform; wide data loaders (12 CPUs plus sidecars)
  that must sit on one NUMA node, inference services and batch preprocessing
  on 16 nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from agent.sim.codec import workload_from_dict
from agent.sim.workload import Workload

__all__ = ["PRESETS", "preset"]

_ENVOY = {"name": "envoy", "role": "sidecar", "cpu": "300m", "cpuLimit": "1", "memory": "128Mi", "memoryLimit": "256Mi"}
_LOGS = {
    "name": "log-shipper",
    "role": "sidecar",
    "cpu": "100m",
    "cpuLimit": "500m",
    "memory": "64Mi",
    "memoryLimit": "128Mi",
}
_METRICS = {
    "name": "metrics",
    "role": "sidecar",
    "cpu": "100m",
    "cpuLimit": "300m",
    "memory": "64Mi",
    "memoryLimit": "128Mi",
}

_SEED_MESH: dict[str, Any] = {
    "name": "seed-mesh",
    "description": "200 mesh pods: a 4-CPU main and two sidecars that together need 0.4 CPU",
    "seed": 0,
    "order": "sequential",
    "nodes": 40,
    "pods": [
        {
            "name": "mesh",
            "count": 200,
            "containers": [{"name": "app", "role": "main", "cpu": "4", "memory": "4Gi"}, _ENVOY, _LOGS],
        }
    ],
}

_MIXED_CLUSTER: dict[str, Any] = {
    "name": "mixed-cluster",
    "description": "databases, mesh services, ML data loaders and batch jobs, interleaved, more than fit",
    "seed": 7,
    "order": "shuffle",
    "nodes": 20,
    "pods": [
        {
            "name": "postgres",
            "count": 16,
            "namespace": "databases",
            "containers": [
                {"name": "postgres", "role": "main", "cpu": "8", "memory": "32Gi"},
                {
                    "name": "exporter",
                    "role": "sidecar",
                    "cpu": "100m",
                    "cpuLimit": "500m",
                    "memory": "64Mi",
                    "memoryLimit": "128Mi",
                },
                {
                    "name": "wal-g",
                    "role": "sidecar",
                    "cpu": "200m",
                    "cpuLimit": "1",
                    "memory": "256Mi",
                    "memoryLimit": "512Mi",
                },
            ],
        },
        {
            "name": "mesh-svc",
            "count": 120,
            "namespace": "mesh",
            "containers": [{"name": "app", "role": "main", "cpu": "2", "memory": "4Gi"}, _ENVOY, _LOGS],
        },
        {
            "name": "ml-loader",
            "count": 20,
            "namespace": "ml",
            "containers": [
                {"name": "loader", "role": "main", "cpu": "6", "memory": "24Gi"},
                {
                    "name": "cache-warmer",
                    "role": "sidecar",
                    "native": True,
                    "cpu": "300m",
                    "cpuLimit": "1",
                    "memory": "512Mi",
                    "memoryLimit": "1Gi",
                },
                _METRICS,
            ],
        },
        {
            "name": "batch",
            "count": 60,
            "namespace": "batch",
            "class": "batch",
            "containers": [{"name": "job", "cpu": "500m", "cpuLimit": "2", "memory": "1Gi", "memoryLimit": "2Gi"}],
        },
    ],
}

_MIXED_ML: dict[str, Any] = {
    "name": "mixed-ml",
    "description": "ML platform: 12-CPU data loaders, inference services and batch preprocessing, more than fit",
    "seed": 11,
    "order": "shuffle",
    "nodes": 16,
    "pods": [
        {
            "name": "loader",
            "count": 24,
            "namespace": "training",
            "containers": [
                {"name": "loader", "role": "main", "cpu": "12", "memory": "48Gi"},
                {
                    "name": "fuse-cache",
                    "role": "sidecar",
                    "native": True,
                    "cpu": "500m",
                    "cpuLimit": "2",
                    "memory": "1Gi",
                    "memoryLimit": "2Gi",
                },
                _METRICS,
            ],
        },
        {
            "name": "inference",
            "count": 60,
            "namespace": "serving",
            "containers": [{"name": "model-server", "role": "main", "cpu": "3", "memory": "12Gi"}, _ENVOY, _METRICS],
        },
        {
            "name": "preprocess",
            "count": 40,
            "namespace": "batch",
            "class": "batch",
            "containers": [{"name": "job", "cpu": "1", "cpuLimit": "4", "memory": "2Gi", "memoryLimit": "4Gi"}],
        },
    ],
}

PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {"seed-mesh": _SEED_MESH, "mixed-cluster": _MIXED_CLUSTER, "mixed-ml": _MIXED_ML}
)
"""Preset name -> the workload document (as a workload file would hold it)."""


def preset(name: str) -> Workload:
    """The workload of a preset.

    Raises:
        KeyError: no preset has this name.
    """
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r} (presets: {', '.join(PRESETS)})")
    return workload_from_dict(PRESETS[name], f"preset {name}")
