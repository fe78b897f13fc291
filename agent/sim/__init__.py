"""``podpin simulate``: replay a workload onto N identical nodes in both CPU models and compare.

The pieces, in data-flow order: :mod:`~agent.sim.workload` (pod templates),
:mod:`~agent.sim.codec` (their YAML form), :mod:`~agent.sim.presets`
(built-in workloads), :mod:`~agent.sim.derive` (each model's manifests),
:mod:`~agent.sim.scheduler` (which node), :mod:`~agent.sim.engine` (the
replay through the real planner), :mod:`~agent.sim.measure` (the numbers),
:mod:`~agent.sim.report` and :mod:`~agent.sim.plot` (text, JSON, PNG).
Everything but reading a workload file is pure; the command does the I/O.
"""

from agent.sim.codec import WorkloadError, load_workload, workload_from_dict, workload_to_dict
from agent.sim.derive import MODELS, Model, pod_manifest
from agent.sim.engine import Simulation, replay, simulate
from agent.sim.machines import example_machine, synthetic_machine
from agent.sim.measure import ModelResult
from agent.sim.presets import PRESETS, preset
from agent.sim.report import render_text, simulation_to_dict
from agent.sim.scheduler import SCHEDULERS
from agent.sim.workload import Workload, scaled

__all__ = [
    "MODELS",
    "PRESETS",
    "SCHEDULERS",
    "Model",
    "ModelResult",
    "Simulation",
    "Workload",
    "WorkloadError",
    "example_machine",
    "load_workload",
    "pod_manifest",
    "preset",
    "render_text",
    "replay",
    "scaled",
    "simulate",
    "simulation_to_dict",
    "synthetic_machine",
    "workload_from_dict",
    "workload_to_dict",
]
