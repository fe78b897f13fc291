"""Building an :class:`~agent.runner.Agent` reads nothing; :meth:`~agent.runner.Agent.prepare` does the start-up.

The constructor is watched in a fresh interpreter with an audit hook (``sys.addaudithook``): opening a file,
listing a directory, making one or a socket are audit events. The paths it is given do not exist, so a constructor
that looked at them (a stat is no audit event) would fail too. The start-up failures ``podpin run`` reports as one
line (``tests/agent/test_once.py`` checks the lines and exit codes through the command) come from ``prepare``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.runner import Agent, AgentError
from tests.support.agentfixture import AgentNode, make_node
from tests.support.cgroupfs_builder import build_v1_tree

_WATCHED = ("open", "os.listdir", "os.scandir", "os.mkdir", "os.remove", "os.rename", "socket.bind", "socket.connect")

_SCRIPT = """
import json, sys
from pathlib import Path
from agent.runner import Agent, AgentError, RunOptions

nowhere = Path(sys.argv[1])
options = RunOptions(
    config=nowhere / "podpin.yaml", pods_dir=nowhere / "pods", sysfs_root=nowhere / "sys",
    proc_root=nowhere / "proc", cgroup_root=nowhere / "cgroup", state_dir=nowhere / "state",
    metrics_bind_address="127.0.0.1:0", runtime_root=nowhere / "runtime",
)
watched = set(sys.argv[2].split(","))
seen = []
recording = [False]

def hook(event, args):
    if recording[0] and event in watched:
        seen.append([event, repr(args[0]) if args else ""])

sys.addaudithook(hook)
recording[0] = True
agent = Agent(options)
built = list(seen)
error = None
try:
    agent.prepare()
except AgentError as err:
    error = str(err)
recording[0] = False
print(json.dumps({"built": built, "prepared": seen[len(built):], "error": error}))
"""


def _watch(nowhere: Path) -> dict[str, object]:
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(nowhere), ",".join(_WATCHED)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found: dict[str, object] = json.loads(run.stdout.splitlines()[-1])
    return found


def test_building_an_agent_touches_no_file(tmp_path: Path) -> None:
    """``Agent(options)`` over paths that do not exist: no file opened, no directory listed or made, no socket; the
    paths still do not exist. ``prepare()`` then reads the configuration file and says it is missing (the watch can
    see what start-up does)."""
    nowhere = tmp_path / "nowhere"
    found = _watch(nowhere)
    prepared = found["prepared"]
    assert ([], True, True, False) == (
        found["built"],
        isinstance(prepared, list) and any(str(nowhere / "podpin.yaml") in str(args) for _, args in prepared),
        str(found["error"]).startswith("configuration: "),
        nowhere.exists(),
    ), found


@pytest.fixture
def node(tmp_path: Path) -> AgentNode:
    return make_node(tmp_path)


def _refusal(node: AgentNode, tmp_path: Path, case: str) -> tuple[dict[str, object], str]:
    """A start-up failure: the flags that cause it and the start of the line ``podpin run`` prints for it."""
    if case == "topology":
        (tmp_path / "empty-sys").mkdir()
        return {"sysfs_root": tmp_path / "empty-sys"}, "topology: "
    if case == "cgroup-v1":
        v1 = build_v1_tree(tmp_path)
        return {"cgroup_root": v1}, f"cgroups: cgroup v1 is not supported: {v1}/cgroup.controllers not found"
    if case == "state-dir":
        (tmp_path / "elsewhere").mkdir()
        node.state_dir.symlink_to(tmp_path / "elsewhere")
        return {}, f"stateDir: {node.state_dir} is a symbolic link"
    if case == "pods-dir":
        return {"pods_dir": tmp_path / "nope"}, f"--pods-dir {tmp_path / 'nope'}: not a directory"
    return {"metrics_bind_address": "localhost"}, "metricsBindAddress: 'localhost' is not HOST:PORT"


@pytest.mark.parametrize("case", ["topology", "cgroup-v1", "state-dir", "pods-dir", "metrics-address"])
def test_start_up_failures_come_from_prepare(node: AgentNode, tmp_path: Path, case: str) -> None:
    """Each start-up failure: building the agent succeeds, ``prepare()`` raises the line ``podpin run`` prints
    before exiting 2 (``commands/run.py``), and no cgroup file changed."""
    changes, line = _refusal(node, tmp_path, case)
    before = node.files()
    agent = Agent(node.options(**changes), file_ops=node.tree.ops())
    with pytest.raises(AgentError) as refused:
        agent.prepare()
    assert (True, before) == (str(refused.value).startswith(line), node.files()), str(refused.value)
