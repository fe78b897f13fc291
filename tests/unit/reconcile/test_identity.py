"""The identity book: one answer per runtime id, the most trusted source first, and never across pods."""

from __future__ import annotations

import pytest

from agent.pods import PodView, pod_from_dict
from agent.reconcile.identity import Identity, IdentityBook, StatusFeed, status_identities
from agent.runtime import ContainerType, IdentitySource
from agent.vocabulary import Runtime
from tests.support.podfactory import container, container_id, make_pod

POD_A = "aaaaaaaa-0000-4000-8000-00000000000a"
POD_B = "bbbbbbbb-0000-4000-8000-00000000000b"
RID = "1" * 64
OTHER = "2" * 64


def ident(
    source: IdentitySource,
    name: str | None = "app",
    *,
    pod: str = POD_A,
    rid: str = RID,
    kind: ContainerType = ContainerType.CONTAINER,
) -> Identity:
    return Identity(runtime_id=rid, pod_uid=pod, kind=kind, name=name, source=source, runtime=Runtime.CONTAINERD)


class TestPrecedence:
    """NRI before the bundle before the pod status."""

    def test_most_trusted_source_answers(self) -> None:
        """With all three sources, NRI's entry answers; without it, the bundle's; then the status'."""
        book = IdentityBook()
        for source, name in ((IdentitySource.STATUS, "s"), (IdentitySource.BUNDLE, "b"), (IdentitySource.NRI, "n")):
            book.learn(ident(source, name))
        answers = []
        for dropped in (None, IdentitySource.NRI, IdentitySource.BUNDLE):
            if dropped is not None:
                book.forget(RID, dropped)
            found = book.lookup(RID)
            answers.append(found.name if found is not None else None)
        assert ["n", "b", "s"] == answers

    def test_forget_without_source_forgets_all(self) -> None:
        """``forget(id)`` drops every source's entry."""
        book = IdentityBook()
        book.learn(ident(IdentitySource.STATUS))
        book.learn(ident(IdentitySource.BUNDLE))
        book.forget(RID)
        assert (None, 0) == (book.lookup(RID), len(book))


class TestPods:
    """A cgroup found inside pod U is named only by an entry that places it in pod U."""

    def test_in_pod(self) -> None:
        """The right pod gets the identity; another pod gets nothing."""
        book = IdentityBook()
        book.learn(ident(IdentitySource.BUNDLE))
        assert (ident(IdentitySource.BUNDLE), None) == (book.in_pod(POD_A, RID), book.in_pod(POD_B, RID))

    def test_best_source_disagreeing_is_not_overruled(self) -> None:
        """The bundle says pod B, the status pod A: a cgroup in pod A is not named (the runtime knows better)."""
        book = IdentityBook()
        book.learn(ident(IdentitySource.STATUS, pod=POD_A))
        book.learn(ident(IdentitySource.BUNDLE, pod=POD_B))
        assert (None, "app") == (book.in_pod(POD_A, RID), getattr(book.in_pod(POD_B, RID), "name", None))

    def test_named_lists_containers_of_the_pod_only(self) -> None:
        """``named(pod)``: container names (no sandbox) whose best entry is in that pod."""
        book = IdentityBook()
        book.learn(ident(IdentitySource.STATUS, "db"))
        book.learn(ident(IdentitySource.BUNDLE, None, rid=OTHER, kind=ContainerType.SANDBOX))
        book.learn(ident(IdentitySource.STATUS, "web", pod=POD_B, rid="3" * 64))
        assert (frozenset({"db"}), frozenset({"web"})) == (book.named(POD_A), book.named(POD_B))

    def test_named_follows_a_move(self) -> None:
        """An entry replaced with another pod moves the name; forgetting it removes it."""
        book = IdentityBook()
        book.learn(ident(IdentitySource.BUNDLE, "db"))
        book.learn(ident(IdentitySource.BUNDLE, "db", pod=POD_B))
        moved = (book.named(POD_A), book.named(POD_B))
        book.forget(RID)
        assert ((frozenset(), frozenset({"db"})), frozenset()) == (moved, book.named(POD_B))


