"""Runner for ``topology_merge.json``: a policy's merge of provider hints.

Every case runs through both merges, the fast one podpin admits pods with
(``tm_policy.make_policy``) and the literal cartesian product
(``merge_reference.reference_merge``), and each must give the kubelet's
expected hint and admission.
"""

from __future__ import annotations

from typing import Any

from agent.alloc.topologymanager import NUMAInfo, ProviderHints, TopologyHint, ids_of, make_policy, mask_of
from tests.oracles.merge_reference import reference_merge


def numa_info(case: dict[str, Any]) -> NUMAInfo:
    """The case's NUMA nodes and distances (rows keyed by node id, indexed by node id)."""
    distances = {int(node): row for node, row in (case.get("numa_distances") or {}).items()}
    return NUMAInfo.from_distance_map(case["numa_nodes"], distances)


def hint(raw: dict[str, Any]) -> TopologyHint:
    """``{"mask": [ids] | null, "preferred": bool}`` as a hint."""
    mask = raw["mask"]
    return TopologyHint(None if mask is None else mask_of(mask), raw["preferred"])


def providers(raw: list[Any]) -> list[ProviderHints]:
    """Provider maps keeping null (nil) apart from [] (empty) at both levels."""
    result: list[ProviderHints] = []
    for provider in raw:
        if provider is None:
            result.append(None)
            continue
        result.append(
            {
                resource: None if hints is None else [hint(item) for item in hints]
                for resource, hints in provider.items()
            }
        )
    return result


def outcome(best: TopologyHint, admit: bool) -> dict[str, Any]:
    """A merge result in the vector's ``expect`` shape."""
    mask = None if best.affinity is None else list(ids_of(best.affinity))
    return {"mask": mask, "preferred": best.preferred, "admit": admit}


def run(case: dict[str, Any], _group: str | None) -> None:
    """Both merges give the expected hint and admission."""
    info = numa_info(case)
    prefer_closest = bool(case["policy_options"].get("prefer-closest-numa-nodes", False))
    hints = providers(case["provider_hints"])
    expected = case["expect"]
    policy = make_policy(case["policy"], info, prefer_closest=prefer_closest)
    assert expected == outcome(*policy.merge(hints))
    assert expected == outcome(*reference_merge(case["policy"], info, hints, prefer_closest=prefer_closest))
