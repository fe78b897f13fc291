"""A node for the agent tests: sysfs + cgroup tree + pods dir + state dir + config, and ways to run ``podpin run``.

Every agent test starts from an :class:`AgentNode` built by :func:`make_node` in
a temp dir: the ``example-2s`` machine (2 sockets x 8 cores x 2 threads, CPUs
0-31, NUMA nodes 0 and 1), a cgroup v2 fixture tree of either driver whose
root holds the same CPUs, an empty pods directory and state directory, and a
configuration file (pod scope, one reserved CPU, a short reconcile period, a
kubelet ``cpu_manager_state`` path that does not exist unless a test writes
it). Pods are added with :meth:`AgentNode.add_pod`, which writes the manifest
and creates the pod's and its started containers' cgroups where the kubelet
and containerd would.

The agent is run three ways:

* :meth:`AgentNode.run_once` / :meth:`AgentNode.agent`: in-process, over
  :class:`~cgroupfs_builder.KernelEmulation` file ops so ``cpuset.cpus.effective``
  follows writes as in the kernel (plain files would show read-back mismatches);
* :func:`running`: an in-process agent in a thread (watcher, server, resync),
  stopped and joined on exit;
* :meth:`AgentNode.cli` / :meth:`AgentNode.spawn`: the real ``.venv/bin/podpin run``
  subprocess, for exit codes, signals and the JSON log lines on stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.cgroups.fs import FileOps
from agent.cpuset import CPUSet
from agent.pods.model import pod_from_dict
from agent.quantity import cpu_millis
from agent.runner import Agent, RunOptions
from tests.support.cgroupfs_builder import FixtureTree, build_tree
from tests.support.podfactory import container_id
from tests.support.sysfs_builder import MACHINES, write_sysfs

__all__ = [
    "NODE",
    "PODPIN",
    "AgentNode",
    "make_node",
    "running",
    "wait_until",
    "json_lines",
    "lines",
    "fetch",
    "sample",
    "kubeconfig",
    "Spawned",
]

NODE = "node-1"
#: The console script of this checkout's virtualenv.
PODPIN = str(Path(sys.executable).with_name("podpin"))
#: The agent configuration every node starts with (pod scope, CPU 0 reserved, quick resync).
BASE_CONFIG: dict[str, Any] = {
    "nodeName": NODE,
    "cpuManagerPolicy": "static",
    "systemReserved": {"cpu": "1"},
    "topologyManagerPolicy": "best-effort",
    "topologyManagerScope": "pod",
    "reconcilePeriod": "1s",
    "logLevel": "debug",
}
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def wait_until(predicate: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll ``predicate`` every 10 ms until it is truthy; AssertionError naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON log lines of a subprocess's stderr (other lines, e.g. tracebacks, are skipped)."""
    out = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                out.append(value)
    return out


def lines(logs: Sequence[Mapping[str, Any]], event: str, **match: Any) -> list[Mapping[str, Any]]:
    """The log entries named ``event`` whose fields include ``match``."""
    return [e for e in logs if e.get("event") == event and all(e.get(k) == v for k, v in match.items())]


