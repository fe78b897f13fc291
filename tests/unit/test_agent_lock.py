"""The node's lock (``agent/agent_lock.py``): one podpin process at a time works on a node's cgroups."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent.agent_lock import LOCK_NAME, LockHeldError, acquire_lock


def test_a_second_holder_is_refused_with_who_took_it(tmp_path: Path) -> None:
    """While one holds the lock another is refused, told who last took it; after release it is free again."""
    first = acquire_lock(tmp_path, "podpin run")
    with pytest.raises(LockHeldError) as raised:
        acquire_lock(tmp_path, "podpin reset")
    first.release()
    again = acquire_lock(tmp_path, "podpin reset")
    text = (tmp_path / LOCK_NAME).read_text()
    again.release()
    assert (True, True) == (
        str(raised.value).startswith(f"{tmp_path / LOCK_NAME} is held by another podpin process (last taken by pid "),
        text.endswith(", podpin reset\n"),
    )


def test_waiting_gets_the_lock_when_the_holder_lets_go(tmp_path: Path) -> None:
    """``wait``: the second taker waits and gets the lock once the first releases it."""
    first = acquire_lock(tmp_path, "podpin run")
    releaser = threading.Timer(0.3, first.release)
    releaser.start()
    second = acquire_lock(tmp_path, "podpin reset", wait=10.0)
    second.release()
    releaser.join()
    assert "podpin reset" in (tmp_path / LOCK_NAME).read_text()


#: A process that takes the lock in the directory given as its argument and keeps it.
_HOLD = """
import sys, time
from pathlib import Path
from agent.agent_lock import acquire_lock
acquire_lock(Path(sys.argv[1]), "podpin run")
print("held", flush=True)
time.sleep(60)
"""


def test_a_dead_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    """The kernel drops the lock when its holder dies, even by SIGKILL: no stale lock survives a crash."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    held = holder.stdout.readline().strip()
    with pytest.raises(LockHeldError):
        acquire_lock(tmp_path, "podpin reset")
    holder.kill()
    holder.wait(10)
    acquire_lock(tmp_path, "podpin reset").release()
    assert "held" == held


@pytest.mark.parametrize("command", ["podpin run", "podpin reset"])
def test_a_planted_symlink_is_refused_and_its_target_untouched(tmp_path: Path, command: str) -> None:
    """Issue 22, finding 3: ``podpin.lock`` as a symlink (dangling or not) fails with ELOOP; the file it points
    to keeps its content (it was truncated and overwritten before)."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / LOCK_NAME).symlink_to(victim)
    (tmp_path / "state2").mkdir()
    (tmp_path / "state2" / LOCK_NAME).symlink_to(tmp_path / "not-there")
    errnos = []
    for directory in (state, tmp_path / "state2"):
        with pytest.raises(OSError) as raised:
            acquire_lock(directory, command)
        errnos.append(raised.value.errno)
    assert ([errno.ELOOP, errno.ELOOP], "precious\n", False) == (
        errnos,
        victim.read_text(),
        (tmp_path / "not-there").exists(),
    )


def test_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    """A FIFO in place of ``podpin.lock`` is not a regular file: EINVAL at once, no wait for a writer."""
    os.mkfifo(tmp_path / LOCK_NAME)
    with pytest.raises(OSError) as raised:
        acquire_lock(tmp_path, "podpin run")
    assert errno.EINVAL == raised.value.errno