class TestFeeding:
    """``replace`` states a source's whole knowledge; ``retain`` drops the gone."""

    def test_replace_drops_what_the_source_no_longer_says(self) -> None:
        """The status now names only OTHER: RID's status entry goes, its bundle entry stays."""
        book = IdentityBook()
        book.learn(ident(IdentitySource.STATUS))
        book.learn(ident(IdentitySource.BUNDLE))
        book.replace(IdentitySource.STATUS, [ident(IdentitySource.STATUS, "b", rid=OTHER)])
        actual = (book.has(RID, IdentitySource.STATUS), book.has(RID, IdentitySource.BUNDLE), book.lookup(OTHER))
        assert (False, True, ident(IdentitySource.STATUS, "b", rid=OTHER)) == actual

    def test_replace_refuses_another_source(self) -> None:
        """Handing a bundle identity to ``replace(status)`` is a programming error, said loudly."""
        with pytest.raises(ValueError, match=r"replace\(status\): identity .* comes from bundle"):
            IdentityBook().replace(IdentitySource.STATUS, [ident(IdentitySource.BUNDLE)])

    def test_retain(self) -> None:
        """Entries of one source whose runtime id is not live are forgotten; others stay."""
        book = IdentityBook()
        book.learn(ident(IdentitySource.BUNDLE))
        book.learn(ident(IdentitySource.BUNDLE, rid=OTHER))
        book.learn(ident(IdentitySource.STATUS, rid=OTHER))
        gone = book.retain(IdentitySource.BUNDLE, {RID})
        assert ([OTHER], True, True) == (
            gone,
            book.has(OTHER, IdentitySource.STATUS),
            book.has(RID, IdentitySource.BUNDLE),
        )


def test_status_identities() -> None:
    """One identity per valid status containerID, named after its pod's cgroup uid; invalid ones are skipped."""
    good = make_pod("good", containers=[container("app", cpu="1", memory="1Gi")], states={"app": "running"})
    bad = make_pod("bad", containers=[container("app", cpu="1", memory="1Gi")], states={"app": "running"})
    bad["status"]["containerStatuses"][0]["containerID"] = "containerd://../../etc"
    waiting = make_pod("waiting", containers=[container("app", cpu="1", memory="1Gi")], states={"app": "waiting"})
    views = [pod_from_dict(raw) for raw in (good, bad, waiting)]
    uid = good["metadata"]["uid"]
    expected = [
        Identity(
            runtime_id=container_id(uid, "app").split("://")[1],
            pod_uid=uid,
            kind=ContainerType.CONTAINER,
            name="app",
            source=IdentitySource.STATUS,
            runtime=Runtime.CONTAINERD,
        )
    ]
    assert expected == status_identities(views)


def test_container_id_spelling() -> None:
    """``container_id`` spells the status form when the runtime is known, else the bare id."""
    bare = Identity(runtime_id=RID, pod_uid=POD_A, kind=ContainerType.SANDBOX, name=None, source=IdentitySource.NRI)
    assert (f"containerd://{RID}", RID) == (ident(IdentitySource.BUNDLE).container_id, bare.container_id)


class TestStatusFeed:
    """The statuses feed the book each pass; only changed pods are read again."""

    @staticmethod
    def _view(name: str, state: str = "running", cid: str | None = None) -> PodView:
        raw = make_pod(name, containers=[container("app", cpu="1", memory="1Gi")], states={"app": state})
        if cid is not None:
            raw["status"]["containerStatuses"][0]["containerID"] = cid
        return pod_from_dict(raw)

    def test_new_changed_and_gone_pods(self) -> None:
        """A changed status replaces the pod's old id; a pod gone takes its ids with it."""
        book = IdentityBook()
        feed = StatusFeed(book)
        a, b = self._view("a"), self._view("b")
        feed.update([a, b])
        first = {rid for rid in (_rid(a), _rid(b)) if book.lookup(rid) is not None}
        a2 = self._view("a", cid=f"containerd://{'e' * 64}")
        feed.update([a2])
        actual = (first == {_rid(a), _rid(b)}, book.lookup(_rid(a)), book.lookup(_rid(b)), book.named(a2.cgroup_uid))
        assert (True, None, None, frozenset({"app"})) == actual

    def test_unchanged_views_are_not_read_again(self) -> None:
        """The same view object again: nothing is re-learnt (an entry forgotten behind the feed stays forgotten)."""
        book = IdentityBook()
        feed = StatusFeed(book)
        a = self._view("a")
        feed.update([a])
        book.forget(_rid(a))
        feed.update([a])
        assert book.lookup(_rid(a)) is None

    def test_a_pod_dropping_an_id_another_pod_claims(self) -> None:
        """Two statuses name one id: the pod that stops naming it does not take the other pod's entry away."""
        book = IdentityBook()
        feed = StatusFeed(book)
        shared = f"containerd://{'c' * 64}"
        a, b = self._view("a", cid=shared), self._view("b", cid=shared)
        feed.update([a, b])
        feed.update([self._view("a"), b])
        found = book.lookup("c" * 64)
        assert b.cgroup_uid == (found.pod_uid if found is not None else None)


def _rid(view: PodView) -> str:
    cid = view.all_containers[0].container_id
    assert cid is not None
    return cid.split("://")[1]
