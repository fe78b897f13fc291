"""Least privilege on the real API server: podpin's ServiceAccount may patch only its condition, only on its node.

RBAC can grant ``pods/status`` patch only for every pod of the cluster; the chart's ValidatingAdmissionPolicy
(``deploy/helm/podpin/templates/pod-status-policy.yaml``) narrows it with the node name a pod-bound token carries
(``authentication.kubernetes.io/node-name`` in the user's extra). The objects applied are the plain manifests'
(``deploy/daemonset.yaml``: the namespace, ServiceAccount, RBAC and the policy with its binding, no DaemonSet);
two Nodes without a kubelet, a pod of the agent's on ``node-a`` (the token is bound to it, as the kubelet's
projected token is) and a tenant's pod on each node, which stay Pending. Every denial is checked by its status
code and message, so a missing or too wide policy fails here (removing the binding turns the policy's denials into
200s). The policy compiles asynchronously: the fixture retries a dry-run of a known-denied patch until it is denied.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.kube.client import load_api
from agent.kube.conditions import CONDITION, condition_patch
from tests.cluster.api_call import STRATEGIC, Answer, call
from tests.cluster.controlplane import ControlPlane
from tests.cluster.procs import wait_for
from tests.support.paths import REPO

pytestmark = pytest.mark.cluster

MANIFEST = REPO / "deploy" / "daemonset.yaml"
APPLIED_KINDS = frozenset(
    {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)
NAMESPACE = "podpin-system"
ACCOUNT = "podpin"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
POLICY = f"{ACCOUNT}-{NAMESPACE}-pod-status"
TENANT = "default"
NODE_A, NODE_B = "node-a", "node-b"
AGENT_POD, POD_A, POD_B = "podpin-agent-a", "tenant-a", "tenant-b"
POD_LEAVING = "tenant-a-leaving"
"""A tenant's pod on node-a that a test deletes: with no kubelet to confirm, it stays, terminating."""
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"

OWN_NODE = "podpin's agent may change the status only of pods on its own node"
ONLY_CONDITION = "podpin's agent may change only the condition podpin.io/CPUsPinned"
NO_METADATA = "podpin's agent may not change a pod's metadata through its status"
POLICY_TIMEOUT = 120.0

KUBELET_STATUS: dict[str, Any] = {
    "phase": "Running",
    "hostIP": "10.0.0.15",
    "hostIPs": [{"ip": "10.0.0.15"}],
    "podIP": "10.244.0.7",
    "podIPs": [{"ip": "10.244.0.7"}],
    "startTime": "2026-01-01T00:00:00Z",
    "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        {"type": "Ready", "status": "False", "reason": "ReadinessGatesNotReady"},
    ],
}
"""What a kubelet would have written on the tenant's pod on node-a (written by the admin: there is no kubelet), so
the agent's patch meets other conditions and fields it must leave as they are."""


@dataclass(frozen=True, slots=True)
class World:
    """The control plane with podpin's objects applied, and the agent's two tokens."""

    plane: ControlPlane
    bound_token: str
    """Bound to the agent's pod on node-a: carries node-a's name, as the agent's projected token does."""
    plain_token: str
    """The same ServiceAccount's token bound to no object: no node name."""
    uids: dict[str, str]

    def pod_path(self, name: str, subresource: str = "") -> str:
        """The tenant pod's API path (with ``/status`` etc.)."""
        return f"/api/v1/namespaces/{TENANT}/pods/{name}" + (f"/{subresource}" if subresource else "")

    def pod(self, name: str) -> dict[str, Any]:
        """The tenant pod as the admin reads it."""
        answer = call(self.plane, "GET", self.pod_path(name))
        assert 200 == answer.status, str(answer)
        return answer.body

    def patch_status(self, name: str, patch: dict[str, Any], *, token: str | None, dry_run: bool = False) -> Answer:
        """A strategic merge patch of the tenant pod's status with `token` (the admin's certificate: None)."""
        path = self.pod_path(name, "status") + ("?dryRun=All" if dry_run else "")
        return call(self.plane, "PATCH", path, token=token, body=patch, content_type=STRATEGIC)


