"""The user's story on the real cluster, end to end, in one guest boot (the tests run in file order, each building
on the last):

1. the release made by ``scripts/release`` (tests/support/agent_image.py builds it as the image test does); its OCI
   archive imported into the node's containerd and tagged as a registry would serve it (``REPOSITORY:VERSION`` and
   ``REPOSITORY@DIGEST``: containerd resolves a digest reference by that name only), so the plain manifests and the
   packaged chart run unchanged; the QoS cgroups' files read before podpin ever runs;
2. ``kubectl label node`` + ``kubectl apply -f deploy/daemonset.yaml`` (the agent's CPU limit raised for the emulated
   node, TCG_AGENT_LIMIT): the agent's pod scheduled, started, Ready;
3. scaled copies of deploy/examples/pods (tests/cluster/example_pods.py) applied one by one: every container's first
   ``Cpus_allowed_list`` (the probe's first log line) equals ``podpin plan`` for that node (its topology read by
   ``podpin topology`` in the agent's pod, its configuration the ConfigMap's) over the pods created so far; the
   ``Pinned`` Events (``kubectl get events``), the ``podpin.io/CPUsPinned`` condition, the allocation lines in
   ``kubectl logs``; a pod deleted gives its CPUs back to the pool;
4. the plain install removed (``kubectl delete -f``: the agent stops, the cgroups stay as they are) and the release's
   chart installed with ``helm install`` (single-numa-node): nothing moves; then ``helm upgrade``, ``helm rollback``,
   the agent's pod deleted, a kubelet restart and a containerd restart: nothing moves;
5. a pod that cannot be placed: ``kubectl describe`` shows ``podpin.io/CPUsPinned False`` and
   ``TopologyAffinityError``; a real Prometheus, started in the guest, scrapes the agent through the metrics
   Service's EndpointSlices as the release's ServiceMonitor says (monitoring.py), and of the release's
   PrometheusRule exactly the two rejection alerts' expressions return series when a pod is rejected again;
6. ``helm uninstall``: the pre-delete hook resets the node, and the QoS levels' effective cpusets and ``cpu.max``
   are what they were before podpin ran.

The image build, its import into the TCG guest and the agent's starts take most of the module's half hour.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.controlplane import NODE_NAME
from tests.cluster.deploy_story import (
    GUEST_PYTHON,
    NAMESPACE,
    POD_TIMEOUT,
    REPO,
    Story,
    agent_pods,
    apply_pod,
    cpus_now,
    delete_pod,
    deployed,
    first_view,
    get_pod,
    plan_of,
    planned_cpus,
    qos_files,
    wait_agent_ready,
)
from tests.cluster.example_pods import scaled_example
from tests.cluster.monitoring import alert_expressions, file_sd_groups, prometheus_config, rule_file
from tests.cluster.node import guest_modules
from tests.cluster.procs import require_setup, wait_for
from tests.support.agent_image import missing_image_inputs
from tests.vm.harness import require_vm

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_deploy]

PROMETHEUS_PORT = 9090
"""Where the test's Prometheus listens: on the guest's loopback (it reaches the agent's pod address, the host does
not)."""
CPU_DIVISOR, MEMORY_DIVISOR = 4, 16
"""The examples ask for a two-socket machine; the node has 4 CPUs on 2 NUMA nodes and 4 GiB (example_pods.py)."""
REJECTED_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "too-wide", "namespace": "default"},
    "spec": {
        "resources": {"requests": {"cpu": "3", "memory": "64Mi"}, "limits": {"cpu": "3", "memory": "64Mi"}},
        "containers": [
            {
                "name": "app",
                "image": "podpin.local/probe:1",
                "imagePullPolicy": "Never",
                "resources": {"requests": {"cpu": "3", "memory": "64Mi"}, "limits": {"cpu": "3", "memory": "64Mi"}},
            }
        ],
        "terminationGracePeriodSeconds": 1,
    },
}
"""A 3-CPU pod bubble on a node whose NUMA nodes have 2 CPUs: single-numa-node cannot place it."""
LATE_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "late", "namespace": "default"},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "podpin.local/probe:1",
                "imagePullPolicy": "Never",
                "resources": {"requests": {"cpu": "1", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "32Mi"}},
            }
        ],
        "terminationGracePeriodSeconds": 1,
    },
}
"""A Guaranteed pod with one whole CPU, created while no agent runs."""


@pytest.fixture(scope="module")
def story(k8s_version: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    """A Ready node holding the release's image, its QoS files read, labelled, `kubectl apply -f deploy/daemonset.yaml`
    done (deploy_story.deployed)."""
    require_vm()
    for reason in (missing_image_inputs(), guest_modules()):
        if reason:
            require_setup(reason)
    with deployed(k8s_version, Path(tmp_path_factory.mktemp("deploy"))) as told:
        yield told


def _apply_example(story: Story, example: str) -> None:
    """Apply one scaled example; its containers' first views equal the plan over the pods created so far."""
    manifest = scaled_example(example, cpu_divisor=CPU_DIVISOR, memory_divisor=MEMORY_DIVISOR)
    apply_pod(story, manifest)
    namespace, name = story.applied[-1]
    planned = planned_cpus(plan_of(story, story.applied), name)
    seen = {container: first_view(story, namespace, name, container) for container in planned}
    assert planned == seen, f"{namespace}/{name}: planned (left) and first views (right)"


