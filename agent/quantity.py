"""Kubernetes resource quantities, exactly.

A quantity is ``<number><suffix>``: the number is a signed decimal (``1``,
``1.5``, ``.5``, ``+2``); the suffix is binary SI (``Ki Mi Gi Ti Pi Ei``),
decimal SI (``n u m`` ``""`` ``k M G T P E``) or a decimal exponent (``e3``,
``E-2``). Values are kept as exact :class:`fractions.Fraction` so that
``0.1`` CPU is 100 millicores and never 99.999.

Rounding follows ``resource.Quantity``: ``Value()`` and ``MilliValue()`` round
*up* to the next integer, and the kubelet's "integral CPU" test is
``Value() * 1000 == MilliValue()``.

Bounds, stricter than ``ParseQuantity`` in ``k8s.io/apimachinery/pkg/api/resource/quantity.go``
(which takes any number of digits and an int32 exponent, then saturates what
the kubelet reads into int64): a quantity string is at most
:data:`MAX_QUANTITY_CHARS` characters, a decimal exponent at most
:data:`MAX_EXPONENT` either way, and a JSON/YAML integer below
``10**MAX_QUANTITY_CHARS``. A pod never needs more (int64 has 19 digits), and
anything beyond is a clean :class:`QuantityError`, never Python's own
``ValueError`` for integers of more than 4,300 digits nor a ``Fraction`` with a
googol of digits.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from agent.shortrepr import short_repr

__all__ = [
    "Quantity",
    "QuantityError",
    "MAX_QUANTITY_CHARS",
    "MAX_EXPONENT",
    "parse_quantity",
    "cpu_millis",
    "memory_bytes",
    "is_integral_cpu",
    "format_cpu",
    "format_bytes",
    "count_of",
]


#: Longest quantity string accepted.
MAX_QUANTITY_CHARS = 64
#: Largest decimal exponent accepted (``1e100``, ``1e-100``).
MAX_EXPONENT = 100


class QuantityError(ValueError):
    """A quantity string that does not parse; the message quotes it (cut to a readable length)."""


def _show(text: object) -> str:
    return short_repr(text, MAX_QUANTITY_CHARS)


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
        if abs(text) >= 10**MAX_QUANTITY_CHARS:
            raise QuantityError(f"invalid quantity {_show(text)}: more than {MAX_QUANTITY_CHARS} digits")
        return Quantity(Fraction(text), str(text))
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"invalid quantity {text!r}: not finite")
        return Quantity(Fraction(str(text)), str(text))
    if not isinstance(text, str):
        raise QuantityError(f"invalid quantity {_show(text)}: not a number or quantity string")
    if len(text) > MAX_QUANTITY_CHARS:
        raise QuantityError(f"invalid quantity {_show(text)}: longer than {MAX_QUANTITY_CHARS} characters")
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
        if abs(exponent) > MAX_EXPONENT:
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


def count_of(count: int, word: str) -> str:
    """``1 CPU``, ``2 CPUs``, ``0 CPUs``: a count and its noun, in the number people expect."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


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
