"""The Helm chart deploy/helm/podpin: lint, non-default renders, the strict values schema, one version.

The default install (the manifests in deploy/) is checked object by object in ``test_manifests.py``; here the chart
is rendered with other values (NRI on, monitoring off, kubelet state off, a digest, a narrowed NetworkPolicy, a
non-default agent config) and each render is validated strictly against every supported Kubernetes minor and
scanned by checkov, and wrong values are shown to be refused by the schema before anything renders.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from agent import __version__
from agent.alloc import TopologyManagerPolicy, TopologyManagerScope
from agent.config import ConfigError, NRTSettings, config_from_mapping
from agent.config_layers import flatten_layers
from agent.nri import NRIConfig
from tests.support.k8s_tools import CHART, checkov, helm_template, rendered_objects, run_helm, supported_versions

NRI_VALUES = CHART / "ci" / "nri-values.yaml"
MANIFESTS_VALUES = CHART / "ci" / "manifests-values.yaml"


def _render(tmp_path: Path, values: dict[str, Any] | None = None, files: tuple[Path, ...] = ()) -> list[dict[str, Any]]:
    return rendered_objects(helm_template(files, values, tmp_dir=tmp_path))


def _kinds(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(o["kind"], o["metadata"]["name"]) for o in objects]


def _one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert 1 == len(found), f"{kind} {name or ''}: {len(found)} objects"
    return found[0]


def _mounts(objects: list[dict[str, Any]], name: str = "podpin") -> dict[str, tuple[str, str, bool]]:
    """mountPath -> (hostPath, type, readOnly) of the host mounts of the first container of DaemonSet ``name``
    (the agent's, or the uninstall hook's reset)."""
    pod = _one(objects, "DaemonSet", name)["spec"]["template"]["spec"]
    pod = {**pod, "containers": pod.get("initContainers") or pod["containers"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    return {
        m["mountPath"]: (
            volumes[m["name"]]["hostPath"]["path"],
            volumes[m["name"]]["hostPath"]["type"],
            bool(m.get("readOnly")),
        )
        for m in pod["containers"][0]["volumeMounts"]
        if "hostPath" in volumes[m["name"]]
    }


def _config(objects: list[dict[str, Any]], fullname: str = "podpin") -> dict[str, Any]:
    return dict(yaml.safe_load(_one(objects, "ConfigMap", f"{fullname}-config")["data"]["config.yaml"]))


def _schema_error(tmp_path: Path, values: dict[str, Any]) -> str:
    """helm's complaint about ``values`` (they must be refused)."""
    path = tmp_path / "bad-values.yaml"
    path.write_text(yaml.safe_dump(values))
    run = run_helm("template", "podpin", str(CHART), "--values", str(path))
    assert (1, "") == (run.returncode, run.stdout), "helm rendered values the schema should refuse"
    return run.stderr