def _settled_on_plan(story: Story) -> None:
    """Wait until every test container runs on its planned CPUs (after a release: the pool grows back)."""
    plan = plan_of(story, story.applied)
    expected = {
        f"{namespace}/{name}/{container}": cpus
        for namespace, name in story.applied
        for container, cpus in planned_cpus(plan, name).items()
    }
    wait_for(
        f"the containers to run on {expected}",
        lambda: cpus_now(story) == expected,
        timeout=180,
        logs=story.node.logs(),
        every=5,
    )


def test_agent_pod_scheduled_started_ready(story: Story) -> None:
    """The DaemonSet's pod lands on the node and becomes Ready under the real kubelet, without restarts."""
    pod = wait_agent_ready(story)
    assert (NODE_NAME, 0) == (pod["spec"]["nodeName"], pod["status"]["containerStatuses"][0]["restartCount"])


def test_kubectl_logs_show_the_agent(story: Story) -> None:
    """`kubectl logs ds/podpin` (through the API server and the kubelet) shows the agent's started line and that it
    reads no kubelet configuration file (the chart's default: none mounted)."""
    logs = story.kubectl("-n", NAMESPACE, "logs", "ds/podpin")
    events = {json.loads(line).get("event") for line in logs.splitlines() if line.startswith("{")}
    assert {"agent.started", "kubelet.config_not_read"} <= events, logs[-2000:]


def test_example_pods_start_on_the_planned_cpus(story: Story) -> None:
    """The burstable web pod, then the trading engine (a 2-CPU pod bubble: one exclusive CPU for the database, the
    sidecars on the pod's shared CPU): each container's first Cpus_allowed_list is `podpin plan`'s."""
    _apply_example(story, "web-burstable.yaml")
    _apply_example(story, "trading-engine-after.yaml")


def test_pinned_events_and_condition(story: Story) -> None:
    """`kubectl get events` shows podpin's Normal Pinned Event on the trading engine, and its status carries
    podpin.io/CPUsPinned True."""
    events = story.plane.admin.json("-n", "trading", "get", "events")["items"]
    pinned = [e for e in events if e["involvedObject"]["name"] == "trading-engine" and e["reason"] == "Pinned"]
    condition = [
        c
        for c in get_pod(story, "trading", "trading-engine")["status"]["conditions"]
        if c["type"] == "podpin.io/CPUsPinned"
    ]
    assert (1, "Normal", [("True", "Pinned")]) == (
        len(pinned),
        pinned[0]["type"] if pinned else None,
        [(c["status"], c["reason"]) for c in condition],
    ), events


def test_kubectl_logs_show_the_allocations(story: Story) -> None:
    """The agent's log has the trading engine's allocation lines: the database exclusive, the sidecars on the pod
    pool."""
    logs = story.kubectl("-n", NAMESPACE, "logs", "ds/podpin")
    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    admitted = {
        container: decision["pool"]
        for line in lines
        if line.get("event") == "pod.admitted" and line.get("pod") == "trading-engine"
        for container, decision in line["containers"].items()
    }
    assert {"database": "exclusive", "envoy": "pod_shared", "log-collector": "pod_shared"} == admitted, logs[-3000:]


def test_a_deleted_pod_gives_its_cpus_back(story: Story) -> None:
    """The trading engine deleted: web runs on the whole node again; the ML loader then takes a bubble (its first
    views are the plan's too)."""
    delete_pod(story, "trading", "trading-engine")
    _settled_on_plan(story)
    assert {"default/web/nginx": "0-3"} == cpus_now(story)
    _apply_example(story, "ml-data-loader.yaml")


