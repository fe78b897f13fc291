"""The ``gpu`` preset of ``podpin simulate``: are a GPU pod's exclusive CPUs on its GPU's NUMA node?

The node is the example machine (2 sockets, one NUMA node each, 16 CPUs each,
one CPU reserved) with one GPU per socket: ``gpu0`` on NUMA 0, ``gpu1`` on
NUMA 1. Each *trial* is one such node receiving, in a seeded random order, two
GPU pods (one GPU and :data:`GPU_POD_CPUS` exclusive CPUs each) and
:data:`CPU_PODS` CPU-only Guaranteed pods of 2, 4 or 6 CPUs (drawn per trial).
The kubelet's device manager hands each GPU pod one free GPU before podpin sees
the pod; which one is the device plugin's choice, not podpin's, so the trial
draws it uniformly among the free GPUs. Every trial is replayed twice, through
the real planner, on a fresh node each time:

* ``podpin``: the pod is admitted with its devices (``Planner.admit(pod,
  devices=...)``): the device manager's hints take part in the topology
  manager merge, as on a node where podpin reads the PodResources API;
* ``without device hints``: the same pods admitted without device facts, as
  podpin did before it read them (and as a pod is after ``deviceWaitTimeout``):
  the CPU manager places the CPUs by its own rules alone, blind to where the
  GPU is. Whether they land on the GPU's node is then the luck of the arrival
  order, which is what this model measures.

A GPU pod is *aligned* when every exclusive CPU it got is on its GPU's NUMA
node; its GPU's node *had room* when it had :data:`GPU_POD_CPUS` free CPUs as
the pod arrived (CPU-only pods that came first may have filled it: then no
placement can align the pod). The report counts, per model, GPU pods
admitted, aligned and not, those whose GPU's node had room and how many of
them were aligned, and rejected (under ``restricted`` and ``single-numa-node`` a pod that cannot be
aligned is rejected rather than placed unaligned), and the CPU-only pods
admitted. Pure: the same seed, trials and configuration give the same counts.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from agent.alloc import AllocatableDevices, DeviceGroup, Planner, PlannerConfig, PodDevices
from agent.pods import PodView, pod_from_dict
from agent.topology import Topology

__all__ = [
    "CPU_PODS",
    "GPU_POD_CPUS",
    "GPU_PRESET",
    "GPU_PRESET_DESCRIPTION",
    "GPUModelResult",
    "GPUSimulation",
    "gpu_simulation",
    "gpu_simulation_to_dict",
    "render_gpu_text",
]

GPU_PRESET = "gpu"
GPU_PRESET_DESCRIPTION = "2 GPU pods among CPU-only pods per node, one GPU per socket: CPUs next to the GPU or not"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_POD_CPUS = 4
CPU_PODS = 4
CPU_POD_SIZES = (2, 4, 6)
DEFAULT_TRIALS = 500
DEFAULT_SEED = 0
MODELS = ("podpin", "without device hints")

_NODE_GPUS = (
    DeviceGroup(resource=GPU_RESOURCE, ids=("gpu0",), numa=(0,)),
    DeviceGroup(resource=GPU_RESOURCE, ids=("gpu1",), numa=(1,)),
)
_UIDS = uuid.UUID("6f1c2a7e-4c1b-5d2a-9e0f-6b1d8c3a2f10")


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUModelResult:
    """The counts of one model over every trial."""

    model: str
    gpu_pods: int
    admitted: int
    aligned: int
    unaligned: int
    rejected: int
    cpu_pods_admitted: int
    had_room: int
    aligned_with_room: int

    @property
    def aligned_share(self) -> float:
        """Aligned GPU pods out of all GPU pods (0 when there are none)."""
        return self.aligned / self.gpu_pods if self.gpu_pods else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUSimulation:
    """Both models' results and what produced them."""

    trials: int
    seed: int
    policy: str
    results: tuple[GPUModelResult, ...]


def _pod(name: str, cpus: int, gpu: bool) -> PodView:
    """A Guaranteed pod with one container ``main`` of ``cpus`` CPUs (and one GPU)."""
    amounts: dict[str, Any] = {"cpu": str(cpus), "memory": "2Gi"}
    if gpu:
        amounts[GPU_RESOURCE] = "1"
    raw = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "sim", "uid": str(uuid.uuid5(_UIDS, name))},
        "spec": {"containers": [{"name": "main", "resources": {"requests": amounts, "limits": dict(amounts)}}]},
    }
    return pod_from_dict(raw)


@dataclass(frozen=True, slots=True)
class _Arrival:
    pod: PodView
    gpu: DeviceGroup | None


def _trial(rng: random.Random, trial: int) -> list[_Arrival]:
    """One trial's pods in arrival order, each GPU pod with the GPU the device plugin gave it."""
    kinds = ["gpu", "gpu"] + ["cpu"] * CPU_PODS
    rng.shuffle(kinds)
    free = list(_NODE_GPUS)
    arrivals = []
    for index, kind in enumerate(kinds):
        name = f"t{trial:05d}-{index}"
        if kind == "gpu":
            gpu = free.pop(rng.randrange(len(free)))
            arrivals.append(_Arrival(_pod(f"{name}-gpu", GPU_POD_CPUS, True), gpu))
        else:
            arrivals.append(_Arrival(_pod(f"{name}-cpu", rng.choice(CPU_POD_SIZES), False), None))
    return arrivals


