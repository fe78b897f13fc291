"""The differential harness's shell (issue 17): scenarios of one machine shape run on one booted guest node, each
twice on fresh node state — (a) the kubelet deciding, (b) podpin deciding — and compared container by container.

Per scenario and side: the kubelet is restarted with that side's configuration and its decision checkpoints
cleared (guest_ops.py); in run (b) podpin starts in the guest (the host's venv, read through the guest's view of
the host's root) with a fresh checkpoint directory, and `/readyz` is awaited. The steps run in order: a pod file is
applied and waited for until it runs or is rejected (diff_pods.settled), `restart` restarts the kubelet (a) or podpin
(b) keeping their state and waits until every pod is settled again, `{delete}` deletes a pod and waits until it is
gone. Then every pod still there is read (the API for admission, the guest for CPUs and memory nodes: guest_observe),
twice a few seconds apart until two readings agree, and deleted; after run (b) podpin is stopped and `podpin reset`
gives the kernel's files back. A scenario that cannot run (a pod that never settles, a kubelet that does not come
back) is reported with its error, the node is cleaned, and the next scenario runs.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.cluster import diff_config, diff_pods
from tests.cluster.certs import write_kubeconfig
from tests.cluster.controlplane import API_SERVICE_IP, NODE_NAME, ControlPlane
from tests.cluster.diff_rows import Observation, Row, compare
from tests.cluster.node import GuestNode
from tests.cluster.procs import ClusterError, wait_for
from tests.cluster.scenario_format import BUSYBOX_IMAGE, Apply, Delete, Restart, Scenario, by_machine
from tests.vm.bytecode import GUEST_CODE, precompile_checkout
from tests.vm.ociimage import SLEEP_IMAGE

__all__ = ["DiffNode", "ScenarioRun", "run_scenarios"]


PODPIN = "podpin"
"""The name of podpin's process in the guest (its log: ``shared/podpin.log``)."""
METRICS = "127.0.0.1:9363"
SETTLE_TIMEOUT = 420.0
"""How long a pod may take to run or be rejected (TCG: a container start is seconds to a minute)."""
PODPIN_READY_TIMEOUT = 300.0
READING_GAP = 2.0
"""Seconds between two readings of the containers (a reading itself takes seconds in the TCG guest: a Python start)."""
POLL = 2.0
"""Seconds between two looks at the API while pods settle or go (a kubectl call on the host each)."""
Sides = ("kubelet", "podpin")
PHASES = {
    "kubelet": "the kubelet's restart with a run's configuration (or a scenario's restart step) until healthz is ok",
    "node": "after that, until the Node's status has a newer Ready heartbeat",
    "podpin": "podpin's start until /readyz, and its stop and reset after run (b)",
    "pods": "applying each pod until it runs or is rejected (and deleting pods of delete steps)",
    "settle": "after a restart step, until every pod is settled again",
    "observe": "reading every container until two readings agree",
    "clean": "deleting the scenario's pods until they are gone",
}
"""The phases a scenario's time is told by (ScenarioRun.phases)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioRun:
    """One scenario's outcome: its rows, or the error that stopped it, and how long it took (in all and by phase:
    where a corpus of dozens spends its hours is what makes it usable or not)."""

    scenario: str
    rows: tuple[Row, ...] = ()
    error: str | None = None
    seconds: float = 0.0
    phases: tuple[tuple[str, float], ...] = ()
    """Seconds by phase, both runs together, in the order first entered (:data:`PHASES` names them)."""


@dataclass(slots=True)
class DiffNode:
    """A booted guest node and its control plane, running scenarios of the node's machine shape."""

    plane: ControlPlane
    node: GuestNode
    say: Callable[[str], None]
    """Where progress goes (the driver: stderr with a time)."""
    _prepared: bool = False
    _phases: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Count the time spent in the block to phase `name` (one of :data:`PHASES`) of the current scenario."""
        started = time.monotonic()
        try:
            yield
        finally:
            self._phases[name] = self._phases.get(name, 0.0) + time.monotonic() - started

    # -- the node --------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Name the guest's busybox image as the scenarios' image; give podpin a kubeconfig in the shared dir."""
        if self._prepared:
            return
        ctr = str(self.node.runtime_bin / "ctr")
        tag = [ctr, "--address", "/run/containerd/containerd.sock", "-n", "k8s.io", "images", "tag", "--force"]
        self.node.sh(*tag, SLEEP_IMAGE.ref, BUSYBOX_IMAGE)
        certs = self.node.shared / "pki"
        admin = self.plane.pki.admin
        for path in (admin.cert, admin.key):
            (certs / path.name).write_bytes(path.read_bytes())
        write_kubeconfig(
            self._kubeconfig,
            server=f"https://{API_SERVICE_IP}:443",
            ca=certs / "ca.crt",
            user=type(admin)(cert=certs / admin.cert.name, key=certs / admin.key.name),
        )
        self._prepared = True

    @property
    def _kubeconfig(self) -> Path:
        return self.node.shared / "podpin.kubeconfig"

    def _restart_kubelet(self, overrides: dict[str, Any] | None, *, clear_state: bool) -> None:
        before = self._heartbeat()
        with self._phase("kubelet"):
            self.node.restart_kubelet(overrides, clear_state=clear_state)
        with self._phase("node"):
            wait_for(
                "the Node's status after the kubelet's restart (a newer heartbeat)",
                lambda: self._heartbeat() > before,
                timeout=300,
                logs=self.node.logs(),
                every=POLL,
            )

    def _heartbeat(self) -> str:
        """The Ready condition's heartbeat (RFC 3339 in UTC, so later is greater), '' while not Ready."""
        node = self.plane.admin.json("get", "node", NODE_NAME)
        for condition in node["status"].get("conditions", []):
            if condition["type"] == "Ready" and condition["status"] == "True":
                return str(condition["lastHeartbeatTime"])
        return ""

    # -- podpin ----------------------------------------------------------------------------------
    def _podpin_argv(self, command: str, config: Path, state_dir: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "agent",
            command,
            "--config",
            str(config),
            "--kubeconfig",
            str(self._kubeconfig),
            "--state-dir",
            state_dir,
        ]

    def _start_podpin(self, config: Path, state_dir: str) -> None:
        started = time.monotonic()
        with self._phase("podpin"):
            self.node.start_process(PODPIN, self._podpin_argv("run", config, state_dir), env=_guest_env())
            wait_for(
                "podpin's /readyz in the guest",
                self._podpin_ready,
                timeout=PODPIN_READY_TIMEOUT,
                logs=self._logs(),
                every=3.0,  # each look is a Python start in the guest, which competes with podpin's own start
            )
        self.say(f"  podpin ready in {time.monotonic() - started:.0f} s")

    def _podpin_ready(self) -> bool:
        if not self.node.process_status(PODPIN)["running"]:
            raise ClusterError(f"podpin exited in the guest; see {self.node.shared / 'podpin.log'}")
        answer = json.loads(self._guest("http", f"http://{METRICS}/readyz"))
        return bool(answer["status"] == 200)

    def _logs(self) -> list[Path]:
        return [*self.node.logs(), self.node.shared / "podpin.log"]

    def _guest(self, *args: str) -> str:
        return self.node.sh(sys.executable, "-m", "tests.cluster.guest_observe", *args, timeout=120).stdout

    # -- one scenario ----------------------------------------------------------------------------
    def run(self, scenario: Scenario) -> ScenarioRun:
        """Both runs of `scenario` and its rows; an error stops the scenario, not the harness."""
        self.prepare()
        self._phases = {}
        started = time.monotonic()
        seen: dict[str, dict[tuple[str, str], Observation]] = {}
        try:
            for side in Sides:
                self.say(f"{scenario.name}: run ({'a' if side == 'kubelet' else 'b'}) {side}")
                seen[side] = self._side(scenario, side)
        except (ClusterError, OSError, ValueError, KeyError) as err:
            self.say(f"{scenario.name}: {err}")
            return ScenarioRun(
                scenario=scenario.name,
                error=f"{type(err).__name__}: {err}",
                seconds=time.monotonic() - started,
                phases=self._phase_totals(),
            )
        rows = [
            compare(
                scenario.name, pod, container, kubelet=seen["kubelet"][key], podpin=seen["podpin"].get(key, _MISSING)
            )
            for key in seen["kubelet"]
            for pod, container in [key]
        ]
        rows += [
            compare(scenario.name, pod, container, kubelet=_MISSING, podpin=seen["podpin"][key])
            for key in seen["podpin"]
            if key not in seen["kubelet"]
            for pod, container in [key]
        ]
        return ScenarioRun(
            scenario=scenario.name,
            rows=tuple(rows),
            seconds=round(time.monotonic() - started, 1),
            phases=self._phase_totals(),
        )

    def _phase_totals(self) -> tuple[tuple[str, float], ...]:
        return tuple((name, round(seconds, 1)) for name, seconds in self._phases.items())

    def _side(self, scenario: Scenario, side: str) -> dict[tuple[str, str], Observation]:
        podpin = side == "podpin"
        config = self.node.shared / f"podpin-{scenario.name}.yaml"
        state_dir = f"/run/podpin-diff/{scenario.name}"
        overrides = diff_config.kubelet_config_b(scenario) if podpin else diff_config.kubelet_config_a(scenario)
        self._restart_kubelet(overrides, clear_state=True)
        if podpin:
            podpin_config = diff_config.podpin_config(
                scenario, node_name=NODE_NAME, state_dir=state_dir, metrics=METRICS
            )
            config.write_text(yaml.safe_dump(podpin_config))
            self._start_podpin(config, state_dir)
        try:
            self._steps(scenario, side, config, state_dir)
            with self._phase("observe"):
                return self._observe(scenario, side)
        finally:
            with self._phase("clean"):
                self._clean(scenario)
            if podpin:
                with self._phase("podpin"):
                    self._stop_podpin(config, state_dir)

    def _steps(self, scenario: Scenario, side: str, config: Path, state_dir: str) -> None:
        live: list[str] = []
        for step in scenario.steps:
            if isinstance(step, Apply):
                manifest = diff_pods.bound_manifest(step.pod, node=NODE_NAME, ready_gate=side == "podpin")
                with self._phase("pods"):
                    self.plane.admin.run("apply", "-f", "-", stdin=json.dumps(manifest))
                    live.append(step.pod.name)
                    self._wait_settled(scenario, side, [step.pod.name])
            elif isinstance(step, Delete):
                pod = step.pod
                with self._phase("pods"):
                    self.plane.admin.run(
                        "delete", "pod", pod.name, "-n", pod.namespace, "--wait=true", "--timeout=300s", timeout=330
                    )
                live.remove(pod.name)
            elif isinstance(step, Restart):
                if side == "kubelet":
                    self._restart_kubelet(None, clear_state=False)
                else:
                    with self._phase("podpin"):
                        self.node.stop_process(PODPIN)
                    self._start_podpin(config, state_dir)
                with self._phase("settle"):
                    self._wait_settled(scenario, side, live)

    def _pod(self, scenario: Scenario, name: str) -> dict[str, Any]:
        pod = scenario.pod(name)
        answer: dict[str, Any] = self.plane.admin.json("get", "pod", pod.name, "-n", pod.namespace)
        return answer

    def _wait_settled(self, scenario: Scenario, side: str, names: Iterable[str]) -> None:
        for name in names:
            wait_for(
                f"pod {name} of {scenario.name} to run or be rejected ({side})",
                lambda name=name: diff_pods.settled(self._pod(scenario, name), side=side),  # type: ignore[misc]
                timeout=SETTLE_TIMEOUT,
                logs=self._logs(),
                every=POLL,
            )

    def _observe(self, scenario: Scenario, side: str) -> dict[tuple[str, str], Observation]:
        deleted = {step.pod.name for step in scenario.steps if isinstance(step, Delete)}
        pods = [self._pod(scenario, pod.name) for pod in scenario.pods if pod.name not in deleted]
        previous: dict[tuple[str, str], Observation] | None = None
        for _ in range(4):
            current = self._read(pods, side)
            if current == previous:
                return current
            previous = current
            time.sleep(READING_GAP)
            pods = [self._pod(scenario, pod["metadata"]["name"]) for pod in pods]
        raise ClusterError(f"{scenario.name} ({side}): the containers' CPUs did not settle in four readings")

    def _read(self, pods: list[dict[str, Any]], side: str) -> dict[tuple[str, str], Observation]:
        ids = {
            (pod["metadata"]["name"], name): cid for pod in pods for name, cid in diff_pods.container_ids(pod).items()
        }
        seen = json.loads(self._guest("containers", *ids.values())) if ids else {}
        out: dict[tuple[str, str], Observation] = {}
        for pod in pods:
            admission = diff_pods.kubelet_admission if side == "kubelet" else diff_pods.podpin_admission
            admitted, reason = admission(pod)
            for container in diff_pods.observed_containers(pod):
                key = (pod["metadata"]["name"], container)
                view = seen.get(ids.get(key, ""), {})
                if "error" in view:
                    raise ClusterError(f"{key[0]}/{key[1]} ({side}): {view['error']}")
                out[key] = Observation(
                    admitted=admitted,
                    reason=reason,
                    cpus=view.get("cpus"),
                    mems=view.get("mems"),
                    cgroup_cpus=view.get("cgroup_cpus"),
                    cgroup_mems=view.get("cgroup_mems"),
                )
        return out

    def _clean(self, scenario: Scenario) -> None:
        for namespace in sorted({pod.namespace for pod in scenario.pods}):
            self.plane.admin.run(
                "delete", "pods", "--all", "-n", namespace, "--wait=true", "--timeout=300s", timeout=330, check=False
            )
        wait_for(
            f"the pods of {scenario.name} to be gone",
            lambda: not any(self.plane.admin.json("get", "pods", "-A")["items"]),
            timeout=300,
            logs=self._logs(),
            every=POLL,
        )

    def _stop_podpin(self, config: Path, state_dir: str) -> None:
        if self.node.process_status(PODPIN)["running"]:
            self.node.stop_process(PODPIN)
        argv = [*self._podpin_argv("reset", config, state_dir), "--forget-state"]
        self.node.sh(*argv, timeout=300)


_MISSING = Observation(admitted=False, reason="NotObserved")
"""A container one side has and the other does not (a pod that did not settle there): never equal."""


def _guest_env() -> dict[str, str]:
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}


def run_scenarios(
    plane: ControlPlane, workdir: Path, scenarios: Iterable[Scenario], say: Callable[[str], None]
) -> Iterator[ScenarioRun]:
    """Run `scenarios` on `plane`, one guest boot per machine shape (one guest at a time), yielding each outcome."""
    if not precompile_checkout():
        say(f"  some of {', '.join(GUEST_CODE)} did not compile: the guest compiles it at each start")
    for index, (machine, group) in enumerate(by_machine(scenarios).items()):
        say(f"boot {index + 1}: {machine} for {len(group)} scenario(s)")
        node = GuestNode(plane, workdir / f"node-{index}", diff_config.node_spec(machine))
        try:
            started = time.monotonic()
            node.start()
            say(f"  node Ready in {time.monotonic() - started:.0f} s")
            diff = DiffNode(plane, node, say)
            for scenario in group:
                yield diff.run(scenario)
        finally:
            node.stop()
