"""Whether a container's file change needs a re-apply: the values its cgroup holds against what a pass would write."""

from __future__ import annotations

import pytest

from agent.cpuset import CPUSet
from agent.reconcile.file_changes import container_values, holds
from agent.vocabulary import CgroupValues, CpuMax
from tests.unit.reconcile.test_targets import DB, FOREIGN, INTERIM, LIFTED, POD_PATH, _book, _plan

HELD = CgroupValues(
    cpuset_cpus=CPUSet.parse("1-2"), cpuset_mems=CPUSet.parse("0"), cpu_max=CpuMax(quota=None, period=100_000)
)


@pytest.mark.parametrize(
    ("want", "expected"),
    [
        (CgroupValues(cpuset_cpus=CPUSet.parse("1-2"), cpu_max=LIFTED), True),  # podpin's own write: held
        (CgroupValues(cpu_max=CpuMax(quota=None)), True),  # no period stated: the cgroup's
        (CgroupValues(cpuset_cpus=CPUSet.parse("1-3")), False),
        (CgroupValues(cpuset_mems=CPUSet.parse("1")), False),
        (CgroupValues(cpu_max=CpuMax(quota=100_000, period=100_000)), False),
        (CgroupValues(cpu_max=CpuMax(quota=None, period=50_000)), False),
        (CgroupValues(), True),  # nothing wanted: nothing to repair
    ],
    ids=["same", "max-alone", "cpus", "mems", "quota", "period", "empty"],
)
def test_holds_compares_only_what_is_wanted(want: CgroupValues, expected: bool) -> None:
    """Each value the plan sets must be there (``cpu.max`` with the cgroup's period when the plan states none)."""
    assert expected == holds(HELD, want)


def test_quota_written_over_max_does_not_hold() -> None:
    """runc's quota over podpin's ``max`` is a difference; a cgroup without a ``cpu.max`` holds none."""
    runc = CgroupValues(cpuset_cpus=CPUSet.parse("1-2"), cpu_max=CpuMax(quota=100_000, period=100_000))
    want = CgroupValues(cpuset_cpus=CPUSet.parse("1-2"), cpu_max=LIFTED)
    assert (False, False) == (holds(runc, want), holds(CgroupValues(cpuset_cpus=CPUSet.parse("1-2")), want))


def test_container_values_are_what_a_pass_targets() -> None:
    """A container the book names gets its own values; one named in another pod, the pod's interim set."""
    plan, book = _plan(), _book()
    own = container_values(plan, DB, POD_PATH / f"cri-containerd-{DB}.scope", book)
    foreign = container_values(plan, FOREIGN, POD_PATH / f"cri-containerd-{FOREIGN}.scope", book)
    expected = (CgroupValues(cpuset_cpus=CPUSet.parse("1-2"), cpu_max=LIFTED), CgroupValues(cpuset_cpus=INTERIM))
    assert expected == (own, foreign)
