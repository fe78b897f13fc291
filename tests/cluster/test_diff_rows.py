"""The differential harness's rule of "equal", its JSON rows and its summary, without a cluster."""

from __future__ import annotations

import json

import pytest

from tests.cluster.diff_rows import CAUSES, Observation, compare, summary

_PINNED = Observation(admitted=True, cpus="2-3", mems="0", cgroup_cpus="2-3", cgroup_mems="0")


class TestCompare:
    def test_same_cpus_and_mems_are_equal(self) -> None:
        """Both admitted, the same CPUs and memory nodes: equal, no cause."""
        row = compare("s", "p", "c", kubelet=_PINNED, podpin=_PINNED)
        assert (True, None) == (row.equal, row.cause)

    @pytest.mark.parametrize(
        ("podpin", "cause"),
        [
            (Observation(admitted=True, cpus="4-5", mems="0", cgroup_cpus="4-5", cgroup_mems="0"), "cpus"),
            (Observation(admitted=True, cpus="2-3", mems="0-1", cgroup_cpus="2-3", cgroup_mems="0-1"), "mems"),
            (Observation(admitted=False, reason="TopologyAffinityError", cpus="0-7", mems="0-1"), "admission"),
            (Observation(admitted=True, cpus="2-3", mems="0", cgroup_cpus="0-7", cgroup_mems="0"), "inconsistent"),
        ],
    )
    def test_each_difference_names_its_cause(self, podpin: Observation, cause: str) -> None:
        """Other CPUs, other memory nodes, another admission, a process its cgroup contradicts: each its cause."""
        row = compare("s", "p", "c", kubelet=_PINNED, podpin=podpin)
        assert (False, cause) == (row.equal, row.cause)

    def test_rejections_with_the_same_reason_are_equal_whatever_the_cpus(self) -> None:
        """The kubelet fails the pod, podpin keeps it unpinned with the same reason: equal."""
        kubelet = Observation(admitted=False, reason="SMTAlignmentError")
        podpin = Observation(admitted=False, reason="SMTAlignmentError", cpus="0-7", mems="0-1")
        assert compare("s", "p", "c", kubelet=kubelet, podpin=podpin).equal

    def test_rejections_with_other_reasons_differ_by_reason(self) -> None:
        """Both reject, for different reasons: the cause is the reason."""
        kubelet = Observation(admitted=False, reason="SMTAlignmentError")
        podpin = Observation(admitted=False, reason="TopologyAffinityError", cpus="0-7", mems="0-1")
        assert "reason" == compare("s", "p", "c", kubelet=kubelet, podpin=podpin).cause

    def test_an_inconsistent_side_is_never_equal(self) -> None:
        """Both sides wrong the same way still differ: the cgroup was not propagated to the process."""
        broken = Observation(admitted=True, cpus="2-3", mems="0", cgroup_cpus="2", cgroup_mems="0")
        assert "inconsistent" == compare("s", "p", "c", kubelet=broken, podpin=broken).cause


class TestJson:
    def test_row_has_the_documented_keys(self) -> None:
        """One line: scenario, pod, container, each side's admitted/reason/cpus/mems, equal (and cause if not)."""
        other = Observation(admitted=True, cpus="4-5", mems="0", cgroup_cpus="4-5", cgroup_mems="0")
        line = json.loads(json.dumps(compare("s", "p", "c", kubelet=_PINNED, podpin=other).as_json()))
        side = {"admitted": True, "reason": None, "cpus": "2-3", "mems": "0"}
        assert {
            "scenario": "s",
            "pod": "p",
            "container": "c",
            "kubelet": side,
            "podpin": {**side, "cpus": "4-5"},
            "equal": False,
            "cause": "cpus",
        } == line

    def test_cgroup_view_shown_only_where_it_disagrees(self) -> None:
        """A side whose cgroup says otherwise than its process carries a ``cgroup`` key with what it says."""
        broken = Observation(admitted=True, cpus="2-3", mems="0", cgroup_cpus="2", cgroup_mems="0")
        row = compare("s", "p", "c", kubelet=_PINNED, podpin=broken).as_json()
        assert ("cgroup" in row["kubelet"], row["podpin"]["cgroup"]) == (False, {"cpus": "2", "mems": "0"})


def test_summary_counts_scenarios_containers_equal_and_causes() -> None:
    """The summary line counts distinct scenarios, rows, equal rows, and every cause (zeros included)."""
    other = Observation(admitted=True, cpus="4-5", mems="0", cgroup_cpus="4-5", cgroup_mems="0")
    rows = [
        compare("a", "p", "c1", kubelet=_PINNED, podpin=_PINNED),
        compare("a", "p", "c2", kubelet=_PINNED, podpin=other),
        compare("b", "q", "c", kubelet=_PINNED, podpin=_PINNED),
    ]
    want = {
        "summary": True,
        "kubernetes": "v1.36.3",
        "scenarios": 2,
        "containers": 3,
        "equal": 2,
        "differences": {cause: int(cause == "cpus") for cause in CAUSES},
    }
    assert want == summary(rows, version="v1.36.3")
