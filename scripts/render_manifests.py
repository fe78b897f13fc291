#!/usr/bin/env python3
"""Render the plain manifests in deploy/ from the Helm chart, so the two never drift.

    scripts/render_manifests.py            # rewrite deploy/daemonset.yaml, servicemonitor.yaml, uninstall/ ...
    scripts/render_manifests.py --check    # exit 1 and name the stale files instead of writing them

``helm template`` renders the chart ``deploy/helm/podpin`` as release ``podpin`` in namespace ``podpin-system``
with ``deploy/helm/podpin/ci/manifests-values.yaml``; each rendered object goes to the file of its template
(``# Source:`` line): the ServiceMonitor, the PrometheusRule and the dashboard ConfigMap to their own files (they
need the Prometheus Operator and Grafana), the uninstall hook to uninstall/uninstall-job.yaml (without its hook
annotations), everything else to daemonset.yaml. A second render adds
``ci/manifests-nrt-values.yaml`` and gives the NodeResourceTopology export's objects, which are off by default: its
ClusterRole to rbac-nrt.yaml and its CRD to crds/noderesourcetopologies.yaml (a subdirectory, so
``kubectl apply -f deploy/`` leaves a cluster's own CRD alone). ``tests/deploy/test_manifests.py`` renders the chart
again and asserts the files equal the output.

helm: ``$PODPIN_HELM``, else ``.venv/tools/k8s/bin/helm`` (installed by ``scripts/test``), else ``helm`` on PATH.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "deploy" / "helm" / "podpin"
VALUES = CHART / "ci" / "manifests-values.yaml"
NRT_VALUES = CHART / "ci" / "manifests-nrt-values.yaml"
RELEASE = "podpin"
NAMESPACE = "podpin-system"
# The renders: values files layered over VALUES -> template file -> the manifest (under deploy/) its objects go to.
# The first render's other templates go to daemonset.yaml; the other renders give only the templates they name.
RENDERS: dict[tuple[Path, ...], dict[str, str]] = {
    (): {
        "servicemonitor.yaml": "servicemonitor.yaml",
        "prometheusrule.yaml": "prometheusrule.yaml",
        "grafana-dashboard.yaml": "grafana-dashboard.yaml",
        "uninstall-hook.yaml": "uninstall/uninstall-job.yaml",
    },
    (NRT_VALUES,): {"rbac-nrt.yaml": "rbac-nrt.yaml", "crd-nrt.yaml": "crds/noderesourcetopologies.yaml"},
}
MAIN_FILE = "daemonset.yaml"
HEADERS = {
    "daemonset.yaml": (
        "podpin: exclusive, NUMA-aligned CPUs for latency-critical pods, with a pod-level shared pool for sidecars.",
        "",
        "  kubectl apply -f deploy/daemonset.yaml",
        (
            "  kubectl label node NODE podpin.io/enabled=true     "
            "# opt a node in; its kubelet must run cpuManagerPolicy: none"
        ),
    ),
    "servicemonitor.yaml": (
        "The Prometheus Operator's ServiceMonitor for the podpin agents (needs the monitoring.coreos.com CRDs).",
        "",
        "  kubectl apply -f deploy/servicemonitor.yaml",
    ),
    "prometheusrule.yaml": (
        "The podpin alerts as a PrometheusRule for the Prometheus Operator (needs the monitoring.coreos.com CRDs).",
        "",
        "  kubectl apply -f deploy/prometheusrule.yaml",
    ),
    "grafana-dashboard.yaml": (
        "The podpin Grafana dashboard as a ConfigMap for Grafana's dashboard sidecar (label grafana_dashboard).",
        "",
        "  kubectl apply -f deploy/grafana-dashboard.yaml",
    ),
    "uninstall/uninstall-job.yaml": (
        "podpin uninstall: run `podpin reset` on every node the agents served, before podpin itself is deleted.",
        "The chart's pre-delete hook (templates/uninstall-hook.yaml) without its hook annotations; in its own",
        "directory so `kubectl apply -f deploy/` never runs it. A DaemonSet resets each node once its agent stopped",
        "and then holds the node's lock; a Job deletes the agents' DaemonSet and waits until every node is reset",
        "(exit 1 names a node that is not). Apply it while podpin is installed (it uses the agents' ServiceAccount",
        "and ConfigMap):",
        "",
        "  kubectl apply -f deploy/uninstall/uninstall-job.yaml",
        "  kubectl -n podpin-system wait --for=condition=complete job/podpin-uninstall --timeout=20m",
        "  kubectl -n podpin-system logs job/podpin-uninstall",
        "  kubectl delete -f deploy/uninstall/uninstall-job.yaml -f deploy/daemonset.yaml",
        "  kubectl label nodes --all podpin.io/enabled-",
    ),
    "rbac-nrt.yaml": (
        "What publishing the NodeResourceTopology adds to the agent's access. Apply it with nrt.enabled: true in the",
        "ConfigMap of deploy/daemonset.yaml (and the CRD, where the cluster lacks it):",
        "",
        "  kubectl apply -f deploy/crds/noderesourcetopologies.yaml -f deploy/rbac-nrt.yaml",
    ),
    "crds/noderesourcetopologies.yaml": (
        "The NodeResourceTopology CRD (topology.node.k8s.io/v1alpha2), for clusters that lack it. A cluster that",
        "already has it (NFD's topology-updater or the scheduler plugins installed it) keeps its own: do not apply",
        "this file there.",
        "",
        "  kubectl apply -f deploy/crds/noderesourcetopologies.yaml",
    ),
}


def _generated(extra: tuple[Path, ...]) -> tuple[str, ...]:
    """The header's last lines: where the file comes from."""
    values = " and ".join([str(VALUES.relative_to(REPO)), *(str(path.relative_to(CHART)) for path in extra)])
    return (
        "",
        "GENERATED by scripts/render_manifests.py from the Helm chart deploy/helm/podpin with",
        f"{values}: change the chart, then run the script.",
    )