def _replay(
    topology: Topology, config: PlannerConfig, arrivals: list[_Arrival], with_devices: bool, counts: dict[str, int]
) -> None:
    planner = Planner(topology, config)
    node = AllocatableDevices(groups=_NODE_GPUS)
    reserved = planner.plan([]).reserved
    for arrival in arrivals:
        room = False
        if arrival.gpu is not None:
            free = (planner.snapshot().cpu.default - reserved) & topology.cpus_in_numa(arrival.gpu.numa[0])
            room = len(free) >= GPU_POD_CPUS
        devices = None
        if with_devices and arrival.gpu is not None:
            devices = PodDevices(containers=MappingProxyType({"main": (arrival.gpu,)}), node=node)
        decision = planner.admit(arrival.pod, devices=devices)
        if arrival.gpu is None:
            counts["cpu_pods_admitted"] += decision.admitted
            continue
        counts["gpu_pods"] += 1
        counts["had_room"] += room
        if not decision.admitted:
            counts["rejected"] += 1
            continue
        counts["admitted"] += 1
        cpus = planner.snapshot().cpu.get(arrival.pod.uid, "main")
        on_gpu = topology.cpus_in_numa(arrival.gpu.numa[0])
        aligned = cpus is not None and len(cpus) > 0 and cpus <= on_gpu
        counts["aligned" if aligned else "unaligned"] += 1
        counts["aligned_with_room"] += aligned and room


def gpu_simulation(
    topology: Topology, config: PlannerConfig, *, trials: int = DEFAULT_TRIALS, seed: int = DEFAULT_SEED
) -> GPUSimulation:
    """Replay ``trials`` seeded trials in both models (the module docstring says what a trial is)."""
    rng = random.Random(seed)
    keys = (
        "gpu_pods",
        "admitted",
        "aligned",
        "unaligned",
        "rejected",
        "cpu_pods_admitted",
        "had_room",
        "aligned_with_room",
    )
    counts = {model: dict.fromkeys(keys, 0) for model in MODELS}
    for trial in range(trials):
        arrivals = _trial(rng, trial)
        for model in MODELS:
            _replay(topology, config, arrivals, model == "podpin", counts[model])
    results = tuple(
        GPUModelResult(
            model=model,
            gpu_pods=counts[model]["gpu_pods"],
            admitted=counts[model]["admitted"],
            aligned=counts[model]["aligned"],
            unaligned=counts[model]["unaligned"],
            rejected=counts[model]["rejected"],
            cpu_pods_admitted=counts[model]["cpu_pods_admitted"],
            had_room=counts[model]["had_room"],
            aligned_with_room=counts[model]["aligned_with_room"],
        )
        for model in MODELS
    )
    return GPUSimulation(trials=trials, seed=seed, policy=str(config.topology_manager_policy), results=results)


def gpu_simulation_to_dict(sim: GPUSimulation) -> dict[str, Any]:
    """The result, JSON-ready."""
    return {
        "preset": GPU_PRESET,
        "trials": sim.trials,
        "seed": sim.seed,
        "policy": sim.policy,
        "models": [
            {
                "model": r.model,
                "gpu_pods": r.gpu_pods,
                "admitted": r.admitted,
                "aligned": r.aligned,
                "unaligned": r.unaligned,
                "rejected": r.rejected,
                "aligned_share": round(r.aligned_share, 4),
                "cpu_pods_admitted": r.cpu_pods_admitted,
                "had_room": r.had_room,
                "aligned_with_room": r.aligned_with_room,
            }
            for r in sim.results
        ],
    }


def render_gpu_text(sim: GPUSimulation) -> str:
    """The result as a small table."""
    head = (
        f"gpu preset: {sim.trials} trials (seed {sim.seed}), topologyManagerPolicy {sim.policy}; per trial one node "
        f"with a GPU per socket, 2 GPU pods ({GPU_POD_CPUS} exclusive CPUs + 1 GPU) among {CPU_PODS} CPU-only pods"
    )
    rows = [
        [
            "MODEL",
            "GPU PODS",
            "ADMITTED",
            "ALIGNED",
            "NOT ALIGNED",
            "REJECTED",
            "ALIGNED %",
            "HAD ROOM",
            "ALIGNED OF THOSE",
            "CPU PODS",
        ]
    ]
    rows.extend(
        [
            r.model,
            str(r.gpu_pods),
            str(r.admitted),
            str(r.aligned),
            str(r.unaligned),
            str(r.rejected),
            f"{100 * r.aligned_share:.1f}",
            str(r.had_room),
            str(r.aligned_with_room),
            str(r.cpu_pods_admitted),
        ]
        for r in sim.results
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    note = (
        "aligned: every exclusive CPU of the GPU pod is on its GPU's NUMA node; had room: that node had "
        f"{GPU_POD_CPUS} free CPUs when the pod arrived; CPU pods: CPU-only pods admitted"
    )
    return "\n".join([head, "", *table, "", note]) + "\n"
