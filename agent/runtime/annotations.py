"""Pure: who a container is, from the annotations its runtime wrote into its OCI bundle's ``config.json``.

The kubelet tells the runtime over CRI which pod and which container it is creating; the CRI runtimes
record that in the OCI runtime spec they hand to runc, as annotations. The bundle is written before runc
creates the container's cgroup, so podpin can name a new container cgroup from it within milliseconds,
without waiting for the API server to publish ``status.containerStatuses[].containerID``.

Annotation keys, per runtime (read in containerd's ``pkg/cri/annotations`` and CRI-O's
``pkg/annotations``; the containerd ones verified against containerd 1.7.24 in ``tests/vm``):

============  ======================================  ==========================================
what          containerd (CRI plugin)                 CRI-O
============  ======================================  ==========================================
kind          ``io.kubernetes.cri.container-type``    ``io.kubernetes.cri-o.ContainerType``
              (``sandbox`` | ``container``)           (``sandbox`` | ``container``)
pod uid       ``io.kubernetes.cri.sandbox-uid``       ``io.kubernetes.pod.uid``
container     ``io.kubernetes.cri.container-name``    ``io.kubernetes.container.name``
pod name      ``io.kubernetes.cri.sandbox-name``      ``io.kubernetes.pod.name``
namespace     ``io.kubernetes.cri.sandbox-namespace`` ``io.kubernetes.pod.namespace``
============  ======================================  ==========================================

Every value is validated before it names anything: the pod uid must be a pod cgroup's uid (an RFC 4122 UUID
in lower-case hex, or a static pod's 32-hex config hash), a container name a DNS-1123 label (what the API
server allows), the kind one of the two values. A sandbox has no container name (CRI-O writes ``POD``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.runtime.vocabulary import ContainerType, IdentityErrorReason
from agent.vocabulary import POD_UID_FORMS, Runtime, is_pod_uid

__all__ = [
    "ANNOTATION_KEYS",
    "AnnotationError",
    "AnnotationKeys",
    "BundleIdentity",
    "identity_from_spec",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnnotationKeys:
    """The annotation keys one runtime writes into a Kubernetes container's OCI spec."""

    kind: str
    pod_uid: str
    name: str
    pod_name: str
    namespace: str


ANNOTATION_KEYS: Mapping[Runtime, AnnotationKeys] = {
    Runtime.CONTAINERD: AnnotationKeys(
        kind="io.kubernetes.cri.container-type",
        pod_uid="io.kubernetes.cri.sandbox-uid",
        name="io.kubernetes.cri.container-name",
        pod_name="io.kubernetes.cri.sandbox-name",
        namespace="io.kubernetes.cri.sandbox-namespace",
    ),
    Runtime.CRIO: AnnotationKeys(
        kind="io.kubernetes.cri-o.ContainerType",
        pod_uid="io.kubernetes.pod.uid",
        name="io.kubernetes.container.name",
        pod_name="io.kubernetes.pod.name",
        namespace="io.kubernetes.pod.namespace",
    ),
}
"""The annotation keys each runtime writes (see the module docstring)."""

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class AnnotationError(ValueError):
    """The spec does not say who the container is; ``reason`` is ``malformed``, ``missing_annotation`` or
    ``bad_annotation``."""

    def __init__(self, reason: IdentityErrorReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleIdentity:
    """Who a runtime container is, as its bundle says."""

    runtime: Runtime
    container_id: str
    pod_uid: str
    """The uid the pod's cgroup is named after (a static pod's config hash)."""
    kind: ContainerType
    name: str | None
    """The container's name in the pod spec; None for a sandbox."""
    pod_name: str | None = None
    namespace: str | None = None


def _annotations(spec: object) -> Mapping[str, str]:
    if not isinstance(spec, Mapping):
        raise AnnotationError(
            IdentityErrorReason.MALFORMED, f"the OCI spec is a JSON {type(spec).__name__}, not an object"
        )
    annotations: Any = spec.get("annotations")
    if annotations is None:
        raise AnnotationError(IdentityErrorReason.MISSING_ANNOTATION, "the OCI spec has no annotations")
    if not isinstance(annotations, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
    ):
        raise AnnotationError(IdentityErrorReason.MALFORMED, "the OCI spec's annotations are not an object of strings")
    return annotations


def _required(annotations: Mapping[str, str], key: str) -> str:
    value = annotations.get(key)
    if value is None:
        raise AnnotationError(IdentityErrorReason.MISSING_ANNOTATION, f"annotation {key} is missing")
    return value


def identity_from_spec(runtime: Runtime, container_id: str, spec: object) -> BundleIdentity:
    """Read who container ``container_id`` is from its parsed OCI spec (``config.json``).

    Args:
        runtime: whose bundle it is (containerd or CRI-O; the keys differ).
        container_id: the container's 64-hex runtime id (already validated by the caller).
        spec: the parsed JSON document.

    Raises:
        AnnotationError: the spec is not an object, an annotation is missing or holds an invalid value;
            the message names the key and quotes the value.
        ValueError: a runtime whose bundles carry no CRI annotations (docker).
    """
    keys = ANNOTATION_KEYS.get(runtime)
    if keys is None:
        raise ValueError(f"{runtime.value} bundles carry no CRI annotations podpin reads")
    annotations = _annotations(spec)
    kind_text = _required(annotations, keys.kind)
    try:
        kind = ContainerType(kind_text)
    except ValueError:
        raise AnnotationError(
            IdentityErrorReason.BAD_ANNOTATION, f"annotation {keys.kind}={kind_text!r}: expected sandbox or container"
        ) from None
    uid = _required(annotations, keys.pod_uid)
    if not is_pod_uid(uid):
        raise AnnotationError(
            IdentityErrorReason.BAD_ANNOTATION,
            f"annotation {keys.pod_uid}={uid!r}: invalid pod uid {uid!r}: expected {POD_UID_FORMS}",
        )
    name: str | None = None
    if kind is ContainerType.CONTAINER:
        name = _required(annotations, keys.name)
        if not _DNS_LABEL.fullmatch(name):
            raise AnnotationError(
                IdentityErrorReason.BAD_ANNOTATION,
                f"annotation {keys.name}={name!r}: a container name is a DNS-1123 label",
            )
    return BundleIdentity(
        runtime=runtime,
        container_id=container_id,
        pod_uid=uid,
        kind=kind,
        name=name,
        pod_name=annotations.get(keys.pod_name),
        namespace=annotations.get(keys.namespace),
    )