def helm_binary() -> str:
    """The helm to run: $PODPIN_HELM, the project's own copy, or PATH's."""
    for candidate in (os.environ.get("PODPIN_HELM"), str(REPO / ".venv" / "tools" / "k8s" / "bin" / "helm")):
        if candidate and Path(candidate).is_file():
            return candidate
    found = shutil.which("helm")
    if found is None:
        sys.exit("render_manifests.py: helm not found (scripts/test installs it in .venv/tools/k8s/bin)")
    return found


def helm_template(helm: str, extra: tuple[Path, ...]) -> str:
    """The chart rendered with the manifests' values and ``extra`` values files."""
    command = [helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--values", str(VALUES)]
    for path in extra:
        command += ["--values", str(path)]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


_HOOK_ANNOTATION = re.compile(r"^ +helm\.sh/hook[-a-z]*: .*\n", re.MULTILINE)
# An annotations map that held only hook annotations: its key, followed by a line that is not deeper.
_EMPTY_ANNOTATIONS = re.compile(r"^( +)annotations:\n(?!\1 )", re.MULTILINE)


def _without_hook_annotations(block: str) -> str:
    """The object without Helm's hook annotations: applied with kubectl, a hook is an object like the others."""
    stripped = _HOOK_ANNOTATION.sub("", block)
    return _EMPTY_ANNOTATIONS.sub("", stripped)


def split_by_template(rendered: str, own_files: dict[str, str], rest: str | None) -> dict[str, str]:
    """Manifest file name -> its rendered objects, in helm's order, each still led by ``---`` and ``# Source:``.

    An object goes to ``own_files[template]``, else to ``rest`` (``None``: it is left out).
    """
    files: dict[str, list[str]] = {}
    for block in rendered.split("---\n"):
        if not block.strip():
            continue
        source = block.splitlines()[0]
        if not source.startswith("# Source: "):
            raise ValueError(f"render_manifests.py: a rendered object has no '# Source:' line: {source!r}")
        name = own_files.get(source.rsplit("/", 1)[-1], rest)
        if name is not None:
            files.setdefault(name, []).append("---\n" + _without_hook_annotations(block))
    return {name: "".join(blocks) for name, blocks in files.items()}


def manifests(helm: str) -> dict[str, str]:
    """File name (under deploy/) -> the full text of the file: the header, then the rendered objects."""
    texts = {}
    for extra, own_files in RENDERS.items():
        rest = None if extra else MAIN_FILE
        for name, body in split_by_template(helm_template(helm, extra), own_files, rest).items():
            header = "".join(f"# {line}".rstrip() + "\n" for line in (*HEADERS[name], *_generated(extra)))
            texts[name] = header + body
    return texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 if stale")
    args = parser.parse_args()
    wanted = manifests(helm_binary())
    stale = [
        name
        for name, text in wanted.items()
        if not (REPO / "deploy" / name).is_file() or (REPO / "deploy" / name).read_text() != text
    ]
    if args.check:
        for name in stale:
            print(f"render_manifests.py: deploy/{name} differs from the chart; run scripts/render_manifests.py")
        return 1 if stale else 0
    for name in stale:
        (REPO / "deploy" / name).write_text(wanted[name])
        print(f"render_manifests.py: wrote deploy/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
