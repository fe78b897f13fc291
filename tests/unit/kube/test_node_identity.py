"""The Node's uid for mirror pods' owner checks (``agent/kube/node_identity.py``): cached, read again on a
differing owner at most once a minute, unknown while the Node cannot be read."""

from __future__ import annotations

from agent.kube.node_identity import NodeIdentity, OwnerVerdict


class FakeNode:
    """Answers ``uid`` (or raises ``error``) and counts the reads; a clock moved by hand."""

    def __init__(self, uid: str | None) -> None:
        self.uid = uid
        self.error: Exception | None = None
        self.reads = 0
        self.now = 0.0

    def read(self) -> str | None:
        self.reads += 1
        if self.error is not None:
            raise self.error
        return self.uid

    def clock(self) -> float:
        return self.now


def test_the_uid_is_read_once_and_confirms_the_owner() -> None:
    """Three checks of the right uid: one read."""
    node = FakeNode("u-1")
    identity = NodeIdentity(node.read, clock=node.clock)
    verdicts = [identity.check("u-1") for _ in range(3)]
    assert ([(OwnerVerdict.CONFIRMED, "u-1")] * 3, 1) == (verdicts, node.reads)


def test_a_differing_owner_reads_the_node_again_at_most_once_a_minute() -> None:
    """A forged uid is a mismatch; the Node is read again (it may have been registered anew), but not on every
    check; a Node registered again is then confirmed under its new uid."""
    node = FakeNode("u-1")
    identity = NodeIdentity(node.read, clock=node.clock)
    first = identity.check("forged")
    node.now = 30.0
    second = identity.check("forged")
    node.uid, node.now = "u-2", 61.0
    third = identity.check("u-2")
    assert (
        (OwnerVerdict.MISMATCH, "u-1"),
        (OwnerVerdict.MISMATCH, "u-1"),
        (OwnerVerdict.CONFIRMED, "u-2"),
        2,
    ) == (first, second, third, node.reads)


def test_an_unreadable_node_is_unknown_and_says_why() -> None:
    """No Node (an API error): unknown, with the error; read again a minute later."""
    node = FakeNode("u-1")
    node.error = RuntimeError('nodes "node-1" not found')
    identity = NodeIdentity(node.read, clock=node.clock)
    verdict = identity.check("u-1")
    node.error, node.now = None, 61.0
    assert (
        (OwnerVerdict.UNKNOWN, None),
        'RuntimeError: nodes "node-1" not found',
        (OwnerVerdict.CONFIRMED, "u-1"),
    ) == (
        verdict,
        identity.error,
        identity.check("u-1"),
    )
