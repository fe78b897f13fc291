"""The project's own habit checks (``scripts/check_habits.py``): imports go through package faces."""

from __future__ import annotations

from pathlib import Path

from scripts.check_habits import deep_imports


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "agent" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "agent"


def test_a_name_the_face_exports_is_imported_from_the_face(tmp_path: Path) -> None:
    """Outside a package, importing an exported name from the module behind the face is named; the face is not."""
    agent = _tree(
        tmp_path,
        {
            "__init__.py": "__all__ = []\n",
            "cgroups/__init__.py": 'from agent.cgroups.fs import CgroupFS\n\n__all__ = ["CgroupFS"]\n',
            "cgroups/fs.py": "class CgroupFS: ...\nCPUS = 'cpuset.cpus'\n",
            "runner.py": "from agent.cgroups.fs import CgroupFS\nfrom agent.cgroups import CgroupFS as Face\n",
        },
    )
    assert ["agent/runner.py:1: imports CgroupFS from agent.cgroups.fs, not from the face agent.cgroups"] == (
        deep_imports(agent)
    )


def test_what_a_face_leaves_out_and_imports_inside_a_package_are_fine(tmp_path: Path) -> None:
    """A name the face does not export, and a package's own modules importing each other, are not findings."""
    agent = _tree(
        tmp_path,
        {
            "__init__.py": "__all__ = []\n",
            "cgroups/__init__.py": 'from agent.cgroups.fs import CgroupFS\n\n__all__ = ["CgroupFS"]\n',
            "cgroups/fs.py": "class CgroupFS: ...\nCPUS = 'cpuset.cpus'\n",
            "cgroups/writer.py": "from agent.cgroups.fs import CgroupFS\n",
            "runner.py": "from agent.cgroups.fs import CPUS, CgroupFS\n",
        },
    )
    assert [] == deep_imports(agent)


def test_a_nested_package_is_judged_by_its_own_face(tmp_path: Path) -> None:
    """Inside ``agent.alloc``, a module of ``agent.alloc.cpumanager`` is reached through that sub-package's face."""
    agent = _tree(
        tmp_path,
        {
            "__init__.py": "__all__ = []\n",
            "alloc/__init__.py": "__all__ = []\n",
            "alloc/cpumanager/__init__.py": (
                'from agent.alloc.cpumanager.policy import Policy\n\n__all__ = ["Policy"]\n'
            ),
            "alloc/cpumanager/policy.py": "class Policy: ...\n",
            "alloc/planner.py": "from agent.alloc.cpumanager.policy import Policy\n",
        },
    )
    expected = (
        "agent/alloc/planner.py:1: imports Policy from agent.alloc.cpumanager.policy, "
        "not from the face agent.alloc.cpumanager"
    )
    assert [expected] == deep_imports(agent)
