"""``podpin reset``: the way out, on fixture nodes the agent has pinned (both cgroup drivers).

The agent runs once over a fixture tree with the kernel emulation (effective
sets follow writes as in the kernel), then the reset runs over the same tree
and must leave every cgroup with all online CPUs in effect and every quota the
kubelet set, whatever the agent changed; a second reset must write nothing; a
dry run must write nothing and print exactly the writes a reset makes. Pods
come from the pods directory or the API server emulator, as for the agent.
"""

from __future__ import annotations

import errno
import io
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agent.agent_lock import LOCK_NAME
from agent.cgroups.fs import FileOps
from agent.cli import main
from agent.resetter import ResetOptions, reset_node
from agent.runner import AgentError
from tests.agent.test_once import PODS
from tests.support.agentfixture import AgentNode, kubeconfig, make_node, running, wait_until
from tests.support.apiserver_emulator import ApiServerEmulator
from tests.support.cgroupfs_builder import FaultyOps, RecordingOps, build_v1_tree
from tests.support.podfactory import container, make_pod

ONLINE = "0-31"


def _pinned(tmp_path: Path, driver: str = "systemd") -> tuple[AgentNode, dict[str, str]]:
    """A node with every kind of pod (sandboxes too), pinned by one agent pass; and its files before the agent."""
    node = make_node(tmp_path, driver=driver)
    for raw in PODS:
        node.add_pod(raw, sandbox=raw["metadata"]["name"] in ("db", "trader"))
    before = node.files()
    node.run_once()
    return node, before


