"""podpin's own NRI and ttrpc protos: generated code matches the sources, wire facts match upstream."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from agent.nri import NRIMethod
from agent.nri.proto import nri_pb2, ttrpc_pb2
from agent.nri.service import EVENT_MASK, PLUGIN_SERVICE, RUNTIME_SERVICE
from tests.support.paths import REPO

GENERATED = (
    "agent/nri/proto/nri_pb2.py",
    "agent/nri/proto/nri_pb2.pyi",
    "agent/nri/proto/ttrpc_pb2.py",
    "agent/nri/proto/ttrpc_pb2.pyi",
)

# Field numbers and types as upstream declares them: containerd/nri pkg/api/api.proto (v0.8.0 and HEAD
# 8ec8b28 agree on every field below) and containerd/ttrpc request.proto (4b166fb).
UPSTREAM_FIELDS: dict[str, dict[str, tuple[int, str]]] = {
    "RegisterPluginRequest": {"plugin_name": (1, "string"), "plugin_idx": (2, "string"), "NRI_version": (3, "string")},
    "UpdateContainersRequest": {"update": (1, "repeated ContainerUpdate")},
    "UpdateContainersResponse": {"failed": (1, "repeated ContainerUpdate")},
    "ConfigureRequest": {
        "config": (1, "string"),
        "runtime_name": (2, "string"),
        "runtime_version": (3, "string"),
        "registration_timeout": (4, "int64"),
        "request_timeout": (5, "int64"),
        "NRI_version": (6, "string"),
    },
    "ConfigureResponse": {"events": (2, "int32")},
    "SynchronizeRequest": {
        "pods": (1, "repeated PodSandbox"),
        "containers": (2, "repeated Container"),
        "more": (3, "bool"),
    },
    "SynchronizeResponse": {"update": (1, "repeated ContainerUpdate"), "more": (2, "bool")},
    "RunPodSandboxRequest": {"pod": (1, "PodSandbox")},
    "StopPodSandboxRequest": {"pod": (1, "PodSandbox")},
    "RemovePodSandboxRequest": {"pod": (1, "PodSandbox")},
    "CreateContainerRequest": {"pod": (1, "PodSandbox"), "container": (2, "Container")},
    "CreateContainerResponse": {"adjust": (1, "ContainerAdjustment"), "update": (2, "repeated ContainerUpdate")},
    "UpdateContainerRequest": {
        "pod": (1, "PodSandbox"),
        "container": (2, "Container"),
        "linux_resources": (3, "LinuxResources"),
    },
    "UpdateContainerResponse": {"update": (1, "repeated ContainerUpdate")},
    "StopContainerRequest": {"pod": (1, "PodSandbox"), "container": (2, "Container")},
    "StopContainerResponse": {"update": (1, "repeated ContainerUpdate")},
    "RemoveContainerRequest": {"pod": (1, "PodSandbox"), "container": (2, "Container")},
    "StateChangeEvent": {"event": (1, "Event"), "pod": (2, "PodSandbox"), "container": (3, "Container")},
    "PodSandbox": {
        "id": (1, "string"),
        "name": (2, "string"),
        "uid": (3, "string"),
        "namespace": (4, "string"),
        "labels": (5, "map"),
        "annotations": (6, "map"),
        "linux": (8, "LinuxPodSandbox"),
    },
    "LinuxPodSandbox": {"cgroup_parent": (3, "string"), "cgroups_path": (4, "string")},
    "Container": {
        "id": (1, "string"),
        "pod_sandbox_id": (2, "string"),
        "name": (3, "string"),
        "state": (4, "ContainerState"),
        "labels": (5, "map"),
        "annotations": (6, "map"),
        "linux": (11, "LinuxContainer"),
    },
    "LinuxContainer": {"resources": (3, "LinuxResources"), "cgroups_path": (5, "string")},
    "LinuxResources": {"cpu": (2, "LinuxCPU")},
    "LinuxCPU": {
        "shares": (1, "OptionalUInt64"),
        "quota": (2, "OptionalInt64"),
        "period": (3, "OptionalUInt64"),
        "cpus": (6, "string"),
        "mems": (7, "string"),
    },
    "OptionalInt64": {"value": (1, "int64")},
    "OptionalUInt64": {"value": (1, "uint64")},
    "ContainerAdjustment": {"linux": (6, "LinuxContainerAdjustment")},
    "LinuxContainerAdjustment": {"resources": (2, "LinuxResources")},
    "ContainerUpdate": {
        "container_id": (1, "string"),
        "linux": (2, "LinuxContainerUpdate"),
        "ignore_failure": (3, "bool"),
    },
    "LinuxContainerUpdate": {"resources": (1, "LinuxResources")},
}

UPSTREAM_TTRPC_FIELDS = {
    "Request": {
        "service": (1, "string"),
        "method": (2, "string"),
        "payload": (3, "bytes"),
        "timeout_nano": (4, "int64"),
        "metadata": (5, "repeated KeyValue"),
    },
    "Response": {"status": (1, "Status"), "payload": (2, "bytes")},
    "KeyValue": {"key": (1, "string"), "value": (2, "string")},
    "Status": {"code": (1, "int32"), "message": (2, "string")},  # google.rpc.Status fields 1 and 2
}

_SCALARS = {
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
}


def _describe(message: Descriptor) -> dict[str, tuple[int, str]]:
    out = {}
    for field in message.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            kind = "map"
        elif field.message_type is not None:
            kind = field.message_type.name
        elif field.enum_type is not None:
            kind = field.enum_type.name
        else:
            kind = _SCALARS[field.type]
        if field.is_repeated and kind != "map":
            kind = f"repeated {kind}"
        out[field.name] = (field.number, kind)
    return out


def test_generated_modules_match_the_protos(tmp_path: Path) -> None:
    """Regenerating from the .proto files with the pinned grpcio-tools gives exactly the committed modules."""
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_nri_proto.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    for name in GENERATED:
        assert (REPO / name).read_bytes() == (tmp_path / name).read_bytes(), (
            f"{name} is stale: run scripts/gen_nri_proto.py"
        )


@pytest.mark.parametrize("name", sorted(UPSTREAM_FIELDS))
def test_nri_message_fields_match_upstream(name: str) -> None:
    """Every field podpin declares has upstream's number and type."""
    assert UPSTREAM_FIELDS[name] == _describe(nri_pb2.DESCRIPTOR.message_types_by_name[name])


