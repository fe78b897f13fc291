"""The checkpoint file: failed saves leave no debris and are remembered, symlinks are never followed, bad files
are refused cleanly and set aside with a bounded history.

Writes fail through the store's :class:`agent.state_store.DiskOps` seam (root ignores permissions, and a tiny
tmpfs cannot be mounted here), so ``ENOSPC``, ``EIO`` and ``EROFS`` arrive exactly where a full, broken or
read-only disk would raise them.
"""

from __future__ import annotations

import errno
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent.alloc import CheckpointError, NodeState, Planner
from agent.config import config_from_mapping
from agent.pods.model import pod_from_dict
from agent.state_store import CHECKPOINT_NAME, KEEP_CORRUPT, MAX_CHECKPOINT_BYTES, DiskOps, StateStore, WriteFailure
from tests.support.machines import machine
from tests.support.podfactory import container, make_pod


def state(*names: str) -> NodeState:
    """A node state with one two-CPU Guaranteed pod per name."""
    planner = Planner(machine(threads=1), config_from_mapping({"reservedSystemCPUs": "0"}, env={}).planner)
    for name in names:
        assert planner.admit(pod_from_dict(make_pod(name, containers=[container("c", cpu="2", memory="1Gi")]))).admitted
    return planner.snapshot()


class FailingDisk(DiskOps):
    """Fails the named operation with ``code`` the next ``times`` times it is called."""

    def __init__(self, operation: str, code: int, times: int = 1) -> None:
        self.operation, self.code, self.times = operation, code, times

    def _maybe_fail(self, operation: str) -> None:
        if operation == self.operation and self.times > 0:
            self.times -= 1
            raise OSError(self.code, os.strerror(self.code))

    def write(self, fd: int, data: bytes) -> int:
        self._maybe_fail("write")
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self._maybe_fail("fsync")
        super().fsync(fd)

    def replace(self, source: str, target: str, dir_fd: int) -> None:
        self._maybe_fail("replace")
        super().replace(source, target, dir_fd)

    def open(self, name: str, flags: int, mode: int, dir_fd: int) -> int:
        self._maybe_fail("open")
        return super().open(name, flags, mode, dir_fd)


class TestFailedSaves:
    @pytest.mark.parametrize(
        ("operation", "code"),
        [("write", errno.ENOSPC), ("fsync", errno.EIO), ("replace", errno.EROFS), ("open", errno.EROFS)],
    )
    def test_no_debris_old_checkpoint_kept_failure_remembered(self, tmp_path: Path, operation: str, code: int) -> None:
        """A save failing anywhere raises, removes its temp file, keeps the old checkpoint, and says why.

        Failed before the fix: a failed write left its 0-byte temp file behind and nothing remembered it.
        """
        store = StateStore(tmp_path, FailingDisk(operation, code, times=2))
        old, new = state("a"), state("a", "b")
        StateStore(tmp_path).save(old)
        raised = []
        for _ in range(2):
            with pytest.raises(OSError) as err:
                store.save(new)
            raised.append(err.value.errno)
        name = errno.errorcode[code]
        expected_failure = WriteFailure(errno_name=name, message=f"{tmp_path}: {os.strerror(code)}", attempts=2)
        assert ([code, code], [CHECKPOINT_NAME], old, expected_failure, True) == (
            raised,
            sorted(os.listdir(tmp_path)),
            store.load(),
            store.failure,
            store.stale,
        )

    def test_next_save_succeeds_and_clears_the_failure(self, tmp_path: Path) -> None:
        """Once the disk takes writes again, one save brings the file up to date and clears ``failure``."""
        store = StateStore(tmp_path, FailingDisk("write", errno.ENOSPC))
        with pytest.raises(OSError):
            store.save(state("a"))
        store.save(state("a", "b"))
        assert (None, False, state("a", "b"), [CHECKPOINT_NAME]) == (
            store.failure,
            store.stale,
            store.load(),
            sorted(os.listdir(tmp_path)),
        )