def _podpin_objects() -> list[dict[str, Any]]:
    """The plain manifests' objects this test needs (module docstring)."""
    documents = [doc for doc in yaml.safe_load_all(MANIFEST.read_text()) if isinstance(doc, dict)]
    return [doc for doc in documents if doc.get("kind") in APPLIED_KINDS]


def _pod(name: str, namespace: str, node: str, account: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeName": node,
        "serviceAccountName": account,
        "automountServiceAccountToken": False,
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
    }
    if namespace == TENANT:
        spec["readinessGates"] = [{"conditionType": CONDITION}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": spec,
    }


def _condition(uid: str, status: bool, reason: str, message: str = "main: CPUs 2-3") -> dict[str, Any]:
    """The agent's own patch (agent/kube/conditions.py) for the pod of `uid`."""
    return condition_patch(uid, status, reason, message, datetime.datetime.now(datetime.UTC))


def _review(plane: ControlPlane, token: str) -> dict[str, Any]:
    """The user the API server sees for `token` (SelfSubjectReview)."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answer = call(plane, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", token=token, body=body)
    assert 201 == answer.status, str(answer)
    info: dict[str, Any] = answer.body["status"]["userInfo"]
    return info


@pytest.fixture(scope="module")
def world(control_plane: ControlPlane) -> World:
    """podpin's objects, the Nodes and pods, the tokens; returns once the policy denies (module docstring)."""
    plane, admin = control_plane, control_plane.admin
    admin.run("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": _podpin_objects()}))
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}} for node in (NODE_A, NODE_B)]
    admin.run("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    wait_for(
        "the default ServiceAccount in namespace default",
        lambda: admin.run("get", "serviceaccount", "default", "-n", TENANT, check=False).returncode == 0,
        timeout=180,
        logs=plane.logs(),
    )
    uids: dict[str, str] = {}
    for pod in (
        _pod(AGENT_POD, NAMESPACE, NODE_A, ACCOUNT),
        _pod(POD_A, TENANT, NODE_A),
        _pod(POD_B, TENANT, NODE_B),
        _pod(POD_LEAVING, TENANT, NODE_A),
    ):
        created = json.loads(admin.run("create", "-o", "json", "-f", "-", stdin=json.dumps(pod)).stdout)
        uids[pod["metadata"]["name"]] = created["metadata"]["uid"]
    token = ("create", "token", ACCOUNT, "-n", NAMESPACE, "--duration=20m")
    bound = admin.run(
        *token, "--bound-object-kind=Pod", f"--bound-object-name={AGENT_POD}", f"--bound-object-uid={uids[AGENT_POD]}"
    )
    built = World(plane, bound.stdout.strip(), admin.run(*token).stdout.strip(), uids)
    seeded = built.patch_status(POD_A, {"status": KUBELET_STATUS}, token=None)
    assert 200 == seeded.status, str(seeded)

    def denied() -> bool:
        patch = _condition(uids[POD_B], True, "Pinned")
        answer = built.patch_status(POD_B, patch, token=built.bound_token, dry_run=True)
        return answer.status == 403 and OWN_NODE in answer.message

    wait_for("the ValidatingAdmissionPolicy to deny", denied, timeout=POLICY_TIMEOUT, logs=plane.logs(), every=0.5)
    return built


def _pinned(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in pod["status"].get("conditions", []) if c["type"] == CONDITION]


def test_the_bound_token_carries_its_node(world: World) -> None:
    """A token bound to the agent's pod names the pod's node in its extra; one bound to nothing does not."""
    bound, plain = _review(world.plane, world.bound_token), _review(world.plane, world.plain_token)
    assert (USER, USER) == (bound["username"], plain["username"])
    assert [NODE_A] == bound["extra"][NODE_NAME_KEY]
    assert [AGENT_POD] == bound["extra"]["authentication.kubernetes.io/pod-name"]
    assert NODE_NAME_KEY not in plain.get("extra", {})


