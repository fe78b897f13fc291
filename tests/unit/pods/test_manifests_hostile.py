"""Hostile manifest files: each is one ManifestError naming the file, whatever the parser underneath would do.

The reported cases of ``docs/design.md``, "Parsers and their errors": before the bounded loaders, a recursive
alias parsed into a cyclic pod dict, a 1 KB alias bomb into 9**9 shared strings, and both blew up later in the
agent (``ValueError: Circular reference``, ``MemoryError``).
"""

from __future__ import annotations

import pytest

from agent.pods.errors import PodSpecError
from agent.pods.manifests import MAX_MANIFEST_BYTES, ManifestError, parse_manifest
from agent.pods.model import pod_from_dict


def _laughs() -> bytes:
    lines = ["kind: Pod", "metadata: {name: lol}", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{n}: &a{n} [{','.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 9)]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize(
    ("name", "data", "problem"),
    [
        (
            "loop.yaml",
            b"kind: Pod\nmetadata: &m\n  name: loop\n  self: *m\n",
            "cannot parse: line 4, column 9: the alias *m is inside the value it names (a cycle)",
        ),
        (
            "laughs.yaml",
            _laughs(),
            "cannot parse: line 7, column 30: more than 50000 values in one file once its aliases are expanded (*a3)",
        ),
        (
            "digits.yaml",
            b"kind: Pod\nmetadata: {name: d}\nspec: {containers: [{name: c, resources: {limits: {cpu: "
            + b"9" * 4401
            + b"}}}]}\n",
            "cannot parse: line 3, column 57: a number of 4401 characters (at most 64); quote it if it is text",
        ),
        ("deep.json", b"[" * 100_000, "cannot parse: nested deeper than 64 levels"),
        ("deep.yaml", b"kind: Pod\nx: " + b"[" * 100, "cannot parse: line 2, column 67: nested deeper than 64 levels"),
        (
            "deeper.yaml",
            b"kind: Pod\nx: " + b"[" * 5000,
            "cannot parse: line 2, column 1003: exceeded maximum nesting depth (while increasing flow level)",
        ),
        ("big.yaml", b"#" * (MAX_MANIFEST_BYTES + 1), "larger than 1048576 bytes; not read"),
        ("kind-list.yaml", b"kind: [null]\nmetadata: {name: k}\n", "document 1: kind is a list, not a string"),
        (
            "item-kind.yaml",
            b"kind: List\nitems: [{kind: {a: 1}, metadata: {name: k}}]\n",
            "document 1: items[0]: kind is a dict, not a string",
        ),
    ],
    ids=[
        "recursive-alias",
        "billion-laughs",
        "4401-digit-int",
        "deep-json",
        "deep-yaml",
        "deeper-yaml",
        "over-1MiB",
        "kind-not-text",
        "item-kind-not-text",
    ],
)
def test_hostile_file_is_one_manifest_error(name: str, data: bytes, problem: str) -> None:
    """The file is refused as a whole with the problem and its place; nothing is built from it."""
    with pytest.raises(ManifestError) as caught:
        parse_manifest(name, data)
    assert (name, problem) == (caught.value.path, caught.value.problem)


def test_quoted_4401_digit_quantity_is_the_pods_error() -> None:
    """A quantity string of 4,401 digits parses as YAML and is then the pod's own clean PodSpecError.

    Failed before the fix: Python's int-digits ValueError escaped from the pod model.
    """
    data = (
        b"kind: Pod\nmetadata: {name: d, uid: u1}\nspec: {containers: [{name: c, resources: {limits: {cpu: '"
        + b"9" * 4401
        + b"'}}}]}\n"
    )
    (pod,) = parse_manifest("digits.yaml", data)
    with pytest.raises(PodSpecError) as caught:
        pod_from_dict(pod)
    quoted = "'" + "9" * 29 + "..." + "9" * 30 + "'"
    message = f"spec.containers[0].resources.limits.cpu: invalid quantity {quoted}: longer than 64 characters"
    assert ("spec.containers[0].resources.limits.cpu", message) == (caught.value.field, str(caught.value))
