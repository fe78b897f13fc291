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

import functools
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from agent import __version__
from tests.support.agentfixture import AgentNode, make_node
from tests.support.paths import REPO
from tests.support.podfactory import container, make_pod, resources

IMAGE_DIR = Path(os.environ.get("PODPIN_IMAGE_DIR", "/tmp/podpin-image"))
BASE_TAG = "localhost/podpin-base:bookworm"
IMAGE_TAG = f"localhost/podpin:{__version__}"
EXAMPLES = REPO / "deploy" / "examples"
PODS = ("trading-engine-after.yaml", "postgres-with-sidecars.yaml", "ml-data-loader.yaml", "web-burstable.yaml")
SETUP = "run scripts/image-setup (scripts/test does)"
#: Filled by the fixture, printed by tests/deploy/conftest.py: seconds and bytes.
MEASURED: dict[str, float] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class Podman:
    """podman with a store of its own in a temporary directory."""

    store: Path

    def command(self, *args: str) -> list[str]:
        """The podman argv for ``args`` with this store and the sandbox's storage and cgroup flags."""
        podman = shutil.which("podman")
        assert podman is not None, f"podman missing: {SETUP}"
        return [
            podman,
            "--root",
            str(self.store / "root"),
            "--runroot",
            str(self.store / "run"),
            "--storage-driver",
            "overlay",
            "--cgroup-manager",
            "cgroupfs",
            *args,
        ]

    def __call__(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        run = subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout, check=False)
        assert 0 == run.returncode, f"podman {' '.join(args[:2])}: {run.stderr[-3000:]}"
        return run

    def run(self, *args: str, user: str = "0:0") -> subprocess.CompletedProcess[str]:
        """``podman run`` of the image with a read-only root as ``user``, the examples mounted read-only at /examples.

        The caller checks the status (some runs are meant to fail).
        """
        podman_run = self.command(
            "run",
            "--rm",
            "--network",
            "none",
            "--cgroups",
            "disabled",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            "--read-only",
            "--user",
            user,
            "--volume",
            f"{EXAMPLES}:/examples:ro",
            *args,
        )
        hide_cgroups = 'mount -t tmpfs -o size=1M podpin-no-cgroups /sys/fs/cgroup && exec "$@"'
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", hide_cgroups, "sh", *podman_run]
        return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def _simple_index(wheelhouse: Path, root: Path) -> None:
    """Write a PEP 503 "simple" index of the wheels in ``wheelhouse`` under ``root/simple`` (it links to
    ``root/wheels``)."""
    (root / "wheels").symlink_to(wheelhouse)
    projects: dict[str, list[str]] = {}
    for wheel in sorted(wheelhouse.glob("*.whl")):
        name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        projects.setdefault(name, []).append(wheel.name)
    for name, files in projects.items():
        page = root / "simple" / name
        page.mkdir(parents=True)
        links = "".join(f'<a href="../../wheels/{file}">{file}</a>\n' for file in files)
        (page / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")


@contextmanager
def _serve(root: Path) -> Iterator[str]:
    """Serve ``root`` over HTTP on 127.0.0.1 (a free port); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="wheel-index", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the build log names what pip fetched."""


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    """The image built from the Dockerfile on the debootstrapped base, in a podman store of the module's own."""
    for path in (IMAGE_DIR / "base.tar", IMAGE_DIR / "wheelhouse"):
        assert path.exists(), f"{path} missing: {SETUP}"
    store = tmp_path_factory.mktemp("podman")
    index = tmp_path_factory.mktemp("index")
    _simple_index(IMAGE_DIR / "wheelhouse", index)
    tool = Podman(store=store)
    try:
        tool("import", str(IMAGE_DIR / "base.tar"), BASE_TAG)
        started = time.monotonic()
        with _serve(index) as url:
            tool(
                "build",
                "--isolation",
                "chroot",
                "--pull=never",
                "--build-arg",
                f"BASE={BASE_TAG}",
                "--build-arg",
                f"PIP_INDEX_URL={url}/simple/",
                "--tag",
                IMAGE_TAG,
                str(REPO),
                timeout=900,
            )
        MEASURED["build_seconds"] = time.monotonic() - started
        MEASURED["image_bytes"] = float(tool("image", "inspect", "--format", "{{.Size}}", IMAGE_TAG).stdout)
        MEASURED["base_bytes"] = float(tool("image", "inspect", "--format", "{{.Size}}", BASE_TAG).stdout)
        yield tool
    finally:
        subprocess.run(tool.command("rmi", "--all", "--force"), capture_output=True, timeout=300, check=False)
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
