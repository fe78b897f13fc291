"""The container runtime's own view of its containers: who a container cgroup belongs to, without the API server.

``annotations`` (pure) reads the pod uid, container name and kind (sandbox or container) from an OCI spec's
annotations, for containerd's CRI plugin and CRI-O; ``bundle`` finds and reads that spec (the bundle's
``config.json``) under ``--runtime-root``, bounded and validated. The reconciler feeds what it learns into its
identity book (``agent/reconcile/identity.py``), next to the pod status and, later, NRI.
"""

from agent.runtime.annotations import (
    ANNOTATION_KEYS,
    AnnotationError,
    BundleIdentity,
    ContainerKind,
    identity_from_spec,
)
from agent.runtime.bundle import (
    BUNDLE_DIRS,
    DEFAULT_RUNTIME_ROOT,
    MAX_BUNDLE_BYTES,
    BundleLookup,
    BundleReader,
    Found,
    Invalid,
    NotYet,
    Unavailable,
)

__all__ = [
    "ANNOTATION_KEYS",
    "BUNDLE_DIRS",
    "DEFAULT_RUNTIME_ROOT",
    "MAX_BUNDLE_BYTES",
    "AnnotationError",
    "BundleIdentity",
    "BundleLookup",
    "BundleReader",
    "ContainerKind",
    "Found",
    "Invalid",
    "NotYet",
    "Unavailable",
    "identity_from_spec",
]
