"""Guest side: the kubelet's part of starting and stopping a pod, against a real containerd over CRI.

What the kubelet (``cgroupDriver: cgroupfs``, ``cpuManagerPolicy: none``) does for a pod, in its order:

1. create the pod cgroup itself (``/kubepods/pod<uid>``, ``/kubepods/burstable/pod<uid>`` ...) with the pod's
   ``cpu.max``, ``cpuset cpu`` enabled down to it (:meth:`CRIKubelet.create_pod_cgroup`);
2. ``RunPodSandbox`` with ``linux.cgroup_parent`` = that cgroup, the host network (no CNI), no hostname, a log
   directory: containerd starts the pause container in ``<pod cgroup>/<sandbox id>``;
3. per container, restartable init containers (sidecars) first, then the app containers: ``CreateContainer``
   (CFS quota, period and shares from the container's CPU limit and request, no cpuset: with the CPU manager
   off the kubelet sends none) and ``StartContainer``, where containerd's runc creates ``<pod cgroup>/<id>``
   and starts the entrypoint;
4. on deletion ``StopContainer`` (grace 0), ``RemoveContainer``, ``StopPodSandbox``, ``RemovePodSandbox``, and
   the pod cgroup is removed.

Each container's stdout goes to ``<log dir>/<name>/0.log`` in the CRI log format (``<time> <stream> <P|F>
<line>``); :func:`first_view` reads what a probe container (``ociimage.PROBE_IMAGE``) printed first.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.cpuset import CPUSet
from agent.quantity import cpu_millis, memory_bytes
from tests.vm import ociimage
from tests.vm.agentpods import CFS_PERIOD_US, ContainerSpec, PodSpec
from tests.vm.criclient import CRIClient, pb
from tests.vm.kubetree import CGROUP_ROOT, enable_controllers, read, write

__all__ = ["CRIKubelet", "PodRun", "first_view", "log_lines", "pod_cgroup_name", "probe_uptime"]

_QOS_DIR = {"guaranteed": "", "burstable": "burstable", "besteffort": "besteffort"}


def pod_cgroup_name(spec: PodSpec) -> str:
    """The pod cgroup relative to the cgroup root, cgroupfs driver: ``kubepods[/<qos>]/pod<uid>``."""
    middle = _QOS_DIR[spec.qos]
    return f"kubepods/{middle + '/' if middle else ''}pod{spec.uid}"


def _resources(container: ContainerSpec) -> pb.LinuxContainerResources:
    """The kubelet's CRI resources for a container with the CPU manager off (no cpuset)."""
    request = cpu_millis(container.cpu_request)
    shares = max(2, request * 1024 // 1000)
    quota = 0 if container.cpu_limit is None else cpu_millis(container.cpu_limit) * CFS_PERIOD_US // 1000
    memory = 0 if container.memory_limit is None else memory_bytes(container.memory_limit)
    return pb.LinuxContainerResources(
        cpu_period=CFS_PERIOD_US, cpu_quota=quota, cpu_shares=shares, memory_limit_in_bytes=memory
    )


def log_lines(path: Path) -> list[str]:
    """The payload of each stdout/stderr line of a CRI log file (timestamps and tags dropped); [] if absent."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    lines = []
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[1] in ("stdout", "stderr"):
            lines.append(parts[3])
    return lines


def first_view(path: Path) -> CPUSet | None:
    """The ``Cpus_allowed_list`` a probe container printed as its first action, or None (not yet printed)."""
    for line in log_lines(path):
        if line.startswith(ociimage.FIRST_VIEW_PREFIX + " "):
            return CPUSet.parse(line[len(ociimage.FIRST_VIEW_PREFIX) + 1 :].strip())
    return None


def probe_uptime(path: Path) -> float | None:
    """The guest uptime (s) a probe container printed right after its first view, or None."""
    for line in log_lines(path):
        if line.startswith(ociimage.UPTIME_PREFIX + " "):
            try:
                return float(line[len(ociimage.UPTIME_PREFIX) + 1 :].strip())
            except ValueError:
                return None
    return None


@dataclass(slots=True)
class PodRun:
    """One pod the kubelet stand-in started: its sandbox, its containers and where their logs go."""

    spec: PodSpec
    cgroup: Path
    sandbox_id: str
    sandbox_config: pb.PodSandboxConfig
    log_dir: Path
    containers: dict[str, str] = field(default_factory=dict)
    """Container name -> runtime id (64 hex), as CreateContainer returned them, in creation order."""
    started: dict[str, float] = field(default_factory=dict)
    """Container name -> ``time.monotonic()`` right after StartContainer returned."""

    def log_path(self, name: str) -> Path:
        """The container's CRI log file."""
        return self.log_dir / name / "0.log"

    def container_cgroup(self, name: str) -> Path:
        """Where containerd (cgroupfs driver) puts the container's cgroup: ``<pod cgroup>/<id>``."""
        return self.cgroup / self.containers[name]

    @property
    def sandbox_cgroup(self) -> Path:
        return self.cgroup / self.sandbox_id


@dataclass(slots=True)
class CRIKubelet:
    """Creates and removes pods like the kubelet does, through ``client`` (see the module docstring)."""

    client: CRIClient
    root: Path = CGROUP_ROOT
    log_root: Path = Path("/tmp/podpin-pod-logs")
    _made: list[Path] = field(default_factory=list)

    @property
    def kubepods(self) -> Path:
        return self.root / "kubepods"

    def setup(self) -> None:
        """``kubepods``, ``kubepods/burstable`` and ``kubepods/besteffort`` with ``cpuset cpu`` enabled down to them."""
        for path in (self.kubepods, self.kubepods / "burstable", self.kubepods / "besteffort"):
            self._mkdir(path)
            enable_controllers(path, self.root)

    def create_pod_cgroup(self, spec: PodSpec) -> Path:
        """The pod cgroup, with the kubelet's pod ``cpu.max`` and the controllers its children need."""
        path = self.root / pod_cgroup_name(spec)
        self._mkdir(path)
        enable_controllers(path, self.root)
        write(path, "cpu.max", spec.kubelet_cpu_max)
        return path

    def run_sandbox(self, spec: PodSpec, cgroup: Path, *, annotations: Mapping[str, str] | None = None) -> PodRun:
        """``RunPodSandbox`` in ``cgroup`` (host network, no hostname), its log directory made first; ``annotations``
        are the pod's (the kubelet passes them; NRI hands them to plugins in every PodSandbox)."""
        log_dir = self.log_root / f"{spec.namespace}_{spec.name}_{spec.uid}"
        log_dir.mkdir(parents=True, exist_ok=True)
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=spec.name, uid=spec.uid, namespace=spec.namespace, attempt=0),
            log_directory=str(log_dir),
            labels={
                "io.kubernetes.pod.name": spec.name,
                "io.kubernetes.pod.namespace": spec.namespace,
                "io.kubernetes.pod.uid": spec.uid,
            },
            annotations=dict(annotations or {}),
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent="/" + str(cgroup.relative_to(self.root)),
                security_context=pb.LinuxSandboxSecurityContext(
                    namespace_options=pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER, ipc=pb.POD)
                ),
            ),
        )
        sandbox_id = self.client.run_pod_sandbox(config)
        return PodRun(spec=spec, cgroup=cgroup, sandbox_id=sandbox_id, sandbox_config=config, log_dir=log_dir)

    def create_container(self, run: PodRun, name: str, image: ociimage.ImageSpec) -> str:
        """``CreateContainer`` for container ``name`` of the pod (log subdirectory made first); returns its id."""
        container = run.spec.container(name)
        (run.log_dir / name).mkdir(parents=True, exist_ok=True)
        config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=0),
            image=pb.ImageSpec(image=image.ref),
            labels={
                "io.kubernetes.container.name": name,
                "io.kubernetes.pod.name": run.spec.name,
                "io.kubernetes.pod.namespace": run.spec.namespace,
                "io.kubernetes.pod.uid": run.spec.uid,
            },
            log_path=f"{name}/0.log",
            linux=pb.LinuxContainerConfig(resources=_resources(container)),
        )
        container_id = self.client.create_container(run.sandbox_id, config, run.sandbox_config)
        run.containers[name] = container_id
        return container_id

    def start_container(self, run: PodRun, name: str) -> None:
        """``StartContainer``: the cgroup appears and the entrypoint runs."""
        self.client.start_container(run.containers[name])
        run.started[name] = time.monotonic()

    def start_pod(self, spec: PodSpec, image: ociimage.ImageSpec, *, names: Sequence[str] | None = None) -> PodRun:
        """Pod cgroup, sandbox, then each container (sidecars first) created and started, one after the other."""
        run = self.run_sandbox(spec, self.create_pod_cgroup(spec))
        order = [c.name for c in spec.containers if c.sidecar] + [c.name for c in spec.containers if not c.sidecar]
        for name in order if names is None else names:
            self.create_container(run, name, image)
            self.start_container(run, name)
        return run

    def stop_pod(self, run: PodRun) -> None:
        """Stop and remove every container and the sandbox, then the pod cgroup (what pod deletion does)."""
        for container_id in reversed(list(run.containers.values())):
            with contextlib.suppress(Exception):
                self.client.stop_container(container_id, grace=0)
            self.client.remove_container(container_id)
        self.client.stop_pod_sandbox(run.sandbox_id)
        self.client.remove_pod_sandbox(run.sandbox_id)
        self.remove_cgroup(run.cgroup)

    def remove_cgroup(self, path: Path, timeout: float = 10.0) -> None:
        """Remove an empty cgroup this stand-in made (EBUSY while the kernel is still releasing tasks: retried)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as err:
                if err.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{path}: cannot remove: {os.strerror(err.errno or 0)} (procs: {read(path, 'cgroup.procs')!r})"
                    ) from err
                time.sleep(0.02)
        if path in self._made:
            self._made.remove(path)

    def close(self) -> None:
        """Remove the cgroups made here that are empty (deepest first); busy ones are left to the VM's poweroff."""
        for path in sorted(self._made, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError, RuntimeError):
                self.remove_cgroup(path, timeout=1.0)

    def _mkdir(self, path: Path) -> None:
        try:
            path.mkdir()
        except FileExistsError:
            return
        self._made.append(path)
