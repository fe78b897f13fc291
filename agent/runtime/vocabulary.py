"""The words of container identity, one spelling each, shared by the runtime readers and everything downstream.

A container cgroup is named by its runtime id only; who it is comes from one of the :class:`IdentitySource`
s (``docs/design.md``, "Container identity"), and is either the pod's sandbox or one of its containers
(:class:`ContainerType`, the CRI runtimes' ``container-type`` annotation). When the runtime's own state cannot
say, :class:`IdentityErrorReason` says why. The same words appear in the identity book
(``agent/reconcile/identity.py``), the cgroup targets, log lines and the metric labels
``podpin_container_pins_total{source}`` and ``podpin_runtime_identity_errors_total{reason}``. They live here,
in the lowest package that uses them, so the metrics can start every label at 0 without importing the
reconciler.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ContainerType", "IdentityErrorReason", "IdentitySource"]


class ContainerType(StrEnum):
    """What a runtime container is to Kubernetes: the pod's sandbox (pause) or one of its containers."""

    SANDBOX = "sandbox"
    CONTAINER = "container"


class IdentitySource(StrEnum):
    """Who said which container a runtime id is, most trusted first (``agent/reconcile/identity.py``)."""

    NRI = "nri"
    """The runtime's NRI CreateContainer / Synchronize calls: before the container exists."""
    BUNDLE = "bundle"
    """The runtime's OCI bundle annotations, read when the cgroup appears: milliseconds."""
    STATUS = "status"
    """The pod status ``containerID`` from the API server: seconds later, the last resort."""


class IdentityErrorReason(StrEnum):
    """Why a container's runtime state named no container of its pod (a closed label set for metrics)."""

    UID_MISMATCH = "uid_mismatch"
    """The bundle names another pod than the one whose cgroup holds the container."""
    INCOMPLETE = "incomplete"
    """The bundle was still missing or half-written after every re-read."""
    MALFORMED = "malformed"
    """``config.json`` is not a JSON object with an object of string annotations."""
    MISSING_ANNOTATION = "missing_annotation"
    BAD_ANNOTATION = "bad_annotation"
    """An annotation holds a value that cannot be a pod uid, container name or container type."""
    OVERSIZE = "oversize"
    NOT_REGULAR = "not_regular"
    """``config.json`` is a symlink, a directory or a device."""
    UNREADABLE = "unreadable"
    INVALID_ID = "invalid_id"
    """The cgroup's runtime id is not 64 lower-case hex digits (it never becomes a path)."""