def test_helm_install_of_the_release_moves_nothing(story: Story) -> None:
    """The plain install deleted (the agent stops; the kernel keeps every cpuset), a pod created meanwhile, then the
    release's chart installed by helm (single-numa-node): the new agent runs the released image by digest, adopts
    the pods (nothing moves) and pins the pod created while it was down on its planned CPU."""
    before = cpus_now(story)
    story.kubectl("delete", "-f", str(REPO / "deploy" / "daemonset.yaml"), "--wait=true", timeout=POD_TIMEOUT)
    apply_pod(story, LATE_POD)
    notes = story.helm(
        "install",
        "podpin",
        str(story.release.chart),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--set",
        "resources.limits.cpu=1",  # 200m starves the agent's start under TCG
        "--set",
        "config.topologyManagerPolicy=single-numa-node",
    )
    pod = wait_agent_ready(story)
    assert (story.release.image, True) == (pod["spec"]["containers"][0]["image"], "NOTES:" in notes), notes
    _settled_on_plan(story)
    # The pinned pod keeps its CPUs; the node shared pool (web's) gives the late pod its CPU, as the plan says.
    pinned = {key for key in before if key.startswith("ml/")}
    now = cpus_now(story)
    assert {key: before[key] for key in pinned} == {key: now[key] for key in pinned}


def test_helm_upgrade_moves_nothing(story: Story) -> None:
    """`helm upgrade` changing a key the agents take only at start rolls the agent: nothing moves."""
    before, old = cpus_now(story), agent_pods(story)[0]["metadata"]["uid"]
    story.helm(
        "upgrade",
        "podpin",
        str(story.release.chart),
        "--namespace",
        NAMESPACE,
        "--reuse-values",
        "--set",
        "config.logLevel=debug",
    )
    wait_agent_ready(story, other_than=old)
    assert before == cpus_now(story)


def test_helm_rollback_moves_nothing(story: Story) -> None:
    """`helm rollback` to the install's revision: the ConfigMap says the install's log level again, the agent rolls
    back to it, helm's history records the rollback; nothing moves."""
    before, old = cpus_now(story), agent_pods(story)[0]["metadata"]["uid"]
    story.helm("rollback", "podpin", "1", "--namespace", NAMESPACE)
    wait_agent_ready(story, other_than=old)
    config = story.plane.admin.json("-n", NAMESPACE, "get", "configmap", "podpin-config")["data"]["config.yaml"]
    history = json.loads(story.helm("history", "podpin", "--namespace", NAMESPACE, "--output", "json"))
    assert (True, "Rollback to 1", before) == (
        "logLevel: info" in config,
        history[-1]["description"],
        cpus_now(story),
    ), config


def test_agent_pod_deleted_and_recreated_moves_nothing(story: Story) -> None:
    """The agent's pod deleted: the DaemonSet controller makes another, which adopts the pods; nothing moves."""
    before, old = cpus_now(story), agent_pods(story)[0]
    story.kubectl("-n", NAMESPACE, "delete", "pod", old["metadata"]["name"], "--wait=false")
    wait_agent_ready(story, other_than=old["metadata"]["uid"])
    assert before == cpus_now(story)


def test_kubelet_and_containerd_restarts_move_nothing(story: Story) -> None:
    """A kubelet restart, then a containerd crash and restart: the pods keep their CPUs, the agent stays."""
    before = cpus_now(story)
    story.node.restart_kubelet()
    wait_for(f"Node {NODE_NAME} Ready", story.node.ready, timeout=300, logs=story.node.logs(), every=3)
    story.node.restart_containerd()
    wait_agent_ready(story)
    assert before == cpus_now(story)


def _writes(story: Story) -> dict[str, float]:
    """The agent's cgroup write and drift repair counters, from its /metrics on its pod's address, read in the guest
    (the pod network is not reachable from the host)."""
    address = agent_pods(story)[0]["status"]["podIP"]
    script = f"import urllib.request; print(urllib.request.urlopen('http://{address}:9363/metrics').read().decode())"
    text = story.node.sh(str(GUEST_PYTHON), "-c", script, timeout=600).stdout
    counters: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name in ("podpin_cgroup_writes", "podpin_drift_repairs"):
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    key = family.name + "".join(f"/{v}" for _, v in sorted(sample.labels.items()))
                    counters[key] = sample.value
    return counters


