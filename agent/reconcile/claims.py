"""One pod per cgroup: which pod a pod cgroup belongs to when two pods claim the same one.

A pod's cgroup is named after its ``cgroup_uid``: its own uid, or for a mirror
pod the static pod's uid from ``kubernetes.io/config.mirror`` (honoured only
on pods the Node owns, ``agent/pods/model.py``). Two pods can still end up with
the same cgroup uid: two mirror pods naming one static pod, or a mirror pod
naming a regular pod's uid. Planning both would write two plans into one
cgroup, the later one moving the other's running containers. The kubelet has
no such case (its pod manager keys static pods by that uid, one pod each,
``pkg/kubelet/pod/pod_manager.go``); podpin sees API objects and must choose.

The rule: a claim held on an earlier pass stays with its holder while that pod
is on the node; a new cgroup uid goes to the pod whose own uid it is, else to
the first claimant in creation order. Every other claimant is left out of the
pass (not admitted, its cgroup untouched) and reported by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from agent.pods import PodView

__all__ = ["CgroupClaims", "Conflict"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Conflict:
    """``pod`` claims the cgroup of ``cgroup_uid``, which ``holder`` holds."""

    pod: PodView
    holder: PodView
    cgroup_uid: str


@dataclass(slots=True)
class CgroupClaims:
    """The holder (pod uid) of each claimed cgroup uid, kept from pass to pass."""

    _holders: dict[str, str] = field(default_factory=dict)

    def settle(self, views: Iterable[PodView]) -> tuple[list[PodView], list[Conflict]]:
        """The pods that keep their cgroup (in the given order) and the ones left out.

        Args:
            views: the node's readable pods, in creation order.
        """
        ordered = list(views)
        present = {v.uid for v in ordered}
        self._holders = {key: uid for key, uid in self._holders.items() if uid in present}
        by_key: dict[str, list[PodView]] = {}
        for view in ordered:
            by_key.setdefault(view.cgroup_uid, []).append(view)
        for key, claimants in by_key.items():
            if key in self._holders and any(v.uid == self._holders[key] for v in claimants):
                continue
            own = next((v for v in claimants if v.uid == key), claimants[0])
            self._holders[key] = own.uid
        kept: list[PodView] = []
        conflicts: list[Conflict] = []
        for view in ordered:
            holder_uid = self._holders[view.cgroup_uid]
            if holder_uid == view.uid:
                kept.append(view)
                continue
            holder = next(v for v in by_key[view.cgroup_uid] if v.uid == holder_uid)
            conflicts.append(Conflict(pod=view, holder=holder, cgroup_uid=view.cgroup_uid))
        return kept, conflicts
