"""Kubernetes resource quantities, exactly.

A quantity is ``<number><suffix>``: the number is a signed decimal (``1``,
``1.5``, ``.5``, ``+2``); the suffix is binary SI (``Ki Mi Gi Ti Pi Ei``),
decimal SI (``n u m`` ``""`` ``k M G T P E``) or a decimal exponent (``e3``,
``E-2``). Values are kept as exact :class:`fractions.Fraction` so that
``0.1`` CPU is 100 millicores and never 99.999.

Rounding follows ``resource.Quantity``: ``Value()`` and ``MilliValue()`` round
*up* to the next integer, and the kubelet's "integral CPU" test is
``Value() * 1000 == MilliValue()``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "Quantity",
    "QuantityError",
    "parse_quantity",
    "cpu_millis",
    "memory_bytes",
    "is_integral_cpu",
    "format_cpu",
    "format_bytes",
]


class QuantityError(ValueError):
    """A quantity string that does not parse; the message quotes it."""


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_PATTERN = re.compile(rf"^(?P<num>{_NUMBER})(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact quantity and the text it was parsed from."""

    value: Fraction
    text: str

    def ceil(self) -> int:
        """``Value()``: the value rounded up to an integer."""
        return math.ceil(self.value)

    def milli(self) -> int:
        """``MilliValue()``: thousandths, rounded up."""
        return math.ceil(self.value * 1000)

    def is_zero(self) -> bool:
        return self.value == 0

    def __str__(self) -> str:
        return self.text


def parse_quantity(text: object) -> Quantity:
    """Parse a Kubernetes quantity string (or a JSON number) into a :class:`Quantity`.

    Raises:
        QuantityError: for anything the API server would not accept, quoting it.
    """
    if isinstance(text, bool):
        raise QuantityError(f"invalid quantity {text!r}: not a number or quantity string")
    if isinstance(text, int):
        return Quantity(Fraction(text), str(text))
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"invalid quantity {text!r}: not finite")
        return Quantity(Fraction(str(text)), str(text))
    if not isinstance(text, str):
        raise QuantityError(f"invalid quantity {text!r}: not a number or quantity string")
    match = _PATTERN.match(text.strip()) if text.strip() == text else None
    if match is None or not text:
        raise QuantityError(f"invalid quantity {text!r}")
    number = Fraction(match.group("num"))
    suffix = match.group("suffix") or ""
    if suffix in _BINARY:
        scale = Fraction(_BINARY[suffix])
    elif suffix in _DECIMAL:
        scale = _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > 100:
            raise QuantityError(f"invalid quantity {text!r}: exponent out of range")
        scale = Fraction(10) ** exponent
    return Quantity(number * scale, text)


def cpu_millis(text: object) -> int:
    """A CPU quantity in millicores (rounded up, as ``MilliValue()``); must be >= 0."""
    quantity = parse_quantity(text)
    if quantity.value < 0:
        raise QuantityError(f"invalid cpu quantity {text!r}: negative")
    return quantity.milli()


def memory_bytes(text: object) -> int:
    """A memory or hugepages quantity in bytes (rounded up, as ``Value()``); must be >= 0."""
    quantity = parse_quantity(text)
    if quantity.value < 0:
        raise QuantityError(f"invalid memory quantity {text!r}: negative")
    return quantity.ceil()


def is_integral_cpu(text: object) -> bool:
    """The kubelet's integral-CPU test: ``Value() * 1000 == MilliValue()``."""
    quantity = parse_quantity(text)
    return quantity.ceil() * 1000 == quantity.milli()


def format_cpu(millis: int) -> str:
    """Millicores as a person writes them in a manifest: ``4`` for whole CPUs, else ``2500m``."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_bytes(size: int) -> str:
    """Bytes as a person writes them: the largest binary suffix that divides them (``1Gi``), else a decimal one
    (``1500M``), else plain bytes."""
    for suffixes in (_BINARY, {name: int(factor) for name, factor in _DECIMAL.items() if factor > 1}):
        for suffix, factor in sorted(suffixes.items(), key=lambda item: -item[1]):
            if size and size % factor == 0:
                return f"{size // factor}{suffix}"
    return str(size)