class TestChart:
    def test_lint_strict(self) -> None:
        """`helm lint --strict` passes with the default values and with each values file of ci/."""
        runs = [run_helm("lint", "--strict", str(CHART))]
        runs += [run_helm("lint", "--strict", str(CHART), "--values", str(p)) for p in sorted(CHART.glob("ci/*.yaml"))]
        assert [(0, True)] * len(runs) == [(r.returncode, "0 chart(s) failed" in r.stdout) for r in runs]

    def test_app_version_is_the_agent_version(self) -> None:
        """Chart.yaml's appVersion is agent.__version__, what `podpin --version` prints and the image tag."""
        chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
        assert __version__ == chart["appVersion"]

    def test_minimum_kubernetes_version(self) -> None:
        """Chart.yaml's kubeVersion states the minimum the manifests are validated from (1.34)."""
        chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
        assert (">=1.34.0-0", "1.34") == (chart["kubeVersion"], supported_versions()[0])

    def test_default_install(self, tmp_path: Path) -> None:
        """Defaults: no Namespace object (helm --create-namespace), metrics Service, no ServiceMonitor or dashboard;
        then the pre-delete hook's objects."""
        expected = [
            ("NetworkPolicy", "podpin"),
            ("ResourceQuota", "podpin-critical-pods"),
            ("ServiceAccount", "podpin"),
            ("ConfigMap", "podpin-config"),
            ("ClusterRole", "podpin"),
            ("ClusterRoleBinding", "podpin"),
            ("Service", "podpin-metrics"),
            ("DaemonSet", "podpin"),
            ("ValidatingAdmissionPolicy", "podpin-podpin-system-pod-status"),
            ("ValidatingAdmissionPolicyBinding", "podpin-podpin-system-pod-status"),
            ("NetworkPolicy", "podpin-uninstall"),
            ("ServiceAccount", "podpin-uninstall"),
            ("Role", "podpin-uninstall"),
            ("RoleBinding", "podpin-uninstall"),
            ("DaemonSet", "podpin-uninstall"),
            ("Job", "podpin-uninstall"),
        ]
        assert expected == _kinds(_render(tmp_path))

    def test_image_defaults_to_the_app_version(self, tmp_path: Path) -> None:
        """image.tag empty -> the appVersion; a digest is appended to the tag; repository and pull policy apply."""
        default = _one(_render(tmp_path), "DaemonSet", "podpin")["spec"]["template"]["spec"]["containers"][0]
        digest = "sha256:" + "ab" * 32
        values = {
            "image": {"repository": "registry.local/podpin", "tag": "9.9.9", "digest": digest, "pullPolicy": "Always"}
        }
        pinned = _one(_render(tmp_path, values), "DaemonSet", "podpin")["spec"]["template"]["spec"]["containers"][0]
        expected = (
            (f"ghcr.io/podpin/podpin:{__version__}", "IfNotPresent"),
            (f"registry.local/podpin:9.9.9@{digest}", "Always"),
        )
        actual = ((default["image"], default["imagePullPolicy"]), (pinned["image"], pinned["imagePullPolicy"]))
        assert expected == actual

    def test_node_selection(self, tmp_path: Path) -> None:
        """nodeSelector (merged with the opt-in default, as helm merges maps), affinity and tolerations from the
        values."""
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["metal"]}
                            ]
                        }
                    ]
                }
            }
        }
        tolerations = [{"key": "dedicated", "operator": "Equal", "value": "trading", "effect": "NoSchedule"}]
        values = {"nodeSelector": {"pool": "latency"}, "affinity": affinity, "tolerations": tolerations}
        default = _one(_render(tmp_path), "DaemonSet", "podpin")["spec"]["template"]["spec"]
        custom = _one(_render(tmp_path, values), "DaemonSet", "podpin")["spec"]["template"]["spec"]
        expected = (
            ({"kubernetes.io/os": "linux", "podpin.io/enabled": "true"}, None, [{"operator": "Exists"}]),
            ({"kubernetes.io/os": "linux", "podpin.io/enabled": "true", "pool": "latency"}, affinity, tolerations),
        )
        actual = tuple((pod["nodeSelector"], pod.get("affinity"), pod["tolerations"]) for pod in (default, custom))
        assert expected == actual

    def test_config_values_reach_the_agent(self, tmp_path: Path) -> None:
        """The config block is the agent's file, loaded by the agent; the kubelet state path follows the mount."""
        objects = _render(tmp_path, files=(NRI_VALUES,))
        config = _config(objects)
        loaded = config_from_mapping(config, env={"NODE_NAME": "node-1"})
        expected = (
            TopologyManagerPolicy.SINGLE_NUMA_NODE,
            TopologyManagerScope.CONTAINER,
            "/var/lib/kubelet/cpu_manager_state",
            False,
        )
        actual = (
            loaded.planner.topology_manager_policy,
            loaded.planner.topology_manager_scope,
            str(loaded.kubelet_cpu_manager_state_path),
            "kubeletCPUManagerStatePath" in config,
        )
        assert expected == actual

    def test_config_change_rolls_the_agents_unless_they_follow_it_live(self, tmp_path: Path) -> None:
        """A changed key the agents take only at start changes the pod template's checksum, so the DaemonSet rolls;
        a change of a key they follow live (reconcilePeriod, deviceWaitTimeout, in any section) does not."""
        checksums = [
            _one(_render(tmp_path, values), "DaemonSet", "podpin")["spec"]["template"]["metadata"]["annotations"][
                "checksum/config"
            ]
            for values in (
                {"config": {"groups": {"big": {"cgroupWatch": "poll"}}}},
                {"config": {"groups": {"big": {"cgroupWatch": "poll"}}, "logLevel": "debug"}},
                {"config": {"groups": {"big": {"cgroupWatch": "poll"}}, "reconcilePeriod": "30s"}},
                {"config": {"groups": {"big": {"cgroupWatch": "poll", "reconcilePeriod": "3s"}}}},
                {"config": {"groups": {"big": {"cgroupWatch": "inotify", "deviceWaitTimeout": "1s"}}}},
            )
        ]
        assert [True, False, False, True] == [checksum != checksums[0] for checksum in checksums[1:]]

    def test_metrics_port_follows_the_bind_address(self, tmp_path: Path) -> None:
        """The container port, the probes' named port and the Service take metricsBindAddress's port."""
        objects = _render(tmp_path, {"config": {"metricsBindAddress": "[::]:9400"}})
        container = _one(objects, "DaemonSet", "podpin")["spec"]["template"]["spec"]["containers"][0]
        service = _one(objects, "Service")["spec"]["ports"][0]
        assert (9400, 9400) == (container["ports"][0]["containerPort"], service["port"])


