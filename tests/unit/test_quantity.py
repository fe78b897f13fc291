"""Kubernetes quantities: exact values and the kubelet's rounding."""

from __future__ import annotations

import pytest

from agent.quantity import QuantityError, cpu_millis, is_integral_cpu, memory_bytes, parse_quantity


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("1", 1000),
        ("1000m", 1000),
        ("1.5", 1500),
        ("0.1", 100),
        ("100m", 100),
        (".5", 500),
        ("2", 2000),
        ("0", 0),
        ("1e3", 1000000),
        ("0.0001", 1),
        (4, 4000),
        ("1k", 1000000),
    ],
)
def test_cpu_millis(text: object, millis: int) -> None:
    """CPU quantities become millicores, rounded up like MilliValue()."""
    assert millis == cpu_millis(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Ki", 1024),
        ("1Mi", 2**20),
        ("9Gi", 9 * 2**30),
        ("1Ti", 2**40),
        ("1Pi", 2**50),
        ("1Ei", 2**60),
        ("1k", 1000),
        ("1M", 10**6),
        ("1G", 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),
        ("1e3", 1000),
        ("1E3", 1000),
        ("128974848", 128974848),
        ("129e6", 129000000),
        ("1.5Gi", 1610612736),
        ("100m", 1),
    ],
)
def test_memory_bytes(text: str, value: int) -> None:
    """Memory quantities become bytes, rounded up like Value()."""
    assert value == memory_bytes(text)


@pytest.mark.parametrize(
    ("text", "integral"),
    [
        ("1", True),
        ("1000m", True),
        ("2000m", True),
        ("1.5", False),
        ("977m", False),
        ("0.1", False),
        ("1.0001", False),
        ("4", True),
        ("4000m", True),
    ],
)
def test_integral_cpu(text: str, integral: bool) -> None:
    """The integral-CPU test matches Value()*1000 == MilliValue()."""
    assert integral == is_integral_cpu(text)


@pytest.mark.parametrize(
    "text",
    ["", " 1", "1 ", "1.2.3", "abc", "1Gib", "1mi", "--1", "1e", "Gi", "1KiB", None, True, [], "1e1000"],
)
def test_garbage_quotes_input(text: object) -> None:
    """Anything the API server would refuse raises QuantityError quoting the input."""
    with pytest.raises(QuantityError) as err:
        parse_quantity(text)
    assert repr(text) in str(err.value)


def test_negative_rejected_for_resources() -> None:
    """Negative CPU or memory is an error naming the value."""
    with pytest.raises(QuantityError, match="invalid cpu quantity '-1': negative"):
        cpu_millis("-1")
    with pytest.raises(QuantityError, match="invalid memory quantity '-1Gi': negative"):
        memory_bytes("-1Gi")


def test_exactness() -> None:
    """Decimal fractions are exact (0.1 CPU is 100 millicores, not 99.999)."""
    assert parse_quantity("0.1").value * 10 == 1
