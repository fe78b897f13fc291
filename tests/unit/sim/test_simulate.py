"""``podpin simulate``: the seed-mesh numbers, reports, workload files, scheduler, metrics and determinism.

The presets run on the built-in example machine; the metric definitions are
checked on an 8-CPU machine small enough to count by hand (2 NUMA nodes of 4
CPUs, CPU 0 reserved, so NUMA node 0 has 3 allocatable CPUs and node 1 has 4).
Preset runs are shared per module so the whole file stays within seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from agent.config import AgentConfig, config_from_mapping
from agent.pods.model import pod_from_dict
from agent.sim.codec import WorkloadError, load_workload, workload_from_dict, workload_to_dict
from agent.sim.derive import pod_budget, pod_manifest
from agent.sim.engine import Simulation, simulate
from agent.sim.machines import example_machine, synthetic_machine
from agent.sim.measure import stranded_threshold
from agent.sim.presets import PRESETS, preset
from agent.sim.report import simulation_to_dict
from agent.sim.scheduler import MAX_PODS, SCHEDULERS, Requests, Scheduler, pod_requests
from agent.sim.workload import Workload, arrivals
from agent.topology import Topology
from agent.topology.codec import topology_to_dict
from tests.support.paths import REPO


def _simulate(topology: Topology, config: AgentConfig, workload: Workload, **options: Any) -> Simulation:
    """simulate() with the planner's settings and the memory reservations of one agent configuration."""
    return simulate(topology, config.planner, workload, allocatable=config.node_allocatable, **options)


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TINY = synthetic_machine(sockets=1, numa_per_socket=2, cores_per_numa=4, threads=1)
MODEL_KEYS = {"pods_admitted", "numa_aligned", "exclusive_cpus", "total_cpus", "free_cpus", "stranded_cpus"}

#: (id, workload file text, expected problem after "<file>: "; None = a YAML syntax error)
MALFORMED: tuple[tuple[str, str, str | None], ...] = (
    ("not-a-mapping", "- 1\n", "expected a mapping, got [1]"),
    ("no-name", "pods: []\n", "name: is required"),
    ("unknown-key", "name: w\npod: []\n", "pod: unknown key (known keys: name, description, seed, order, nodes, pods)"),
    ("no-pods", "name: w\n", "pods: expected a non-empty list of pod templates, got None"),
    ("bad-order", "name: w\norder: random\npods: [{}]\n", "order: 'random' is not one of shuffle, sequential"),
    (
        "zero-count",
        "name: w\npods: [{name: a, count: 0, containers: []}]\n",
        "pods[0].count: expected an integer >= 1, got 0",
    ),
    (
        "fractional-main",
        "name: w\npods: [{name: a, count: 1, containers: [{name: m, role: main, cpu: 1.5, memory: 1Gi}]}]\n",
        "pods[0].containers[0].cpu: '1.5' is not a whole number of CPUs (a main gets exclusive CPUs)",
    ),
    (
        "bad-quantity",
        "name: w\npods: [{name: a, count: 1, containers: [{name: m, role: main, cpu: lots, memory: 1Gi}]}]\n",
        "pods[0].containers[0].cpu: invalid quantity 'lots'",
    ),
    (
        "no-role",
        "name: w\npods: [{name: a, count: 1, containers: [{name: m, cpu: '1', memory: 1Gi}]}]\n",
        "pods[0].containers[0].role: is required in a latency-critical pod (main or sidecar)",
    ),
    (
        "no-main",
        "name: w\npods: [{name: a, count: 1, containers: [{name: s, role: sidecar, cpu: 100m, memory: 1Gi}]}]\n",
        "pods[0].containers: a latency-critical pod needs at least one container with role: main",
    ),
    (
        "role-in-batch",
        "name: w\npods: [{name: a, count: 1, class: batch, containers: [{name: j, role: main}]}]\n",
        "pods[0].containers[0].role: only latency-critical pods have mains and sidecars",
    ),
    (
        "sidecar-limit-below-request",
        (
            "name: w\npods: [{name: a, count: 1, containers: [{name: m, role: main, cpu: '2', memory: 1Gi},"
            " {name: s, role: sidecar, cpu: 500m, cpuLimit: 200m, memory: 1Gi}]}]\n"
        ),
        "pods[0].containers[1].cpuLimit: '200m' is below the request '500m'",
    ),
    (
        "small-budget",
        (
            "name: w\npods: [{name: a, count: 1, budget: {cpu: '2', memory: 2Gi}, containers: [{name: m, role: main,"
            " cpu: '2', memory: 1Gi}, {name: s, role: sidecar, cpu: 500m, memory: 1Gi}]}]\n"
        ),
        "pods[0].budget.cpu: '2' is below the 2500m the mains and sidecar requests need",
    ),
    (
        "duplicate-container",
        (
            "name: w\npods: [{name: a, count: 1, containers: [{name: m, role: main, cpu: '1', memory: 1Gi},"
            " {name: m, role: main, cpu: '1', memory: 1Gi}]}]\n"
        ),
        "pods[0].containers[1].name: duplicate container name 'm'",
    ),
    ("not-yaml", "name: [\n", None),
)