class TestToggles:
    def test_nri_on_mounts_the_socket_directory(self, tmp_path: Path) -> None:
        """nri.enabled mounts the socket's directory read-only (the directory, so a new socket shows)."""
        mounts = _mounts(_render(tmp_path, {"nri": {"enabled": True, "socketPath": "/run/containerd/nri/nri.sock"}}))
        assert ("/run/containerd/nri", "DirectoryOrCreate", True) == mounts["/run/containerd/nri"]

    def test_nri_on_reaches_the_agent(self, tmp_path: Path) -> None:
        """nri.enabled and nri.socketPath become the agent's nri section, loaded by the agent: it connects to the
        socket where the mount puts it."""
        objects = _render(tmp_path, {"nri": {"enabled": True, "socketPath": "/run/containerd/nri/nri.sock"}})
        loaded = config_from_mapping(_config(objects), env={"NODE_NAME": "node-1"})
        expected = NRIConfig(enabled=True, socket_path=Path("/run/containerd/nri/nri.sock"))
        assert (expected, True) == (loaded.nri, str(loaded.nri.socket_path.parent) in _mounts(objects))

    def test_nri_on_by_default(self, tmp_path: Path) -> None:
        """By default the NRI socket's directory is mounted (created when the runtime has NRI off) and the agent
        uses the socket whenever it exists, as its own default says."""
        objects = _render(tmp_path)
        loaded = config_from_mapping(_config(objects), env={"NODE_NAME": "node-1"})
        mounts = _mounts(objects)
        assert (("/var/run/nri", "DirectoryOrCreate", True), True, Path("/var/run/nri/nri.sock")) == (
            mounts["/var/run/nri"],
            loaded.nri.enabled,
            loaded.nri.socket_path,
        )

    def test_nri_off_mounts_nothing_of_the_runtime(self, tmp_path: Path) -> None:
        """nri.enabled false: no NRI path is mounted, and the agent is told NRI is off (its own default is on)."""
        objects = _render(tmp_path, {"nri": {"enabled": False}})
        loaded = config_from_mapping(_config(objects), env={"NODE_NAME": "node-1"})
        assert ([], False) == ([path for path in _mounts(objects) if "nri" in path], loaded.nri.enabled)

    def test_nri_is_the_charts_not_the_config_block(self, tmp_path: Path) -> None:
        """config.nri is refused by the schema: the nri values decide both the mount and the agent's section."""
        assert "at '/config/nri': false schema" in _schema_error(tmp_path, {"config": {"nri": {}}})

    def test_runtime_state_mounts_reach_the_agent(self, tmp_path: Path) -> None:
        """runtimeState mounts containerd's and CRI-O's state read-only under mountRoot, and the agent's runtimeRoot
        is that prefix, so its bundle reader finds them where the mounts put them."""
        objects = _render(tmp_path, {"runtimeState": {"enabled": True, "mountRoot": "/node"}})
        loaded = config_from_mapping(_config(objects), env={"NODE_NAME": "node-1"})
        mounts = _mounts(objects)
        expected = (
            Path("/node"),
            ("/run/containerd/io.containerd.runtime.v2.task/k8s.io", "DirectoryOrCreate", True),
            ("/run/containers/storage/overlay-containers", "DirectoryOrCreate", True),
        )
        actual = (
            loaded.runtime_root,
            mounts["/node/run/containerd/io.containerd.runtime.v2.task/k8s.io"],
            mounts["/node/run/containers/storage/overlay-containers"],
        )
        assert expected == actual

    def test_runtime_state_off(self, tmp_path: Path) -> None:
        """runtimeState.enabled=false mounts no runtime state and leaves the agent's runtimeRoot unset (the pod
        status, and NRI, name containers)."""
        objects = _render(tmp_path, {"runtimeState": {"enabled": False}})
        host_paths = [host for host, _, _ in _mounts(objects).values()]
        assert ([], False) == ([p for p in host_paths if p.startswith("/run/")], "runtimeRoot" in _config(objects))

    def test_kubelet_state_off(self, tmp_path: Path) -> None:
        """kubeletState.enabled=false drops the kubelet mounts and leaves the agent's default paths."""
        objects = _render(tmp_path, {"kubeletState": {"enabled": False}})
        host_paths = [host for host, _, _ in _mounts(objects).values()]
        config = _config(objects)
        expected: tuple[list[str], bool, bool] = ([], False, False)
        actual = (
            [p for p in host_paths if p.startswith("/var/lib/kubelet")],
            "kubeletCPUManagerStatePath" in config,
            "podResourcesSocket" in config,
        )
        assert expected == actual

    def test_pod_resources_socket_is_under_the_kubelet_mount(self, tmp_path: Path) -> None:
        """The agent asks the kubelet's PodResources socket, and reads its checkpoint and configuration (when
        kubeletState.configFile names it), where the chart mounts them: each file or directory alone, read-only,
        under mountPath."""
        objects = _render(
            tmp_path,
            {"kubeletState": {"hostPath": "/data/kubelet/", "mountPath": "/host/kubelet", "configFile": "config.yaml"}},
        )
        loaded = config_from_mapping(_config(objects), env={"NODE_NAME": "node-1"})
        mounts = _mounts(objects)
        expected = (
            Path("/host/kubelet/pod-resources/kubelet.sock"),
            Path("/host/kubelet/cpu_manager_state"),
            Path("/host/kubelet/config.yaml"),
            {
                "/host/kubelet/cpu_manager_state": ("/data/kubelet/cpu_manager_state", "File", True),
                "/host/kubelet/pod-resources": ("/data/kubelet/pod-resources", "Directory", True),
                "/host/kubelet/config.yaml": ("/data/kubelet/config.yaml", "File", True),
            },
        )
        actual = (
            loaded.pod_resources_socket,
            loaded.kubelet_cpu_manager_state_path,
            loaded.kubelet_config_path,
            {path: mount for path, mount in mounts.items() if path.startswith("/host/kubelet")},
        )
        assert expected == actual

    @pytest.mark.parametrize("config_file", ["config.yaml", ""])
    def test_only_what_podpin_reads_of_the_kubelet_directory_is_mounted(self, tmp_path: Path, config_file: str) -> None:
        """Issue 22, finding 9: the kubelet's root directory holds other pods' secret and token volumes; no mount
        of the agent or the uninstall hook's reset reaches it or anything in it but the CPU manager checkpoint,
        the pod-resources directory and the kubelet's configuration file, each read-only."""
        objects = _render(tmp_path, {"kubeletState": {"configFile": config_file}, "uninstallHook": {"enabled": True}})
        allowed = {"/var/lib/kubelet/cpu_manager_state", "/var/lib/kubelet/pod-resources"}
        allowed |= {f"/var/lib/kubelet/{config_file}"} if config_file else set()
        for name in ("podpin", "podpin-uninstall"):
            if not any(o.get("kind") == "DaemonSet" and o["metadata"]["name"] == name for o in objects):
                continue
            kubelet = {(host, ro) for host, _, ro in _mounts(objects, name).values() if host.startswith("/var/lib/kub")}
            assert set() == {host for host, ro in kubelet if host not in allowed or not ro}, name
        agent = {host for host, _, _ in _mounts(objects).values() if host.startswith("/var/lib/kubelet")}
        assert allowed == agent

    def test_the_agent_may_read_its_node(self, tmp_path: Path) -> None:
        """Always ``get nodes``: a mirror pod's owner uid is checked against the Node's (issue 22, finding 1)."""
        rules = _one(_render(tmp_path), "ClusterRole", "podpin")["rules"]
        assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]} in rules

    def test_nrt_off_by_default(self, tmp_path: Path) -> None:
        """By default the agent publishes no NodeResourceTopology, and the chart grants nothing for it nor adds
        the CRD."""
        objects = _render(tmp_path)
        loaded = config_from_mapping(_config(objects), env={"NODE_NAME": "node-1"})
        nrt_objects = [(kind, name) for kind, name in _kinds(objects) if "nrt" in name or "topolog" in name]
        assert (False, []) == (loaded.nrt.enabled, nrt_objects)

    @pytest.mark.parametrize("preset", ["k3s", "rke2"])
    def test_k3s_and_rke2_presets_mount_and_configure_their_runtime_state(self, tmp_path: Path, preset: str) -> None:
        """runtimeState.paths.preset k3s/rke2: containerd's task and sandboxer directories come from
        /run/k3s/containerd, a CRI-O with its own runroot and driver from there, and the agent reads them at the same
        places (config.runtimePaths)."""
        values = {
            "runtimeState": {"paths": {"preset": preset, "crioRunroot": "/var/run/crio-x", "crioStorageDriver": "vfs"}}
        }
        objects = _render(tmp_path, values)
        loaded = config_from_mapping(_config(objects), env={"NODE_NAME": "node-1"})
        mounted = sorted(host for host, _, read_only in _mounts(objects).values() if "crio" in host or "k3s" in host)
        paths = loaded.runtime_paths
        configured = sorted(str(d) for d in (paths.containerd_tasks, paths.containerd_sandboxes, paths.crio_containers))
        dirs = [
            "/run/k3s/containerd/io.containerd.runtime.v2.task/k8s.io",
            "/run/k3s/containerd/io.containerd.sandbox.controller.v1.shim/k8s.io",
            "/var/run/crio-x/vfs-containers",
        ]
        assert (dirs, dirs) == (mounted, configured)

    def test_nrt_on_grants_the_publisher_its_access(self, tmp_path: Path) -> None:
        """config.nrt.enabled reaches the agent and renders a ClusterRole for the Node and NodeResourceTopology
        calls, bound to the agent's ServiceAccount (which follows fullnameOverride)."""
        values = {"fullnameOverride": "pin", "config": {"nrt": {"enabled": True, "minInterval": "30s"}}}
        objects = _render(tmp_path, values)
        loaded = config_from_mapping(_config(objects, "pin"), env={"NODE_NAME": "node-1"})
        role, binding = _one(objects, "ClusterRole", "pin-nrt"), _one(objects, "ClusterRoleBinding", "pin-nrt")
        expected = (
            NRTSettings(enabled=True, min_interval=30.0),
            [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                {
                    "apiGroups": ["topology.node.k8s.io"],
                    "resources": ["noderesourcetopologies"],
                    "verbs": ["get", "create", "update", "patch"],
                },
            ],
            ("pin-nrt", [{"kind": "ServiceAccount", "name": "pin", "namespace": "podpin-system"}]),
        )
        actual = (loaded.nrt, role["rules"], (binding["roleRef"]["name"], binding["subjects"]))
        assert expected == actual
        assert "pin" == _one(objects, "ServiceAccount", "pin")["metadata"]["name"]

    def test_nrt_crd_install(self, tmp_path: Path) -> None:
        """nrtCRD.install renders the NodeResourceTopology CRD, kept by helm uninstall."""
        crd = _one(_render(tmp_path, {"nrtCRD": {"install": True}}), "CustomResourceDefinition")
        expected = ("noderesourcetopologies.topology.node.k8s.io", "keep", ["v1alpha2"])
        actual = (
            crd["metadata"]["name"],
            crd["metadata"]["annotations"]["helm.sh/resource-policy"],
            [version["name"] for version in crd["spec"]["versions"]],
        )
        assert expected == actual

    def test_monitoring_on(self, tmp_path: Path) -> None:
        """ServiceMonitor with the kube-prometheus-stack release label, and the dashboard for Grafana's sidecar."""
        values = {
            "monitoring": {
                "serviceMonitor": {"enabled": True, "release": "prom", "labels": {"team": "platform"}},
                "dashboard": {"enabled": True, "namespace": "monitoring", "annotations": {"grafana_folder": "Nodes"}},
            }
        }
        objects = _render(tmp_path, values)
        monitor = _one(objects, "ServiceMonitor")["metadata"]["labels"]
        dashboard = _one(objects, "ConfigMap", "podpin-dashboard")["metadata"]
        expected = (("prom", "platform"), ("monitoring", "1", {"grafana_folder": "Nodes"}))
        actual = (
            (monitor["release"], monitor["team"]),
            (dashboard["namespace"], dashboard["labels"]["grafana_dashboard"], dashboard["annotations"]),
        )
        assert expected == actual
        assert json.loads((CHART / "dashboards" / "podpin.json").read_text()) == json.loads(
            _one(objects, "ConfigMap", "podpin-dashboard")["data"]["podpin.json"]
        )

    def test_service_monitor_without_release_label(self, tmp_path: Path) -> None:
        """An empty release leaves the label off."""
        values = {"monitoring": {"serviceMonitor": {"enabled": True, "release": ""}}}
        assert "release" not in _one(_render(tmp_path, values), "ServiceMonitor")["metadata"]["labels"]

    def test_monitoring_off(self, tmp_path: Path) -> None:
        """monitoring.enabled=false renders no Service and no ServiceMonitor, even when asked for one."""
        values = {"monitoring": {"enabled": False, "serviceMonitor": {"enabled": True}}}
        kinds = {kind for kind, _ in _kinds(_render(tmp_path, values))}
        assert set() == kinds & {"Service", "ServiceMonitor"}

    def test_network_policy_from(self, tmp_path: Path) -> None:
        """networkPolicy.from adds peers to the labelled scraping namespaces."""
        peers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
        policy = _one(_render(tmp_path, {"networkPolicy": {"from": peers}}), "NetworkPolicy", "podpin")["spec"][
            "ingress"
        ]
        labelled = {"namespaceSelector": {"matchLabels": {"podpin.io/scrape": "true"}}}
        assert [{"ports": [{"port": "metrics", "protocol": "TCP"}], "from": [labelled, *peers]}] == policy

    @pytest.mark.parametrize(
        ("labels", "expected"),
        [
            (None, [{"namespaceSelector": {"matchLabels": {"podpin.io/scrape": "true"}}}]),
            (
                {"podpin.io/scrape": None, "team": "observability"},
                [{"namespaceSelector": {"matchLabels": {"team": "observability"}}}],
            ),
            ({"podpin.io/scrape": None}, None),
        ],
        ids=["default", "custom", "empty-admits-any"],
    )
    def test_network_policy_admits_scrapes_from_labelled_namespaces(
        self, tmp_path: Path, labels: dict[str, str | None] | None, expected: list[dict[str, Any]] | None
    ) -> None:
        """Scrapes come only from namespaces carrying networkPolicy.scrapeNamespaceLabels (issue "hold under attack"
        item 8: nothing limited who may scrape); emptied (helm merges maps: null drops the default key), the policy
        admits any source on the metrics port."""
        values = {} if labels is None else {"networkPolicy": {"scrapeNamespaceLabels": labels}}
        (rule,) = _one(_render(tmp_path, values), "NetworkPolicy", "podpin")["spec"]["ingress"]
        assert expected == rule.get("from")

    @pytest.mark.parametrize(
        ("values", "writable"),
        [
            ({"config": {"cgroupDriver": "cgroupfs"}}, "kubepods"),
            ({"config": {"cgroupDriver": "systemd"}}, "kubepods.slice"),
            ({"cgroupSubtree": "kubepods"}, "kubepods"),
        ],
        ids=["cgroupfs", "systemd", "explicit"],
    )
    def test_only_the_pod_cgroups_are_writable(self, tmp_path: Path, values: dict[str, Any], writable: str) -> None:
        """With the driver named, the cgroup tree is read-only and only the kubelet's pod subtree is read-write, for
        the agents and the uninstall hook's resets alike."""
        objects = _render(tmp_path, values)
        for name in ("podpin", "podpin-uninstall"):
            mounts = _mounts(objects, name)
            cgroup = {path: mount for path, mount in mounts.items() if path.startswith("/sys/fs/cgroup")}
            assert {
                "/sys/fs/cgroup": ("/sys/fs/cgroup", "Directory", True),
                f"/sys/fs/cgroup/{writable}": (f"/sys/fs/cgroup/{writable}", "Directory", False),
            } == cgroup

    def test_auto_driver_mounts_no_subtree_a_node_may_lack(self, tmp_path: Path) -> None:
        """cgroupDriver auto (the default) mounts no kubepods.slice, which a cgroupfs node lacks (the pod would never
        start, finding 5): the whole tree is writable instead, as the agent finds its driver on the node."""
        objects = _render(tmp_path)
        for name in ("podpin", "podpin-uninstall"):
            cgroup = {path: m for path, m in _mounts(objects, name).items() if path.startswith("/sys/fs/cgroup")}
            assert {"/sys/fs/cgroup": ("/sys/fs/cgroup", "Directory", False)} == cgroup

    @pytest.mark.parametrize(
        ("values", "pods"),
        [({}, "1000"), ({"criticalPodQuota": {"nodes": 20}}, "40"), ({"criticalPodQuota": {"pods": 7}}, "7")],
        ids=["default", "nodes", "explicit"],
    )
    def test_critical_pod_quota_is_two_per_node(self, tmp_path: Path, values: dict[str, Any], pods: str) -> None:
        """The system-node-critical quota is 2 x criticalPodQuota.nodes unless pods is set (it was 10,000)."""
        quota = _one(_render(tmp_path, values), "ResourceQuota")["spec"]["hard"]
        assert {"pods": pods} == quota


