"""Naming container cgroups from bundles: found, not yet (re-read on a schedule), elsewhere, wrong pod, invalid."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent.cgroups import ScannedContainer, ScannedPod
from agent.pods import QOSClass
from agent.reconcile.identity import Identity, IdentityBook
from agent.reconcile.naming import RETRY_DELAYS, BundleNamer
from agent.runtime import BundleReader, ContainerType, IdentityErrorReason, IdentitySource
from agent.vocabulary import Runtime
from tests.support.bundles import bundle_path, containerd_annotations, write_bundle, write_raw_bundle

POD = "0c9e8a54-52d4-4c1e-8f61-3b7a9e2d4c11"
OTHER_POD = "5b0c1d2e-3f40-4a51-8b62-7c83d94ea5f6"
CID = "c254a5ed38a9380a3229bf5fe8303ff3d7a0090cddfbb022b97b254e6fde5780"
CGROUP = Path("/sys/fs/cgroup/kubepods") / f"pod{POD}" / CID


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Log:
    """Records ``log.info(event, **fields)`` calls."""

    lines: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))


@dataclass
class Setup:
    root: Path
    book: IdentityBook
    namer: BundleNamer
    clock: Clock
    log: Log
    errors: list[tuple[str, str, Path, str, str]]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    bundle_path(tmp_path, "0" * 64).parent.parent.mkdir(parents=True)
    book, clock, log = IdentityBook(), Clock(), Log()
    errors: list[tuple[str, str, Path, str, str]] = []
    namer = BundleNamer(
        book,
        BundleReader(tmp_path),
        on_error=lambda *args: errors.append(args),
        log=log,
        clock=clock,
    )
    return Setup(root=tmp_path, book=book, namer=namer, clock=clock, log=log, errors=errors)


def _bundle_identity(name: str | None = "app") -> Identity:
    return Identity(
        runtime_id=CID,
        pod_uid=POD,
        kind=ContainerType.CONTAINER if name else ContainerType.SANDBOX,
        name=name,
        source=IdentitySource.BUNDLE,
        runtime=Runtime.CONTAINERD,
    )


def test_found_is_learnt(setup: Setup) -> None:
    """A bundle naming a container of the pod its cgroup is in goes into the book as source ``bundle``."""
    write_bundle(setup.root, CID, containerd_annotations(POD, "app"))
    setup.namer.identify(POD, CID, None, CGROUP)
    assert (_bundle_identity(), [], None) == (setup.book.lookup(CID), setup.errors, setup.namer.next_recheck())


def test_sandbox_is_learnt_as_sandbox(setup: Setup) -> None:
    """The sandbox's bundle names the sandbox (no container name)."""
    write_bundle(setup.root, CID, containerd_annotations(POD, None))
    setup.namer.identify(POD, CID, None, CGROUP)
    assert _bundle_identity(None) == setup.book.lookup(CID)


def test_another_pod_is_refused_and_reported(setup: Setup) -> None:
    """A bundle claiming another pod than the cgroup it sits in is not learnt, and is reported once."""
    write_bundle(setup.root, CID, containerd_annotations(OTHER_POD, "app"))
    setup.namer.identify(POD, CID, None, CGROUP)
    setup.namer.identify(POD, CID, None, CGROUP)
    [(pod, rid, path, reason, message)] = setup.errors
    assert (None, POD, CID, CGROUP, IdentityErrorReason.UID_MISMATCH) == (
        setup.book.lookup(CID),
        pod,
        rid,
        path,
        reason,
    )
    assert f"belongs to pod {OTHER_POD}, but its cgroup {CGROUP} is in pod {POD}'s" in message


