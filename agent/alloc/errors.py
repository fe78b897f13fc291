"""The allocation core's errors: typed admission failures with the kubelet's reasons, and set-up errors.

Every failure the planner reports for a pod is a :class:`PlacementError`. Its ``reason``
is the string the kubelet puts in ``status.reason`` (and podpin in the Event's
reason); ``str(error)`` is the message without the ``"Pod was rejected: "``
prefix. Allocation helpers raise :class:`AllocationError` for the kubelet's
plain ``fmt.Errorf`` failures; admission wraps those into
:class:`UnexpectedAdmissionError` exactly as the kubelet does.

The other three are about setting the planner up, never about one pod:
:class:`OptionsError` (a policy option map the kubelet would refuse),
:class:`PlannerError` (a configuration that cannot work on this machine) and
:class:`CheckpointError` (a saved state that cannot be adopted). They live here,
below every other module of the package, so the state, the options and the
planner can raise them without importing each other.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "OptionsError",
    "PlannerError",
    "PlacementError",
    "AllocationError",
    "TopologyAffinityError",
    "SMTAlignmentError",
    "EmptyPodSharedPoolError",
    "UnexpectedAdmissionError",
]


class PlacementError(ValueError):
    """A pod (or container) that cannot be placed; ``reason`` is the kubelet's reason."""

    reason: str = "UnexpectedAdmissionError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AllocationError(PlacementError):
    """A plain allocation failure (the kubelet's untyped ``error``), e.g. not enough CPUs."""

    reason = "UnexpectedAdmissionError"


class TopologyAffinityError(PlacementError):
    """The topology manager found no admissible NUMA affinity."""

    reason = "TopologyAffinityError"

    def __init__(self, message: str = "Resources cannot be allocated with Topology locality") -> None:
        super().__init__(message)


class SMTAlignmentError(PlacementError):
    """``full-pcpus-only`` could not be honoured."""

    reason = "SMTAlignmentError"


class EmptyPodSharedPoolError(PlacementError):
    """A pod-level pod whose exclusive containers leave nothing for its shared ones."""

    reason = "EmptyPodSharedPoolError"


class UnexpectedAdmissionError(PlacementError):
    """Any other allocation failure, worded as the kubelet words it."""

    reason = "UnexpectedAdmissionError"

    @classmethod
    def wrap(cls, error: Exception) -> UnexpectedAdmissionError:
        """``Allocate failed due to <err>, which is unexpected``."""
        detail = error.message if isinstance(error, PlacementError) else str(error)
        return cls(f"Allocate failed due to {detail}, which is unexpected")


class OptionsError(ValueError):
    """An unknown option, a bad value, or two options that cannot be combined."""


class PlannerError(ValueError):
    """A configuration that cannot work on this machine; the message names the setting."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be adopted; the message says exactly what is wrong."""