def test_five_minutes_beside_the_kubelet_write_nothing(story: Story) -> None:
    """Settled, the agent writes no cpuset or cpu.max for five minutes of the kubelet's syncs and housekeeping, and
    repairs no drift: nothing of the kubelet's fights podpin's values (issue 16 item 4)."""
    time.sleep(30)  # three reconcile periods after the restarts
    first = _writes(story)
    time.sleep(300)
    last = _writes(story)
    assert {} == {key: last.get(key, 0.0) - value for key, value in first.items() if last.get(key, 0.0) != value} | {
        key: value for key, value in last.items() if key not in first
    }


def test_a_rejected_pod_shows_why(story: Story) -> None:
    """The ML loader deleted, a 3-CPU pod bubble under single-numa-node on 2-CPU NUMA nodes: `podpin plan` rejects
    it, and `kubectl describe` shows podpin.io/CPUsPinned False and TopologyAffinityError."""
    delete_pod(story, "ml", "imagenet-loader")
    delete_pod(story, "default", "late")  # the scheduler's room for 3 CPUs
    apply_pod(story, REJECTED_POD)
    planned = next(p for p in plan_of(story, story.applied)["pods"] if p["name"] == "too-wide")

    def condition() -> dict[str, Any] | None:
        found = [
            c
            for c in get_pod(story, "default", "too-wide")["status"].get("conditions", [])
            if c["type"] == "podpin.io/CPUsPinned"
        ]
        return found[0] if found else None

    wait_for("too-wide's podpin.io/CPUsPinned condition", lambda: condition() is not None, timeout=180, every=3)
    described = story.kubectl("-n", "default", "describe", "pod", "too-wide")
    (story.workdir / "too-wide.describe.txt").write_text(described)  # kept for the note
    shown = [line.split() for line in described.splitlines() if "podpin.io/CPUsPinned" in line]
    found = condition()
    assert found is not None
    assert (
        (False, "TopologyAffinityError"),
        ("False", "TopologyAffinityError"),
        [["podpin.io/CPUsPinned", "False"]],
        True,
    ) == (
        (planned["admitted"], planned["reason"]),
        (found["status"], found["reason"]),
        shown[:1],
        "TopologyAffinityError" in described,
    ), described


def _monitoring(story: Story) -> dict[str, dict[str, Any]]:
    """The release's ServiceMonitor and PrometheusRule, rendered from its chart with the values the cluster's
    release was installed with and monitoring on (the cluster has no monitoring.coreos.com CRDs to hold them)."""
    values = story.workdir / "monitoring-values.yaml"
    values.write_text(story.helm("get", "values", "podpin", "--namespace", NAMESPACE, "--output", "yaml"))
    rendered = story.helm(
        "template",
        "podpin",
        str(story.release.chart),
        "--namespace",
        NAMESPACE,
        "--values",
        str(values),
        "--set",
        "monitoring.serviceMonitor.enabled=true",
        "--set",
        "monitoring.prometheusRule.enabled=true",
        "--show-only",
        "templates/servicemonitor.yaml",
        "--show-only",
        "templates/prometheusrule.yaml",
    )
    return {doc["kind"]: doc for doc in yaml.safe_load_all(rendered) if doc}


_ASK_PROMETHEUS = """
import json, sys, urllib.request
answers = {}
for key, path in json.loads(sys.argv[1]).items():
    try:
        answers[key] = json.load(urllib.request.urlopen("http://127.0.0.1:%d/api/v1/" + path, timeout=60))
    except (OSError, ValueError) as err:
        answers[key] = {"status": "error", "error": repr(err)}
print(json.dumps(answers))
"""
"""One guest Python run for many questions to the guest's Prometheus: key -> API path, printed as key -> answer."""


def _ask_prometheus(story: Story, paths: dict[str, str]) -> dict[str, Any]:
    script = _ASK_PROMETHEUS % PROMETHEUS_PORT
    answers: dict[str, Any] = json.loads(
        story.node.sh(str(GUEST_PYTHON), "-c", script, json.dumps(paths), timeout=600).stdout
    )
    return answers


def _query(expression: str) -> str:
    return "query?query=" + urllib.parse.quote(expression)


