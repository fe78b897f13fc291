"""The agent image, built from the Dockerfile with podman and run: what the DaemonSet would run.

No container registry is reachable here, so the image is built on a base made from Debian's own packages:
``scripts/image-setup`` (run by ``scripts/test``) debootstraps a bookworm minbase with python3, python3-venv and
libudev1 into ``$PODPIN_IMAGE_DIR/base.tar`` (default ``/tmp/podpin-image``) and downloads podpin's dependencies as
wheels into ``wheelhouse/``. The module imports that base into a podman store of its own (a temporary directory,
so nothing is shared with other runs or with the machine's own store), builds the Dockerfile with
``--build-arg BASE=...`` once, and runs the image as the DaemonSet does: as its user, with a read-only root.

What podman needs in this sandbox, and why (found by trying; a fresh Debian 12 machine with cgroup v2 takes the
same flags):

* ``--root``/``--runroot`` in the test's temporary directory, ``--storage-driver overlay`` (root; vfs would work
  too, slower) and ``--cgroup-manager cgroupfs`` (no systemd to ask for scopes).
* build: ``--isolation chroot``: the RUN steps run in a chroot, without an OCI runtime or cgroups (crun refuses
  this machine's hybrid cgroup layout). chroot isolation only has the host's network (``--network none`` is refused
  with it), so the build reaches the loopback: the module serves the wheelhouse there as a PEP 503 index and passes
  it as the Dockerfile's ``PIP_INDEX_URL`` build argument. A ``-v`` mount of the wheelhouse would leave its empty
  mount point in the image. apt never runs: the base has libudev1.
* run: ``--cgroups disabled`` (create no cgroup: the machine's cgroups are not ours to touch) inside a private
  mount namespace (``unshare -m``) where a tmpfs hides the host's hybrid ``/sys/fs/cgroup`` from crun, which
  otherwise refuses to start; ``--ulimit nofile=1024:1024 --ulimit nproc=1024:1024``, because podman's defaults
  raise limits above the hard ones and the sandbox has no CAP_SYS_RESOURCE; ``--network none``.

The build time and the image size are printed at the end of the run (tests/deploy/conftest.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from agent import __version__
from tests.support.agent_image import BASE_TAG, BUILD_FLAGS, EXAMPLES, IMAGE_TAG, Podman, base_store
from tests.support.agentfixture import AgentNode, make_node
from tests.support.paths import REPO
from tests.support.podfactory import container, make_pod, resources

PODS = ("trading-engine-after.yaml", "postgres-with-sidecars.yaml", "ml-data-loader.yaml", "web-burstable.yaml")
#: Filled by the fixture, printed by tests/deploy/conftest.py: seconds and bytes.
MEASURED: dict[str, float] = {}


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    """The image built from the Dockerfile on the debootstrapped base, in a podman store of the module's own."""
    store = tmp_path_factory.mktemp("podman")
    try:
        with base_store(store, tmp_path_factory.mktemp("index")) as (tool, build_args):
            started = time.monotonic()
            args = [arg for key, value in build_args.items() for arg in ("--build-arg", f"{key}={value}")]
            tool("build", *BUILD_FLAGS, *args, "--tag", IMAGE_TAG, str(REPO), timeout=900)
            MEASURED["build_seconds"] = time.monotonic() - started
            MEASURED["image_bytes"] = float(tool("image", "inspect", "--format", "{{.Size}}", IMAGE_TAG).stdout)
            MEASURED["base_bytes"] = float(tool("image", "inspect", "--format", "{{.Size}}", BASE_TAG).stdout)
            yield tool
    finally:
        shutil.rmtree(store, ignore_errors=True)


