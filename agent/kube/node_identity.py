"""The Node's uid, which a mirror pod's owner reference must carry (issue 22, finding 1).

The kubelet creates each mirror pod with an ``ownerReferences`` entry naming its Node, name and uid
(``pkg/kubelet/pod/mirror_client.go``). A tenant can write the same entry with a made-up uid on a pod of its own;
the API server accepts it, and only the garbage collector later removes a pod whose owner's uid matches no Node.
podpin therefore compares the entry's uid with the uid of the Node it runs on, as the garbage collector would,
before letting the pod's ``kubernetes.io/config.mirror`` annotation name a static pod's cgroup.

The uid is read once and cached. A Node deleted and registered again gets a new uid, so an entry that differs
makes the agent read the Node again, at most once per :data:`REFRESH_SECONDS`. While the Node cannot be read at
all (no API server: pods from ``--pods-dir``; the Node not found; an API error), the uid is unknown and only the
owner's kind and name are checked, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum

__all__ = ["REFRESH_SECONDS", "NodeIdentity", "OwnerVerdict"]

REFRESH_SECONDS = 60.0
"""The shortest time between two reads of the Node made because an owner's uid differed."""


class OwnerVerdict(StrEnum):
    """What a Node owner reference's uid is, against the Node's."""

    CONFIRMED = "confirmed"
    MISMATCH = "mismatch"
    UNKNOWN = "unknown"
    """The Node's uid could not be read: only the owner's kind and name were checked."""


class NodeIdentity:
    """The Node's uid, read through ``read`` (which returns None or raises when it cannot say)."""

    def __init__(
        self,
        read: Callable[[], str | None],
        *,
        clock: Callable[[], float] = time.monotonic,
        refresh: float = REFRESH_SECONDS,
    ) -> None:
        self._read = read
        self._clock = clock
        self._refresh = refresh
        self._uid: str | None = None
        self._read_at: float | None = None
        self.error: str | None = None
        """Why the last read gave no uid (None after a good read)."""

    def uid(self) -> str | None:
        """The cached uid, read first when there is none (at most once per ``refresh`` seconds)."""
        if self._uid is None:
            self._reread()
        return self._uid

    def check(self, owner_uid: str) -> tuple[OwnerVerdict, str | None]:
        """Whether ``owner_uid`` is the Node's uid; the verdict and the Node's uid as known."""
        known = self.uid()
        if known is not None and known != owner_uid:
            self._reread()  # the Node may have been registered again since the uid was read
            known = self._uid
        if known is None:
            return OwnerVerdict.UNKNOWN, None
        return (OwnerVerdict.CONFIRMED if known == owner_uid else OwnerVerdict.MISMATCH), known

    def _reread(self) -> None:
        now = self._clock()
        if self._read_at is not None and now - self._read_at < self._refresh:
            return
        self._read_at = now
        try:
            uid = self._read()
        except Exception as err:  # the client's ApiException, or no connection: the uid stays as it was
            self.error = f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"
            return
        if uid:
            self._uid, self.error = uid, None
        else:
            self.error = "the Node has no uid"