def fetch(url: str) -> tuple[int, str]:
    """Status and body of a GET (HTTP errors are answers too)."""
    try:
        with _OPENER.open(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def sample(agent: Agent, name: str, **labels: str) -> float | None:
    """One sample of the agent's registry (None when the series does not exist)."""
    return agent.metrics.registry.get_sample_value(name, labels)


def kubeconfig(path: Path, server: str) -> Path:
    """Write a kubeconfig for ``server`` (the API server emulator) and return its path."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "emulator", "cluster": {"server": server}}],
        "users": [{"name": "podpin", "user": {"token": "test-token"}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "podpin"}}],
        "current-context": "emulator",
    }
    path.write_text(yaml.safe_dump(document))
    return path


@dataclass
class AgentNode:
    """One node's directories and configuration; see the module docstring."""

    base: Path
    sysfs: Path
    tree: FixtureTree
    pods_dir: Path
    state_dir: Path
    config_path: Path
    kubelet_state: Path
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def kubelet_config(self) -> Path:
        """The node's kubelet configuration file (``kubeletConfigPath``; absent unless a test writes one)."""
        return self.base / "kubelet" / "config.yaml"

    @property
    def runtime_root(self) -> Path:
        """``--runtime-root``: the node's runtime state (empty unless a test writes bundles into it)."""
        return self.base / "runtime"

    # -- configuration ---------------------------------------------------------------------
    def write_config(self, **changes: Any) -> None:
        """Change configuration keys (None removes one) and rewrite the file."""
        for key, value in changes.items():
            if value is None:
                self.config.pop(key, None)
            else:
                self.config[key] = value
        self.config_path.write_text(yaml.safe_dump(self.config))

    # -- pods ------------------------------------------------------------------------------
    def pod_cgroup(self, raw: Mapping[str, Any]) -> Path:
        """Where the kubelet puts this pod's cgroup (by the QoS class podpin computes; a static pod's by its hash)."""
        view = pod_from_dict(raw)
        return self.tree.qos_dir(view.qos) / self.tree.pod_name(view.cgroup_uid, view.qos)

    def container_cgroup(self, raw: Mapping[str, Any], name: str) -> Path:
        """The cgroup of container ``name`` of this pod (its status containerID must be set)."""
        uid = raw["metadata"]["uid"]
        return self.pod_cgroup(raw) / self.tree.container_name(container_id(uid, name).split("://")[1])

    def add_pod(
        self, raw: Mapping[str, Any], *, manifest: bool = True, cgroups: bool = True, sandbox: bool = False
    ) -> Path:
        """Write the manifest (``<name>.yaml``) and create the cgroups the kubelet and containerd would.

        The pod cgroup gets the pod's CFS quota (pod-level CPU limit, else the sum of
        the containers' limits when all have one); each container with a status
        containerID gets a cgroup with its own limit as quota; ``sandbox`` adds the
        pause container's cgroup (an id no container status names).

        Returns:
            the pod cgroup's path (created or not).
        """
        if manifest:
            self.write_manifest(raw)
        path = self.pod_cgroup(raw)
        if not cgroups:
            return path
        view = pod_from_dict(raw)
        self.tree.add_pod(view.cgroup_uid, view.qos)
        spec = raw["spec"]
        limits = [_cpu_limit(c) for c in [*spec.get("initContainers", []), *spec["containers"]]]
        pod_limit = _cpu_limit(spec) if "resources" in spec else None
        if pod_limit is None and limits and None not in limits:
            pod_limit = sum(m for m in limits if m is not None)
        self.tree.preset(path, "cpu.max", _quota(pod_limit))
        for container, limit in zip(view.all_containers, limits, strict=True):
            if container.container_id:
                child = self.tree.add_container(path, container.container_id.split("://")[1])
                self.tree.preset(child, "cpu.max", _quota(limit))
        if sandbox:
            self.tree.add_container(path, container_id(view.uid, "sandbox").split("://")[1])
        return path

    def start_container(self, raw: Mapping[str, Any], name: str) -> Path:
        """Create container ``name``'s cgroup in one step, as a real cgroup appears with all its files.

        ``mkcgroup`` makes the directory and then writes the files; an agent
        watching the tree could see the directory before its files. So the
        cgroup is built under a name no runtime uses and renamed into place.
        """
        target = self.container_cgroup(raw, name)
        staging = self.tree.mkcgroup(target.parent / f"staging-{name}", procs="4242\n")
        limit = next(
            (
                _cpu_limit(c)
                for c in [*raw["spec"].get("initContainers", []), *raw["spec"]["containers"]]
                if c["name"] == name
            ),
            None,
        )
        (staging / "cpu.max").write_text(_quota(limit))
        os.rename(staging, target)
        return target

    def sandbox_cgroup(self, raw: Mapping[str, Any]) -> Path:
        """The pause container's cgroup made by ``add_pod(..., sandbox=True)``."""
        uid = raw["metadata"]["uid"]
        return self.pod_cgroup(raw) / self.tree.container_name(container_id(uid, "sandbox").split("://")[1])

    def write_manifest(self, raw: Mapping[str, Any]) -> Path:
        """Write (or replace) the pod's manifest atomically, so the pods-dir source never reads half of it."""
        target = self.pods_dir / f"{raw['metadata']['name']}.yaml"
        temp = self.pods_dir / f".{target.name}.tmp"
        temp.write_text(yaml.safe_dump(dict(raw)))
        os.replace(temp, target)
        return target

    def remove_pod(self, raw: Mapping[str, Any]) -> None:
        """Delete the manifest and the pod's cgroups (the pod is gone)."""
        (self.pods_dir / f"{raw['metadata']['name']}.yaml").unlink()
        self.remove_pod_cgroup(raw)

    def remove_pod_cgroup(self, raw: Mapping[str, Any]) -> None:
        """Remove the pod's cgroups in one step, as the kubelet's ``rmdir`` does.

        The kernel removes a cgroup with its files at once. A plain tree removed
        file by file races with the agent, whose emulated kernel may still write
        into it. So the pod's cgroup first leaves the tree in one rename and only
        then is deleted.
        """
        graveyard = self.base / "removed-cgroups"
        graveyard.mkdir(exist_ok=True)
        gone = graveyard / raw["metadata"]["uid"]
        os.rename(self.pod_cgroup(raw), gone)
        shutil.rmtree(gone)

    # -- reading the tree ------------------------------------------------------------------
    def read(self, cgroup: Path, file: str = "cpuset.cpus") -> str:
        """A cgroup file's content, stripped."""
        return (cgroup / file).read_text().strip()

    def cpus(self, raw: Mapping[str, Any], container: str | None = None) -> str:
        """``cpuset.cpus`` of a pod's cgroup or of one of its containers."""
        path = self.pod_cgroup(raw) if container is None else self.container_cgroup(raw, container)
        return self.read(path)

    def files(self) -> dict[str, str]:
        """Every ``cpuset.cpus``/``cpuset.mems``/``cpu.max`` below the root (relative path -> content)."""
        found = {}
        for path in sorted(self.tree.root.rglob("*")):
            if path.name in ("cpuset.cpus", "cpuset.mems", "cpu.max"):
                found[str(path.relative_to(self.tree.root))] = path.read_text().strip()
        return found

    def checkpoint(self) -> dict[str, Any]:
        """The checkpoint's ``data`` (exclusive assignments per pod, bubbles, default pool)."""
        document: dict[str, Any] = json.loads((self.state_dir / "podpin_state.json").read_text())
        return dict(document["data"])

    # -- running the agent -----------------------------------------------------------------
    def options(self, **changes: Any) -> RunOptions:
        """The ``podpin run`` flags for this node (pods from the pods dir unless ``pods_dir=None``)."""
        flags: dict[str, Any] = {
            "config": self.config_path,
            "pods_dir": self.pods_dir,
            "sysfs_root": self.sysfs,
            "cgroup_root": self.tree.root,
            "state_dir": self.state_dir,
            "metrics_bind_address": "127.0.0.1:0",
            "runtime_root": self.runtime_root,
        }
        flags.update(changes)
        return RunOptions(**flags)

    def agent(self, ops: FileOps | None = None, **changes: Any) -> Agent:
        """An in-process agent over this node, writing through ``ops`` (default: the kernel emulation); prepared."""
        agent = Agent(self.options(**changes), file_ops=ops if ops is not None else self.tree.ops())
        agent.prepare()
        return agent

    def run_once(self, ops: FileOps | None = None, **changes: Any) -> Agent:
        """Run one in-process ``--once`` pass; returns the (stopped) agent for its metrics and state."""
        agent = self.agent(ops, once=True, **changes)
        status = agent.run()
        assert 0 == status, f"podpin run --once returned {status}"
        return agent

    def cli_args(self, *extra: str, pods_dir: bool = True) -> list[str]:
        """The argv of ``podpin run`` over this node."""
        args = [
            PODPIN,
            "run",
            "--config",
            str(self.config_path),
            "--sysfs-root",
            str(self.sysfs),
            "--cgroup-root",
            str(self.tree.root),
            "--state-dir",
            str(self.state_dir),
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--runtime-root",
            str(self.runtime_root),
        ]
        if pods_dir:
            args += ["--pods-dir", str(self.pods_dir)]
        return args + list(extra)

    def cli(
        self, *extra: str, env: Mapping[str, str] | None = None, timeout: float = 30.0, pods_dir: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run ``podpin run ... --once``-style to completion; stdout and stderr captured as text."""
        return subprocess.run(
            self.cli_args(*extra, pods_dir=pods_dir),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_env(env),
            check=False,
        )

    def spawn(self, *extra: str, env: Mapping[str, str] | None = None, pods_dir: bool = True) -> Spawned:
        """Start ``podpin run`` in the background; its log lines are collected as they come."""
        process = subprocess.Popen(
            self.cli_args(*extra, pods_dir=pods_dir),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(env),
        )
        return Spawned(process)


class Spawned:
    """A background ``podpin run``: its JSON log lines (read by a thread) and ways to wait on them."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.logs: list[dict[str, Any]] = []
        self.other: list[str] = []
        self._reader = threading.Thread(target=self._read, name="podpin-stderr", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            parsed = json_lines(line)
            if parsed:
                self.logs.extend(parsed)
            else:
                self.other.append(line.rstrip("\n"))

    def wait_log(self, event: str, timeout: float = 10.0, **match: Any) -> Mapping[str, Any]:
        """The first log line named ``event`` with ``match``, waiting for it."""
        wait_until(lambda: lines(self.logs, event, **match) or self.process.poll() is not None, timeout, event)
        found = lines(self.logs, event, **match)
        assert found, f"podpin run exited ({self.process.returncode}) before logging {event}: {self.other[-5:]}"
        return found[0]

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` of the metrics server, from the ``agent.started`` line."""
        return f"http://{self.wait_log('agent.started')['metrics']}"

    def finish(self, timeout: float = 10.0) -> int:
        """Wait for the process to end and the reader to drain; returns the exit status."""
        status = self.process.wait(timeout)
        self._reader.join(timeout)
        return status

    def kill(self) -> None:
        """SIGKILL, if still running, and reap."""
        if self.process.poll() is None:
            self.process.kill()
        self.finish()


def _env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(extra or {})
    return env


def _cpu_limit(raw: Mapping[str, Any]) -> int | None:
    """The CPU limit in millicores of a raw container or pod spec (None when unset)."""
    limit = (raw.get("resources") or {}).get("limits", {}).get("cpu")
    return None if limit is None else cpu_millis(limit)


def _quota(millis: int | None) -> str:
    """``cpu.max`` as the kubelet and runc set it for a CPU limit (100 ms period)."""
    return "max 100000" if millis is None else f"{max(1000, millis * 100)} 100000"


def make_node(
    base: Path, *, driver: str = "systemd", machine: str = "example-2s", sysfs: Path | None = None
) -> AgentNode:
    """A node in ``base`` (a fresh directory).

    Args:
        base: an empty directory (``tmp_path``).
        driver: the kubelet's cgroup driver, ``systemd`` or ``cgroupfs``.
        machine: a :data:`sysfs_builder.MACHINES` name.
        sysfs: a sysfs tree to share (read-only for the agent); default: written into ``base``.
    """
    if sysfs is None:
        sysfs = write_sysfs(base / "sys", MACHINES[machine]())
    online = CPUSet.parse((sysfs / "devices/system/cpu/online").read_text())
    nodes = sorted(p.name[4:] for p in (sysfs / "devices/system/node").glob("node[0-9]*"))
    tree = build_tree(base, driver=driver, cpus=str(online), mems=str(CPUSet(int(n) for n in nodes)))
    pods_dir = base / "pods"
    pods_dir.mkdir()
    node = AgentNode(
        base=base,
        sysfs=sysfs,
        tree=tree,
        pods_dir=pods_dir,
        state_dir=base / "state",
        config_path=base / "podpin.yaml",
        kubelet_state=base / "kubelet" / "cpu_manager_state",
        config=dict(BASE_CONFIG),
    )
    # A PodResources socket and a kubelet configuration file of the node's own (absent unless a test writes
    # them): never the host's kubelet.
    node.write_config(
        kubeletCPUManagerStatePath=str(node.kubelet_state),
        podResourcesSocket=str(base / "kubelet" / "podres.sock"),
        kubeletConfigPath=str(node.kubelet_config),
    )
    return node


@contextlib.contextmanager
def running(agent: Agent, *, stop_within: float = 5.0) -> Iterator[Agent]:
    """Run ``agent`` (long-running mode) in a thread; on exit stop it and require it to end in time."""
    result: list[int | BaseException] = []

    def target() -> None:
        try:
            result.append(agent.run())
        except BaseException as err:
            result.append(err)

    thread = threading.Thread(target=target, name="agent-under-test", daemon=True)
    thread.start()
    try:
        wait_until(lambda: agent.reconciler.passes > 0 or result, what="the agent's first pass")
        yield agent
    finally:
        agent.stop()
        thread.join(stop_within)
        assert not thread.is_alive(), f"the agent did not stop within {stop_within}s"
    if result and isinstance(result[0], BaseException):
        raise result[0]
    assert [0] == result, f"the agent's run() returned {result}"
