"""The kube package's face is cheap to import: the Kubernetes client loads only when an API client is built."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(statement: str) -> set[str]:
    """The top-level module names a fresh interpreter holds after running ``statement``."""
    script = f"import sys\n{statement}\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    return set(run.stdout.split())


def test_importing_the_face_does_not_load_the_kubernetes_client() -> None:
    """``import agent.kube`` (every name it exports) leaves ``kubernetes`` and ``urllib3`` unloaded."""
    loaded = _modules_after("import agent.kube; from agent.kube import *")
    assert (False, False, True) == ("kubernetes" in loaded, "urllib3" in loaded, "agent" in loaded)


def test_building_an_api_client_loads_it() -> None:
    """The check above can fail: ``load_api`` does load the client (here from a kubeconfig that does not exist)."""
    loaded = _modules_after(
        "from agent.kube import KubeConfigError, load_api\n"
        "try:\n    load_api('/nonexistent/kubeconfig')\nexcept KubeConfigError:\n    pass"
    )
    assert "kubernetes" in loaded