#: (id, template -> pinned request, template -> pods left out, expected threshold)
THRESHOLDS: tuple[tuple[str, dict[str, int], dict[str, int], int], ...] = (
    ("smallest-left-out", {"big": 6, "small": 2}, {"big": 1, "small": 0}, 6),
    ("all-admitted", {"big": 6, "small": 2}, {}, 2),
    ("left-out-batch-ignored", {"big": 6, "batch": 0}, {"batch": 3}, 6),
    ("nothing-pinned", {"batch": 0}, {"batch": 3}, 0),
)


def config(policy: str = "best-effort") -> AgentConfig:
    """The command's planner configuration: one reserved CPU, pod scope, ``policy``."""
    return config_from_mapping(
        {"kubeReserved": {"cpu": "1"}, "topologyManagerScope": "pod", "topologyManagerPolicy": policy}, env={}
    )


def mains(name: str, count: int, cpus: str) -> dict[str, Any]:
    """A latency-critical template with one main of ``cpus`` CPUs and 1Gi."""
    return {
        "name": name,
        "count": count,
        "containers": [{"name": "main", "role": "main", "cpu": cpus, "memory": "1Gi"}],
    }


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``podpin simulate ARGV`` in-process: (exit status, stdout, stderr)."""
    status = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def seed_mesh() -> Simulation:
    """The seed-mesh preset on its default 40 nodes."""
    return _simulate(example_machine(), config(), preset("seed-mesh"))


@pytest.fixture(scope="module")
def mixed() -> Simulation:
    """The mixed-cluster preset on its default 20 nodes."""
    return _simulate(example_machine(), config(), preset("mixed-cluster"))


# -- seed-mesh ------------------------------------------------------------------------------------
class TestSeedMesh:
    def test_numbers(self, seed_mesh: Simulation) -> None:
        """All 200 pods fit in both models; exclusive CPUs 1200 -> 800, total 1200 -> 1000, pod-level all aligned."""
        before, after = seed_mesh.results["per-container"], seed_mesh.results["pod-level"]
        expected = {
            "nodes": 40,
            "admitted": (200, 200),
            "exclusive": (1200, 800),
            "total": (1200, 1000),
            "aligned": 200,
        }
        actual = {
            "nodes": seed_mesh.nodes,
            "admitted": (before.pods_admitted, after.pods_admitted),
            "exclusive": (before.exclusive_cpus, after.exclusive_cpus),
            "total": (before.total_cpus, after.total_cpus),
            "aligned": after.numa_aligned,
        }
        assert expected == actual

    def test_free_is_allocatable_minus_total(self, seed_mesh: Simulation) -> None:
        """Free CPUs are the 40 x 31 allocatable CPUs minus what the pods hold: 40 -> 240."""
        before, after = seed_mesh.results["per-container"], seed_mesh.results["pod-level"]
        assert (1240, 40, 240) == (before.allocatable_cpus, before.free_cpus, after.free_cpus)

    def test_text_rows(self, capsys: pytest.CaptureFixture[str]) -> None:
        """The text prints the nodes and the rows ``exclusive CPUs  1200 -> 800`` and ``total CPUs  1200 -> 1000``."""
        status, out, err = run_cli(capsys, "--preset", "seed-mesh")
        rows = {line.strip().split("  ")[0]: line.strip() for line in out.splitlines() if " -> " in line}
        expected = (0, "", "exclusive CPUs  1200 -> 800   -400 (-33%)", "total CPUs  1200 -> 1000  -200 (-17%)", True)
        assert expected == (status, err, rows["exclusive CPUs"], rows["total CPUs"], "onto 40 nodes" in out)

    def test_pod_manifests(self) -> None:
        """Per container the sidecars are 1-CPU Guaranteed; pod-level the budget is 5 CPUs / 4480Mi as written."""
        template = preset("seed-mesh").pods[0]
        before, after = pod_manifest(template, "per-container", 7), pod_manifest(template, "pod-level", 7)
        whole = {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}
        envoy = {"requests": {"cpu": "300m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}
        budget = {"requests": {"cpu": "5", "memory": "4480Mi"}, "limits": {"cpu": "5", "memory": "4480Mi"}}
        expected = ("mesh-0007", None, whole, budget, envoy, before["metadata"]["uid"])
        actual = (
            before["metadata"]["name"],
            before["spec"].get("resources"),
            before["spec"]["containers"][1]["resources"],
            after["spec"]["resources"],
            after["spec"]["containers"][1]["resources"],
            after["metadata"]["uid"],
        )
        assert expected == actual


# -- reports ---------------------------------------------------------------------------------------
class TestReports:
    def test_json_keys(self, capsys: pytest.CaptureFixture[str]) -> None:
        """JSON has a ``per-container`` and a ``pod-level`` object holding every metric, plus the settings."""
        status, out, _ = run_cli(capsys, "--preset", "seed-mesh", "--output", "json")
        document = json.loads(out)
        expected = (0, {"per-container", "pod-level", "simulation"}, True, True, (1200, 800))
        actual = (
            status,
            set(document),
            MODEL_KEYS <= set(document["per-container"]),
            MODEL_KEYS <= set(document["pod-level"]),
            (document["per-container"]["exclusive_cpus"], document["pod-level"]["exclusive_cpus"]),
        )
        assert expected == actual

    def test_mixed_preset_fits_more_pods(self, mixed: Simulation) -> None:
        """On the same 20 nodes the pod-level model admits more mixed-cluster pods, and the JSON says how many more."""
        before, after = mixed.results["per-container"], mixed.results["pod-level"]
        settings = simulation_to_dict(mixed)["simulation"]
        expected = (True, after.pods_admitted - before.pods_admitted)
        assert expected == (after.pods_admitted > before.pods_admitted, settings["more_pods_fit"])

    def test_mixed_headline(self, mixed: Simulation, capsys: pytest.CaptureFixture[str]) -> None:
        """The text report of a mixed preset ends with ``X more pods fit on the same 20 nodes``."""
        _, out, _ = run_cli(capsys, "--preset", "mixed-cluster")
        expected = f"{mixed.more_pods_fit} more pods fit on the same 20 nodes with pod-level resources"
        assert expected == out.splitlines()[-1]

    def test_png(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``--output png FILE`` writes a PNG file and nothing on stdout."""
        target = tmp_path / "chart.png"
        status, out, err = run_cli(capsys, "--preset", "mixed-ml", "--output", "png", str(target))
        assert (0, "", "", PNG_MAGIC) == (status, out, err, target.read_bytes()[:8])

    def test_png_needs_a_file(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--output png`` without a FILE is one line on stderr and exit status 2."""
        status, _, err = run_cli(capsys, "--preset", "mixed-ml", "--output", "png")
        assert (2, "podpin simulate: --output png needs a FILE to write the picture to\n") == (status, err)

    def test_json_file(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``--output json FILE`` writes the same document into the file."""
        target = tmp_path / "out.json"
        run_cli(capsys, "--preset", "mixed-ml", "--output", "json", str(target))
        _, out, _ = run_cli(capsys, "--preset", "mixed-ml", "--output", "json")
        assert json.loads(out) == json.loads(target.read_text())

    def test_progress_only_when_asked(self, capsys: pytest.CaptureFixture[str]) -> None:
        """stderr (not a TTY under pytest) stays empty unless ``--progress`` is given."""
        _, _, quiet = run_cli(capsys, "--preset", "mixed-ml", "--output", "json")
        _, _, loud = run_cli(capsys, "--preset", "mixed-ml", "--output", "json", "--progress")
        assert ("", True) == (quiet, "simulating:   0%" in loud)


# -- workload files --------------------------------------------------------------------------------
class TestWorkloadFiles:
    @pytest.mark.parametrize("name", list(PRESETS))
    def test_round_trip(self, name: str, tmp_path: Path) -> None:
        """A preset written to YAML with workload_to_dict reads back equal."""
        path = tmp_path / "w.yaml"
        path.write_text(yaml.safe_dump(workload_to_dict(preset(name)), sort_keys=False))
        assert preset(name) == load_workload(path)

    def test_file_simulates_like_the_preset(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``--workload FILE`` holding a preset prints exactly what ``--preset`` prints."""
        path = tmp_path / "ml.yaml"
        path.write_text(yaml.safe_dump(workload_to_dict(preset("mixed-ml"))))
        _, from_file, _ = run_cli(capsys, "--workload", str(path))
        _, from_preset, _ = run_cli(capsys, "--preset", "mixed-ml")
        assert from_preset == from_file

    @pytest.mark.parametrize(("text", "problem"), [(t, p) for _, t, p in MALFORMED], ids=[i for i, _, _ in MALFORMED])
    def test_malformed(self, text: str, problem: str | None, tmp_path: Path) -> None:
        """A malformed workload file is one error line: ``<file>: <field>: <problem>``."""
        path = tmp_path / "w.yaml"
        path.write_text(text)
        with pytest.raises(WorkloadError) as caught:
            load_workload(path)
        message = str(caught.value)
        if problem is None:
            assert (True, 1) == (message.startswith(f"{path}: not valid YAML: "), len(message.splitlines()))
        else:
            assert f"{path}: {problem}" == message

    def test_malformed_on_the_command_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The command prints the workload error as one line on stderr and exits 2."""
        path = tmp_path / "w.yaml"
        path.write_text("name: w\npods: [{name: a, count: -1, containers: []}]\n")
        status, out, err = run_cli(capsys, "--workload", str(path))
        assert (2, "", f"podpin simulate: {path}: pods[0].count: expected an integer >= 1, got -1\n") == (
            status,
            out,
            err,
        )


# -- scheduler -------------------------------------------------------------------------------------
class TestScheduler:
    def test_node_choice(self) -> None:
        """first-fit takes the lowest node that fits, most-allocated the fullest, least-allocated the emptiest.

        numa-aware without topology objects (the engine supplies them) is its NodeResourcesFit part: the emptiest.
        """
        picks = {}
        for policy in SCHEDULERS:
            placer = Scheduler(3, Requests(10_000, 0), policy)
            placer.bind(0, Requests(4_000, 0))
            placer.bind(1, Requests(7_000, 0))
            placer.bind(2, Requests(2_000, 0))
            picks[policy] = placer.pick(Requests(2_000, 0))
        assert {"first-fit": 0, "most-allocated": 1, "least-allocated": 2, "numa-aware": 2} == picks

    def test_unschedulable_and_max_pods(self) -> None:
        """A pod larger than what is left fits no node, and no node takes more than 110 pods."""
        placer = Scheduler(1, Requests(10_000, 0))
        for _ in range(MAX_PODS):
            placer.bind(0, Requests(1, 0))
        assert (None, None) == (placer.pick(Requests(1, 0)), Scheduler(1, Requests(1_000, 0)).pick(Requests(1_001, 0)))

    def test_pod_requests(self) -> None:
        """The scheduler counts container requests per container and the budget pod-level."""
        template = preset("seed-mesh").pods[0]
        before = pod_requests(pod_from_dict(pod_manifest(template, "per-container", 0)))
        after = pod_requests(pod_from_dict(pod_manifest(template, "pod-level", 0)))
        assert (Requests(6_000, 4480 * 2**20), Requests(5_000, 4480 * 2**20)) == (before, after)


# -- metric definitions ----------------------------------------------------------------------------
class TestMetrics:
    @pytest.mark.parametrize(
        ("pinned", "left_out", "expected"), [c[1:] for c in THRESHOLDS], ids=[c[0] for c in THRESHOLDS]
    )
    def test_stranded_threshold(self, pinned: dict[str, int], left_out: dict[str, int], expected: int) -> None:
        """The threshold is the smallest pinned pod left out, else the smallest pinned pod, else 0."""
        assert expected == stranded_threshold(pinned, left_out)

    def test_stranded_cpus_by_hand(self) -> None:
        """Two 3-CPU pods fill NUMA node 0 (3) and leave 1 CPU on node 1; the third is left out: 1 CPU stranded."""
        workload = workload_from_dict({"name": "t", "order": "sequential", "pods": [mains("a", 3, "3")]})
        result = _simulate(TINY, config(), workload).results["per-container"]
        expected = (2, 1, 2, 6, 1, 1, 3)
        actual = (
            result.pods_admitted,
            result.pods_unschedulable,
            result.numa_aligned,
            result.total_cpus,
            result.free_cpus,
            result.stranded_cpus,
            result.stranded_threshold,
        )
        assert expected == actual

    def test_room_for_exactly_one_pod_is_not_stranded(self) -> None:
        """With every pod admitted, an empty NUMA node of 3 CPUs holds the smallest (3-CPU) pod: nothing is stranded."""
        workload = workload_from_dict({"name": "t", "pods": [mains("a", 1, "3")]})
        result = _simulate(TINY, config(), workload, nodes=2).results["per-container"]
        assert (1, 11, 0, 3) == (
            result.pods_admitted,
            result.free_cpus,
            result.stranded_cpus,
            result.stranded_threshold,
        )

    def test_planner_rejection_is_not_admitted(self) -> None:
        """A 5-CPU pod fits the node's 7 allocatable CPUs but no 4-CPU NUMA node: single-numa-node rejects it."""
        workload = workload_from_dict({"name": "t", "pods": [mains("wide", 1, "5")]})
        result = _simulate(TINY, config("single-numa-node"), workload).results["pod-level"]
        expected = (0, 1, {"TopologyAffinityError": 1}, 7)
        assert expected == (result.pods_admitted, result.pods_rejected, dict(result.rejections), result.stranded_cpus)

    def test_pod_level_shared_pool_is_not_exclusive(self) -> None:
        """A pod-level pod of a 2-CPU main and a 100m sidecar holds a 3-CPU bubble: 2 exclusive, 3 total."""
        sidecar = {"name": "s", "role": "sidecar", "cpu": "100m", "memory": "64Mi"}
        template = mains("p", 1, "2")
        template["containers"].append(sidecar)
        workload = workload_from_dict({"name": "t", "pods": [template]})
        results = _simulate(TINY, config(), workload).results
        expected = ((3, 3), (2, 3), 3)
        actual = (
            (results["per-container"].exclusive_cpus, results["per-container"].total_cpus),
            (results["pod-level"].exclusive_cpus, results["pod-level"].total_cpus),
            pod_budget(workload.pods[0])[0],
        )
        assert expected == actual


# -- determinism and machines ----------------------------------------------------------------------
class TestDeterminism:
    def test_two_runs_equal(self, mixed: Simulation) -> None:
        """Running the same preset again gives the same simulation, field for field."""
        assert simulation_to_dict(mixed) == simulation_to_dict(
            _simulate(example_machine(), config(), preset("mixed-cluster"))
        )

    def test_seed_drives_the_interleaving(self) -> None:
        """The same seed gives the same arrival order, another seed another order."""
        workload = preset("mixed-cluster")
        assert (True, False) == (
            arrivals(workload, 3) == arrivals(workload, 3),
            arrivals(workload, 3) == arrivals(workload, 4),
        )

    def test_example_machine_is_the_bundled_topology(self) -> None:
        """The default machine equals deploy/examples/topology-2s.json."""
        expected = json.loads((REPO / "deploy" / "examples" / "topology-2s.json").read_text())
        assert expected == topology_to_dict(example_machine())

    def test_topology_file(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``--topology FILE`` replays onto that machine: 8 CPUs, 2 NUMA nodes."""
        path = tmp_path / "tiny.json"
        path.write_text(json.dumps(topology_to_dict(TINY)))
        _, out, _ = run_cli(capsys, "--preset", "mixed-ml", "--topology", str(path), "--nodes", "2", "--output", "json")
        settings = json.loads(out)["simulation"]
        assert (8, 2, 2) == (settings["cpus_per_node"], settings["numa_nodes_per_node"], settings["nodes"])