def _reset(node: AgentNode, ops: FileOps | None = None, **changes: Any) -> tuple[int, str, str]:
    """Run ``podpin reset`` over the node in-process (kernel emulation unless ``ops``); (status, stdout, stderr)."""
    flags: dict[str, Any] = {
        "config": node.config_path,
        "pods_dir": node.pods_dir,
        "sysfs_root": node.sysfs,
        "cgroup_root": node.tree.root,
        "state_dir": node.state_dir,
        "env": {},
    }
    flags.update(changes)
    out, err = io.StringIO(), io.StringIO()
    status = reset_node(ResetOptions(**flags), file_ops=ops or node.tree.ops(), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def _effective(node: AgentNode) -> dict[str, str]:
    """``cpuset.cpus.effective`` of every cgroup below the root."""
    return {
        str(path.parent.relative_to(node.tree.root)): path.read_text().strip()
        for path in sorted(node.tree.root.rglob("cpuset.cpus.effective"))
        if path.parent != node.tree.root
    }


def _expected_after_reset(before: dict[str, str], pinned: dict[str, str]) -> dict[str, str]:
    """The kubelet's values back: every quota as before, every cpuset podpin set widened to all online CPUs."""
    expected = dict(before)
    for key, value in pinned.items():
        if key.endswith("cpuset.cpus") and value != before[key]:
            expected[key] = ONLINE
    return expected


@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
def test_reset_gives_back_every_cpu_and_quota(tmp_path: Path, driver: str) -> None:
    """After a reset every cgroup has all online CPUs in effect, every quota is the kubelet's, and it says so."""
    node, before = _pinned(tmp_path, driver)
    pinned = node.files()
    status, out, err = _reset(node)
    assert (0, "", _expected_after_reset(before, pinned)) == (status, err, node.files())
    assert {ONLINE} == set(_effective(node).values())
    assert "restored: " in out.splitlines()[-2]


def test_reset_changed_what_the_agent_changed(tmp_path: Path) -> None:
    """The test above is not vacuous: the agent narrowed cpusets and lifted quotas the reset then restored."""
    node, before = _pinned(tmp_path)
    pinned = node.files()
    lifted = sorted(k for k, v in pinned.items() if k.endswith("cpu.max") and v != before[k])
    narrowed = [k for k, v in pinned.items() if k.endswith("cpuset.cpus") and v != before[k]]
    assert (True, True, {"max 100000"}) == (len(lifted) >= 6, len(narrowed) >= 15, {pinned[k] for k in lifted})


def test_second_reset_writes_nothing_and_says_so(tmp_path: Path) -> None:
    """Idempotent: a second reset finds nothing to restore, makes no write and exits 0."""
    node, _ = _pinned(tmp_path)
    assert 0 == _reset(node)[0]
    recording = RecordingOps(inner=node.tree.ops(), root=node.tree.root)
    status, out, _ = _reset(node, recording)
    assert (0, [], True) == (
        status,
        recording.writes,
        "nothing to restore: every cgroup already holds what the kubelet gives it" in out,
    )


def test_dry_run_writes_nothing_and_prints_the_writes_a_reset_makes(tmp_path: Path) -> None:
    """``--dry-run``: no file changes; its lines are exactly the writes the real reset makes, in the same order."""
    node, _ = _pinned(tmp_path)
    pinned = node.files()
    status, out, _ = _reset(node, dry_run=True)
    would = [line.removeprefix("would write ") for line in out.splitlines() if line.startswith("would write ")]
    unchanged = node.files()
    recording = RecordingOps(inner=node.tree.ops(), root=node.tree.root)
    _, real_out, _ = _reset(node, recording)
    wrote = [line.removeprefix("wrote ") for line in real_out.splitlines() if line.startswith("wrote ")]
    assert (0, pinned, wrote, len(recording.writes)) == (status, unchanged, would, len(would))
    assert f"dry run: {len(would)} writes would be made; nothing was written" in out


def test_dry_run_lines_name_cgroup_file_old_new_and_owner(tmp_path: Path) -> None:
    """Each dry-run line says which cgroup and file, the old and the new value, and whose container it is."""
    node, _ = _pinned(tmp_path)
    db = node.container_cgroup(PODS[0], "db").relative_to(node.tree.root)
    _, out, _ = _reset(node, dry_run=True)
    assert [
        f"would write {db}  cpuset.cpus  1-2,17-18 -> {ONLINE}  (default/db/db)",
        f"would write {db}  cpu.max  max 100000 -> 400000 100000  (default/db/db)",
    ] == [line for line in out.splitlines() if str(db) in line]


def test_a_pod_not_in_the_list_keeps_its_quota_and_is_named(tmp_path: Path) -> None:
    """A pod the pod list no longer has: its cpusets are widened, its cpu.max left as found, and the reset says so."""
    node, _ = _pinned(tmp_path)
    db = PODS[0]
    (node.pods_dir / "db.yaml").unlink()
    status, out, _ = _reset(node)
    pod = node.pod_cgroup(db)
    uid = db["metadata"]["uid"]
    assert (0, ONLINE, "max 100000", ONLINE, "max 100000") == (
        status,
        node.read(pod),
        node.read(pod, "cpu.max"),
        node.read(node.container_cgroup(db, "db")),
        node.read(node.container_cgroup(db, "db"), "cpu.max"),
    )
    assert (
        f"left as is: cpu.max of {pod.relative_to(node.tree.root)} and its 3 container(s): pod {uid} is not in the "
        "pod list (its cpusets are widened)"
    ) in out.splitlines()


def test_reset_with_pods_from_the_api_server(tmp_path: Path) -> None:
    """With a kubeconfig the pods come from the API server, as the agent's do, and the quotas are restored."""
    node = make_node(tmp_path)
    raw = make_pod("api-db", containers=[container("db", cpu="2", memory="1Gi")], states={"db": "running"})
    node.add_pod(raw)
    before = node.files()
    node.run_once()
    with ApiServerEmulator() as api:
        api.add_pod(raw)
        config = kubeconfig(node.base / "kubeconfig", api.url)
        status, _, err = _reset(node, pods_dir=None, kubeconfig=str(config))
    assert (0, "", before[_key(node, node.container_cgroup(raw, "db"), "cpu.max")]) == (
        status,
        err,
        node.read(node.container_cgroup(raw, "db"), "cpu.max"),
    )


@pytest.mark.parametrize("server", ["no configuration", "unreachable"])
def test_without_a_pod_list_every_cpuset_is_widened_and_every_quota_left(tmp_path: Path, server: str) -> None:
    """No API access and no --pods-dir (a broken node): cpusets widened, quotas left as found, and it says so."""
    node, _ = _pinned(tmp_path)
    if server == "unreachable":
        with ApiServerEmulator() as api:  # a port that answered once and is closed now
            url = api.url
        config = str(kubeconfig(node.base / "kubeconfig", url))
    else:
        config = str(node.base / "no-such-kubeconfig")
    status, out, err = _reset(node, pods_dir=None, kubeconfig=config)
    db = node.container_cgroup(PODS[0], "db")
    notes = [line for line in out.splitlines() if line.startswith("note: no pod list (")]
    assert (0, "", {ONLINE}, "max 100000", 1) == (
        status,
        err,
        set(_effective(node).values()),
        node.read(db, "cpu.max"),
        len(notes),
    )
    assert notes[0].endswith(
        "every cpuset is widened, but the cpu.max of each pod's cgroups is left as it is (run the reset again with "
        "API access, or with --pods-dir DIR of the node's pod manifests, to give the quotas back)"
    )


def _key(node: AgentNode, cgroup: Path, file: str) -> str:
    return str((cgroup / file).relative_to(node.tree.root))


def test_cpuset_mems_are_widened_with_the_static_memory_policy(tmp_path: Path) -> None:
    """With memoryManagerPolicy Static the agent narrows cpuset.mems; the reset gives every memory node back."""
    node = make_node(tmp_path)
    node.write_config(
        memoryManagerPolicy="Static",
        systemReserved={"cpu": "1", "memory": "924Mi"},
        reservedMemory=[{"numaNode": 0, "limits": {"memory": "1Gi"}}],
    )
    raw = make_pod("mem", containers=[container("app", cpu="2", memory="1Gi")], states={"app": "running"})
    node.add_pod(raw)
    node.run_once()
    app = node.container_cgroup(raw, "app")
    narrowed = node.read(app, "cpuset.mems")
    assert 0 == _reset(node)[0]
    assert ("0", "0-1", "0-1") == (narrowed, node.read(app, "cpuset.mems"), node.read(app, "cpuset.mems.effective"))


def test_refused_while_an_agent_runs(tmp_path: Path) -> None:
    """A running agent holds the node's lock: the reset exits 3, says why and writes nothing."""
    node, _ = _pinned(tmp_path)
    with running(node.agent()):
        pinned = node.files()
        status, _, err = _reset(node)
        after = node.files()
    assert (3, pinned) == (status, after)
    assert err.startswith("podpin reset: another podpin process works on this node (an agent or a reset): ")
    assert ", podpin run)" in err


def test_wait_for_agent_resets_once_the_agent_stops(tmp_path: Path) -> None:
    """``--wait-for-agent``: the reset waits for the lock and runs as soon as the agent stops."""
    node, _ = _pinned(tmp_path)
    result: list[tuple[int, str, str]] = []
    agent = node.agent()
    with running(agent):
        waiting = threading.Thread(target=lambda: result.append(_reset(node, wait_for_agent=30.0)))
        waiting.start()
        wait_until(waiting.is_alive, what="the reset waiting")
    waiting.join(30)
    assert ([0], {ONLINE}) == ([r[0] for r in result], set(_effective(node).values()))


def test_forget_state_removes_the_checkpoint_and_the_lock(tmp_path: Path) -> None:
    """By default the checkpoint stays for a re-install; ``--forget-state`` removes it and the lock file."""
    node, _ = _pinned(tmp_path)
    _, kept_out, _ = _reset(node)
    kept = sorted(p.name for p in node.state_dir.iterdir())
    status, out, _ = _reset(node, forget_state=True)
    assert (["podpin.lock", "podpin_state.json"], 0, []) == (kept, status, list(node.state_dir.iterdir()))
    assert "--forget-state removes it" in kept_out
    assert f"removed {node.state_dir / LOCK_NAME}, {node.state_dir / 'podpin_state.json'}" in out


def test_a_value_that_cannot_be_restored_exits_1_and_keeps_the_checkpoint(tmp_path: Path) -> None:
    """A write the kernel refuses: exit 1, the cgroup and errno named on stderr, the rest restored, state kept."""
    node, _ = _pinned(tmp_path)
    db = node.container_cgroup(PODS[0], "db")
    faulty = FaultyOps(node.tree.ops(), write_errors={db / "cpuset.cpus": errno.EBUSY})
    status, _, err = _reset(node, faulty, forget_state=True)
    trader = node.container_cgroup(PODS[1], "engine")
    assert (1, True, ONLINE, True) == (
        status,
        f"podpin reset: not restored: write {db}/cpuset.cpus value '{ONLINE}'" in err and "(EBUSY)" in err,
        node.read(trader),
        (node.state_dir / "podpin_state.json").exists(),
    )


def test_cli_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No node name, cgroup v1, or a missing pods directory: exit 2 and one line naming the problem."""
    monkeypatch.delenv("NODE_NAME", raising=False)
    node = make_node(tmp_path)
    node.write_config(nodeName=None)
    common = ["reset", "--config", str(node.config_path), "--sysfs-root", str(node.sysfs)]
    common += ["--state-dir", str(node.state_dir)]
    statuses = [
        main([*common, "--cgroup-root", str(node.tree.root), "--pods-dir", str(node.pods_dir)]),
    ]
    node.write_config(nodeName="node-1")
    statuses.append(main([*common, "--cgroup-root", str(build_v1_tree(tmp_path)), "--pods-dir", str(node.pods_dir)]))
    statuses.append(main([*common, "--cgroup-root", str(node.tree.root), "--pods-dir", str(tmp_path / "none")]))
    err = capsys.readouterr().err.splitlines()
    assert [2, 2, 2] == statuses
    assert [
        "podpin reset: no node name: set nodeName in the configuration or the NODE_NAME environment variable",
        (
            f"podpin reset: cgroups: cgroup v1 is not supported: {tmp_path / 'cgroup-v1'}/cgroup.controllers not "
            "found; podpin needs the unified cgroup v2 hierarchy"
        ),
        f"podpin reset: --pods-dir {tmp_path / 'none'}: not a directory",
    ] == err


def test_hold_keeps_agents_off_the_node_until_stopped(tmp_path: Path) -> None:
    """``--hold``: after the reset the lock stays taken, so an agent cannot start and pin again, until stopped."""
    node, _ = _pinned(tmp_path)
    stop = threading.Event()
    out = io.StringIO()
    options = ResetOptions(
        config=node.config_path,
        pods_dir=node.pods_dir,
        sysfs_root=node.sysfs,
        cgroup_root=node.tree.root,
        state_dir=node.state_dir,
        hold=True,
        forget_state=True,
        env={},
    )
    result: list[int] = []
    holder = threading.Thread(
        target=lambda: result.append(reset_node(options, file_ops=node.tree.ops(), out=out, stop=stop))
    )
    holder.start()
    wait_until(lambda: "holding " in out.getvalue(), what="the reset holding the lock")
    with pytest.raises(AgentError) as refused:
        node.agent().run()
    stop.set()
    holder.join(10)
    assert ([0], True, [], {ONLINE}) == (
        result,
        str(refused.value).startswith("another podpin process works on this node (an agent or a reset): "),
        list(node.state_dir.iterdir()),
        set(_effective(node).values()),
    )


def test_a_reset_from_manifests_never_loads_the_kubernetes_client(tmp_path: Path) -> None:
    """With --pods-dir the reset reads the manifests itself: the Kubernetes client (seconds of start-up) stays out."""
    node, _ = _pinned(tmp_path)
    script = (
        "import sys; from agent.cli import main; "
        f"status = main(['reset', '--dry-run', '--config', {str(node.config_path)!r}, '--pods-dir', "
        f"{str(node.pods_dir)!r}, '--sysfs-root', {str(node.sysfs)!r}, '--cgroup-root', {str(node.tree.root)!r}, "
        f"'--state-dir', {str(node.state_dir)!r}]); "
        "print(status, 'kubernetes' in sys.modules, file=sys.stderr)"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert "0 False" == run.stderr.strip().splitlines()[-1]