def _daemonset_user() -> str:
    """uid:gid of the agent container in deploy/daemonset.yaml."""
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "daemonset.yaml").read_text()) if d]
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    context = daemonset["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    return f"{context['runAsUser']}:{context['runAsGroup']}"


def _plan_args(root: Path) -> list[str]:
    return [
        "plan",
        "--output",
        "json",
        "--topology",
        str(root / "topology-2s.json"),
        "--config",
        str(root / "config-pod-scope.yaml"),
        *(str(root / "pods" / name) for name in PODS),
    ]


def test_version(podman: Podman) -> None:
    """`podpin --version` in the image prints the agent's version."""
    run = podman.run(IMAGE_TAG, "--version", user=_daemonset_user())
    assert (0, f"podpin {__version__}\n") == (run.returncode, run.stdout)


def test_plan_equals_the_agent_outside(podman: Podman) -> None:
    """`podpin plan` of the bundled topology and example pods, in the image with a read-only root as the
    DaemonSet's user, prints the same plan as the agent outside the image."""
    inside = podman.run(IMAGE_TAG, *_plan_args(Path("/examples")), user=_daemonset_user())
    outside = subprocess.run(
        [str(REPO / ".venv" / "bin" / "podpin"), *_plan_args(EXAMPLES)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert (0, json.loads(outside.stdout)) == (inside.returncode, json.loads(inside.stdout or "null"))


def test_runs_as_the_daemonset_user_on_a_read_only_root(podman: Podman) -> None:
    """With the DaemonSet's runAsUser/runAsGroup the process has that uid and gid and cannot write its root."""
    probe = (
        "import os\n"
        "try:\n"
        "    open('/probe', 'w')\n"
        "    result = 'written'\n"
        "except OSError as err:\n"
        "    result = os.strerror(err.errno)\n"
        "print(os.getuid(), os.getgid(), result)\n"
    )
    run = podman.run("--entrypoint", "python3", IMAGE_TAG, "-c", probe, user=_daemonset_user())
    uid, gid = _daemonset_user().split(":")
    assert (0, f"{uid} {gid} Read-only file system\n") == (run.returncode, run.stdout)


def test_carries_only_what_the_agent_runs(podman: Podman) -> None:
    """No packaging tool, test dependency, compiler or source tree in the image: only the agent's virtualenv."""
    probe = (
        "import importlib.util, shutil, sys, os\n"
        "mods = ['pip', 'setuptools', 'wheel', 'pytest', 'hypothesis', 'matplotlib', 'kubernetes_validate']\n"
        "found = [m for m in mods if importlib.util.find_spec(m)]\n"
        "tools = [t for t in ('gcc', 'cc', 'make', 'pip', 'pip3', 'apt-get') if shutil.which(t)]\n"
        "trees = [p for p in ('/src', '/wheels', '/wheelhouse', '/tests', '/etc/pip.conf') if os.path.exists(p)]\n"
        "print(sys.prefix, found, tools, trees)\n"
    )
    run = podman.run("--entrypoint", "/opt/podpin/bin/python", IMAGE_TAG, "-c", probe, user=_daemonset_user())
    system = podman.run("--entrypoint", "/usr/bin/python3", IMAGE_TAG, "-c", probe, user=_daemonset_user())
    expected = (0, "/opt/podpin [] ['apt-get'] []\n", "/usr [] ['apt-get'] []\n")
    assert expected == (run.returncode, run.stdout, system.stdout)


def _node_with_pods(base: Path) -> AgentNode:
    """A fixture node (sysfs, systemd-driver cgroup tree, pods dir) with a pod-level pod and a classic one."""
    base.mkdir()
    node = make_node(base)
    node.add_pod(
        make_pod(
            "db",
            containers=[container("db", cpu="4", memory="1Gi"), container("proxy", cpu="100m", memory="64Mi")],
            pod_resources=resources(cpu="5", memory="2Gi"),
            states={"db": "running", "proxy": "running"},
            creation_timestamp="2026-01-01T00:00:01Z",
        )
    )
    node.add_pod(
        make_pod(
            "trader",
            containers=[container("engine", cpu="2", memory="1Gi")],
            states={"engine": "running"},
            creation_timestamp="2026-01-01T00:00:02Z",
        )
    )
    return node


def _tree_files(node: AgentNode) -> dict[str, str]:
    """Every file of the node's cgroup tree, by path relative to its root."""
    root = node.tree.root
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_run_once_writes_what_the_agent_outside_writes(podman: Podman, tmp_path: Path) -> None:
    """`podpin run --once` in the image (read-only root, the DaemonSet's user, the node's directories mounted at
    the same paths) writes the same cgroup files as the same command outside the image, and its checkpoint."""
    outside, inside = _node_with_pods(tmp_path / "outside"), _node_with_pods(tmp_path / "inside")
    before = _tree_files(inside)
    host = inside.cli_args("--once")[1:]
    run_outside = outside.cli("--once")
    run_inside = podman.run("--volume", f"{inside.base}:{inside.base}", IMAGE_TAG, *host, user=_daemonset_user())
    expected = (0, 0, True, _tree_files(outside), True)
    actual = (
        run_outside.returncode,
        run_inside.returncode,
        before != _tree_files(inside),
        _tree_files(inside),
        (inside.state_dir / "podpin_state.json").is_file(),
    )
    assert expected == actual, run_inside.stderr[-2000:]


def test_pyudev_finds_libudev(podman: Podman) -> None:
    """pyudev, which the agent uses for device events, loads libudev in the image."""
    probe = "import pyudev; print(type(pyudev.Context()).__name__)"
    run = podman.run("--entrypoint", "python3", IMAGE_TAG, "-c", probe, user=_daemonset_user())
    assert (0, "Context\n") == (run.returncode, run.stdout)


def test_default_command_is_the_agent(podman: Podman) -> None:
    """The image's entrypoint is podpin and its default command `run`, as the DaemonSet's args expect."""
    config = json.loads(podman("image", "inspect", "--format", "{{json .Config}}", IMAGE_TAG).stdout)
    assert (["podpin"], ["run"], ["9363/tcp"]) == (config["Entrypoint"], config["Cmd"], list(config["ExposedPorts"]))
