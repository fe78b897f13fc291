"""The official client's ``Configuration`` (as :class:`CoreCalls`) from whatever configuration this process has.

A file given with ``--kubeconfig`` is the only one tried: an operator who names
a file means it. Without one, the first that works wins: the in-cluster service
account (the DaemonSet case), ``$KUBECONFIG`` (a ``:``-separated list, merged as
kubectl does), ``~/.kube/config``. Each attempt gets its own
``Configuration`` object: the client's process-wide default is never touched,
so a test or a second client cannot inherit another's credentials.

The in-cluster attempt comes first and needs only the client's in-cluster
loader; the kubeconfig loader (requests, oauthlib, the ``ApiClient``: about
15 MiB) is imported only when a kubeconfig file is tried
(:mod:`agent.kube.official`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from agent.kube.api import CoreCalls

if TYPE_CHECKING:
    from kubernetes.client.configuration import Configuration

__all__ = ["KubeConfigError", "load_api", "SERVICE_ACCOUNT_DIR"]

_log = structlog.get_logger("podpin.kube.client")

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's service account token and CA bundle."""


class KubeConfigError(RuntimeError):
    """No configuration to reach the API server; the message lists every attempt and why it failed."""


def load_api(
    kubeconfig: str | None,
    *,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
    home: Path | None = None,
) -> CoreCalls:
    """A :class:`CoreCalls` from the first configuration that loads (see the module docstring).

    Args:
        kubeconfig: the ``--kubeconfig`` file, or None.
        environ: the environment to read (default ``os.environ``).
        service_account_dir: where the service account files are (tests point it elsewhere).
        home: the home directory for ``~/.kube/config`` (default: ``Path.home()``).

    Raises:
        KubeConfigError: the given file does not load, or none of the three
            defaults works; the one-line message names each attempt and its failure.
    """
    # The client is imported here, not at the top: importing agent.kube stays cheap for commands that never call
    # the API server (podpin reset --pods-dir, the tests of the directory source).
    from agent.kube.official import ConfigException, Configuration, InClusterConfigLoader

    env = os.environ if environ is None else environ
    failures: list[str] = []
    if kubeconfig is not None:
        problem = _try_kubeconfig(kubeconfig, configuration := Configuration())
        if problem is None:
            _log.info("kube.config", source="--kubeconfig", file=kubeconfig, host=configuration.host)
            return CoreCalls(configuration)
        raise KubeConfigError(f"--kubeconfig {kubeconfig}: {problem}")

    configuration = Configuration()
    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(service_account_dir / "token"),
        cert_filename=str(service_account_dir / "ca.crt"),
        environ=env,
    )
    try:
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except ConfigException as err:
        failures.append(f"in-cluster ({service_account_dir}): {err}")
    else:
        _log.info("kube.config", source="in-cluster", host=configuration.host)
        return CoreCalls(configuration)

    candidates = [
        ("$KUBECONFIG", env.get("KUBECONFIG") or None),
        ("~/.kube/config", str((home if home is not None else Path.home()) / ".kube" / "config")),
    ]
    for label, value in candidates:
        if value is None:
            failures.append(f"{label}: not set")
            continue
        problem = _try_kubeconfig(value, configuration := Configuration())
        if problem is None:
            _log.info("kube.config", source=label, file=value, host=configuration.host)
            return CoreCalls(configuration)
        failures.append(f"{label} ({value}): {problem}")
    raise KubeConfigError("no Kubernetes API configuration found; tried " + "; ".join(failures))


def _try_kubeconfig(files: str, configuration: Configuration) -> str | None:
    """Load a kubeconfig (``:``-separated list) into ``configuration``; the problem, or None."""
    from agent.kube.official import load_kube_config

    paths = [p for p in files.split(os.pathsep) if p]
    if not any(Path(p).expanduser().is_file() for p in paths):
        return "no such file"
    try:
        load_kube_config(files, configuration)
    except Exception as err:
        return " ".join(str(err).split()) or type(err).__name__
    return None
