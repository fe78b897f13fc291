"""The identity book: which pod and which container a runtime id (the name of a container cgroup) belongs to.

A container cgroup is named only by its runtime id (``<pod cgroup>/<id>``, ``cri-containerd-<id>.scope``...).
Who it is comes from three sources, in this order of trust (``docs/design.md``, "Container identity"):

1. ``nri``: the runtime's NRI CreateContainer / Synchronize calls (the runtime says it, before the container
   exists);
2. ``bundle``: the runtime's OCI bundle annotations, read when the cgroup appears (``agent/runtime``);
3. ``status``: ``status.containerStatuses[].containerID`` from the API server (seconds later: last resort).

Every source feeds this one book and every consumer (the cgroup targets, the checkpoint rebuild, the usage
sampler, the ``Pinned`` Event) asks it, so naming lives in one place. The book keeps one entry per (source,
runtime id); a lookup answers with the most trusted source's entry. A lookup for a cgroup found inside pod
``U`` answers only if that entry says pod ``U`` too: a runtime id that the best source places in another pod
is not named at all (the cgroup then gets its pod's interim set), never named from a less trusted source
that happens to agree. The book does no I/O and reads no clock.

Feeding it (the NRI integration uses the same calls):

* ``learn(Identity(...))`` for one container (an NRI CreateContainer, a bundle read);
* ``replace(source, identities)`` to state everything one source knows now (the pod statuses each pass, an
  NRI Synchronize);
* ``forget(runtime_id, source)`` when a container is gone (an NRI RemoveContainer, a cgroup removed);
* ``retain(source, live_ids)`` to drop what no longer exists after a full scan.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass

from agent.cgroups import CgroupPathError, ContainerID
from agent.pods import PodView
from agent.runtime import ContainerType, IdentitySource
from agent.vocabulary import Runtime

__all__ = ["PRECEDENCE", "Identity", "IdentityBook", "StatusFeed", "status_identities"]


PRECEDENCE: tuple[IdentitySource, ...] = (IdentitySource.NRI, IdentitySource.BUNDLE, IdentitySource.STATUS)
"""Most trusted first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """Who one runtime container is, according to one source."""

    runtime_id: str
    """The 64-hex id naming the container's cgroup."""
    pod_uid: str
    """The uid the pod's cgroup is named after (a static pod's config hash, else ``metadata.uid``)."""
    kind: ContainerType
    name: str | None
    """The container's name in the pod spec; None for the sandbox."""
    source: IdentitySource
    runtime: Runtime | None = None

    @property
    def container_id(self) -> str:
        """``<runtime>://<id>`` as a pod status would spell it (the bare id when the runtime is unknown)."""
        return self.runtime_id if self.runtime is None else f"{self.runtime.value}://{self.runtime_id}"


