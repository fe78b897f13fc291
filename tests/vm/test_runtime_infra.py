"""The real-runtime harness's own parts, checked on the host (no VM boot): the CRI proto and its generated code,
the local OCI images, containerd's generated configuration, the CRI log reader, the manifests with runtime ids
and the delayed status writer.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cpuset import CPUSet
from agent.pods.model import pod_from_dict
from tests.support.paths import REPO
from tests.vm import matrix, ociimage
from tests.vm.containerd import ContainerdConfig
from tests.vm.cri import cri_api_pb2 as pb
from tests.vm.crikubelet import first_view, log_lines, pod_cgroup_name, probe_uptime
from tests.vm.runtimenode import StatusWriter
from tests.vm.runtimepods import cache_pod, manifest, story_pod
from tests.vm.scenario_pin_window import attach_pin_stages, stage_summary
from tests.vm.scenario_runtime import sync_seconds

CRI = Path(__file__).resolve().parent / "cri"


def test_generated_code_matches_the_proto(tmp_path: Path) -> None:
    """Regenerating from ``cri_api.proto`` with the pinned grpcio-tools gives exactly the committed files."""
    out = tmp_path / "out"
    out.mkdir()
    command = [sys.executable, "-m", "grpc_tools.protoc", f"-I{CRI}", f"--python_out={out}", f"--pyi_out={out}"]
    proc = subprocess.run([*command, str(CRI / "cri_api.proto")], capture_output=True, text=True, check=False)
    assert 0 == proc.returncode, proc.stderr
    names = ("cri_api_pb2.py", "cri_api_pb2.pyi")
    assert [(CRI / n).read_text() for n in names] == [(out / n).read_text() for n in names]


@pytest.mark.parametrize(
    ("message", "field", "number"),
    [
        ("PodSandboxConfig", "metadata", 1),
        ("PodSandboxConfig", "log_directory", 3),
        ("PodSandboxConfig", "linux", 8),
        ("LinuxPodSandboxConfig", "cgroup_parent", 1),
        ("LinuxSandboxSecurityContext", "namespace_options", 1),
        ("NamespaceOption", "network", 1),
        ("PodSandboxMetadata", "uid", 2),
        ("ContainerConfig", "image", 2),
        ("ContainerConfig", "log_path", 11),
        ("ContainerConfig", "linux", 15),
        ("LinuxContainerResources", "cpu_quota", 2),
        ("LinuxContainerResources", "cpuset_cpus", 6),
        ("CreateContainerRequest", "sandbox_config", 3),
        ("StopContainerRequest", "timeout", 2),
        ("UpdateContainerResourcesRequest", "container_id", 1),
        ("UpdateContainerResourcesRequest", "linux", 2),
    ],
)
def test_wire_field_numbers(message: str, field: str, number: int) -> None:
    """Field numbers are cri-api's ``runtime.v1`` ones (what containerd decodes)."""
    assert number == pb.DESCRIPTOR.message_types_by_name[message].fields_by_name[field].number


def test_service_and_enum_names() -> None:
    """The gRPC service is ``runtime.v1.RuntimeService`` with the nine calls used; NODE is namespace mode 2."""
    service = pb.DESCRIPTOR.services_by_name["RuntimeService"]
    methods = sorted(service.methods_by_name)
    expected = sorted(
        [
            "Version",
            "RunPodSandbox",
            "StopPodSandbox",
            "RemovePodSandbox",
            "CreateContainer",
            "StartContainer",
            "StopContainer",
            "RemoveContainer",
            "UpdateContainerResources",
        ]
    )
    assert ("runtime.v1.RuntimeService", expected, 2) == (service.full_name, methods, pb.NODE)


