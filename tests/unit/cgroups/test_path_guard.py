"""The symlink guard: the same answers as resolving the whole path, with fewer ``lstat`` calls."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.cgroups import CgroupPathError, checked_once, ensure_inside


@pytest.fixture
def lstats(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path ``os.lstat`` is asked for while the test runs."""
    asked: list[str] = []
    real = os.lstat

    def counting(path: str | os.PathLike[str], *args: object, **kwargs: object) -> os.stat_result:
        asked.append(os.fspath(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", counting)
    return asked


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A cgroup root with kubepods/pod/container directories below it."""
    (tmp_path / "root" / "kubepods" / "pod" / "container").mkdir(parents=True)
    return tmp_path / "root"


def test_a_path_below_the_root_looks_only_at_its_own_components(root: Path, lstats: list[str]) -> None:
    """The root's components were resolved with the layout: only kubepods, pod and container are looked at."""
    path = root / "kubepods" / "pod" / "container"
    assert path == ensure_inside(root, path, resolved_root=str(root))
    assert [str(root / "kubepods"), str(root / "kubepods" / "pod"), str(path)] == lstats


def test_a_symlink_leading_out_is_refused_and_named(root: Path, tmp_path: Path) -> None:
    """A symlink below the root that leads outside is refused, the message naming where it leads."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "kubepods" / "evil").symlink_to(outside)
    with pytest.raises(CgroupPathError) as caught:
        ensure_inside(root, root / "kubepods" / "evil" / "cpuset.cpus")
    expected = f"cgroup path {root}/kubepods/evil/cpuset.cpus resolves to {outside}/cpuset.cpus, outside the cgroup"
    assert f"{expected} root {root}" == str(caught.value)


def test_a_symlink_staying_inside_is_accepted(root: Path) -> None:
    """A symlink is not refused for being one: only where it leads matters (as with the full resolution)."""
    (root / "alias").symlink_to(root / "kubepods")
    path = root / "alias" / "pod"
    assert path == ensure_inside(root, path)


def test_dot_dot_out_of_the_root_is_refused(root: Path) -> None:
    """A ``..`` component is resolved in full: climbing out of the root is refused."""
    with pytest.raises(CgroupPathError):
        ensure_inside(root, root / "kubepods" / ".." / ".." / "etc")


def test_a_path_not_spelled_below_the_root_is_resolved_in_full(root: Path, tmp_path: Path) -> None:
    """A path elsewhere is refused; one spelled elsewhere that resolves inside is accepted."""
    with pytest.raises(CgroupPathError):
        ensure_inside(root, tmp_path / "other")
    (tmp_path / "link-to-root").symlink_to(root)
    assert tmp_path / "link-to-root" / "kubepods" == ensure_inside(root, tmp_path / "link-to-root" / "kubepods")


def test_a_symlinked_root_checks_paths_spelled_either_way(tmp_path: Path, root: Path) -> None:
    """A root given through a symlink: paths below the name given and below the resolved one both pass."""
    (tmp_path / "alias-root").symlink_to(root)
    given = tmp_path / "alias-root"
    resolved = os.path.realpath(given)
    assert given / "kubepods" / "pod" == ensure_inside(given, given / "kubepods" / "pod", resolved_root=resolved)
    assert root / "kubepods" == ensure_inside(given, root / "kubepods", resolved_root=resolved)


def test_a_cgroup_not_there_yet_is_checked_lexically(root: Path, lstats: list[str]) -> None:
    """Components that do not exist are not looked at past the first missing one."""
    path = root / "kubepods" / "new-pod" / "new-container"
    assert path == ensure_inside(root, path, resolved_root=str(root))
    assert [str(root / "kubepods"), str(root / "kubepods" / "new-pod")] == lstats


def test_within_one_scope_each_directory_is_looked_at_once(root: Path, lstats: list[str]) -> None:
    """Three checks of paths in one pod, one scope: each directory is looked at once."""
    real = str(root)
    container = root / "kubepods" / "pod" / "container"
    with checked_once():
        ensure_inside(root, container, resolved_root=real)
        ensure_inside(root, container, resolved_root=real)
        with checked_once():  # a nested scope shares the outer one's directories
            ensure_inside(root, root / "kubepods" / "pod", resolved_root=real)
    assert [str(root / "kubepods"), str(root / "kubepods" / "pod"), str(container)] == lstats
    ensure_inside(root, container, resolved_root=real)  # outside any scope: looked at again
    assert 6 == len(lstats)


def test_a_directory_turned_symlink_is_caught_by_the_next_scope(root: Path, tmp_path: Path) -> None:
    """What one scope (a pass) found real is not trusted by the next: a swap between passes is refused."""
    pod = root / "kubepods" / "pod"
    with checked_once():
        ensure_inside(root, pod / "container")
    outside = tmp_path / "outside"
    outside.mkdir()
    pod.rename(tmp_path / "moved")
    pod.symlink_to(outside)
    with checked_once(), pytest.raises(CgroupPathError):
        ensure_inside(root, pod / "container")
