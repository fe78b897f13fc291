"""The parts of the official Kubernetes client podpin uses, loaded without running the package's ``__init__``.

``import kubernetes`` (or of any module under it) first runs ``kubernetes/__init__.py``, which imports
``config`` (``kube_config``: requests, oauthlib, and the ``ApiClient`` with pydantic), ``dynamic``,
``stream`` (websocket), ``utils``, ``leaderelection`` and ``informer``. Measured in a runtime-only
virtualenv, that is 17.8 MiB of resident memory, for an agent whose budget is 60 MiB and which needs
the client's ``Configuration``, its REST layer (urllib3 with the configuration's TLS, proxy, retries and
keep-alive), its in-cluster loader, its exceptions and its watch line splitter: 2.0 MiB of it
(``docs/design.md``, "Footprint").

Importing this module registers the ``kubernetes`` and ``kubernetes.config`` packages with their
``__init__`` deferred (unless they are imported already): submodules import as usual, and the first
access to anything else a package's ``__init__`` defines (``kubernetes.__version__``,
``kubernetes.config.load_kube_config``...) runs that ``__init__`` then, so code that wants the whole
package still gets it. The kubeconfig loader,
which needs the ``ApiClient`` and requests, is imported only when a kubeconfig file is used
(:func:`load_kube_config`); in a cluster the service account is read by the in-cluster loader alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = [
    "ApiException",
    "ConfigException",
    "Configuration",
    "InClusterConfigLoader",
    "RESTClientObject",
    "defer_package_init",
    "iter_resp_lines",
    "load_kube_config",
]


def defer_package_init(name: str) -> bool:
    """Register package ``name`` without running its ``__init__`` yet; True when registered now.

    Nothing happens when the package is imported already or is not a package. Afterwards
    ``import name.sub`` imports the submodule alone; the first access to another attribute of the
    package runs its ``__init__`` (PEP 562 ``__getattr__``), once.
    """
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(attribute: str) -> Any:  # noqa: N807 - the module attribute hook's name
        if importlib.util.find_spec(f"{name}.{attribute}") is not None:
            # A submodule (the import system asks with hasattr before importing one): import only it.
            return importlib.import_module(f"{name}.{attribute}")
        del package.__dict__["__getattr__"]
        loader.exec_module(package)
        return package.__dict__[attribute] if attribute in package.__dict__ else _missing(package, attribute)

    package.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)
    return True


def _missing(package: ModuleType, attribute: str) -> Any:
    raise AttributeError(f"module {package.__name__!r} has no attribute {attribute!r}")


defer_package_init("kubernetes")
defer_package_init("kubernetes.config")  # its __init__ imports the kubeconfig loader

# The order matters: kubernetes.client (its __init__ imports nothing eagerly) is imported before the modules
# that say ``from kubernetes import client``, so that name is found on the package without running its __init__.
from kubernetes.client.configuration import Configuration  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402
from kubernetes.client.rest import RESTClientObject  # noqa: E402
from kubernetes.config.config_exception import ConfigException  # noqa: E402
from kubernetes.config.incluster_config import InClusterConfigLoader  # noqa: E402
from kubernetes.watch.watch import iter_resp_lines  # noqa: E402


def load_kube_config(files: str, configuration: Configuration) -> None:
    """The client's ``load_kube_config`` into ``configuration`` (not persisted); imports the kubeconfig loader.

    Raises:
        Exception: whatever the client raises for a file it cannot use.
    """
    from kubernetes.config.kube_config import load_kube_config as load

    load(config_file=files, client_configuration=configuration, persist_config=False)  # type: ignore[no-untyped-call]
