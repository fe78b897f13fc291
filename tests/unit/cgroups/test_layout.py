"""Where pod and container cgroups are, for both drivers, three runtimes and three QoS classes."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from agent.cgroups.errors import CgroupDriverError, CgroupPathError, CgroupV1Error
from agent.cgroups.layout import (
    CgroupLayout,
    ContainerID,
    Driver,
    PodLocation,
    ScannedContainer,
    ScannedPod,
    detect_layout,
    ensure_inside,
    list_containers,
    scan,
    validate_uid,
)
from agent.vocabulary import QOSClass, Runtime
from tests.support.cgroupfs_builder import build_tree, build_v1_tree, container_hex, pod_uid

UID = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
UID_ = "3f2a9c1e_5b7d_4e8f_9a0b_1c2d3e4f5a6b"
CID = "4c1d7e0b9a8f6e5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a2918076e5d4"

#: (driver, QoS) -> pod cgroup relative to the root, written out by hand.
POD_DIRS = {
    ("systemd", "Guaranteed"): f"kubepods.slice/kubepods-pod{UID_}.slice",
    ("systemd", "Burstable"): f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice",
    ("systemd", "BestEffort"): f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice",
    ("cgroupfs", "Guaranteed"): f"kubepods/pod{UID}",
    ("cgroupfs", "Burstable"): f"kubepods/burstable/pod{UID}",
    ("cgroupfs", "BestEffort"): f"kubepods/besteffort/pod{UID}",
}
#: (driver, runtime scheme) -> container cgroup name.
CONTAINER_NAMES = {
    ("systemd", "containerd"): f"cri-containerd-{CID}.scope",
    ("systemd", "cri-o"): f"crio-{CID}.scope",
    ("systemd", "docker"): f"docker-{CID}.scope",
    ("cgroupfs", "containerd"): CID,
    ("cgroupfs", "cri-o"): f"crio-{CID}",
    ("cgroupfs", "docker"): CID,
}
TABLE = [
    pytest.param(
        driver,
        qos,
        runtime,
        f"{POD_DIRS[driver, qos]}/{CONTAINER_NAMES[driver, runtime]}",
        id=f"{driver}-{qos}-{runtime}",
    )
    for driver, qos, runtime in itertools.product(
        ("systemd", "cgroupfs"), ("Guaranteed", "Burstable", "BestEffort"), ("containerd", "cri-o", "docker")
    )
]
ROOT = Path("/sys/fs/cgroup")


class TestPaths:
    @pytest.mark.parametrize(("driver", "qos", "runtime", "expected"), TABLE)
    def test_container_path(self, driver: str, qos: str, runtime: str, expected: str) -> None:
        """The container cgroup is <pod dir>/<runtime's name for the id> for every driver, QoS and runtime."""
        layout = CgroupLayout(root=ROOT, driver=Driver(driver))
        assert ROOT / expected == layout.container_path(UID, qos, f"{runtime}://{CID}")

    @pytest.mark.parametrize(("driver", "qos"), list(POD_DIRS))
    def test_pod_path(self, driver: str, qos: str) -> None:
        """The pod cgroup sits in its QoS level, named with the uid (systemd: dashes become underscores)."""
        layout = CgroupLayout(root=ROOT, driver=Driver(driver))
        assert ROOT / POD_DIRS[driver, qos] == layout.pod_path(UID, qos)

    @pytest.mark.parametrize(
        ("driver", "expected"),
        [
            (
                "systemd",
                (
                    "kubepods.slice",
                    "kubepods.slice/kubepods-burstable.slice",
                    "kubepods.slice/kubepods-besteffort.slice",
                ),
            ),
            ("cgroupfs", ("kubepods", "kubepods/burstable", "kubepods/besteffort")),
        ],
    )
    def test_qos_dirs(self, driver: str, expected: tuple[str, str, str]) -> None:
        """The QoS-level cgroups the reconciler confines are kubepods, burstable and besteffort."""
        layout = CgroupLayout(root=ROOT, driver=Driver(driver))
        assert tuple(ROOT / p for p in expected) == layout.qos_dirs()

    def test_container_id_round_trip(self) -> None:
        """A parsed containerID keeps its runtime and id and prints back as the status field."""
        cid = ContainerID.parse(f"cri-o://{CID}")
        assert (Runtime.CRIO, CID, f"cri-o://{CID}") == (cid.runtime, cid.id, str(cid))


