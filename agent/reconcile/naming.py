"""Naming container cgroups from their runtime's OCI bundles, into the identity book.

When a container cgroup appears (the watcher says so, or a full scan finds one nobody named yet), the
:class:`BundleNamer` reads the container's bundle (``agent/runtime/bundle.py``) and, when it names a container
of the very pod whose cgroup holds it, records that in the identity book (``identity.py``, source ``bundle``).
The bundle is written before the cgroup (containerd's shim and CRI-O both write ``config.json`` before
``runc create``), so the first read normally succeeds.

What else can happen, and what follows:

* not complete yet (missing, empty, half-written JSON): read again after 5, 10, 20, 50, 100, 200, 500 and
  1000 ms (:data:`RETRY_DELAYS`; the agent's loop wakes for :meth:`BundleNamer.next_recheck`), then reported
  as ``incomplete``;
* the runtime's bundle directory does not exist under ``--runtime-root`` (another runtime; its state not
  mounted): said once per directory (``runtime.bundles_unavailable``), nothing retried;
* the bundle names another pod than the cgroup it sits in (``uid_mismatch``), or is invalid (oversize, not a
  regular file, unreadable, no or bad annotations): reported through ``on_error`` and not used.

In every case but success the container stays unnamed by its bundle; the pod status stays the last resort.
A runtime id is read at most once once settled (success or failure), until its cgroup is removed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.cgroups import ScannedPod
from agent.fault_boundary import FaultBoundary, Stage
from agent.reconcile.identity import Identity, IdentityBook
from agent.runtime import BundleReader, Found, IdentityErrorReason, IdentitySource, Invalid, NotYet, Unavailable
from agent.vocabulary import Runtime

__all__ = ["RETRY_DELAYS", "BundleNamer", "ErrorSink"]

RETRY_DELAYS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
"""Seconds before each new read of a bundle that was not complete yet (about 1.9 s in all, then reported)."""

ErrorSink = Callable[[str, str, Path, IdentityErrorReason, str], None]
"""Called as ``(pod_key, runtime_id, cgroup_path, reason, message)`` for a bundle that cannot name its container."""


@dataclass(slots=True)
class _Retry:
    """A container cgroup whose bundle was not complete yet: where it is and when to read it again."""

    pod_key: str
    runtime: Runtime | None
    path: Path
    attempts: int
    due: float


class BundleNamer:
    """Feeds the identity book from bundles; see the module docstring.

    Args:
        book: the identity book to feed.
        reader: reads bundles under ``--runtime-root``.
        on_error: told about each bundle that cannot name its container (once per runtime id).
        log: a structlog logger (for ``runtime.bundles_unavailable``).
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        book: IdentityBook,
        reader: BundleReader,
        *,
        on_error: ErrorSink,
        log: Any,
        clock: Callable[[], float],
    ) -> None:
        self.book = book
        self.reader = reader
        self._on_error = on_error
        self._log = log
        self._clock = clock
        self._retry: dict[str, _Retry] = {}
        self._settled: set[str] = set()
        self._unavailable: set[str] = set()
        self.boundary: FaultBoundary | None = None
        """Where an exception the reader does not expect stops (this bundle only); None: it propagates."""

    def identify(self, pod_key: str, runtime_id: str, runtime: Runtime | None, path: Path) -> None:
        """Name the container cgroup ``path`` (inside pod ``pod_key``'s cgroup) from its bundle, if it can be."""
        if runtime_id in self._settled or self.book.has(runtime_id, IdentitySource.NRI):
            return
        try:
            outcome = self.reader.read(runtime_id, runtime)
        except Exception as err:
            if self.boundary is None:
                raise
            self.boundary.caught(Stage.BUNDLE, err, str(path))
            outcome = Invalid(path=None, reason=IdentityErrorReason.UNREADABLE, message=f"{type(err).__name__}: {err}")
        if isinstance(outcome, NotYet):
            self._not_yet(pod_key, runtime_id, runtime, path, f"{outcome.path}: {outcome.reason}")
            return
        self._settle(runtime_id)
        if isinstance(outcome, Unavailable):
            key = str(outcome.directory or outcome.runtime)
            if key not in self._unavailable:
                self._unavailable.add(key)
                self._log.info("runtime.bundles_unavailable", directory=key, reason=outcome.reason)
        elif isinstance(outcome, Invalid):
            self._on_error(pod_key, runtime_id, path, outcome.reason, outcome.message)
        elif isinstance(outcome, Found):
            found = outcome.identity
            if found.pod_uid != pod_key:
                message = (
                    f"{outcome.path} says container {runtime_id} belongs to pod {found.pod_uid}, but its cgroup "
                    f"{path} is in pod {pod_key}'s; it is not named from its bundle"
                )
                self._on_error(pod_key, runtime_id, path, IdentityErrorReason.UID_MISMATCH, message)
                return
            self.book.learn(
                Identity(
                    runtime_id=runtime_id,
                    pod_uid=found.pod_uid,
                    kind=found.kind,
                    name=found.name,
                    source=IdentitySource.BUNDLE,
                    runtime=found.runtime,
                )
            )

    def _not_yet(self, pod_key: str, runtime_id: str, runtime: Runtime | None, path: Path, reason: str) -> None:
        retry = self._retry.get(runtime_id)
        attempts = 1 if retry is None else retry.attempts + 1
        if attempts > len(RETRY_DELAYS):
            self._settle(runtime_id)
            self._on_error(
                pod_key,
                runtime_id,
                path,
                IdentityErrorReason.INCOMPLETE,
                f"{reason} (after {len(RETRY_DELAYS)} retries)",
            )
            return
        due = self._clock() + RETRY_DELAYS[attempts - 1]
        self._retry[runtime_id] = _Retry(pod_key=pod_key, runtime=runtime, path=path, attempts=attempts, due=due)

    def _settle(self, runtime_id: str) -> None:
        self._retry.pop(runtime_id, None)
        self._settled.add(runtime_id)

    def identify_live(self, live: Iterable[ScannedPod]) -> None:
        """Read the bundles of the live children nobody named yet."""
        for scanned in live:
            for child in scanned.containers:
                if child.id not in self._settled and child.id not in self._retry:
                    self.identify(scanned.uid, child.id, child.runtime, child.path)

    def retain(self, live: Iterable[ScannedPod]) -> None:
        """``live`` is a full scan: forget what was learnt about the children that are not in it any more."""
        ids = {child.id for scanned in live for child in scanned.containers}
        for runtime_id in [r for r in (*self._settled, *self._retry) if r not in ids]:
            self.forget(runtime_id)
        self.book.retain(IdentitySource.BUNDLE, ids)

    def forget(self, runtime_id: str) -> None:
        """The container's cgroup is gone: drop its bundle identity and read it afresh if it comes back."""
        self._retry.pop(runtime_id, None)
        self._settled.discard(runtime_id)
        self.book.forget(runtime_id, IdentitySource.BUNDLE)

    def next_recheck(self) -> float | None:
        """When the next incomplete bundle is due to be read again (``clock()`` time), or None."""
        return min((retry.due for retry in self._retry.values()), default=None)

    def recheck(self, now: float) -> list[tuple[str, Path]]:
        """Read again every bundle due by ``now``; returns (pod key, cgroup path) of each, to be applied."""
        due = [(runtime_id, retry) for runtime_id, retry in self._retry.items() if retry.due <= now]
        for runtime_id, retry in due:
            self.identify(retry.pod_key, runtime_id, retry.runtime, retry.path)
        return [(retry.pod_key, retry.path) for _, retry in due]
