"""``podpin plan --devices``: the devices each container holds align its CPUs, and the plan says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main
from tests.support.paths import REPO
from tests.support.podfactory import container, make_pod

EXAMPLES = REPO / "deploy" / "examples"
TOPOLOGY = EXAMPLES / "topology-2s.json"
CONTAINER_SCOPE = EXAMPLES / "config-container-scope.yaml"
GPU = "example.com/gpu"


def _files(tmp_path: Path, gpu_numa: list[int]) -> tuple[Path, Path]:
    """A trainer pod asking 2 exclusive CPUs and a GPU, and a devices file putting its GPU on ``gpu_numa``."""
    pod = make_pod(
        "trainer",
        namespace="ml",
        containers=[container("train", cpu="2", memory="1Gi", limits={GPU: 1}, requests={GPU: 1})],
    )
    pods = tmp_path / "pod.yaml"
    pods.write_text(yaml.safe_dump(pod))
    devices = tmp_path / "devices.yaml"
    entry = {"namespace": "ml", "pod": "trainer", "container": "train"}
    entry["devices"] = [{"resource": GPU, "ids": ["gpu-1"], "numa": gpu_numa}]  # type: ignore[assignment]
    devices.write_text(yaml.safe_dump([entry]))
    return pods, devices


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["plan", "--topology", str(TOPOLOGY), "--config", str(CONTAINER_SCOPE), *args])
    out, err = capsys.readouterr()
    return status, out, err


def _container(out: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(out)["pods"][0]["containers"][0]
    return found


def test_gpu_on_numa1_moves_the_cpus_and_the_json_says_aligned(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """With the GPU on NUMA 1 the CPUs come from NUMA 1; the JSON names the devices and ``aligned``."""
    pods, devices = _files(tmp_path, [1])
    status, out, _ = _plan(capsys, "--output", "json", "--devices", str(devices), str(pods))
    found = _container(out)
    assert (0, "8,24", [{"resource": GPU, "ids": ["gpu-1"], "numa": [1]}], "aligned") == (
        status,
        found["cpus"],
        found["devices"],
        found["device_alignment"],
    )


def test_without_devices_file_the_cpus_stay_on_numa0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The same pod without ``--devices``: CPUs from NUMA 0, no devices shown, as before."""
    pods, _ = _files(tmp_path, [1])
    status, out, _ = _plan(capsys, "--output", "json", str(pods))
    found = _container(out)
    assert (0, "1,17", [], None) == (status, found["cpus"], found["devices"], found["device_alignment"])


def test_text_plan_shows_devices_and_alignment(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The text plan has a line per container with devices: which, their NUMA nodes, whether the CPUs follow."""
    pods, devices = _files(tmp_path, [1])
    status, out, _ = _plan(capsys, "--devices", str(devices), str(pods))
    assert 0 == status
    assert "  devices of train: example.com/gpu gpu-1 (NUMA 1); CPUs aligned" in out.splitlines()


def test_explain_shows_the_device_hints(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--explain`` lists the device manager's hints in the merge and the devices held (the only GPU is on NUMA 1,
    so, as the kubelet v1.36 looks only at nodes hosting one, NUMA 1 alone)."""
    pods, devices = _files(tmp_path, [1])
    status, out, _ = _plan(capsys, "--devices", str(devices), "--explain", "ml/trainer", str(pods))
    lines = out.splitlines()
    hint_line = [line for line in lines if "(device manager)" in line]
    assert (0, 1) == (status, len(hint_line))
    assert hint_line[0].endswith("(device manager)  NUMA 1 (preferred)")
    assert "chosen NUMA nodes: 1" in lines


def test_explain_json_names_the_device_provider(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The JSON walk-through carries the device provider's hints by resource."""
    pods, devices = _files(tmp_path, [1])
    status, out, _ = _plan(capsys, "--output", "json", "--devices", str(devices), "--explain", "ml/trainer", str(pods))
    steps = json.loads(out)["explain"]["steps"]
    device = [h for h in steps[0]["hints"] if h["provider"] == "device"]
    assert (0, [GPU]) == (status, [h["resource"] for h in device])
    assert [{"numa": [1], "preferred": True}] == device[0]["hints"]


def test_bad_devices_file_is_status_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A devices file that cannot be used stops the plan with status 2 and a line naming the file."""
    pods, _ = _files(tmp_path, [1])
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {pod: trainer, container: train, devices: [{resource: gpu, ids: [g]}]}\n")
    status, out, err = _plan(capsys, "--devices", str(bad), str(pods))
    assert (2, "") == (status, out)
    assert err.startswith(f"podpin plan: {bad}: entry 0")


def test_nrt_output_counts_the_devices_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--output nrt`` with ``--devices`` publishes the GPU in its NUMA zone, held (none available)."""
    pods, devices = _files(tmp_path, [1])
    saved = tmp_path / "gpu-node.json"
    saved.write_text(json.dumps({"hostname": "gpu-node", **json.loads(TOPOLOGY.read_text())}))
    status = main(
        [
            "plan",
            "--topology",
            str(saved),
            "--config",
            str(CONTAINER_SCOPE),
            "--output",
            "nrt",
            "--devices",
            str(devices),
            str(pods),
        ]
    )
    out = capsys.readouterr().out
    zones = {zone["name"]: zone for zone in json.loads(out)["zones"]}
    gpu = [r for r in zones["node-1"]["resources"] if r["name"] == GPU]
    assert (0, [("1", "0")]) == (status, [(r["capacity"], r["available"]) for r in gpu])


def test_an_entry_naming_a_container_the_pod_lacks_is_status_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A devices entry for a planned pod must name one of its containers; a typo is refused, naming both sides."""
    pods, _ = _files(tmp_path, [1])
    typo = tmp_path / "typo.yaml"
    entry = {"namespace": "ml", "pod": "trainer", "container": "trian"}
    other = {"namespace": "ml", "pod": "elsewhere", "container": "any"}  # a pod not planned: the node's others
    for each in (entry, other):
        each["devices"] = [{"resource": GPU, "ids": [f"gpu-{each['pod']}"], "numa": [1]}]  # type: ignore[assignment]
    typo.write_text(yaml.safe_dump([entry, other]))
    status, out, err = _plan(capsys, "--devices", str(typo), str(pods))
    assert (2, "", f"podpin plan: {typo}: pod ml/trainer has no container 'trian' (its containers: train)\n") == (
        status,
        out,
        err,
    )