class TestValidation:
    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("containerd://../../etc", "the id after containerd:// must be 64 lower-case hex digits"),
            (f"containerd://{CID[:60]}/../x", "the id after containerd:// must be 64 lower-case hex digits"),
            (f"rkt://{CID}", "unknown runtime prefix 'rkt' (expected containerd, cri-o or docker)"),
            ("docker://abc123", "the id after docker:// must be 64 lower-case hex digits"),
            (f"containerd://{CID.upper()}", "the id after containerd:// must be 64 lower-case hex digits"),
            (CID, "expected <runtime>://<64 lower-case hex digits>"),
            ("", "expected <runtime>://<64 lower-case hex digits>"),
        ],
        ids=["dotdot", "slash", "unknown-prefix", "short-id", "uppercase", "no-scheme", "empty"],
    )
    def test_bad_container_id(self, text: str, reason: str) -> None:
        """A containerID that is not <containerd|cri-o|docker>://<64 lower hex> is refused, quoting it."""
        layout = CgroupLayout(root=ROOT, driver=Driver.SYSTEMD)
        with pytest.raises(CgroupPathError) as caught:
            layout.container_path(UID, "Guaranteed", text)
        assert f"invalid container ID {text!r}: {reason}" == str(caught.value)

    @pytest.mark.parametrize(
        "uid",
        [f"{UID[:8]}/{UID[9:]}", UID.upper(), "../" + UID[3:], "", "0123456789abcdef0123456789abcde", UID + "0"],
        ids=["slash", "uppercase", "dotdot", "empty", "short-hash", "too-long"],
    )
    def test_bad_uid(self, uid: str) -> None:
        """A pod uid that is not a lower-case RFC 4122 UUID is refused, quoting it."""
        layout = CgroupLayout(root=ROOT, driver=Driver.CGROUPFS)
        with pytest.raises(CgroupPathError) as caught:
            layout.pod_path(uid, "Burstable")
        expected = (
            f"invalid pod uid {uid!r}: expected an RFC 4122 UUID in lower-case hex (8-4-4-4-12) "
            "or a static pod's 32-hex config hash"
        )
        assert expected == str(caught.value)

    @pytest.mark.parametrize(
        ("driver", "name"), [(Driver.SYSTEMD, "kubepods-burstable-pod{h}.slice"), (Driver.CGROUPFS, "pod{h}")]
    )
    def test_static_pod_config_hash(self, driver: Driver, name: str) -> None:
        """A static pod's cgroup is named after its 32-hex config hash, for both drivers, and parses back."""
        config_hash = "0123456789abcdef0123456789abcdef"
        layout = CgroupLayout(root=ROOT, driver=driver)
        path = layout.pod_path(config_hash, "Burstable")
        assert (name.format(h=config_hash), config_hash) == (path.name, layout.parse_pod_dir("Burstable", path.name))

    def test_bad_qos(self) -> None:
        """A QoS class other than the three API strings is refused, quoting it."""
        layout = CgroupLayout(root=ROOT, driver=Driver.SYSTEMD)
        with pytest.raises(CgroupPathError) as caught:
            layout.pod_path(UID, "burstable")
        assert "invalid QoS class 'burstable': expected Guaranteed, Burstable or BestEffort" == str(caught.value)

    def test_valid_uid_returned(self) -> None:
        """A valid uid is returned unchanged."""
        assert UID == validate_uid(UID)

    def test_symlink_out_of_root(self, tmp_path: Path) -> None:
        """A kubepods that is a symlink leading outside the root is refused, naming both paths."""
        tree = build_tree(tmp_path)
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        (tree.root / "kubepods.slice").rename(tmp_path / "moved")
        (tree.root / "kubepods.slice").symlink_to(outside)
        layout = CgroupLayout(root=tree.root, driver=Driver.SYSTEMD)
        with pytest.raises(CgroupPathError) as caught:
            layout.pod_path(UID, "Guaranteed")
        expected = f"cgroup path {tree.root}/kubepods.slice resolves to {outside}, outside the cgroup root {tree.root}"
        assert expected == str(caught.value)

    def test_inside_root_accepted(self, tmp_path: Path) -> None:
        """A path below the root (existing or not yet) is returned unchanged."""
        assert tmp_path / "a" / "b" == ensure_inside(tmp_path, tmp_path / "a" / "b")


