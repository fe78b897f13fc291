"""The real cluster's programs: our go.mod follows the release's own, and each built program says its version."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster import build
from tests.cluster.gomod import mismatches, parse_release, render_gomod, replaces, staging_version
from tests.cluster.procs import require_setup

HERE = Path(__file__).resolve().parent

RELEASE_GOMOD = """module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
	sigs.k8s.io/yaml v1.6.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
)
"""


def test_staging_version() -> None:
    """A release's staging modules are tagged v0.<minor>.<patch>; anything else is refused, naming it."""
    assert "v0.36.3" == staging_version("v1.36.3")
    with pytest.raises(ValueError, match=r"'1\.36'"):
        staging_version("1.36")


def test_render_replaces_every_staging_module() -> None:
    """Every `k8s.io/* v0.0.0` requirement becomes a replace by its release; go, godebug and the tools are kept."""
    release = parse_release("v1.36.3", RELEASE_GOMOD)
    text = render_gomod(release)
    assert {"k8s.io/api": "k8s.io/api v0.36.3", "k8s.io/client-go": "k8s.io/client-go v0.36.3"} == replaces(text)
    assert "godebug default=go1.26" in text
    assert "\ngo 1.26.0\n" in text
    assert [] == mismatches(text, release)


def test_mismatches_name_the_drift() -> None:
    """A committed module missing a replace, or for another release, is reported line by line."""
    release = parse_release("v1.36.3", RELEASE_GOMOD)
    drifted = render_gomod(release).replace("k8s.io/api => k8s.io/api v0.36.3\n", "").replace("v1.36.3", "v1.37.2")
    problems = mismatches(drifted, release)
    assert "replace k8s.io/api: expected k8s.io/api v0.36.3, found None" in problems
    assert "require k8s.io/kubernetes v1.36.3: missing" in problems


def test_not_a_kubernetes_gomod() -> None:
    """A go.mod without staging requirements is refused with the version named."""
    with pytest.raises(ValueError, match=r"k8s\.io/kubernetes@v1\.36\.3"):
        parse_release("v1.36.3", "module x\n\ngo 1.26\n")


def test_pins_name_a_module_per_version() -> None:
    """Every pinned version has its committed module, and the default is one of them."""
    pinned = build.pins()
    assert pinned["K8S_DEFAULT"] in pinned["K8S_VERSIONS"].split()
    for version in pinned["K8S_VERSIONS"].split():
        assert (HERE / "k8s" / version / "go.mod").is_file(), version
        assert (HERE / "k8s" / version / "go.sum").is_file(), version


@pytest.mark.cluster
@pytest.mark.parametrize("version", build.pins()["K8S_VERSIONS"].split())
def test_committed_gomod_matches_the_release(version: str) -> None:
    """The committed go.mod replaces exactly the release's staging modules (read from the Go module proxy)."""
    go = shutil.which("go") or shutil.which("go", path="/usr/local/go/bin")
    if go is None:
        require_setup("no go on PATH or in /usr/local/go/bin")
    info = json.loads(
        subprocess.run(
            [str(go), "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout
    )
    release = parse_release(version, Path(info["GoMod"]).read_text())
    assert [] == mismatches((HERE / "k8s" / version / "go.mod").read_text(), release)


@pytest.mark.cluster
@pytest.mark.parametrize("program", ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"])
def test_programs_report_the_pinned_version(k8s_version: str, program: str) -> None:
    """Each program was built with the version ldflags: `--version` says `Kubernetes <version>`."""
    out = subprocess.run(
        [str(build.binary(program, k8s_version)), "--version"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert f"Kubernetes {k8s_version}" == out.strip()


@pytest.mark.cluster
def test_kine_runs(k8s_version: str) -> None:
    """kine is built and starts (its --version names the module version it was built from, or a dev one)."""
    result = subprocess.run(
        [str(build.binary("kine", k8s_version)), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert 0 == result.returncode, result.stderr
    assert re.search(r"kine version", result.stdout + result.stderr), result.stdout + result.stderr


def test_version_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    """K8S_VERSION picks another pinned version; an unpinned one is refused with the choices named."""
    monkeypatch.setenv("K8S_VERSION", "v1.37.2")
    assert "v1.37.2" == build.version()
    assert build.build_dir().name == "v1.37.2"
    monkeypatch.setenv("K8S_VERSION", "v1.35.0")
    with pytest.raises(ValueError, match=r"v1\.36\.3 v1\.37\.2"):
        build.version()
