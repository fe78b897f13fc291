"""Who a container is, from its OCI spec's annotations: containerd's and CRI-O's keys, and every bad input."""

from __future__ import annotations

from typing import Any

import pytest

from agent.runtime import AnnotationError, BundleIdentity, ContainerType, IdentityErrorReason, identity_from_spec
from agent.vocabulary import Runtime
from tests.support.bundles import containerd_annotations, crio_annotations

UID = "0c9e8a54-52d4-4c1e-8f61-3b7a9e2d4c11"
CID = "ab" * 32


def _spec(annotations: Any) -> dict[str, Any]:
    return {"ociVersion": "1.1.0", "annotations": annotations}


class TestContainerd:
    """containerd's CRI plugin: ``io.kubernetes.cri.*``."""

    def test_container(self) -> None:
        """A container: pod uid, container name, pod name and namespace."""
        actual = identity_from_spec(Runtime.CONTAINERD, CID, _spec(containerd_annotations(UID, "database")))
        expected = BundleIdentity(
            runtime=Runtime.CONTAINERD,
            container_id=CID,
            pod_uid=UID,
            kind=ContainerType.CONTAINER,
            name="database",
            pod_name="web",
            namespace="default",
        )
        assert expected == actual

    def test_sandbox(self) -> None:
        """The sandbox (pause) container has no container name."""
        actual = identity_from_spec(Runtime.CONTAINERD, CID, _spec(containerd_annotations(UID, None)))
        assert (ContainerType.SANDBOX, None, UID) == (actual.kind, actual.name, actual.pod_uid)

    def test_static_pod_config_hash_uid(self) -> None:
        """A static pod's uid is the kubelet's 32-hex config hash, which names its cgroup too."""
        uid = "6d0e5a9c1f2b3a4d5e6f708192a3b4c5"
        actual = identity_from_spec(Runtime.CONTAINERD, CID, _spec(containerd_annotations(uid, "etcd")))
        assert (uid, "etcd") == (actual.pod_uid, actual.name)


class TestCrio:
    """CRI-O: ``io.kubernetes.cri-o.ContainerType`` plus the kubelet's ``io.kubernetes.pod.*`` names."""

    def test_container(self) -> None:
        """A container: the kubelet's container name and pod uid."""
        actual = identity_from_spec(Runtime.CRIO, CID, _spec(crio_annotations(UID, "envoy", pod="mesh")))
        assert (ContainerType.CONTAINER, "envoy", UID, "mesh") == (
            actual.kind,
            actual.name,
            actual.pod_uid,
            actual.pod_name,
        )

    def test_infra_container(self) -> None:
        """The infra container is the sandbox; its ``POD`` container name is not a container name."""
        actual = identity_from_spec(Runtime.CRIO, CID, _spec(crio_annotations(UID, None)))
        assert (ContainerType.SANDBOX, None) == (actual.kind, actual.name)


def _containerd_without(key: str) -> dict[str, str]:
    annotations = containerd_annotations(UID, "app")
    del annotations[key]
    return annotations


def _containerd_with(key: str, value: str) -> dict[str, str]:
    return {**containerd_annotations(UID, "app"), key: value}


@pytest.mark.parametrize(
    ("spec", "reason", "message"),
    [
        ([1, 2], IdentityErrorReason.MALFORMED, "the OCI spec is a JSON list, not an object"),
        ({"ociVersion": "1.1.0"}, IdentityErrorReason.MISSING_ANNOTATION, "the OCI spec has no annotations"),
        (_spec(["a"]), IdentityErrorReason.MALFORMED, "the OCI spec's annotations are not an object of strings"),
        (
            _spec({"io.kubernetes.cri.container-type": 1}),
            IdentityErrorReason.MALFORMED,
            "the OCI spec's annotations are not an object",
        ),
        (
            _spec(_containerd_without("io.kubernetes.cri.container-type")),
            IdentityErrorReason.MISSING_ANNOTATION,
            "annotation io.kubernetes.cri.container-type is missing",
        ),
        (
            _spec(_containerd_without("io.kubernetes.cri.sandbox-uid")),
            IdentityErrorReason.MISSING_ANNOTATION,
            "annotation io.kubernetes.cri.sandbox-uid is missing",
        ),
        (
            _spec(_containerd_without("io.kubernetes.cri.container-name")),
            IdentityErrorReason.MISSING_ANNOTATION,
            "annotation io.kubernetes.cri.container-name is missing",
        ),
        (
            _spec(_containerd_with("io.kubernetes.cri.container-type", "podsandbox")),
            IdentityErrorReason.BAD_ANNOTATION,
            "annotation io.kubernetes.cri.container-type='podsandbox': expected sandbox or container",
        ),
        (
            _spec(_containerd_with("io.kubernetes.cri.sandbox-uid", "../../etc")),
            IdentityErrorReason.BAD_ANNOTATION,
            "annotation io.kubernetes.cri.sandbox-uid='../../etc': invalid pod uid",
        ),
        (
            _spec(_containerd_with("io.kubernetes.cri.sandbox-uid", UID.upper())),
            IdentityErrorReason.BAD_ANNOTATION,
            "annotation io.kubernetes.cri.sandbox-uid='0C9E8A54",
        ),
        (
            _spec(_containerd_with("io.kubernetes.cri.container-name", "App_1")),
            IdentityErrorReason.BAD_ANNOTATION,
            "annotation io.kubernetes.cri.container-name='App_1': a container name is a DNS-1123 label",
        ),
    ],
    ids=[
        "not-an-object",
        "no-annotations",
        "annotations-a-list",
        "annotation-not-a-string",
        "no-kind",
        "no-uid",
        "no-container-name",
        "unknown-kind",
        "traversal-uid",
        "upper-case-uid",
        "bad-container-name",
    ],
)
def test_bad_specs_are_refused_with_a_reason(spec: Any, reason: str, message: str) -> None:
    """A spec that cannot name the container raises AnnotationError: a closed reason and a message naming the key."""
    with pytest.raises(AnnotationError) as info:
        identity_from_spec(Runtime.CONTAINERD, CID, spec)
    assert (reason, True) == (info.value.reason, info.value.message.startswith(message)), info.value.message


def test_docker_has_no_annotations_to_read() -> None:
    """docker (through cri-dockerd) writes no CRI annotations podpin reads: a ValueError, not a guess."""
    with pytest.raises(ValueError) as info:
        identity_from_spec(Runtime.DOCKER, CID, _spec({}))
    assert "docker bundles carry no CRI annotations podpin reads" == str(info.value)
