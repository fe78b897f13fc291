"""The pod fingerprint of a NodeResourceTopology object, as the ``podfingerprint`` Go module computes it (pure).

The scheduler-plugins' NodeResourceTopologyMatch keeps a reserve cache when ``cacheResyncPeriodSeconds`` > 0:
a node it placed a pod on is "dirty" until the node's NRT object says which pods it accounts for, and the
plugin finds the same fingerprint over the pods it knows on that node. Without one, the node never resyncs.

The signature (``github.com/k8stopologyawareschedwg/podfingerprint`` v0.2.x, ``Fingerprint.Sign``):
each pod hashes to ``XXH64(name, seed=XXH64(namespace, seed=0))``; the hashes are sorted as unsigned 64-bit
numbers, written little-endian one after the other and hashed again with XXH64 (seed 0); the signature is
``"pfp0" + "v001" + `` that digest as 16 lower-case hex digits (big-endian). No pods: the hash of nothing.

Published, as NFD's topology-updater does, in the attributes :data:`ATTRIBUTE` (the signature) and
:data:`ATTRIBUTE_METHOD` (which pods it covers) and in the annotation :data:`ANNOTATION`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from enum import StrEnum

import xxhash

__all__ = ["ANNOTATION", "ATTRIBUTE", "ATTRIBUTE_METHOD", "PREFIX", "VERSION", "FingerprintMethod", "pod_fingerprint"]

PREFIX = "pfp0"
VERSION = "v001"
ANNOTATION = "topology.node.k8s.io/fingerprint"
ATTRIBUTE = "nodeTopologyPodsFingerprint"
ATTRIBUTE_METHOD = "nodeTopologyPodsFingerprintMethod"


class FingerprintMethod(StrEnum):
    """Which pods the fingerprint covers (the module's ``Method*`` values; the plugin autodetects it)."""

    ALL = "all"
    WITH_EXCLUSIVE_RESOURCES = "with-exclusive-resources"


def _pod_hash(namespace: str, name: str) -> int:
    return xxhash.xxh64_intdigest(name.encode(), seed=xxhash.xxh64_intdigest(namespace.encode()))


def pod_fingerprint(pods: Iterable[tuple[str, str]]) -> str:
    """The signature of a set of pods given as ``(namespace, name)`` pairs (order does not matter).

    A pair given twice counts twice, as in the Go module (callers pass each pod once).
    """
    hashes = sorted(_pod_hash(namespace, name) for namespace, name in pods)
    digest = xxhash.xxh64(b"".join(struct.pack("<Q", value) for value in hashes)).hexdigest()
    return PREFIX + VERSION + digest