def test_invalid_bundle_is_reported_once(setup: Setup) -> None:
    """An invalid bundle is reported with its reason and not read again."""
    write_raw_bundle(setup.root, CID, b"[]")
    setup.namer.identify(POD, CID, None, CGROUP)
    write_bundle(setup.root, CID, containerd_annotations(POD, "app"))
    setup.namer.identify(POD, CID, None, CGROUP)
    assert ([IdentityErrorReason.MALFORMED], None) == ([e[3] for e in setup.errors], setup.book.lookup(CID))


def test_not_yet_is_read_again_when_due(setup: Setup) -> None:
    """A missing bundle is due again after 5 ms; read then, it names the container and the cgroup is returned."""
    setup.namer.identify(POD, CID, None, CGROUP)
    due_at = setup.namer.next_recheck()
    early = setup.namer.recheck(setup.clock.now + 0.001)
    write_bundle(setup.root, CID, containerd_annotations(POD, "app"))
    setup.clock.now += 0.005
    ready = setup.namer.recheck(setup.clock.now)
    actual = (due_at, early, ready, setup.book.lookup(CID), setup.namer.next_recheck())
    assert (100.005, [], [(POD, CGROUP)], _bundle_identity(), None) == actual


def test_never_complete_is_reported_after_the_last_retry(setup: Setup) -> None:
    """A half-written bundle that stays so: re-read on the schedule, then reported as ``incomplete``."""
    write_raw_bundle(setup.root, CID, b'{"annotations": {')
    setup.namer.identify(POD, CID, None, CGROUP)
    delays = []
    while (due := setup.namer.next_recheck()) is not None:
        delays.append(round(due - setup.clock.now, 3))
        setup.clock.now = due
        setup.namer.recheck(due)
    [(_, _, _, reason, message)] = setup.errors
    assert (list(RETRY_DELAYS), IdentityErrorReason.INCOMPLETE) == (delays, reason)
    assert f"(after {len(RETRY_DELAYS)} retries)" in message


def test_unavailable_runtime_is_said_once_and_not_retried(tmp_path: Path) -> None:
    """No containerd state under the root: one ``runtime.bundles_unavailable`` line, no re-reads, no error."""
    log, errors = Log(), []
    namer = BundleNamer(
        IdentityBook(), BundleReader(tmp_path), on_error=lambda *a: errors.append(a), log=log, clock=Clock()
    )
    namer.identify(POD, CID, None, CGROUP)
    namer.identify(POD, "d" * 64, None, CGROUP.with_name("d" * 64))
    directory = str(tmp_path / "run/containerd/io.containerd.runtime.v2.task/k8s.io")
    assert (
        [("runtime.bundles_unavailable", {"directory": directory, "reason": f"{directory} does not exist"})],
        None,
        [],
    ) == (log.lines, namer.next_recheck(), errors)


def test_nri_named_containers_are_not_read(setup: Setup) -> None:
    """When NRI already said who the container is, its bundle is not read."""
    write_raw_bundle(setup.root, CID, b"[]")
    nri = Identity(runtime_id=CID, pod_uid=POD, kind=ContainerType.CONTAINER, name="app", source=IdentitySource.NRI)
    setup.book.learn(nri)
    setup.namer.identify(POD, CID, None, CGROUP)
    assert ([], nri) == (setup.errors, setup.book.lookup(CID))


def test_forget_and_full_scan(setup: Setup) -> None:
    """A scan reads children nobody named; a complete scan without them forgets their bundle identities."""
    write_bundle(setup.root, CID, containerd_annotations(POD, "app"))
    child = ScannedContainer(id=CID, runtime=Runtime.CONTAINERD, path=CGROUP)
    pod = ScannedPod(qos=QOSClass.GUARANTEED, uid=POD, path=CGROUP.parent, containers=(child,))
    setup.namer.identify_live([pod])
    learnt = setup.book.lookup(CID)
    empty = ScannedPod(qos=QOSClass.GUARANTEED, uid=POD, path=CGROUP.parent, containers=())
    setup.namer.retain([empty])
    assert (_bundle_identity(), None) == (learnt, setup.book.lookup(CID))