class TestSymlinks:
    def test_planted_temp_symlinks_are_never_followed(self, tmp_path: Path) -> None:
        """Symlinks planted where temp files go (any pid) are not written through; the victim file is unchanged.

        Failed before the fix: the temp file ``.podpin_state.json.<pid>.tmp`` was opened with ``O_TRUNC`` following
        symlinks, so a planted link truncated and overwrote its target.
        """
        victim = tmp_path / "victim"
        victim.write_text("precious\n")
        directory = tmp_path / "state"
        directory.mkdir()
        for pid in (os.getpid(), 1, *range(2, 64)):
            (directory / f".{CHECKPOINT_NAME}.{pid}.tmp").symlink_to(victim)
        StateStore(directory).save(state("a"))
        assert ("precious\n", state("a")) == (victim.read_text(), StateStore(directory).load())

    def test_state_directory_symlink_is_refused(self, tmp_path: Path) -> None:
        """A state directory that is a symlink is refused by check(), save() and load(), naming it."""
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        link = tmp_path / "state"
        link.symlink_to(elsewhere)
        store = StateStore(link)
        with pytest.raises(OSError) as checked:
            store.check()
        with pytest.raises(OSError) as saved:
            store.save(state("a"))
        with pytest.raises(CheckpointError) as loaded:
            store.load()
        message = f"{link} is a symbolic link; the checkpoint is kept only in a real directory"
        assert (errno.ELOOP, message, errno.ELOOP, [], f"{link}/{CHECKPOINT_NAME}: a symbolic link") == (
            checked.value.errno,
            checked.value.strerror,
            saved.value.errno,
            os.listdir(elsewhere),
            str(loaded.value),
        )

    def test_checkpoint_symlink_is_not_read(self, tmp_path: Path) -> None:
        """A checkpoint that is a symlink (to a valid checkpoint, even) is refused, not read."""
        real = tmp_path / "real.json"
        StateStore(tmp_path).save(state("a"))
        os.replace(tmp_path / CHECKPOINT_NAME, real)
        (tmp_path / CHECKPOINT_NAME).symlink_to(real)
        with pytest.raises(CheckpointError) as err:
            StateStore(tmp_path).load()
        assert f"{tmp_path}/{CHECKPOINT_NAME}: a symbolic link" == str(err.value)


class TestCleanup:
    def test_temp_files_of_a_crash_are_removed(self, tmp_path: Path) -> None:
        """clean() removes every ``.podpin_state.json.*.tmp`` (files and links) and nothing else."""
        for name in (f".{CHECKPOINT_NAME}.1.tmp", f".{CHECKPOINT_NAME}.4242.tmp", f".{CHECKPOINT_NAME}.ab12.tmp"):
            (tmp_path / name).write_bytes(b"")
        (tmp_path / f".{CHECKPOINT_NAME}.9.tmp").symlink_to("/etc/hostname")
        (tmp_path / "keep.tmp").write_text("not ours")
        StateStore(tmp_path).save(state("a"))
        removed = StateStore(tmp_path).clean()
        assert (4, ["keep.tmp", CHECKPOINT_NAME]) == (len(removed), sorted(os.listdir(tmp_path)))

    def test_no_directory_nothing_to_clean(self, tmp_path: Path) -> None:
        """A state directory that does not exist yet is not an error."""
        assert [] == StateStore(tmp_path / "missing").clean()