class TestDetect:
    @pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
    def test_auto(self, tmp_path: Path, driver: str) -> None:
        """auto picks the driver whose kubepods directory exists."""
        tree = build_tree(tmp_path, driver=driver)
        assert CgroupLayout(root=tree.root, driver=Driver(driver)) == detect_layout(tree.root)

    def test_explicit_driver(self, tmp_path: Path) -> None:
        """A named driver is used when its kubepods directory exists."""
        tree = build_tree(tmp_path, driver="cgroupfs")
        assert CgroupLayout(root=tree.root, driver=Driver.CGROUPFS) == detect_layout(tree.root, "cgroupfs")

    def test_explicit_driver_missing(self, tmp_path: Path) -> None:
        """A named driver whose kubepods directory is missing is an error naming the path."""
        tree = build_tree(tmp_path, driver="cgroupfs")
        with pytest.raises(CgroupDriverError) as caught:
            detect_layout(tree.root, "systemd")
        expected = (
            f"cgroup driver systemd: {tree.root}/kubepods.slice not found (is the kubelet's cgroupDriver another?)"
        )
        assert expected == str(caught.value)

    def test_auto_without_kubepods(self, tmp_path: Path) -> None:
        """auto with neither kubepods.slice nor kubepods names both paths."""
        tree = build_tree(tmp_path)
        (tree.root / "kubepods.slice").rename(tmp_path / "away")
        with pytest.raises(CgroupDriverError) as caught:
            detect_layout(tree.root)
        expected = (
            f"cannot detect the kubelet's cgroup driver: neither {tree.root}/kubepods.slice (systemd) "
            f"nor {tree.root}/kubepods (cgroupfs) exists"
        )
        assert expected == str(caught.value)

    def test_unknown_driver(self, tmp_path: Path) -> None:
        """An unknown driver name is an error quoting it."""
        tree = build_tree(tmp_path)
        with pytest.raises(CgroupDriverError) as caught:
            detect_layout(tree.root, "upstart")
        assert "invalid cgroup driver 'upstart': expected auto, systemd or cgroupfs" == str(caught.value)

    @pytest.mark.parametrize("hybrid", [False, True], ids=["v1", "hybrid"])
    def test_v1_refused(self, tmp_path: Path, hybrid: bool) -> None:
        """A v1 or hybrid hierarchy is refused with a one-line message naming the missing file."""
        root = build_v1_tree(tmp_path, hybrid=hybrid)
        with pytest.raises(CgroupV1Error) as caught:
            detect_layout(root, "auto")
        expected = (
            f"cgroup v1 is not supported: {root}/cgroup.controllers not found; "
            "podpin needs the unified cgroup v2 hierarchy"
        )
        assert expected == str(caught.value)


