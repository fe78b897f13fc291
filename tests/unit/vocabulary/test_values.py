"""The shared cgroup values: ``cpu.max`` parsed and rendered in one place, and what an empty value means."""

from __future__ import annotations

import pytest

from agent.cpuset import CPUSet
from agent.vocabulary import CgroupValues, CpuMax, CpuMaxError


class TestCpuMax:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("max", CpuMax(quota=None)),
            ("max 100000", CpuMax(quota=None, period=100000)),
            ("50000", CpuMax(quota=50000)),
            ("50000 20000\n", CpuMax(quota=50000, period=20000)),
        ],
    )
    def test_parse(self, text: str, expected: CpuMax) -> None:
        """cpu.max parses to a quota (None for max) and a period (None when omitted)."""
        assert expected == CpuMax.parse(text)

    @pytest.mark.parametrize("text", ["max", "max 100000", "50000", "50000 20000"])
    def test_rendered_as_parsed(self, text: str) -> None:
        """A value renders as the kernel's text it was read from: one grammar both ways."""
        assert text == str(CpuMax.parse(text))

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ("", "expected 'max|<quota> [<period>]' (µs)"),
            ("-1", "expected 'max|<quota> [<period>]' (µs)"),
            ("max  100000", "expected 'max|<quota> [<period>]' (µs)"),
            ("100 200 300", "expected 'max|<quota> [<period>]' (µs)"),
            ("999 100000", "quota below 1000 µs"),
            ("max 999", "period outside 1000..1000000 µs"),
            ("50000 1000001", "period outside 1000..1000000 µs"),
        ],
    )
    def test_invalid(self, text: str, problem: str) -> None:
        """A cpu.max the kernel would reject is refused, quoting it."""
        with pytest.raises(CpuMaxError) as caught:
            CpuMax.parse(text)
        assert (f"invalid cpu.max {text!r}: {problem}", text) == (str(caught.value), caught.value.text)

    def test_period_required(self) -> None:
        """A file's value must state its period (a short read lost it); a planned one may leave it out."""
        with pytest.raises(CpuMaxError) as caught:
            CpuMax.parse("max", require_period=True)
        assert "invalid cpu.max 'max': expected 'max|<quota> [<period>]' (µs)" == str(caught.value)

    @pytest.mark.parametrize(
        ("quota", "period", "problem"),
        [(0, None, "invalid cpu.max '0': quota below 1000 µs"), (None, 0, "invalid cpu.max 'max 0': period outside")],
    )
    def test_built_out_of_range(self, quota: int | None, period: int | None, problem: str) -> None:
        """A value built in code is held to the kernel's ranges too, quoting its text."""
        with pytest.raises(CpuMaxError) as caught:
            CpuMax(quota=quota, period=period)
        assert str(caught.value).startswith(problem)

    def test_with_period(self) -> None:
        """A value without a period takes the cgroup's; one with a period keeps its own."""
        assert (CpuMax(quota=None, period=50000), CpuMax(quota=20000, period=100000)) == (
            CpuMax(quota=None).with_period(50000),
            CpuMax(quota=20000, period=100000).with_period(50000),
        )


def test_empty_values_leave_the_cgroup_alone() -> None:
    """Only a value with no file set is empty; an empty cpuset is still a value (the writer refuses it)."""
    assert (True, False, False) == (
        CgroupValues().is_empty(),
        CgroupValues(cpuset_cpus=CPUSet()).is_empty(),
        CgroupValues(cpu_max=CpuMax(quota=None)).is_empty(),
    )
