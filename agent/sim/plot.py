"""The comparison as a picture: grouped bars of both models, returned as PNG bytes.

Two panels share one figure: pods (admitted, NUMA-aligned) and CPUs
(exclusive, total, free, stranded), each metric a pair of bars,
per-container next to pod-level, with the value on top. matplotlib is an
optional dependency (the ``plot`` extra), so it is imported only here, inside
:func:`render_png`, with the non-interactive Agg backend: nothing opens a
window and nothing is written to disk (the command writes the bytes).
"""

from __future__ import annotations

import io
from typing import Any

from agent.sim.derive import MODELS
from agent.sim.engine import Simulation

__all__ = ["PlotError", "render_png"]

_PANELS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("pods", (("admitted", "pods_admitted"), ("NUMA-aligned", "numa_aligned"))),
    (
        "CPUs",
        (
            ("exclusive", "exclusive_cpus"),
            ("total", "total_cpus"),
            ("free", "free_cpus"),
            ("stranded", "stranded_cpus"),
        ),
    ),
)
_COLOURS = {"per-container": "#9a9a9a", "pod-level": "#2b6cb0"}


class PlotError(RuntimeError):
    """The picture cannot be drawn (matplotlib is not installed)."""


def _load_pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as err:
        raise PlotError("--output png needs matplotlib: pip install 'podpin[plot]'") from err
    return pyplot


def render_png(sim: Simulation) -> bytes:
    """The comparison chart of a simulation as PNG bytes.

    Raises:
        PlotError: matplotlib is missing.
    """
    pyplot = _load_pyplot()
    figure, axes = pyplot.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [2, 4]})
    width = 0.38
    for axis, (unit, metrics) in zip(axes, _PANELS, strict=True):
        for offset, model in ((-width / 2, MODELS[0]), (width / 2, MODELS[1])):
            values = [getattr(sim.results[model], field) for _, field in metrics]
            bars = axis.bar(
                [i + offset for i in range(len(metrics))], values, width, label=model, color=_COLOURS[model]
            )
            axis.bar_label(bars, fontsize=8, padding=2)
        axis.set_xticks(range(len(metrics)), [label for label, _ in metrics])
        axis.set_ylabel(unit)
        axis.margins(y=0.12)
        axis.spines[["top", "right"]].set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.93), ncols=2, fontsize=9, frameon=False)
    headline = f"{sim.workload}: {sim.pods} pods on {sim.nodes} nodes of {sim.cpus_per_node} CPUs"
    if sim.more_pods_fit > 0:
        headline += f"; {sim.more_pods_fit} more pods fit with pod-level resources"
    figure.suptitle(headline, fontsize=11)
    figure.tight_layout(rect=(0, 0, 1, 0.88))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    pyplot.close(figure)
    return buffer.getvalue()
