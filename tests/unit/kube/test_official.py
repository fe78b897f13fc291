"""agent.kube.official: the client's modules podpin uses load without the kubernetes package's __init__."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.paths import REPO

PROBE = """
import json, sys
import agent.kube.official
heavy = ("pydantic", "requests", "kubernetes.config.kube_config", "kubernetes.dynamic")
light = sorted(m for m in heavy if m in sys.modules)
import kubernetes
version = kubernetes.__version__  # an attribute of the package's own __init__: it runs now
from kubernetes import config
print(json.dumps({"light": light, "version": version, "dynamic": "kubernetes.dynamic" in sys.modules,
                  "loader": callable(config.load_kube_config),
                  "same_exception": config.ConfigException is agent.kube.official.ConfigException}))
"""


def run_probe(code: str) -> dict[str, object]:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    loaded: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


def test_deferred_package_loads_light_and_whole_on_demand() -> None:
    """Importing agent.kube.official loads none of the package's heavy imports; asking the package for an
    attribute of its own __init__ then runs it, and kubernetes.config still offers its loader."""
    from kubernetes import __version__ as installed

    assert {
        "light": [],
        "version": installed,
        "dynamic": True,
        "loader": True,
        "same_exception": True,
    } == run_probe(PROBE)


def test_nothing_deferred_when_the_package_is_imported_already() -> None:
    """A process that imported kubernetes first keeps the whole package; defer_package_init says so."""
    code = (
        "import json, kubernetes, sys\n"
        "from agent.kube.official import defer_package_init\n"
        "print(json.dumps({'again': defer_package_init('kubernetes'), 'dynamic': 'kubernetes.dynamic' in sys.modules}))"
    )
    assert {"again": False, "dynamic": True} == run_probe(code)