def _results(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The vector of an instant query's answer (empty when Prometheus answered an error)."""
    found: list[dict[str, Any]] = answer.get("data", {}).get("result", []) if answer.get("status") == "success" else []
    return found


def test_prometheus_scrapes_the_agent_and_the_rejection_alerts_fire(story: Story) -> None:
    """A real Prometheus (in the guest, beside the pod network) scrapes the agent through the metrics Service's
    EndpointSlices as the release's ServiceMonitor says (monitoring.py does the operator's part), its series labelled
    with the node; the release's PrometheusRule loaded. A second rejection while it scrapes: of every alert's
    expression exactly the two rejection alerts' return series (the rejected pod, the reason), PodpinPodsRejected
    fires and PodpinPodsRunningUnpinned waits out its 15 minutes (pending) (issues 16 and 19)."""
    objects = _monitoring(story)
    monitor, rule = objects["ServiceMonitor"], objects["PrometheusRule"]
    services = story.plane.admin.json("get", "services", "--all-namespaces")["items"]
    slices = story.plane.admin.json("get", "endpointslices", "--all-namespaces")["items"]
    groups = file_sd_groups(monitor, services, slices)
    agent = agent_pods(story)[0]
    assert [[f"{agent['status']['podIP']}:9363"]] == [group["targets"] for group in groups], slices
    home = story.node.shared / "prometheus"
    home.mkdir()
    (home / "targets.json").write_text(json.dumps(groups))
    (home / "rules.yaml").write_text(yaml.safe_dump(rule_file(rule)))
    config = prometheus_config(
        monitor,
        targets_file=str(home / "targets.json"),
        rules_file=str(home / "rules.yaml"),
        evaluation_interval="10s",
    )
    (home / "prometheus.yml").write_text(yaml.safe_dump(config))
    argv = [
        "/usr/bin/prometheus",
        f"--config.file={home / 'prometheus.yml'}",
        "--storage.tsdb.path=/run/podpin-test-prometheus",
        f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}",
    ]
    story.node.start_process("prometheus", argv)
    try:
        up: list[dict[str, Any]] = []

        def scraped() -> bool:
            up[:] = _results(_ask_prometheus(story, {"up": _query('up{job="podpin-metrics"}')})["up"])
            return [item["value"][1] for item in up] == ["1"]

        wait_for(
            "Prometheus to scrape the agent",
            scraped,
            timeout=900,
            logs=[story.node.shared / "prometheus.log"],
            every=10,
        )
        delete_pod(story, "default", "too-wide")
        apply_pod(story, REJECTED_POD)
        alerts: list[dict[str, Any]] = []

        def fired() -> bool:
            alerts[:] = _ask_prometheus(story, {"alerts": "alerts"})["alerts"].get("data", {}).get("alerts", [])
            return any(a["labels"]["alertname"] == "PodpinPodsRejected" and a["state"] == "firing" for a in alerts)

        wait_for(
            "PodpinPodsRejected to fire", fired, timeout=900, logs=[story.node.shared / "prometheus.log"], every=10
        )
        expressions = alert_expressions(rule)
        answers = _ask_prometheus(story, {name: _query(expr) for name, expr in expressions.items()})
        returned = {name: [item["metric"] for item in _results(answers[name])] for name in expressions}
        (story.workdir / "alerts.json").write_text(json.dumps({"alerts": alerts, "up": up}, indent=1))
        assert (
            {"__name__", "endpoint", "instance", "job", "node", "service"},
            {
                "PodpinPodsRejected": [{"node": NODE_NAME, "reason": "TopologyAffinityError"}],
                "PodpinPodsRunningUnpinned": [{"node": NODE_NAME}],
            },
            [
                ("PodpinPodsRejected", "firing", NODE_NAME, "TopologyAffinityError"),
                ("PodpinPodsRunningUnpinned", "pending", NODE_NAME, None),
            ],
        ) == (
            set(up[0]["metric"]),
            {name: found for name, found in returned.items() if found},
            sorted(
                (a["labels"]["alertname"], a["state"], a["labels"]["node"], a["labels"].get("reason")) for a in alerts
            ),
        ), answers
    finally:
        story.node.stop_process("prometheus")


def test_helm_uninstall_resets_the_node(story: Story) -> None:
    """`helm uninstall`: the pre-delete hook resets the node before the agents go; the QoS levels' effective
    cpusets and quotas are what they were before podpin ever ran."""
    story.helm("uninstall", "podpin", "--namespace", NAMESPACE, "--wait", "--timeout", "20m")
    assert story.baseline == qos_files(story.node)
