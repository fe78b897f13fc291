"""The committed gRPC/protobuf modules are exactly what grpcio-tools generates from the committed api.proto."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

PROTO = Path("agent/podresources/v1/api.proto")
GENERATED = ("api_pb2.py", "api_pb2.pyi")


def test_regenerating_gives_the_committed_files(tmp_path: Path) -> None:
    """Running protoc (the command in api.proto's header) again changes none of the generated files."""
    (tmp_path / PROTO.parent).mkdir(parents=True)
    shutil.copy(REPO / PROTO, tmp_path / PROTO)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            ".",
            "--python_out=.",
            "--pyi_out=.",
            str(PROTO),
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    stale = [
        name
        for name in GENERATED
        if (tmp_path / PROTO.parent / name).read_bytes() != (REPO / PROTO.parent / name).read_bytes()
    ]
    assert [] == stale


def test_wire_names_are_the_kubelets() -> None:
    """The service and method paths and the field numbers podpin relies on match the kubelet's v1 API."""
    from agent.podresources.v1 import api_pb2

    service = api_pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert "v1.PodResourcesLister" == service.full_name
    assert ["List", "GetAllocatableResources", "Get"] == [m.name for m in service.methods]
    numbers = {
        (message, field.name): field.number
        for message in (
            "AllocatableResourcesResponse",
            "PodResources",
            "ContainerResources",
            "ContainerDevices",
            "GetPodResourcesRequest",
        )
        for field in api_pb2.DESCRIPTOR.message_types_by_name[message].fields
    }
    assert {
        ("AllocatableResourcesResponse", "devices"): 1,
        ("PodResources", "name"): 1,
        ("PodResources", "namespace"): 2,
        ("PodResources", "containers"): 3,
        ("ContainerResources", "name"): 1,
        ("ContainerResources", "devices"): 2,
        ("ContainerDevices", "resource_name"): 1,
        ("ContainerDevices", "device_ids"): 2,
        ("ContainerDevices", "topology"): 3,
        ("GetPodResourcesRequest", "pod_name"): 1,
        ("GetPodResourcesRequest", "pod_namespace"): 2,
    } == numbers