def test_the_policy_type_checks(world: World) -> None:
    """The API server's type checking of the policy against the Pod schema finds nothing to warn about."""
    path = f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{POLICY}"

    def checked() -> bool:
        policy = call(world.plane, "GET", path).body
        return bool(policy.get("status", {}).get("observedGeneration") == policy["metadata"]["generation"])

    wait_for("the policy's type checking", checked, timeout=POLICY_TIMEOUT, logs=world.plane.logs())
    status = call(world.plane, "GET", path).body["status"]
    assert [] == status.get("typeChecking", {}).get("expressionWarnings", []), status


def test_the_agent_sets_its_condition_on_its_own_node(world: World, tmp_path: Path) -> None:
    """The agent's own client (in-cluster configuration, the bound token) patches the condition on node-a's pod;
    the condition is there after and every other condition and field is as the kubelet left it."""
    (tmp_path / "token").write_text(world.bound_token)
    (tmp_path / "ca.crt").write_bytes(world.plane.pki.ca.cert.read_bytes())
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(world.plane.api_port)}
    api = load_api(None, environ=environ, service_account_dir=tmp_path, home=tmp_path)
    before = world.pod(POD_A)
    patch = _condition(world.uids[POD_A], False, "TopologyAffinityError", "no NUMA node fits")
    api.patch_namespaced_pod_status(POD_A, TENANT, patch)
    after = world.pod(POD_A)
    assert [("False", "TopologyAffinityError", "no NUMA node fits")] == [
        (c["status"], c["reason"], c["message"]) for c in _pinned(after)
    ]
    others = {key: value for key, value in after["status"].items() if key != "conditions"}
    assert {key: value for key, value in before["status"].items() if key != "conditions"} == others
    assert [c for c in before["status"]["conditions"] if c["type"] != CONDITION] == [
        c for c in after["status"]["conditions"] if c["type"] != CONDITION
    ]
    assert before["metadata"]["labels"] == after["metadata"]["labels"]


def test_the_agent_sets_its_condition_on_a_terminating_pod(world: World) -> None:
    """A pod being deleted (its deletionTimestamp set by the API server, not by the patch) still takes the agent's
    condition: the metadata comparison leaves what the API server keeps alone."""
    world.plane.admin.run("delete", "pod", POD_LEAVING, "-n", TENANT, "--wait=false")
    assert "deletionTimestamp" in world.pod(POD_LEAVING)["metadata"]
    answer = world.patch_status(
        POD_LEAVING, _condition(world.uids[POD_LEAVING], True, "Pinned"), token=world.bound_token
    )
    assert 200 == answer.status, str(answer)
    assert [("True", "Pinned")] == [(c["status"], c["reason"]) for c in _pinned(answer.body)]