class TestLookup:
    def test_find_pod_at_expected_level(self, tmp_path: Path) -> None:
        """A pod is found at the QoS level podpin computed."""
        tree = build_tree(tmp_path)
        path = tree.add_pod(UID, "Burstable")
        layout = detect_layout(tree.root)
        assert PodLocation(qos=QOSClass.BURSTABLE, path=path) == layout.find_pod(UID, "Burstable")

    @pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
    @pytest.mark.parametrize(
        ("computed", "actual"), [("Guaranteed", "Burstable"), ("Burstable", "BestEffort"), ("BestEffort", "Guaranteed")]
    )
    def test_find_pod_at_other_level(self, tmp_path: Path, driver: str, computed: str, actual: str) -> None:
        """A pod the kubelet classed differently is found at the level where its cgroup really is."""
        tree = build_tree(tmp_path, driver=driver)
        path = tree.add_pod(UID, actual)
        layout = detect_layout(tree.root)
        assert PodLocation(qos=QOSClass(actual), path=path) == layout.find_pod(UID, computed)

    def test_find_pod_missing(self, tmp_path: Path) -> None:
        """A pod without a cgroup at any level is None."""
        layout = detect_layout(build_tree(tmp_path).root)
        assert [None, None, None] == [layout.find_pod(UID, qos) for qos in QOSClass]

    @pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
    @pytest.mark.parametrize("runtime", ["containerd", "cri-o", "docker"])
    def test_find_container(self, tmp_path: Path, driver: str, runtime: str) -> None:
        """A container is found under its pod even when the pod's QoS was computed differently."""
        tree = build_tree(tmp_path, driver=driver)
        path = tree.add_container(tree.add_pod(UID, "BestEffort"), CID, runtime)
        layout = detect_layout(tree.root)
        assert path == layout.find_container(UID, "Guaranteed", f"{runtime}://{CID}")

    def test_find_container_missing(self, tmp_path: Path) -> None:
        """A container whose cgroup does not exist (yet) is None."""
        tree = build_tree(tmp_path)
        tree.add_pod(UID, "Guaranteed")
        layout = detect_layout(tree.root)
        assert [None] == [layout.find_container(UID, "Guaranteed", f"containerd://{CID}")]