class TestNonDefaultRenderIsValid:
    @pytest.mark.parametrize("version", supported_versions())
    def test_validates_strictly(self, tmp_path: Path, version: str) -> None:
        """The NRI-on, monitoring-off, digest-pinned render passes strict validation against each supported minor."""
        objects = _render(tmp_path, files=(NRI_VALUES,))
        assert [version] * len(objects) == [kubernetes_validate.validate(o, version, strict=True) for o in objects]

    def test_checkov(self, tmp_path: Path) -> None:
        """checkov passes the same render; with a digest and pullPolicy Always only the uid/token skips (and the
        uninstall hook's probe skips) remain."""
        rendered = tmp_path / "rendered.yaml"
        rendered.write_text(helm_template((NRI_VALUES,)))
        run = subprocess.run(
            [
                str(checkov()),
                "--framework",
                "kubernetes",
                "--skip-download",
                "--output",
                "json",
                "--file",
                str(rendered),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        report = json.loads(run.stdout)
        failed = [(c["check_id"], c["resource"]) for c in report["results"]["failed_checks"]]
        skipped = {c["check_id"] for c in report["results"]["skipped_checks"]}
        # The agent: uid 0 and its token; the uninstall hook's reset pods and Job also need no probes.
        assert ([], {"CKV_K8S_8", "CKV_K8S_9", "CKV_K8S_23", "CKV_K8S_38", "CKV_K8S_40"}) == (failed, skipped)


class TestSchema:
    @pytest.mark.parametrize(
        ("values", "complaint"),
        [
            ({"imag": {"tag": "1"}}, "additional properties 'imag' not allowed"),
            ({"image": {"digest": "latest"}}, "at '/image/digest'"),
            ({"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy'"),
            ({"nri": {"enabled": "yes"}}, "at '/nri/enabled'"),
            ({"nri": {"socket": "/run/nri.sock"}}, "additional properties 'socket' not allowed"),
            ({"monitoring": {"serviceMonitor": {"relase": "x"}}}, "additional properties 'relase' not allowed"),
            ({"config": {"topologyManagerPolicy": "fast"}}, "at '/config/topologyManagerPolicy'"),
            ({"config": {"topologyManagerPolicyOption": {}}}, "at '/config/topologyManagerPolicyOption': false schema"),
            ({"config": {"reconcilePeriod": 10}}, "at '/config/reconcilePeriod'"),
            ({"config": {"nodeName": "worker-1"}}, "at '/config/nodeName': false schema"),
            ({"config": {"podResourcesSocket": "/x.sock"}}, "at '/config/podResourcesSocket': false schema"),
            ({"config": {"kubeletConfigPath": "/x.yaml"}}, "at '/config/kubeletConfigPath': false schema"),
            ({"config": {"groups": {"g": {"nodeName": "w"}}}}, "at '/config/groups/g'"),
            ({"config": {"nrt": {"enable": True}}}, "additional properties 'enable' not allowed"),
            ({"config": {"nrt": {"minInterval": 5}}}, "at '/config/nrt/minInterval'"),
            ({"nrtCRD": {"install": "yes"}}, "at '/nrtCRD/install'"),
            ({"config": {"cpuManagerPolicyOptions": {"full-pcpus-only": True}}}, "full-pcpus-only"),
            ({"kubeletState": {"mountPath": "relative/dir"}}, "at '/kubeletState/mountPath'"),
            ({"nodeSelector": {"podpin.io/enabled": True}}, "at '/nodeSelector/podpin.io~1enabled'"),
            ({"cgroupSubtree": "../etc"}, "at '/cgroupSubtree'"),
            ({"criticalPodQuota": {"nodes": 0}}, "at '/criticalPodQuota/nodes'"),
            ({"networkPolicy": {"scrapeNamespaceLabels": {"a": True}}}, "at '/networkPolicy/scrapeNamespaceLabels/a'"),
        ],
        ids=lambda v: json.dumps(v) if isinstance(v, dict) else "",
    )
    def test_refuses(self, tmp_path: Path, values: dict[str, Any], complaint: str) -> None:
        """A wrong or unknown value fails the render with helm naming where it is."""
        assert complaint in _schema_error(tmp_path, values)

    def test_manifests_values_pass(self, tmp_path: Path) -> None:
        """The values files the project ships render (the schema is not refusing everything)."""
        assert [True, True] == [bool(_render(tmp_path, files=(path,))) for path in (MANIFESTS_VALUES, NRI_VALUES)]


class TestAffinityAudit:
    def test_host_pid_only_when_asked(self, tmp_path: Path) -> None:
        """The DaemonSet stays out of the host PID namespace unless affinityAudit.hostPID lets the audit see threads."""
        default = _one(_render(tmp_path), "DaemonSet", "podpin")["spec"]["template"]["spec"]["hostPID"]
        values = {"affinityAudit": {"hostPID": True}}
        asked = _one(_render(tmp_path, values), "DaemonSet", "podpin")["spec"]["template"]["spec"]["hostPID"]
        assert (False, True) == (default, asked)


# (values, whether the agent accepts them): every refusal and every example the chart documents, through both the
# chart (schema and templates) and the agent's own loader (finding 5: `helm template` rendered values the agent then
# crash-looped on).
BOTH_WAYS: list[tuple[dict[str, Any], bool]] = [
    ({"config": {"reservedSystemCPUs": "0-1x"}}, False),
    ({"config": {"reservedSystemCPUs": "3-1"}}, False),
    ({"config": {"reservedSystemCPUs": "99999"}}, False),
    ({"config": {"groups": {"trading": {"reservedSystemCPUs": "3-1"}}}}, False),
    ({"nri": {"podWaitTimeout": "2s"}}, False),
    ({"nri": {"podWaitTimeout": "800.1ms"}}, False),
    ({"config": {"systemReserved": {"cpu": "abc"}}}, False),
    ({"config": {"systemReserved": {"cpu": "-1"}}}, False),
    ({"config": {"systemReserved": {"cpu": "0"}}}, False),
    ({"config": {"kubeReserved": {"cpu": "1", "memory": "1.5.0"}}}, False),
    ({"config": {"reconcilePeriod": "0s"}}, False),
    ({"config": {"nodes": {"worker-7": {"podResyncPeriod": "-1s"}}}}, False),
    ({"config": {"cpuCFSQuotaPeriod": "2s"}}, False),
    ({"config": {"cpuCFSQuotaPeriod": "500us"}}, False),
    ({"config": {"deviceWaitTimeout": "-1s"}}, False),
    ({"config": {"metricsBindAddress": ":99999"}}, False),
    ({"config": {"topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "4"}}}, False),
    ({"config": {"evictionHard": {"memory.available": "10%"}}}, False),
    ({"config": {"reservedSystemCPUs": "0"}}, True),
    ({"config": {"reservedSystemCPUs": "0-1,16-17"}}, True),
    ({"config": {"systemReserved": {"cpu": "500m", "memory": "1Gi"}, "kubeReserved": {"cpu": 1.5}}}, True),
    ({"nri": {"podWaitTimeout": "0.8s"}}, True),
    ({"nri": {"podWaitTimeout": "0"}}, True),
    ({"config": {"reconcilePeriod": "1m30s", "podResyncPeriod": ".5s", "deviceWaitTimeout": "0s"}}, True),
    ({"config": {"cpuCFSQuotaPeriod": "1ms"}}, True),
    ({"config": {"cpuCFSQuotaPeriod": "1s"}}, True),
    ({"config": {"metricsBindAddress": "[::]:9400", "stateBindAddress": "127.0.0.1:9364"}}, True),
    ({"config": {"nrt": {"enabled": True, "minInterval": "0s"}}}, True),
    ({"config": {"topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "16"}}}, True),
    ({"config": {"groups": {"trading": {"topologyManagerPolicy": "single-numa-node"}}}}, True),
]


def _agent_view(values: dict[str, Any]) -> dict[str, Any]:
    """The agent's file for these values, as the chart writes it (the nri values become the nri section)."""
    return {"nodeName": "node-1", **values.get("config", {}), **({"nri": values["nri"]} if "nri" in values else {})}


def _agent_accepts(data: dict[str, Any]) -> bool:
    """Whether the agent loads this file, for the default section and for each group and node section."""
    views: list[tuple[str, dict[str, str]]] = [("node-1", {})]
    views += [("node-1", {"podpin.io/config-group": group}) for group in data.get("groups") or {}]
    views += [(node, {}) for node in data.get("nodes") or {}]
    try:
        for node, labels in views:
            config_from_mapping(flatten_layers(data, node, labels).mapping, env={"NODE_NAME": node})
    except ConfigError:
        return False
    return True


class TestSchemaRefusesWhatTheAgentRefuses:
    @pytest.mark.parametrize(("values", "accepted"), BOTH_WAYS, ids=[json.dumps(v) for v, _ in BOTH_WAYS])
    def test_chart_and_agent_agree(self, tmp_path: Path, values: dict[str, Any], accepted: bool) -> None:
        """The chart renders exactly what the agent loads: a refusal fails `helm template` naming the key, and
        an accepted value reaches the agent's file unchanged."""
        path = tmp_path / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        run = run_helm("template", "podpin", str(CHART), "--values", str(path))
        rendered = run.returncode == 0
        agent = _agent_accepts(_agent_view(values))
        assert (accepted, accepted) == (rendered, agent), run.stderr
        if rendered:
            config = _config(rendered_objects(run.stdout))
            assert _agent_accepts(config)