class TestLoad:
    @pytest.mark.parametrize(
        ("content", "reason"),
        [
            (b"[" * 100_000, "not valid JSON: nested deeper than 16 levels"),
            (b'{"version": 1, "data": ' + b"[" * 20 + b"]" * 20 + b"}", "not valid JSON: nested deeper than 16 levels"),
            (b"9" * 5000, "not valid JSON: Exceeds the limit (4300 digits) for integer string conversion: value has"),
            (b"\xff\xfe", "not valid JSON: not UTF-8 text (invalid start byte at byte 0)"),
        ],
        ids=["100k-brackets", "deep-data", "5000-digits", "not-utf8"],
    )
    def test_unparseable_is_a_checkpoint_error(self, tmp_path: Path, content: bytes, reason: str) -> None:
        """Anything unparseable is one CheckpointError naming the file (never RecursionError nor ValueError).

        Failed before the fix: 100,000 opening brackets raised RecursionError and blocked start-up.
        """
        (tmp_path / CHECKPOINT_NAME).write_bytes(content)
        with pytest.raises(CheckpointError) as err:
            StateStore(tmp_path).load()
        assert str(err.value).startswith(f"{tmp_path}/{CHECKPOINT_NAME}: {reason}")

    def test_too_large_is_refused_unread(self, tmp_path: Path) -> None:
        """A checkpoint over 1 MiB (sparse here: nothing is read) is refused by its size."""
        with (tmp_path / CHECKPOINT_NAME).open("wb") as file:
            file.truncate(MAX_CHECKPOINT_BYTES + 1)
        with pytest.raises(CheckpointError) as err:
            StateStore(tmp_path).load()
        assert f"{tmp_path}/{CHECKPOINT_NAME}: cannot read: larger than {MAX_CHECKPOINT_BYTES} bytes" == str(err.value)

    def test_a_directory_is_not_a_checkpoint(self, tmp_path: Path) -> None:
        """A directory in the checkpoint's place is refused as not a regular file."""
        (tmp_path / CHECKPOINT_NAME).mkdir()
        with pytest.raises(CheckpointError) as err:
            StateStore(tmp_path).load()
        assert f"{tmp_path}/{CHECKPOINT_NAME}: cannot read: not a regular file" == str(err.value)

    def test_a_fifo_is_refused_without_waiting(self, tmp_path: Path) -> None:
        """Issue 22, finding 4: a FIFO in the checkpoint's place is refused at once (it blocked the agent in
        ``open`` before its first log line, with no writer ever coming)."""
        os.mkfifo(tmp_path / CHECKPOINT_NAME)
        with pytest.raises(CheckpointError) as err:
            StateStore(tmp_path).load()
        assert f"{tmp_path}/{CHECKPOINT_NAME}: cannot read: not a regular file" == str(err.value)

    def test_round_trip(self, tmp_path: Path) -> None:
        """What save() writes, load() reads back equal; the file is indented JSON with a checksum."""
        store = StateStore(tmp_path / "new")
        store.save(state("a", "b"))
        document = json.loads((tmp_path / "new" / CHECKPOINT_NAME).read_text())
        assert (state("a", "b"), 1, True) == (store.load(), document["version"], document["checksum"].startswith("sha"))


class TestQuarantine:
    def test_set_aside_with_the_time_and_a_bounded_history(self, tmp_path: Path) -> None:
        """Each bad checkpoint becomes ``.corrupt-<UTC time>``; only the newest KEEP_CORRUPT stay."""
        store = StateStore(tmp_path)
        start = datetime(2026, 1, 1, tzinfo=UTC)
        moved = []
        for n in range(KEEP_CORRUPT + 3):
            (tmp_path / CHECKPOINT_NAME).write_text(f"bad {n}")
            moved.append(store.quarantine(start + timedelta(seconds=n)))
        kept = sorted(p.name for p in tmp_path.iterdir())
        assert (
            tmp_path / f"{CHECKPOINT_NAME}.corrupt-20260101T000000.000000Z",
            [f"{CHECKPOINT_NAME}.corrupt-20260101T0000{n:02d}.000000Z" for n in range(3, KEEP_CORRUPT + 3)],
            f"bad {KEEP_CORRUPT + 2}",
            None,
        ) == (moved[0], kept, (tmp_path / kept[-1]).read_text(), store.quarantine())