class TestImages:
    """The OCI image layout built from a (fake) busybox binary."""

    FAKE_BUSYBOX = b"\x7fELF fake busybox"

    def test_index_names_every_image(self) -> None:
        """``index.json`` lists one manifest per image, named by ``io.containerd.image.name``."""
        files = ociimage.build_layout(self.FAKE_BUSYBOX)
        index = json.loads(files["index.json"])
        names = [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]]
        assert [i.ref for i in ociimage.IMAGES] == names

    def test_blobs_are_content_addressed(self) -> None:
        """Every blob's name is its sha256 and each manifest's digests and sizes point at real blobs."""
        files = ociimage.build_layout(self.FAKE_BUSYBOX)
        blobs = {name.split("/")[-1]: data for name, data in files.items() if name.startswith("blobs/")}
        problems = [name for name, data in blobs.items() if hashlib.sha256(data).hexdigest() != name]
        for entry in json.loads(files["index.json"])["manifests"]:
            manifest_doc = json.loads(blobs[entry["digest"].split(":")[1]])
            problems.extend(
                ref["digest"]
                for ref in (manifest_doc["config"], *manifest_doc["layers"])
                if len(blobs.get(ref["digest"].split(":")[1], b"")) != ref["size"]
            )
        assert [] == problems

    def test_layer_and_entrypoints(self) -> None:
        """One shared layer holds busybox and its applets; the probe's entrypoint prints its first view first."""
        files = ociimage.build_layout(self.FAKE_BUSYBOX)
        index = json.loads(files["index.json"])
        blobs = {name.split("/")[-1]: data for name, data in files.items() if name.startswith("blobs/")}
        entrypoints: dict[str, list[str]] = {}
        layers: set[str] = set()
        for entry in index["manifests"]:
            manifest_doc = json.loads(blobs[entry["digest"].split(":")[1]])
            config = json.loads(blobs[manifest_doc["config"]["digest"].split(":")[1]])
            entrypoints[entry["annotations"]["io.containerd.image.name"]] = config["config"]["Entrypoint"]
            layers.update(layer["digest"] for layer in manifest_doc["layers"])
        [layer] = layers
        with tarfile.open(fileobj=io.BytesIO(blobs[layer.split(":")[1]])) as tar:
            busybox = tar.extractfile("bin/busybox")
            content = busybox.read() if busybox is not None else b""
            sh = tar.getmember("bin/sh").linkname
        probe = entrypoints[ociimage.PROBE_IMAGE.ref]
        assert (self.FAKE_BUSYBOX, "busybox", ["/bin/sh", "-c"], True) == (
            content,
            sh,
            probe[:2],
            probe[2].startswith("while read -r k v; do"),
        )

    def test_deterministic(self, tmp_path: Path) -> None:
        """The same busybox gives byte-identical tarballs (stable digests)."""
        busybox = tmp_path / "busybox"
        busybox.write_bytes(self.FAKE_BUSYBOX)
        first = ociimage.write_image_tarball(busybox, tmp_path / "a.tar").read_bytes()
        second = ociimage.write_image_tarball(busybox, tmp_path / "b.tar").read_bytes()
        assert hashlib.sha256(first).hexdigest() == hashlib.sha256(second).hexdigest()


@pytest.mark.parametrize("nri", [False, True])
def test_containerd_config(nri: bool) -> None:
    """Everything containerd writes is moved to /tmp and /run; the NRI section follows the switch."""
    config = tomllib.loads(ContainerdConfig(runtime_bin=Path("/vm/runtime/bin"), nri=nri).toml())
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    runc = cri["containerd"]["runtimes"]["runc"]
    actual = {
        "root": config["root"],
        "state": config["state"],
        "address": config["grpc"]["address"],
        "nri_disabled": config["plugins"]["io.containerd.nri.v1.nri"]["disable"],
        "nri_socket": config["plugins"]["io.containerd.nri.v1.nri"]["socket_path"],
        "snapshotter": cri["containerd"]["snapshotter"],
        "systemd_cgroup": runc["options"]["SystemdCgroup"],
        "runc": runc["options"]["BinaryName"],
        "cni": (cri["cni"]["bin_dir"], cri["cni"]["conf_dir"]),
        "sandbox_image": cri["sandbox_image"],
    }
    expected = {
        "root": "/tmp/ctrd/root",
        "state": "/run/containerd",
        "address": "/run/containerd/containerd.sock",
        "nri_disabled": not nri,
        "nri_socket": "/var/run/nri/nri.sock",
        "snapshotter": "native",
        "systemd_cgroup": False,
        "runc": "/vm/runtime/bin/runc",
        "cni": ("/tmp/ctrd/cni-bin", "/tmp/ctrd/cni-conf"),
        "sandbox_image": "podpin.local/pause:1",
    }
    assert expected == actual