class IdentityBook:
    """Runtime id -> :class:`Identity`, per source; see the module docstring."""

    def __init__(self) -> None:
        self._entries: dict[IdentitySource, dict[str, Identity]] = {source: {} for source in PRECEDENCE}
        self._pod_ids: dict[str, set[str]] = {}

    def __len__(self) -> int:
        """How many runtime ids are named by at least one source."""
        return len({rid for entries in self._entries.values() for rid in entries})

    # -- feeding -----------------------------------------------------------------------------
    def learn(self, identity: Identity) -> None:
        """Record (or replace) what ``identity.source`` says about ``identity.runtime_id``."""
        entries = self._entries[identity.source]
        old = entries.get(identity.runtime_id)
        if old == identity:
            return
        entries[identity.runtime_id] = identity
        if old is not None:
            self._unindex(old)
        self._pod_ids.setdefault(identity.pod_uid, set()).add(identity.runtime_id)

    def forget(self, runtime_id: str, source: IdentitySource | None = None, *, pod_uid: str | None = None) -> None:
        """Drop what ``source`` (every source when None) says about ``runtime_id`` (only if it places it in
        ``pod_uid``, when given)."""
        for each in PRECEDENCE if source is None else (source,):
            entry = self._entries[each].get(runtime_id)
            if entry is None or (pod_uid is not None and entry.pod_uid != pod_uid):
                continue
            del self._entries[each][runtime_id]
            self._unindex(entry)

    def replace(self, source: IdentitySource, identities: Iterable[Identity]) -> None:
        """State everything ``source`` knows now: entries of that source not in ``identities`` are dropped.

        Raises:
            ValueError: an identity of another source is among ``identities``.
        """
        fresh: dict[str, Identity] = {}
        for identity in identities:
            if identity.source is not source:
                raise ValueError(f"replace({source.value}): identity {identity} comes from {identity.source.value}")
            fresh[identity.runtime_id] = identity
        for runtime_id, old in list(self._entries[source].items()):
            if fresh.get(runtime_id) != old:
                self.forget(runtime_id, source)
        for identity in fresh.values():
            self.learn(identity)

    def retain(self, source: IdentitySource, live: Container[str]) -> list[str]:
        """Forget the entries of ``source`` whose runtime id is not in ``live``; returns the ids dropped."""
        gone = [runtime_id for runtime_id in self._entries[source] if runtime_id not in live]
        for runtime_id in gone:
            self.forget(runtime_id, source)
        return gone

    def _unindex(self, old: Identity) -> None:
        if any(
            (entry := entries.get(old.runtime_id)) is not None and entry.pod_uid == old.pod_uid
            for entries in self._entries.values()
        ):
            return
        ids = self._pod_ids.get(old.pod_uid)
        if ids is not None:
            ids.discard(old.runtime_id)
            if not ids:
                del self._pod_ids[old.pod_uid]

    # -- asking ------------------------------------------------------------------------------
    def has(self, runtime_id: str, source: IdentitySource) -> bool:
        """Whether ``source`` has said who ``runtime_id`` is."""
        return runtime_id in self._entries[source]

    def lookup(self, runtime_id: str) -> Identity | None:
        """The most trusted source's identity of ``runtime_id``, or None."""
        for source in PRECEDENCE:
            identity = self._entries[source].get(runtime_id)
            if identity is not None:
                return identity
        return None

    def in_pod(self, pod_uid: str, runtime_id: str) -> Identity | None:
        """Who ``runtime_id`` is, if its most trusted source places it in pod ``pod_uid``; else None."""
        identity = self.lookup(runtime_id)
        return identity if identity is not None and identity.pod_uid == pod_uid else None

    def named(self, pod_uid: str) -> frozenset[str]:
        """The container names (not the sandbox) of pod ``pod_uid`` that some runtime id is known to be."""
        names = set()
        for runtime_id in self._pod_ids.get(pod_uid, ()):
            identity = self.in_pod(pod_uid, runtime_id)
            if identity is not None and identity.name is not None and identity.kind is ContainerType.CONTAINER:
                names.add(identity.name)
        return frozenset(names)


class StatusFeed:
    """Feeds the book from the pod statuses each pass, reading again only the pods whose view changed.

    The pod cache hands out the same :class:`PodView` object for a pod that did not change, so a pass over a
    node of 110 unchanged pods costs one identity check per pod, not a parse of every containerID.
    """

    def __init__(self, book: IdentityBook) -> None:
        self.book = book
        self._fed: dict[str, tuple[PodView, tuple[Identity, ...]]] = {}

    def update(self, views: Iterable[PodView]) -> None:
        """State what ``views`` (every pod the sources hold now) say in their statuses."""
        fed: dict[str, tuple[PodView, tuple[Identity, ...]]] = {}
        for view in views:
            old = self._fed.pop(view.uid, None)
            if old is not None and old[0] is view:
                fed[view.uid] = old
                continue
            if old is not None:
                self._drop(old[1])
            identities = tuple(status_identities([view]))
            for identity in identities:
                self.book.learn(identity)
            fed[view.uid] = (view, identities)
        for _view, identities in self._fed.values():
            self._drop(identities)
        self._fed = fed

    def _drop(self, identities: Iterable[Identity]) -> None:
        for identity in identities:
            self.book.forget(identity.runtime_id, IdentitySource.STATUS, pod_uid=identity.pod_uid)


def status_identities(views: Iterable[PodView]) -> list[Identity]:
    """What the pod statuses say: one identity per valid ``containerID`` (invalid ones are reported elsewhere)."""
    found: list[Identity] = []
    for view in views:
        for container in view.all_containers:
            if not container.container_id:
                continue
            try:
                parsed = ContainerID.parse(container.container_id)
            except CgroupPathError:
                continue
            found.append(
                Identity(
                    runtime_id=parsed.id,
                    pod_uid=view.cgroup_uid,
                    kind=ContainerType.CONTAINER,
                    name=container.name,
                    source=IdentitySource.STATUS,
                    runtime=parsed.runtime,
                )
            )
    return found
