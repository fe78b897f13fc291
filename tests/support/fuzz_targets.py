"""Fuzz targets: every parser of untrusted input, its Hypothesis strategy and the only errors it may raise.

One :class:`Target` per parser of ``docs/design.md``, "Parsers and their errors". Each has a strategy that mixes
well-formed input with small mutations and plain junk, the call that parses it the way the agent does (a manifest
goes on into the pod cache, a checkpoint on into the planner), the documented error types, the crashes fuzzing
found (kept as explicit examples, run every time), and the worst inputs for the memory check.

:func:`check` runs one input with a real per-example deadline (``SIGALRM``: a parser that loops forever is
interrupted and reported, which Hypothesis' own deadline, measured after the call returns, cannot do).
``tests/unit/test_fuzz.py`` runs a few seconds of every target in the suite; ``scripts/fuzz.py --examples N``
runs N in all and prints the count and time per target as JSON.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import errno
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import FrameType
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent.alloc import CheckpointError, Planner, state_to_checkpoint
from agent.cgroups.errors import CgroupError
from agent.cgroups.fs import CgroupFS
from agent.cgroups.layout import CgroupLayout, ContainerID, detect_layout
from agent.config import CONFIG_KEYS, ConfigError, config_from_mapping, load_config
from agent.cpuset import CPUSet, CPUSetError
from agent.httpserve import parse_request_head
from agent.kube.source import PodEvent
from agent.kubelet_state import parse_kubelet_cpu_policy
from agent.pods.errors import PodSpecError
from agent.pods.manifests import ManifestError, parse_manifest
from agent.pods.model import pod_from_dict
from agent.quantity import QuantityError, cpu_millis, is_integral_cpu, memory_bytes, parse_quantity
from agent.reconcile.pods import PodCache
from agent.runtime import BundleReader
from agent.state_store import CHECKPOINT_NAME, StateStore
from agent.topology.model import TopologyError
from agent.topology.sysfs import read_topology
from agent.vocabulary import Runtime
from tests.support.bundles import bundle_path, containerd_annotations
from tests.support.cgroupfs_builder import build_tree
from tests.support.podfactory import container, make_pod, resources, sidecar
from tests.support.sysfs_builder import MACHINES, write_sysfs

__all__ = ["DOCUMENTED_ERRORS", "TARGETS", "HangError", "Target", "check", "fuzz", "target_named"]

#: Seconds one input may take before it counts as a hang.
HANG_SECONDS = 10.0
#: How many times longer under a tracer: ``scripts/test`` measures branch coverage, which traces every line (the
#: worst inputs took 7-9 s untraced and up to 23 s traced on a 2-core host at load average 20).
TRACED_SLOWDOWN = 4.0


def hang_seconds() -> float:
    """:data:`HANG_SECONDS`, times :data:`TRACED_SLOWDOWN` while a tracer (coverage, a debugger) runs."""
    return HANG_SECONDS * (TRACED_SLOWDOWN if sys.gettrace() is not None else 1.0)


class HangError(AssertionError):
    """A parser ran longer than :data:`HANG_SECONDS` on one input."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One parser under fuzzing.

    Attributes:
        name: the parser, as reported by ``scripts/fuzz.py``.
        run: parses one input the way the agent does.
        strategy: the inputs.
        errors: the only exception types ``run`` may raise (documented in ``docs/design.md``).
        examples: inputs that once crashed it (or nearly), run before the random ones.
        worst: the worst inputs for memory (traced peak below ``memory_bound``).
        memory_bound: bytes.
    """

    name: str
    run: Callable[[Any], object]
    strategy: st.SearchStrategy[Any]
    errors: tuple[type[BaseException], ...]
    examples: tuple[Any, ...] = ()
    worst: tuple[Any, ...] = ()
    memory_bound: int = 64 << 20


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (main thread only; elsewhere the block runs unguarded)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(_signum: int, _frame: FrameType | None) -> None:
        raise HangError(f"one input took more than {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check(target: Target, value: Any) -> None:
    """Parse ``value``; a documented error is fine, anything else (or a hang) propagates to the caller."""
    with _deadline(hang_seconds()), contextlib.suppress(*target.errors):
        target.run(value)


# -- scratch space ---------------------------------------------------------------------------------
@cache
def _scratch() -> Path:
    path = Path(tempfile.mkdtemp(prefix="podpin-fuzz-"))
    atexit.register(shutil.rmtree, path, True)
    return path


# -- generic junk ----------------------------------------------------------------------------------
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["", "0", "-1", "1e3", "0x10", "9" * 70, "[" * 20, "&a", "*a", "\x00", "\udcff"[:0] + "é"])
)
_junk = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _mostly(valid: st.SearchStrategy[Any], junk: st.SearchStrategy[Any] = _junk) -> st.SearchStrategy[Any]:
    """``valid`` four times in five, ``junk`` otherwise, so most examples reach the deeper fields."""
    return st.integers(0, 4).flatmap(lambda roll: junk if roll == 0 else valid)


def _mutate(document: Any, draw: st.DrawFn) -> Any:
    """A deep copy of a JSON-like ``document`` with one value replaced by junk or removed."""
    result = copy.deepcopy(document)
    paths: list[tuple[Any, Any]] = []
    stack: list[Any] = [result]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            paths.append((node, key))
            stack.append(child)
    if not paths:
        return draw(_junk)
    parent, key = draw(st.sampled_from(paths))
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[key]
    else:
        parent[key] = draw(_junk)
    return result


# -- cpulist ---------------------------------------------------------------------------------------
_cpulist_text = st.one_of(
    st.text(alphabet="0123456789-, \n\t", max_size=40),
    st.lists(
        st.tuples(st.integers(0, 10**5), st.integers(0, 10**5)).map(lambda r: f"{min(r)}-{max(r)}")
        | st.integers(0, 9000).map(str),
        max_size=8,
    ).map(",".join),
    st.text(max_size=20),
    st.integers(0, 10**6).map(lambda n: "9" * (n % 6000)),
)


def _cpulist(text: Any) -> object:
    cpus = CPUSet.parse(text)
    return str(cpus), len(cpus)


# -- quantities ------------------------------------------------------------------------------------
_quantity_input = st.one_of(
    st.text(alphabet="0123456789.+-eEkKMGTPinum ", max_size=80),
    st.from_regex(r"\A[+-]?[0-9]{0,70}(\.[0-9]{0,70})?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,12})?\Z"),
    st.integers(-(10**70), 10**70),
    st.integers(),
    st.floats(),
    _junk,
)


def _quantity(value: Any) -> object:
    quantity = parse_quantity(value)
    results: list[object] = [quantity.milli(), quantity.ceil(), is_integral_cpu(value)]
    if quantity.value >= 0:
        results += [cpu_millis(value), memory_bytes(value)]
    return results


# -- pods ------------------------------------------------------------------------------------------
_hostile_quantity = st.sampled_from(["1", "100m", "1Gi", "1e3", "9" * 64, "9" * 65, "9" * 4401, "1e100", "1e101", ""])
_quantity_value = _mostly(_hostile_quantity | st.integers(-(10**70), 10**70) | st.floats())
_resource_list = _mostly(
    st.dictionaries(
        st.sampled_from(["cpu", "memory", "hugepages-2Mi", "example.com/gpu", ""]), _quantity_value, max_size=3
    )
)


@cache
def _base_pods() -> tuple[dict[str, Any], ...]:
    return (
        make_pod("classic", containers=[container("app", cpu="2", memory="1Gi")], states={"app": "running"}),
        make_pod(
            "db",
            containers=[container("db", cpu="4", memory="1Gi"), container("proxy", cpu="100m", memory="64Mi")],
            init_containers=[sidecar("mesh", cpu="100m", memory="32Mi")],
            pod_resources=resources(cpu="5", memory="2Gi"),
            states={"db": "running", "proxy": "waiting", "mesh": "running"},
        ),
    )


@st.composite
def _pod(draw: st.DrawFn) -> Any:
    base = draw(st.sampled_from(_base_pods()))
    pod = copy.deepcopy(base)
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return _mutate(pod, draw)
    if choice == 1:
        spec = pod["spec"]
        target = draw(st.sampled_from([*spec["containers"], spec]))
        target["resources"] = {"requests": draw(_resource_list), "limits": draw(_resource_list)}
        return pod
    if choice == 2:
        return _mutate(_mutate(pod, draw), draw)
    return draw(_junk)


def _pod_dict(raw: Any) -> object:
    return pod_from_dict(raw)


# -- manifests (YAML and JSON files into the pod cache) ----------------------------------------------
_YAML_BITS = st.sampled_from(
    ["&a ", "*a", "<<: *a\n", "[", "]", "{", "}", ": ", "- ", "\n", "  ", "0x" + "f" * 80, "1:2:3:4", "!!set ", "---\n"]
)


@st.composite
def _manifest(draw: st.DrawFn) -> tuple[str, bytes]:
    json_file = draw(st.booleans())
    choice = draw(st.integers(0, 3))
    if choice == 0:
        data = draw(st.binary(max_size=300))
    elif choice == 1:
        pod = draw(_pod())
        data = (json.dumps(pod, default=str) if json_file else yaml.safe_dump(pod)).encode(errors="surrogatepass")
    else:
        text = yaml.safe_dump(draw(st.sampled_from(_base_pods())))
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(_YAML_BITS) + text[at:]
        data = text.encode()
    return ("pod.json" if json_file else "pod.yaml"), data


def _manifest_into_cache(value: tuple[str, bytes]) -> object:
    name, data = value
    pods = parse_manifest(name, data)
    cache_ = PodCache()
    cache_.apply(PodEvent("SYNC", pods))
    return cache_.views()


# -- configuration ---------------------------------------------------------------------------------
_KEYS = tuple(entry.key for entry in CONFIG_KEYS)
_config_value = _mostly(
    st.sampled_from(
        [
            "static",
            "none",
            "best-effort",
            "pod",
            "10s",
            "0",
            "0-3",
            {"cpu": "1"},
            {"memory.available": "100Mi"},
            [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
            "127.0.0.1:0",
            True,
            {"full-pcpus-only": "true"},
            {"max-allowable-numa-nodes": "16"},
        ]
    )
)
_config_mapping = st.dictionaries(
    st.sampled_from(_KEYS) | st.sampled_from([1, None, True, 1.5, "unknown", ""]), _config_value, max_size=6
).map(lambda m: {"systemReserved": {"cpu": "1"}, **m})


def _config(mapping: Any) -> object:
    return config_from_mapping(mapping, env={})


@st.composite
def _config_text(draw: st.DrawFn) -> bytes:
    choice = draw(st.integers(0, 2))
    if choice == 0:
        return draw(st.binary(max_size=200))
    text = yaml.safe_dump(draw(_config_mapping))
    if choice == 2:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(_YAML_BITS) + text[at:]
    return text.encode()


def _config_file(data: bytes) -> object:
    path = _scratch() / "config.yaml"
    path.write_bytes(data)
    return load_config(path, env={})


# -- checkpoints -----------------------------------------------------------------------------------
_PLANNER_CONFIGS: tuple[dict[str, Any], ...] = (
    {"reservedSystemCPUs": "0"},
    {
        "systemReserved": {"cpu": "1", "memory": "924Mi"},
        "memoryManagerPolicy": "Static",
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
        "topologyManagerPolicy": "single-numa-node",
    },
)


@cache
def _planner_parts(variant: int) -> tuple[Any, Any, dict[str, Any]]:
    """Topology, planner configuration and a checkpoint document of a few admitted pods (plain, or Static memory)."""
    from tests.support.machines import machine

    topology = machine(threads=2, hugepages_2m=16)
    config = config_from_mapping(_PLANNER_CONFIGS[variant], env={}).planner
    planner = Planner(topology, config)
    for raw in _base_pods():
        planner.admit(pod_from_dict(raw))
    return topology, config, state_to_checkpoint(planner.snapshot())


def _rechecksum(document: Any) -> Any:
    if isinstance(document, dict) and "data" in document:
        canonical = json.dumps(document["data"], sort_keys=True, separators=(",", ":"), default=str)
        document["checksum"] = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    return document


@st.composite
def _checkpoint(draw: st.DrawFn) -> tuple[int, bytes]:
    """(the configuration the agent restarts with, the checkpoint bytes it finds)."""
    variant = draw(st.sampled_from(range(len(_PLANNER_CONFIGS))))
    written = draw(st.sampled_from(range(len(_PLANNER_CONFIGS))))  # another one: the configuration changed
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return variant, draw(st.binary(max_size=200))
    if choice == 1:
        return variant, draw(st.sampled_from([b"[", b"{", b'{"a":']).map(lambda s: s * 30_000))
    document = _planner_parts(written)[2]
    if choice >= 3:
        document = _rechecksum(_mutate(document, draw))  # reach the checks behind the checksum
    elif choice == 2:
        document = _mutate(document, draw)
    return variant, json.dumps(document, default=str).encode(errors="surrogatepass")


def _checkpoint_file(value: tuple[int, bytes]) -> object:
    variant, data = value
    directory = _scratch() / "state"
    directory.mkdir(exist_ok=True)
    (directory / CHECKPOINT_NAME).write_bytes(data)
    state = StateStore(directory).load()
    if state is None:
        return None
    topology, config, _ = _planner_parts(variant)
    return Planner(topology, config, state)


# -- the kubelet's cpu_manager_state ---------------------------------------------------------------
_kubelet_documents = st.sampled_from(
    [
        {"policyName": "none", "defaultCpuSet": "", "checksum": 1},
        {"policyName": "static", "defaultCpuSet": "0-3", "entries": {}, "checksum": 2},
        {"data": json.dumps({"policyName": "static"}), "checksum": 3},
    ]
)


@st.composite
def _kubelet_state(draw: st.DrawFn) -> str:
    choice = draw(st.integers(0, 2))
    if choice == 0:
        return draw(st.text(max_size=100))
    if choice == 1:
        return draw(st.sampled_from(["[", "{", '{"data": "']).map(lambda s: s * 30_000))
    return json.dumps(_mutate(draw(_kubelet_documents), draw), default=str)


# -- OCI bundles -----------------------------------------------------------------------------------
_BUNDLE_ID = "a" * 64


@cache
def _bundle_root() -> Path:
    return _scratch()


@st.composite
def _bundle(draw: st.DrawFn) -> bytes:
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(st.binary(max_size=200))
    if choice == 1:
        return draw(st.sampled_from([b"[", b'{"a":', b'{"annotations":{"x":']).map(lambda s: s * 30_000))
    spec = {"ociVersion": "1.2.0", "annotations": containerd_annotations("0c9e8a54-uid", "app")}
    return json.dumps(_mutate(spec, draw), default=str).encode()


def _bundle_file(data: bytes) -> object:
    """Issue 22: a bundle nested 100,000 deep once escaped as RecursionError; every outcome is a value now."""
    path = bundle_path(_bundle_root(), _BUNDLE_ID)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return BundleReader(_bundle_root()).read(_BUNDLE_ID, Runtime.CONTAINERD)


# -- sysfs -----------------------------------------------------------------------------------------
@cache
def _sysfs() -> tuple[Path, tuple[str, ...]]:
    root = write_sysfs(_scratch() / "sys", MACHINES["example-2s"]())
    files = tuple(
        sorted(
            str(path.relative_to(root))
            for path in root.rglob("*")
            if path.is_file() and not path.is_symlink() and "pci" not in str(path)
        )
    )
    return root, files


@st.composite
def _sysfs_change(draw: st.DrawFn) -> tuple[str, str, bytes]:
    _root, files = _sysfs()
    name = draw(st.sampled_from(files))
    action = draw(st.sampled_from(["write", "write", "write", "remove", "directory"]))
    content = draw(
        st.one_of(
            st.binary(max_size=60),
            st.text(alphabet="0123456789-,\n x", max_size=40).map(str.encode),
            st.sampled_from([b"9" * 5000, b"\xff\xfe", b"", b"-1\n", b"MemTotal: " + b"9" * 5000 + b" kB\n"]),
        )
    )
    return name, action, content


def _sysfs_tree(change: tuple[str, str, bytes]) -> object:
    root, _files = _sysfs()
    name, action, content = change
    path = root / name
    original = path.read_bytes()
    try:
        if action == "write":
            path.write_bytes(content)
        else:
            path.unlink()
            if action == "directory":
                path.mkdir()
        return read_topology(root)
    finally:
        if path.is_dir():
            path.rmdir()
        path.write_bytes(original)


# -- cgroup files ----------------------------------------------------------------------------------
_CGROUP_FILES = (
    "cpuset.cpus",
    "cpuset.cpus.effective",
    "cpuset.mems",
    "cpuset.mems.effective",
    "cpu.max",
    "cpu.stat",
    "cgroup.subtree_control",
)


class _MemoryFiles:
    """A ``FileOps`` serving file contents from a dict (an OSError for a file not there)."""

    def __init__(self, contents: Mapping[Path, str]) -> None:
        self.contents = contents

    def read(self, path: Path) -> str:
        if path not in self.contents:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
        return self.contents[path]

    def write(self, path: Path, text: str) -> None:  # noqa: ARG002 (the FileOps signature; readers never write)
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))


@cache
def _cgroup_tree() -> tuple[Path, CgroupLayout]:
    base = _scratch() / "cgroupfs"
    base.mkdir()
    tree = build_tree(base, driver="systemd", cpus="0-7", mems="0")
    return tree.root, detect_layout(tree.root, "systemd")


_cgroup_content = st.one_of(
    st.text(alphabet="0123456789-, \nmax_usecnr", max_size=60),
    st.text(max_size=30),
    st.sampled_from(
        ["max 100000", "max", "50000 100000", "1 1", "9" * 5000, "usage_usec 1\nnr_periods 2", "usage_usec ²", ""]
    ),
)


@st.composite
def _cgroup_files(draw: st.DrawFn) -> tuple[str, dict[str, str], str]:
    reader = draw(st.sampled_from(["cpuset", "cpu.max", "cpu.stat", "subtree", "values", "effective", "name", "id"]))
    contents = draw(st.dictionaries(st.sampled_from(_CGROUP_FILES), _cgroup_content, max_size=len(_CGROUP_FILES)))
    prefix = draw(
        st.sampled_from(["", "cri-containerd-", "crio-", "docker-", "containerd://", "cri-o://", "docker://"])
    )
    tail = draw(st.text(max_size=80) | st.text(alphabet="0123456789abcdefABCDEF./", min_size=60, max_size=66))
    name = prefix + tail + draw(st.sampled_from(["", "", ".scope"]))
    return reader, contents, name


def _cgroup_reader(value: tuple[str, dict[str, str], str]) -> object:
    reader, contents, name = value
    root, layout = _cgroup_tree()
    cgroup = root / "kubepods.slice"
    fs = CgroupFS(root, _MemoryFiles({cgroup / file: text for file, text in contents.items()}))
    readers: dict[str, Callable[[], object]] = {
        "cpuset": lambda: fs.read_cpuset(cgroup, "cpuset.cpus"),
        "cpu.max": lambda: fs.read_cpu_max(cgroup),
        "cpu.stat": lambda: fs.read_cpu_stat(cgroup),
        "subtree": lambda: fs.read_subtree_control(cgroup),
        "values": lambda: fs.read_values(cgroup),
        "effective": lambda: fs.read_effective(cgroup),
        "name": lambda: layout.parse_container_dir(name),
        "id": lambda: ContainerID.parse(name),
    }
    return readers[reader]()


# -- HTTP request heads ----------------------------------------------------------------------------
_request_head = st.one_of(
    st.binary(max_size=300),
    st.tuples(
        st.sampled_from(["GET", "HEAD", "POST", "", "G\x00T"]),
        st.text(max_size=40),
        st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2", ""]),
        st.lists(st.tuples(st.text(max_size=10), st.text(max_size=20)), max_size=4),
    ).map(
        lambda t: (f"{t[0]} {t[1]} {t[2]}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in t[3])).encode(
            "utf-8", "surrogatepass"
        )
    ),
)


# -- the table -------------------------------------------------------------------------------------
def _brackets(n: int) -> bytes:
    return b"[" * n


TARGETS: tuple[Target, ...] = (
    Target(
        name="cpulist",
        run=_cpulist,
        strategy=_cpulist_text,
        errors=(CPUSetError,),
        examples=("9" * 5000, "0-" + "9" * 5000, "0-8191", "٣", "1_0"),
        worst=(",".join(["0-8191"] * 10_000), "9" * (1 << 20)),
    ),
    Target(
        name="quantity",
        run=_quantity,
        strategy=_quantity_input,
        errors=(QuantityError,),
        examples=("9" * 4401, 10**5000, [10**5000], "1e-2147483648", "0." + "0" * 62 + "1", -(10**64)),
        worst=("9" * 64, "9" * (1 << 20), 10**20000, "9e100"),
    ),
    Target(
        name="pod",
        run=_pod_dict,
        strategy=_pod(),
        errors=(PodSpecError,),
        examples=(
            make_pod("digits", containers=[container("app", cpu="9" * 4401, memory="1Gi")]),
            make_pod("hugeint", containers=[{"name": "app", "resources": {"limits": {"cpu": 10**5000}}}]),
        ),
        worst=(make_pod("wide", containers=[container(f"c{i}", cpu="1", memory="1Gi") for i in range(500)]),),
    ),
    Target(
        name="manifest",
        run=_manifest_into_cache,
        strategy=_manifest(),
        errors=(ManifestError,),
        examples=(
            ("loop.yaml", b"kind: Pod\nmetadata: &m\n  name: loop\n  self: *m\n"),
            ("deep.json", _brackets(100_000)),
            ("deep.yaml", b"kind: Pod\nx: " + _brackets(100_000)),
            ("hex.yaml", b"kind: Pod\nmetadata: {name: x}\nspec: {x: 0x" + b"f" * 5000 + b"}\n"),
        ),
        worst=(
            ("big.yaml", b"kind: List\nitems:\n" + b"- {kind: Pod, metadata: {name: p}}\n" * 29_000),
            ("deep.yaml", b"kind: Pod\nx: " + _brackets((1 << 20) - 20)),
            ("deep.json", _brackets(1 << 20)),
        ),
    ),
    Target(
        name="config-mapping",
        run=_config,
        strategy=_config_mapping,
        errors=(ConfigError,),
        examples=({1: "a", "zzz": "b"}, {"systemReserved": {1: 2}}, {"evictionHard": {1: "a", "b": "c"}}),
    ),
    Target(
        name="config-file",
        run=_config_file,
        strategy=_config_text(),
        errors=(ConfigError,),
        examples=(b"1: a\nzzz: b\n", b"nodeName: &a [1]\nx: *a\n", b"\xff", b"[" * 100_000),
        worst=(b"#" * (1 << 20), b"a: " + _brackets((1 << 20) - 4), b"x: [" + b"1," * 500_000 + b"1]\n"),
    ),
    Target(
        name="checkpoint",
        run=_checkpoint_file,
        strategy=_checkpoint(),
        errors=(CheckpointError,),
        examples=((0, _brackets(100_000)), (0, b'{"version": 1, "data": ' + _brackets(50) + b"}"), (1, b"9" * 5000)),
        worst=((0, _brackets(1 << 20)), (0, b"[" + b"1," * ((1 << 19) - 2) + b"1]")),
    ),
    Target(
        name="kubelet-state",
        run=parse_kubelet_cpu_policy,
        strategy=_kubelet_state(),
        errors=(),
        examples=("[" * 100_000, '{"data": "' + "[" * 100_000 + '"}', '{"policyName": 1}'),
        worst=("[" * (1 << 20),),
    ),
    Target(
        name="sysfs",
        run=_sysfs_tree,
        strategy=_sysfs_change(),
        errors=(TopologyError,),
        examples=(
            ("devices/system/cpu/online", "write", b"9" * 5000),
            ("devices/system/node/node0/meminfo", "write", b"Node 0 MemTotal: " + b"9" * 5000 + b" kB\n"),
            ("devices/system/cpu/cpu0/topology/core_id", "write", b"\xff"),
        ),
    ),
    Target(
        name="cgroup-files",
        run=_cgroup_reader,
        strategy=_cgroup_files(),
        errors=(CgroupError,),
        examples=(
            ("cpu.stat", {"cpu.stat": "usage_usec ²"}, ""),
            ("cpu.stat", {"cpu.stat": "usage_usec " + "9" * 5000}, ""),
            ("cpu.max", {"cpu.max": "9" * 5000 + " 100000"}, ""),
            ("cpuset", {"cpuset.cpus": "9" * 5000}, ""),
        ),
    ),
    Target(
        name="bundle",
        run=_bundle_file,
        strategy=_bundle(),
        errors=(),
        examples=(b'{"a":' + _brackets(100_000) + b"}", b"[" * 100_000, b"\xff\xfe", b""),
        worst=(b'{"a":' + _brackets((1 << 20) - 10) + b"}",),
    ),
    Target(
        name="http-request",
        run=parse_request_head,
        strategy=_request_head,
        errors=(),
        examples=(b"", b"\xff\xfe GET / HTTP/1.1", b"GET " + b"/" * 8000 + b" HTTP/1.1"),
    ),
)


def target_named(name: str) -> Target:
    """The target called ``name``."""
    return next(t for t in TARGETS if t.name == name)


def fuzz(target: Target, examples: int) -> int:
    """Run ``target`` on its explicit examples and ``examples`` generated inputs; returns how many ran.

    Raises:
        Whatever escaped the parser on the smallest input Hypothesis could find (it prints that input).
    """
    count = 0

    @settings(
        max_examples=max(1, examples),
        deadline=None,  # the real one is check()'s alarm: Hypothesis measures only after the call returns
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(target.strategy)
    def run(value: Any) -> None:
        nonlocal count
        count += 1
        check(target, value)

    for value in target.examples:
        run = example(value)(run)
    run()
    return count


#: Every documented error type, for the docs check.
DOCUMENTED_ERRORS: Mapping[str, tuple[str, ...]] = {t.name: tuple(e.__name__ for e in t.errors) for t in TARGETS}
