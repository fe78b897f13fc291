"""CgroupClaims: one pod per pod cgroup, the earlier holder kept, the pod's own uid before a mirror's claim."""

from __future__ import annotations

from typing import Any

from agent.pods.model import PodView, pod_from_dict
from agent.reconcile.claims import CgroupClaims
from tests.support.podfactory import container, make_pod

STATIC = "0123456789abcdef0123456789abcdef"
OWNER = [{"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "n-1"}]


def mirror(name: str, of: str, ts: int) -> PodView:
    raw: dict[str, Any] = make_pod(
        name, containers=[container("app")], creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z"
    )
    raw["metadata"]["annotations"] = {"kubernetes.io/config.mirror": of}
    raw["metadata"]["ownerReferences"] = OWNER
    return pod_from_dict(raw)


def plain(name: str, ts: int) -> PodView:
    return pod_from_dict(
        make_pod(name, containers=[container("app")], creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z")
    )


def test_distinct_cgroups_are_all_kept() -> None:
    """Pods with their own cgroups pass through in order, no conflict."""
    pods = [plain("a", 1), mirror("b", STATIC, 2)]
    kept, conflicts = CgroupClaims().settle(pods)
    assert (["a", "b"], []) == ([p.name for p in kept], conflicts)


def test_first_claimant_in_creation_order_wins() -> None:
    """Two mirrors of one static pod: the first created keeps the cgroup, the second is the conflict."""
    kept, conflicts = CgroupClaims().settle([mirror("first", STATIC, 1), mirror("second", STATIC, 2)])
    assert (["first"], [("second", "first", STATIC)]) == (
        [p.name for p in kept],
        [(c.pod.name, c.holder.name, c.cgroup_uid) for c in conflicts],
    )


def test_a_pod_keeps_its_own_uid_against_an_earlier_mirror_claim() -> None:
    """A mirror naming a regular pod's uid loses to that pod, even when the mirror was created first."""
    victim = plain("victim", 2)
    kept, conflicts = CgroupClaims().settle([mirror("claim", victim.uid, 1), victim])
    assert (["victim"], ["claim"]) == ([p.name for p in kept], [c.pod.name for c in conflicts])


def test_holder_keeps_the_cgroup_when_an_earlier_claimant_appears_later() -> None:
    """A claim held on an earlier pass stays with its holder while it is on the node; then the other gets it."""
    claims = CgroupClaims()
    late = mirror("late", STATIC, 2)
    claims.settle([late])
    early = mirror("early", STATIC, 1)
    kept, conflicts = claims.settle([early, late])
    after, none = claims.settle([early])
    assert (["late"], ["early"], ["early"], []) == (
        [p.name for p in kept],
        [c.pod.name for c in conflicts],
        [p.name for p in after],
        none,
    )