@pytest.mark.parametrize("name", sorted(UPSTREAM_TTRPC_FIELDS))
def test_ttrpc_envelope_fields_match_upstream(name: str) -> None:
    """The ttrpc Request/Response envelopes have upstream's field numbers and types."""
    assert UPSTREAM_TTRPC_FIELDS[name] == _describe(ttrpc_pb2.DESCRIPTOR.message_types_by_name[name])


def test_every_declared_nri_message_is_checked() -> None:
    """No NRI message escapes the upstream comparison (the empty messages have no fields to compare)."""
    empty = {
        "Empty",
        "RunPodSandboxResponse",
        "StopPodSandboxResponse",
        "RemovePodSandboxResponse",
        "RemoveContainerResponse",
    }
    assert set(nri_pb2.DESCRIPTOR.message_types_by_name) == set(UPSTREAM_FIELDS) | empty
    for name in empty:
        assert [] == list(nri_pb2.DESCRIPTOR.message_types_by_name[name].fields)


def test_service_and_method_names_are_upstreams() -> None:
    """The ttrpc service names are upstream's package-qualified names, with upstream's method names."""
    plugin = nri_pb2.DESCRIPTOR.services_by_name["Plugin"]
    runtime = nri_pb2.DESCRIPTOR.services_by_name["Runtime"]
    assert ("nri.pkg.api.v1alpha1.Plugin", "nri.pkg.api.v1alpha1.Runtime") == (PLUGIN_SERVICE, RUNTIME_SERVICE)
    assert [
        "Configure",
        "Synchronize",
        "Shutdown",
        "RunPodSandbox",
        "StopPodSandbox",
        "RemovePodSandbox",
        "CreateContainer",
        "UpdateContainer",
        "StopContainer",
        "RemoveContainer",
        "StateChange",
    ] == [m.name for m in plugin.methods]
    assert ["RegisterPlugin", "UpdateContainers"] == [m.name for m in runtime.methods]


def test_reported_method_names_are_the_plugin_services() -> None:
    """NRIMethod, the word outcomes, logs and metric labels use, spells each Plugin method as on the wire."""
    plugin = nri_pb2.DESCRIPTOR.services_by_name["Plugin"]
    assert [m.name for m in plugin.methods] == [str(method) for method in NRIMethod]


def test_event_numbers_and_subscription_mask() -> None:
    """Events keep upstream's numbers, and podpin subscribes to bits (event - 1) of its seven events: 0x68f."""
    expected = {
        "RUN_POD_SANDBOX": 1,
        "STOP_POD_SANDBOX": 2,
        "REMOVE_POD_SANDBOX": 3,
        "CREATE_CONTAINER": 4,
        "POST_CREATE_CONTAINER": 5,
        "START_CONTAINER": 6,
        "POST_START_CONTAINER": 7,
        "UPDATE_CONTAINER": 8,
        "POST_UPDATE_CONTAINER": 9,
        "STOP_CONTAINER": 10,
        "REMOVE_CONTAINER": 11,
        "UPDATE_POD_SANDBOX": 12,
        "POST_UPDATE_POD_SANDBOX": 13,
        "VALIDATE_CONTAINER_ADJUSTMENT": 14,
        "LAST": 15,
    }
    assert expected == {name: nri_pb2.Event.Value(name) for name in expected}
    assert 0x68F == EVENT_MASK