def test_cri_log_first_view(tmp_path: Path) -> None:
    """The probe's first view and uptime are read from a CRI-format log (timestamp, stream, tag, line)."""
    log = tmp_path / "0.log"
    log.write_text(
        "2026-01-01T00:00:00.000000001Z stdout F podpin-probe first-view 2-3,6\n"
        "2026-01-01T00:00:00.000000002Z stdout F podpin-probe uptime 30.15\n"
        "2026-01-01T00:00:00.000000003Z stderr F something else\n"
    )
    actual = (first_view(log), probe_uptime(log), log_lines(log)[1:], first_view(tmp_path / "missing.log"))
    assert (CPUSet.parse("2-3,6"), 30.15, ["podpin-probe uptime 30.15", "something else"], None) == actual


def test_pod_cgroup_names() -> None:
    """The kubelet's cgroupfs layout: Guaranteed pods directly under kubepods."""
    assert "kubepods/pod5b0c1d2e-3f40-4a51-8b62-7c83d94ea5f0" == pod_cgroup_name(cache_pod())


def test_manifest_names_the_runtime_ids() -> None:
    """A manifest carries the runtime's own container ids for the containers reported so far, sidecars too."""
    spec = story_pod()
    ids = {"database": "d" * 64, "envoy": "e" * 64}
    view = pod_from_dict(manifest(spec, ids))
    actual = {c.name: c.container_id for c in view.all_containers}
    expected = {"envoy": f"containerd://{'e' * 64}", "log-collector": None, "database": f"containerd://{'d' * 64}"}
    assert (expected, None) == (actual, pod_from_dict(manifest(spec, {})).all_containers[0].container_id)


def test_status_writer_publishes_late_and_forgets_deleted_pods(tmp_path: Path) -> None:
    """Statuses appear when due; a deleted pod's manifest is removed and its pending statuses dropped."""
    writer = StatusWriter(tmp_path)
    writer.start()
    kept, deleted = cache_pod(suffix="1"), cache_pod(suffix="2")
    try:
        for spec in (kept, deleted):
            writer.publish(spec)
        now = time.monotonic()
        writer.schedule(kept, "main", "a" * 64, now)
        writer.schedule(deleted, "main", "b" * 64, now + 0.3)
        writer.forget(deleted)
        deadline = time.monotonic() + 5
        while not writer.written and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.4)
    finally:
        writer.stop()
    kept_doc = yaml.safe_load((tmp_path / kept.file_name).read_text())
    actual = (
        [c["containerID"] for c in kept_doc["status"]["containerStatuses"]],
        (tmp_path / deleted.file_name).exists(),
        [w[1] for w in writer.written],
    )
    assert ([f"containerd://{'a' * 64}"], False, [kept.uid]) == actual


@pytest.mark.parametrize("version", [2, 3])
def test_containerd_overlayfs_config(version: int) -> None:
    """The real cluster's node (tests/cluster/guest_node.py): the CRI and the imports use the overlayfs snapshotter
    under a root on the guest's plain tmpfs /run."""
    config = tomllib.loads(
        ContainerdConfig(
            runtime_bin=Path("/r/bin"), base=Path("/run/ctrd"), snapshotter="overlayfs", version=version
        ).toml()
    )
    plugins = config["plugins"]
    if version == 2:
        used = [plugins["io.containerd.grpc.v1.cri"]["containerd"]["snapshotter"]]
    else:
        unpack = plugins["io.containerd.transfer.v1.local"]["unpack_config"]
        used = [plugins["io.containerd.cri.v1.images"]["snapshotter"], *(u["snapshotter"] for u in unpack)]
    assert ("/run/ctrd/root", {"overlayfs"}) == (config["root"], set(used))


