"""The reconciler's pod cache: views read once per change of the pod set (``agent/reconcile/pods.py``)."""

from __future__ import annotations

from agent.kube.source import PodEvent
from agent.reconcile.pods import PodCache
from tests.support.podfactory import container, make_pod


def test_views_are_kept_until_the_next_event() -> None:
    """Two reads without an event give the same pod objects; an UPSERT and a DELETE are seen at once."""
    web, db = (
        make_pod("web", containers=[container("app", cpu="1", memory="1Gi")]),
        make_pod("db", containers=[container("db", cpu="2", memory="1Gi")], creation_timestamp="2026-01-01T00:00:09Z"),
    )
    cache = PodCache()
    cache.apply(PodEvent(kind="SYNC", pods=(web,)))
    first, _ = cache.views()
    again, _ = cache.views()
    cache.apply(PodEvent(kind="UPSERT", pods=(db,)))
    upserted, _ = cache.views()
    cache.apply(PodEvent(kind="DELETE", pods=(web,)))
    deleted, _ = cache.views()
    assert (True, ["web", "db"], ["db"]) == (
        all(a is b for a, b in zip(first, again, strict=True)),
        [v.name for v in upserted],
        [v.name for v in deleted],
    )


def test_a_caller_changing_its_list_does_not_change_the_cache() -> None:
    """views() hands out a new list each time: a caller that filters it in place leaves the next read whole."""
    cache = PodCache()
    cache.apply(PodEvent(kind="SYNC", pods=(make_pod("web", containers=[container("app", cpu="1", memory="1Gi")]),)))
    taken, _ = cache.views()
    taken.clear()
    assert ["web"] == [v.name for v in cache.views()[0]]