class TestScan:
    def test_systemd(self, tmp_path: Path) -> None:
        """scan lists every pod of every QoS level with its containers; conmon, junk and files are skipped."""
        tree = build_tree(tmp_path, driver="systemd")
        guaranteed = tree.add_pod(pod_uid(1), "Guaranteed")
        c1 = tree.add_container(guaranteed, container_hex(1), "containerd")
        c2 = tree.add_container(guaranteed, container_hex(2), "containerd")
        burstable = tree.add_pod(pod_uid(2), "Burstable")
        c3 = tree.add_container(burstable, container_hex(3), "cri-o")
        tree.add_conmon(burstable, container_hex(3))
        besteffort = tree.add_pod(pod_uid(3), "BestEffort")
        c4 = tree.add_container(besteffort, container_hex(4), "docker")
        (besteffort / "not-a-container").mkdir()
        (tree.kubepods() / "system.slice").mkdir()
        (tree.kubepods() / f"kubepods-burstable-pod{pod_uid(9).replace('-', '_')}.slice").mkdir()
        expected = [
            ScannedPod(
                qos=QOSClass.GUARANTEED,
                uid=pod_uid(1),
                path=guaranteed,
                containers=(
                    ScannedContainer(id=container_hex(1), runtime=Runtime.CONTAINERD, path=c1),
                    ScannedContainer(id=container_hex(2), runtime=Runtime.CONTAINERD, path=c2),
                ),
            ),
            ScannedPod(
                qos=QOSClass.BURSTABLE,
                uid=pod_uid(2),
                path=burstable,
                containers=(ScannedContainer(id=container_hex(3), runtime=Runtime.CRIO, path=c3),),
            ),
            ScannedPod(
                qos=QOSClass.BESTEFFORT,
                uid=pod_uid(3),
                path=besteffort,
                containers=(ScannedContainer(id=container_hex(4), runtime=Runtime.DOCKER, path=c4),),
            ),
        ]
        assert expected == scan(detect_layout(tree.root))

    def test_cgroupfs(self, tmp_path: Path) -> None:
        """With the cgroupfs driver a bare-id container has no known runtime and crio- ones are CRI-O."""
        tree = build_tree(tmp_path, driver="cgroupfs")
        pod = tree.add_pod(pod_uid(5), "Burstable")
        bare = tree.add_container(pod, container_hex(5), "containerd")
        crio = tree.add_container(pod, container_hex(6), "cri-o")
        tree.add_conmon(pod, container_hex(6))
        expected = [
            ScannedPod(
                qos=QOSClass.BURSTABLE,
                uid=pod_uid(5),
                path=pod,
                containers=(
                    ScannedContainer(id=container_hex(5), runtime=None, path=bare),
                    ScannedContainer(id=container_hex(6), runtime=Runtime.CRIO, path=crio),
                ),
            ),
        ]
        assert expected == scan(detect_layout(tree.root))

    @pytest.mark.parametrize(
        ("driver", "qos", "name"),
        [
            ("systemd", "Guaranteed", "kubepods-burstable.slice"),
            ("systemd", "Guaranteed", f"kubepods-pod{UID}.slice"),
            ("systemd", "Burstable", f"kubepods-pod{UID_}.slice"),
            ("systemd", "Guaranteed", f"kubepods-pod{UID_}"),
            ("cgroupfs", "Guaranteed", "burstable"),
            ("cgroupfs", "Guaranteed", f"pod{UID.upper()}"),
            ("cgroupfs", "Guaranteed", f"pod{UID_}"),
        ],
    )
    def test_not_a_pod_dir(self, driver: str, qos: str, name: str) -> None:
        """Names that are not a pod cgroup of that QoS level parse as None."""
        assert [None] == [CgroupLayout(root=ROOT, driver=Driver(driver)).parse_pod_dir(qos, name)]

    @pytest.mark.parametrize(
        ("driver", "name"),
        [
            ("systemd", f"crio-conmon-{CID}.scope"),
            ("systemd", f"cri-containerd-{CID}"),
            ("systemd", f"podman-{CID}.scope"),
            ("systemd", f"docker-{CID[:12]}.scope"),
            ("cgroupfs", f"crio-conmon-{CID}"),
            ("cgroupfs", CID.upper()),
            ("cgroupfs", f"cri-containerd-{CID}.scope"),
        ],
    )
    def test_not_a_container_dir(self, driver: str, name: str) -> None:
        """conmon cgroups, other runtimes' names and malformed ids parse as None."""
        assert [None] == [CgroupLayout(root=ROOT, driver=Driver(driver)).parse_container_dir(name)]


class TestListContainers:
    def test_lists_real_container_directories_only(self, tmp_path: Path) -> None:
        """A pod's container cgroups by name; a symlink named like a container and the control files are not."""
        tree = build_tree(tmp_path, driver="systemd")
        pod = tree.add_pod(pod_uid(1), "Burstable")
        c2 = tree.add_container(pod, container_hex(2), "containerd")
        c1 = tree.add_container(pod, container_hex(1), "containerd")
        (pod / f"cri-containerd-{container_hex(3)}.scope").symlink_to(c1)
        layout = detect_layout(tree.root)
        expected = (
            ScannedContainer(id=container_hex(1), runtime=Runtime.CONTAINERD, path=c1),
            ScannedContainer(id=container_hex(2), runtime=Runtime.CONTAINERD, path=c2),
        )
        assert expected == list_containers(layout, pod)

    def test_a_pod_gone_is_none(self, tmp_path: Path) -> None:
        """A pod cgroup that is gone (or is a file) is None, not an empty pod."""
        tree = build_tree(tmp_path, driver="systemd")
        layout = detect_layout(tree.root)
        assert None is list_containers(layout, tree.kubepods() / "kubepods-pod-gone.slice")
        assert None is list_containers(layout, tree.kubepods() / "cgroup.procs")
