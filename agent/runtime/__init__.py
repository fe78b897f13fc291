"""The container runtime's own view of its containers: who a container cgroup belongs to, without the API server.

``annotations`` (pure) reads the pod uid, container name and type (sandbox or container) from an OCI spec's
annotations, for containerd's CRI plugin and CRI-O; ``paths`` says where the runtimes keep their state
(``runtimePaths``, with k3s and RKE2 presets); ``bundle`` finds and reads that spec (the bundle's
``config.json``) under ``--runtime-root``, bounded and validated; ``vocabulary`` holds the words of container
identity (container types, identity sources, error reasons). The reconciler feeds what it learns into its
identity book (``agent/reconcile/identity.py``), next to the pod status and NRI (``docs/design.md``,
"Container identity"). Nothing here imports the planner or the reconciler.
"""

from agent.runtime.annotations import (
    ANNOTATION_KEYS,
    AnnotationError,
    AnnotationKeys,
    BundleIdentity,
    identity_from_spec,
)
from agent.runtime.bundle import (
    DEFAULT_RUNTIME_ROOT,
    MAX_BUNDLE_BYTES,
    BundleLookup,
    BundleReader,
    Found,
    Invalid,
    NotYet,
    Unavailable,
    bundle_locations,
)
from agent.runtime.paths import PRESETS, RuntimePathPreset, RuntimePaths, RuntimePathsError
from agent.runtime.vocabulary import ContainerType, IdentityErrorReason, IdentitySource

__all__ = [
    "ANNOTATION_KEYS",
    "DEFAULT_RUNTIME_ROOT",
    "MAX_BUNDLE_BYTES",
    "PRESETS",
    "AnnotationError",
    "AnnotationKeys",
    "BundleIdentity",
    "BundleLookup",
    "BundleReader",
    "ContainerType",
    "Found",
    "IdentityErrorReason",
    "IdentitySource",
    "Invalid",
    "NotYet",
    "RuntimePathPreset",
    "RuntimePaths",
    "RuntimePathsError",
    "Unavailable",
    "bundle_locations",
    "identity_from_spec",
]
