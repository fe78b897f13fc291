"""The walk-through of one admission, as values: the hints each provider gave, each merge, its outcome.

``podpin plan --explain`` shows how the topology manager reached its decision
for one pod: the CPU manager's and the memory manager's hints, the merge of the
configured policy (once for the pod in the ``pod`` scope, once per container in
the ``container`` scope), the best hint, whether it is preferred, and whether
the policy admits it. The kubelet logs the same steps at high verbosity
(``pkg/kubelet/cm/topologymanager/scope.go``, ``policy.go``); podpin's core does
no logging, so :func:`agent.alloc.admission.admit_pod` appends
:class:`MergeStep` values to a list the planner hands it, and the planner wraps
them with the policy, the scope and the outcome in an :class:`AdmissionTrace`.

Hints are kept in the kubelet's listing order (nil first, then by the number of
NUMA nodes, then by the lowest nodes), also where a provider built them as a
compact :class:`~agent.alloc.topologymanager.HintList` bitmap on a large machine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agent.alloc.plan import RequestFacts
from agent.alloc.topologymanager import (
    CompactProviderHints,
    HintList,
    TopologyHint,
    TopologyManagerPolicy,
    TopologyManagerScope,
    mask_at,
    position_of,
)

__all__ = ["AdmissionTrace", "MergeStep", "ResourceHints", "listed_hints", "resource_hints"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceHints:
    """One provider's hints for one resource; ``hints`` None means "no preference"."""

    provider: str
    resource: str
    hints: tuple[TopologyHint, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MergeStep:
    """One merge: whose hints (``container`` None = the whole pod), the hints, the best one and the verdict."""

    container: str | None
    hints: tuple[ResourceHints, ...]
    best: TopologyHint
    admitted: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionTrace:
    """How one pod was admitted or refused, for ``podpin plan --explain``.

    Attributes:
        policy: ``topologyManagerPolicy`` (``none`` merges nothing, so it has no steps).
        scope: ``topologyManagerScope``.
        prefer_closest: ``prefer-closest-numa-nodes``: equally narrow hints are ranked by NUMA distance.
        pod_level: the pod went through KEP-5526's pod-level path (one allocation for the whole pod).
        steps: the merges, in the order they ran (a rejection ends them).
        admitted: the outcome.
        request: the pod's whole request and what was free before the admission.
        reason, message: the kubelet's reason and message of a refusal.
    """

    policy: TopologyManagerPolicy
    scope: TopologyManagerScope
    prefer_closest: bool
    pod_level: bool
    steps: tuple[MergeStep, ...]
    admitted: bool
    request: RequestFacts
    reason: str | None = None
    message: str | None = None


def _sort_key(hint: TopologyHint) -> tuple[int, int, tuple[int, ...]]:
    if hint.affinity is None:
        return (0, 0, ())
    return (1, hint.affinity.bit_count(), hint.nodes or ())


def listed_hints(hints: Sequence[TopologyHint] | HintList) -> tuple[TopologyHint, ...]:
    """Every hint of a resource in the kubelet's listing order, from a plain list or a compact bitmap."""
    if not isinstance(hints, HintList):
        return tuple(sorted(hints, key=_sort_key))
    found: list[TopologyHint] = []
    if hints.nil:
        found.append(TopologyHint(None, hints.nil_preferred))
    # A preferred hint naming nodes the merge does not rank (a rare memory-only node) keeps its whole mask.
    foreign = {position_of(mask, hints.nodes): mask for mask in hints.foreign_preferred}
    masks, position = hints.masks, 0
    while masks:
        if masks & 1:
            if position in foreign:
                found.append(TopologyHint(foreign[position], True))
            else:
                found.append(TopologyHint(mask_at(position, hints.nodes), bool(hints.preferred >> position & 1)))
        masks >>= 1
        position += 1
    return tuple(sorted(found, key=_sort_key))


def resource_hints(provider: str, hints: CompactProviderHints) -> tuple[ResourceHints, ...]:
    """One provider's answer as :class:`ResourceHints` (a provider without an opinion gives one "no preference")."""
    if not hints:
        return (ResourceHints(provider=provider, resource="-", hints=None),)
    by_resource: Mapping[str, Sequence[TopologyHint] | HintList | None] = hints
    return tuple(
        ResourceHints(provider=provider, resource=name, hints=None if value is None else listed_hints(value))
        for name, value in sorted(by_resource.items())
    )