def test_containerd_2_config() -> None:
    """containerd 2.x (version 3): the images plugin unpacks into native and pins the sandbox image, the runtime plugin
    runs the chosen runc with cgroupfs, CNI directories under /tmp, NRI's request timeout when given, a shim load
    timeout long enough for TCG, and an import that unpacks into the native snapshotter."""
    runc = Path("/tmp/podpin-runtimes/runc/bin/runc")
    text = ContainerdConfig(runtime_bin=Path("/r/bin"), runc=runc, version=3, nri=True, nri_request_timeout="1s").toml()
    config = tomllib.loads(text)
    images = config["plugins"]["io.containerd.cri.v1.images"]
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    runc_options = runtime["containerd"]["runtimes"]["runc"]["options"]
    actual = {
        "version": config["version"],
        "snapshotter": images["snapshotter"],
        "sandbox": images["pinned_images"]["sandbox"],
        "runc": (runc_options["BinaryName"], runc_options["SystemdCgroup"]),
        "cni": (runtime["cni"]["bin_dirs"], runtime["cni"]["conf_dir"]),
        "nri_timeout": config["plugins"]["io.containerd.nri.v1.nri"]["plugin_request_timeout"],
        "shim_load": config["timeouts"]["io.containerd.timeout.shim.load"],
        "unpack": config["plugins"]["io.containerd.transfer.v1.local"]["unpack_config"],
    }
    expected = {
        "version": 3,
        "snapshotter": "native",
        "sandbox": "podpin.local/pause:1",
        "runc": (str(runc), False),
        "cni": (["/tmp/ctrd/cni-bin"], "/tmp/ctrd/cni-conf"),
        "nri_timeout": "1s",
        "shim_load": "60s",
        "unpack": [{"platform": "linux/amd64", "snapshotter": "native"}],
    }
    assert expected == actual


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("", ["containerd-1.7", "containerd-2.4"]),
        ("ci", ["containerd-1.7", "containerd-2.4"]),
        ("all", ["containerd-1.7", "containerd-2.2", "containerd-2.3", "containerd-2.4"]),
        ("containerd-2.2, containerd-2.3", ["containerd-2.2", "containerd-2.3"]),
    ],
)
def test_matrix_selection(value: str, names: list[str]) -> None:
    """``PODPIN_RUNTIMES`` picks the CI part (default), all, or named runtimes."""
    assert names == [r.name for r in matrix.selected({"PODPIN_RUNTIMES": value})]


def test_matrix_names_an_unknown_runtime() -> None:
    """A name the matrix does not hold is refused with the known names."""
    with pytest.raises(ValueError, match=r"\['containerd-1.6'\] not in the matrix"):
        matrix.selected({"PODPIN_RUNTIMES": "containerd-1.6"})


def test_matrix_nri_versions_are_the_vendored_ones() -> None:
    """Each built runtime's NRI version is the one its go.mod resolves (tests/runtime/<name>/go.mod)."""
    found = {}
    for choice in matrix.MATRIX.values():
        if choice.built:
            text = (REPO / "tests" / "runtime" / choice.name / "go.mod").read_text()
            vendored = re.search(r"github.com/containerd/nri (v[0-9.]+)", text)
            found[choice.name] = vendored.group(1) if vendored else None
    assert {n: c.nri for n, c in matrix.MATRIX.items() if c.built} == found