def test_another_nodes_pod_is_denied(world: World) -> None:
    """The same patch on node-b's pod: 403 from the policy, and the pod has no condition of podpin's."""
    patch = _condition(world.uids[POD_B], True, "Pinned")
    answer = world.patch_status(POD_B, patch, token=world.bound_token)
    assert (403, "Forbidden") == (answer.status, answer.body.get("reason")), str(answer)
    assert OWN_NODE in answer.message
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in answer.message
    assert [] == _pinned(world.pod(POD_B))


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        pytest.param({"status": {"phase": "Failed"}}, ONLY_CONDITION, id="phase"),
        pytest.param({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, ONLY_CONDITION, id="Ready"),
        pytest.param(
            {"status": {"conditions": [{"type": "example.com/Other", "status": "True"}]}},
            ONLY_CONDITION,
            id="a-new-condition",
        ),
        pytest.param(
            {"status": {"conditions": [{"$patch": "delete", "type": "Ready"}]}},
            ONLY_CONDITION,
            id="Ready-deleted",
        ),
        pytest.param(
            {"status": {"conditions": [{"type": CONDITION, "status": "True"}], "phase": "Succeeded"}},
            ONLY_CONDITION,
            id="condition-with-phase",
        ),
        pytest.param(
            {"status": {"podIP": "10.244.0.9", "podIPs": [{"$patch": "replace"}, {"ip": "10.244.0.9"}]}},
            ONLY_CONDITION,
            id="podIP",
        ),
        pytest.param({"status": {"hostIPs": [{"ip": "10.0.0.15"}, {"ip": "fd00::15"}]}}, ONLY_CONDITION, id="hostIPs"),
        pytest.param({"status": {"observedGeneration": 7}}, ONLY_CONDITION, id="observedGeneration"),
        pytest.param({"metadata": {"labels": {"app": "hijacked"}}}, NO_METADATA, id="labels"),
        pytest.param({"metadata": {"annotations": {"example.com/note": "x"}}}, NO_METADATA, id="annotations"),
        pytest.param({"metadata": {"finalizers": ["example.com/keep"]}}, NO_METADATA, id="finalizers"),
    ],
)
def test_other_status_changes_are_denied(world: World, patch: dict[str, Any], message: str) -> None:
    """Any change through ``pods/status`` of node-a's pod other than podpin's condition: 403 from the policy."""
    before = world.pod(POD_A)
    answer = world.patch_status(POD_A, patch, token=world.bound_token)
    assert (403, "Forbidden") == (answer.status, answer.body.get("reason")), str(answer)
    assert message in answer.message
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in answer.message
    assert before["metadata"]["resourceVersion"] == world.pod(POD_A)["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    ("method", "subresource", "body", "verb", "resource"),
    [
        pytest.param("DELETE", "", None, "delete", "pods", id="delete"),
        pytest.param("PATCH", "", {"metadata": {"labels": {"app": "x"}}}, "patch", "pods", id="patch-labels"),
        pytest.param("PATCH", "", {"spec": {"activeDeadlineSeconds": 1}}, "patch", "pods", id="patch-spec"),
        pytest.param("PUT", "status", "pod", "update", "pods/status", id="update-status"),
        pytest.param(
            "POST",
            "eviction",
            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": POD_A, "namespace": TENANT}},
            "create",
            "pods/eviction",
            id="evict",
        ),
    ],
)
def test_rbac_forbids_the_rest(
    world: World, method: str, subresource: str, body: Any, verb: str, resource: str
) -> None:
    """Deleting, evicting, patching a pod, or replacing its status: 403 from RBAC, naming the agent's user."""
    sent = world.pod(POD_A) if body == "pod" else body
    answer = call(
        world.plane,
        method,
        world.pod_path(POD_A, subresource),
        token=world.bound_token,
        body=sent,
        content_type=STRATEGIC if method == "PATCH" else "application/json",
    )
    assert 403 == answer.status, str(answer)
    assert f'User "{USER}" cannot {verb} resource "{resource}" in API group ""' in answer.message


def test_a_token_bound_to_no_pod_patches_no_status(world: World) -> None:
    """The ServiceAccount's token bound to nothing carries no node name: even node-a's pod is denied."""
    patch = _condition(world.uids[POD_A], True, "Pinned")
    answer = world.patch_status(POD_A, patch, token=world.plain_token)
    assert (403, "Forbidden") == (answer.status, answer.body.get("reason")), str(answer)
    assert OWN_NODE in answer.message


def test_other_users_are_not_matched(world: World) -> None:
    """The admin sets podpin's condition and the phase on node-b's pod: the policy matches podpin's user only."""
    patch = _condition(world.uids[POD_B], True, "Pinned")
    patch["status"]["phase"] = "Running"
    answer = world.patch_status(POD_B, patch, token=None)
    assert 200 == answer.status, str(answer)
    assert [("True", "Pinned")] == [(c["status"], c["reason"]) for c in _pinned(answer.body)]
    assert "Running" == answer.body["status"]["phase"]
