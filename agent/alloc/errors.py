"""Typed admission failures, carrying the kubelet's reason strings.

Every failure the planner reports is a :class:`PlacementError`. Its ``reason``
is the string the kubelet puts in ``status.reason`` (and podpin in the Event's
reason); ``str(error)`` is the message without the ``"Pod was rejected: "``
prefix. Allocation helpers raise :class:`AllocationError` for the kubelet's
plain ``fmt.Errorf`` failures; admission wraps those into
:class:`UnexpectedAdmissionError` exactly as the kubelet does.
"""

from __future__ import annotations

__all__ = [
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
