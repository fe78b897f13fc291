"""Hostile manifests and configuration files against ``podpin run``: one bad file never stops the node's agent.

Each reported case of issue "hold under attack" item 3, reproduced on the code before the bounded loaders
(``docs/design.md``, "Parsers and their errors"): a recursive alias ended in ``ValueError: Circular reference``
(the pod cache hashes each pod's JSON), a 4,401-digit quantity in Python's int-digits ``ValueError``, a 1 KB
billion-laughs file in 2.9 GB and a ``MemoryError`` — each a crash loop for the whole node. Now the file is
reported (log line, ``podpin_source_errors_total``), the pod it describes is not admitted, and every other pod
is pinned as usual. A bad configuration stays an agent-level error, but a one-line one (exit 2), never a
traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.support.agentfixture import AgentNode, lines, make_node, sample
from tests.support.podfactory import container, make_pod


def gu(name: str, cpus: str = "2", *, ts: int = 1) -> dict[str, Any]:
    """A Guaranteed pod with one running container ``app``."""
    return make_pod(
        name,
        containers=[container("app", cpu=cpus, memory="1Gi")],
        states={"app": "running"},
        creation_timestamp=f"2026-01-01T00:00:{ts:02d}Z",
    )


def _laughs() -> bytes:
    lines_ = ["kind: Pod", "metadata: {name: lol, namespace: default}", "spec:", "  containers:", "  - name: app"]
    lines_.append('    args: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]')
    lines_ += [f"    env{n}: &a{n} [{','.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 9)]
    return ("\n".join(lines_) + "\n").encode()


BAD_MANIFESTS = {
    "recursive-alias": b"kind: Pod\nmetadata: &m\n  name: loop\n  self: *m\nspec: {containers: []}\n",
    "billion-laughs": _laughs(),
    "4401-digit-int": (
        b"kind: Pod\nmetadata: {name: digits}\nspec: {containers: [{name: app, resources: {limits: {cpu: "
        + b"9" * 4401
        + b"}}}]}\n"
    ),
    "deep-nesting": b"kind: Pod\nmetadata: {name: deep}\nspec: " + b"[" * 200_000,
    "over-1MiB": b"kind: Pod\nmetadata: {name: big}\n" + b"#" * (1 << 20),
    "hex-int": b"kind: Pod\nmetadata: {name: hex}\nspec: {priority: 0x" + b"f" * 20_000 + b"}\n",
}


@pytest.fixture
def node(tmp_path: Path) -> AgentNode:
    return make_node(tmp_path)


@pytest.mark.parametrize("case", sorted(BAD_MANIFESTS))
def test_bad_manifest_is_reported_and_the_others_are_pinned(node: AgentNode, case: str) -> None:
    """The bad file is one source.manifest_error; ``--once`` exits 0 and the good pod holds its CPUs."""
    good = gu("good")
    node.add_pod(good)
    bad = node.pods_dir / f"{case}.yaml"
    bad.write_bytes(BAD_MANIFESTS[case])
    with capture_logs() as logs:
        agent = node.run_once()
    errors = [e["file"] for e in lines(logs, "source.manifest_error")]
    assert ([str(bad)], 1.0, "1,17", ["good"]) == (
        errors,
        sample(agent, "podpin_source_errors_total"),
        node.cpus(good, "app"),
        [e["pod"] for e in lines(logs, "pod.admitted")],
    )


def test_quoted_4401_digit_quantity_is_that_pods_error(node: AgentNode) -> None:
    """A 4,401-digit quantity string makes that pod malformed (reported, not admitted); the others are pinned."""
    good = gu("good")
    node.add_pod(good)
    digits = gu("digits", ts=2)
    digits["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "9" * 4401
    node.write_manifest(digits)
    with capture_logs() as logs:
        agent = node.run_once()
    malformed = lines(logs, "pod.malformed")
    assert ([("digits", "spec.containers[0].resources.limits.cpu")], 1.0, "1,17") == (
        [(e["pod"], e["field"]) for e in malformed],
        sample(agent, "podpin_malformed_pods_total", reason="spec"),
        node.cpus(good, "app"),
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
            + b"".join(f"l{n}: &l{n} [{','.join([f'*l{n - 1}'] * 9)}]\n".encode() for n in range(1, 8))
            + b"nodeName: *l7\n",
            "not valid YAML: line 5, column 30: more than 50000 values in one file once its aliases are expanded (*l3)",
        ),
        (b"1: a\nzzz: b\n", "unknown configuration key 'zzz' (known keys: "),
    ],
    ids=["alias-bomb", "mixed-type-unknown-keys"],
)
def test_bad_configuration_is_one_line_and_exit_2(node: AgentNode, content: bytes, message: str) -> None:
    """``podpin run`` with a hostile configuration exits 2 with one line naming the file, no traceback."""
    node.config_path.write_bytes(content)
    result = node.cli("--once", timeout=60)
    assert (2, [f"podpin run: configuration: {node.config_path}: {message}"], False) == (
        result.returncode,
        [
            line[: len(f"podpin run: configuration: {node.config_path}: {message}")]
            for line in result.stderr.splitlines()
        ],
        "Traceback" in result.stderr,
    )