def test_matrix_knows_which_runtimes_split_a_large_synchronize() -> None:
    """NRI v0.11+ resends a Synchronize past 4 MiB in ``more`` chunks; containerd 1.7's v0.6.1 does not, so the
    big-Synchronize step runs on the 2.x runtimes only."""
    actual = {name: choice.splits_synchronize for name, choice in matrix.MATRIX.items()}
    assert {"containerd-1.7": False, "containerd-2.2": True, "containerd-2.3": True, "containerd-2.4": True} == actual


def test_matrix_knows_which_runtimes_tell_their_request_timeout() -> None:
    """NRI v0.7 added ``request_timeout`` to ConfigureRequest; containerd 1.7's v0.6.1 does not send it (only each
    request's ttrpc deadline carries it), and only v0.12+ has the dedicated sandbox calls."""
    actual = {name: (c.tells_request_timeout, c.dedicated_events) for name, c in matrix.MATRIX.items()}
    expected = {
        "containerd-1.7": (False, False),
        "containerd-2.2": (True, False),
        "containerd-2.3": (True, True),
        "containerd-2.4": (True, True),
    }
    assert expected == actual


def test_sync_seconds_spans_the_last_connection() -> None:
    """From the last ``nri.connected`` to the ``nri.synchronized`` after it; a connection that never synchronized
    gives None (an earlier connection's pair does not count)."""
    events = [
        {"event": "nri.connected", "timestamp": "2026-12-06T21:36:40.000000Z"},
        {"event": "nri.synchronized", "timestamp": "2026-12-06T21:36:40.500000Z"},
        {"event": "nri.disconnected", "timestamp": "2026-12-06T21:36:45.210879Z"},
        {"event": "nri.connected", "timestamp": "2026-12-06T21:36:45.400000Z"},
        {"event": "nri.synchronized", "timestamp": "2026-12-06T21:36:46.442053Z"},
    ]
    assert (1.042, 0.5, None, None) == (
        sync_seconds(events),
        sync_seconds(events[:3]),
        sync_seconds(events[:4]),
        sync_seconds([]),
    )


class TestPinStages:
    """The pin-window scenario's reading of the agent's ``pin_ms`` (host only, no VM)."""

    def test_each_container_gets_its_first_applied_lines_stages(self) -> None:
        """Matched by the cgroup's directory (the container id); a later line of the same cgroup and lines
        without ``pin_ms`` are not taken; a container the agent never wrote gets None."""
        first = {"total": 2.0, "write": 1.0}
        events: list[dict[str, Any]] = [
            {"event": "cgroup.applied", "path": "/sys/fs/cgroup/kubepods/podx/aaa", "pin_ms": first},
            {"event": "cgroup.applied", "path": "/sys/fs/cgroup/kubepods/podx/aaa", "pin_ms": {"total": 9.0}},
            {"event": "cgroup.applied", "path": "/sys/fs/cgroup/kubepods/podx"},
            {"event": "cgroup.drift_repaired", "path": "/sys/fs/cgroup/kubepods/podx/bbb", "pin_ms": {"total": 1.0}},
        ]
        records: list[dict[str, Any]] = [{"id": "aaa"}, {"id": "bbb"}]
        attach_pin_stages(records, events)
        assert [first, None] == [r["pin_ms"] for r in records]

    def test_stage_summary_per_stage_over_the_records_that_have_it(self) -> None:
        """Nearest-rank p50 and p99 per stage; records without ``pin_ms`` (NRI) or without a stage are skipped."""
        records: list[dict[str, Any]] = [{"pin_ms": {"total": float(t), "write": 1.0}} for t in range(1, 101)]
        records += [{"pin_ms": None}, {"pin_ms": {"total": 500.0, "name": 0.5}}]
        expected = {
            "total": {"p50_ms": 51.0, "p99_ms": 100.0},
            "name": {"p50_ms": 0.5, "p99_ms": 0.5},
            "write": {"p50_ms": 1.0, "p99_ms": 1.0},
        }
        assert expected == stage_summary(records)
