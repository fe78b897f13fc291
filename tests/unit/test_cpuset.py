"""CPUSet values and the Linux cpulist format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.cpuset import CPUSet, CPUSetError, parse_cpulist


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("\n", []),
        ("0", [0]),
        ("0-3", [0, 1, 2, 3]),
        ("0-3,8\n", [0, 1, 2, 3, 8]),
        ("8,0-1", [0, 1, 8]),
        ("0-1,1-2", [0, 1, 2]),
        (" 2 , 4-5 ", [2, 4, 5]),
        ("0,", [0]),
    ],
)
def test_parse_valid(text: str, expected: list[int]) -> None:
    """Valid cpulists parse to their members (newlines, overlaps and a trailing comma tolerated)."""
    assert expected == parse_cpulist(text).sorted()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a", "invalid cpulist 'a': 'a' is not a CPU id"),
        ("3-1", "invalid cpulist '3-1': range '3-1' is descending"),
        ("1-2-3", "invalid cpulist '1-2-3': bad range '1-2-3'"),
        ("-1", "invalid cpulist '-1': '' is not a CPU id"),
        ("1.5", "invalid cpulist '1.5': '1.5' is not a CPU id"),
        ("99999", "invalid cpulist '99999': CPU id 99999 exceeds 8191"),
        ("0-", "invalid cpulist '0-': '' is not a CPU id"),
    ],
)
def test_parse_garbage_quotes_input(text: str, message: str) -> None:
    """Garbage raises CPUSetError whose message quotes the input."""
    with pytest.raises(CPUSetError) as err:
        parse_cpulist(text)
    assert message == str(err.value)


def test_format_collapses_ranges() -> None:
    """str() renders ascending ids with consecutive runs collapsed."""
    assert "0-3,8,10-11" == str(CPUSet([11, 10, 8, 3, 2, 1, 0]))
    assert "" == str(CPUSet())


def test_algebra() -> None:
    """Union, intersection, difference and subset behave as set operations."""
    a, b = CPUSet.parse("0-5"), CPUSet.parse("4-9")
    assert CPUSet.parse("0-9") == a | b
    assert CPUSet.parse("4-5") == a & b
    assert CPUSet.parse("0-3") == a - b
    assert CPUSet.parse("4") <= a
    assert not a.is_disjoint(b)
    assert 0 == a.min()
    assert 6 == len(a)


def test_immutable_and_hashable() -> None:
    """CPUSets cannot be mutated and equal sets hash equally."""
    s = CPUSet([1, 2])
    with pytest.raises(AttributeError):
        s._mask = 5  # noqa: SLF001 (the private slot is what must stay read-only)
    assert hash(CPUSet.parse("1-2")) == hash(s)
    assert {s: "x"}[CPUSet([2, 1])] == "x"


def test_invalid_members_rejected() -> None:
    """Negative or non-integer ids are rejected with the offending value."""
    with pytest.raises(CPUSetError, match="invalid CPU id -1"):
        CPUSet([-1])
    with pytest.raises(CPUSetError, match="invalid CPU id True"):
        CPUSet([True])


@given(st.sets(st.integers(min_value=0, max_value=511)))
def test_round_trip(ids: set[int]) -> None:
    """Formatting then parsing gives back the same set."""
    s = CPUSet(ids)
    assert s == parse_cpulist(str(s))
    assert sorted(ids) == list(s)
