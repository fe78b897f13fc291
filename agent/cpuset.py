"""CPU sets as immutable values, and the Linux cpulist format.

A ``CPUSet`` is an immutable set of CPU ids kept as one Python ``int`` bitmask
(bit *n* set means CPU *n* is in the set). Set algebra is then a single integer
operation, which keeps the allocator fast on 256-CPU machines, and values are
hashable so they can key dictionaries and sit inside frozen dataclasses.

The text form is the Linux/kubelet cpulist: ascending ids, consecutive runs
collapsed into ranges, comma separated (``"0-3,8,10-11"``), the empty set as
``""``. It is what ``cpuset.cpus`` and ``/sys/devices/system/cpu/online``
contain and what the kubelet writes into ``cpu_manager_state``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["CPUSet", "CPUSetError", "parse_cpulist"]

#: Largest CPU id accepted when parsing. Linux' NR_CPUS tops out at 8192.
MAX_CPU_ID = 8191


class CPUSetError(ValueError):
    """A cpulist that is not valid; the message quotes the offending text."""


class CPUSet:
    """An immutable set of CPU ids.

    Iteration yields ids in ascending order. ``str()`` gives the cpulist form.
    Equality and hashing follow the members, so two sets built in different
    ways compare equal when they hold the same CPUs (as ``cpuset.Equals`` does).
    """

    __slots__ = ("_mask",)

    _mask: int

    def __init__(self, cpus: Iterable[int] = ()) -> None:
        mask = 0
        for cpu in cpus:
            if not isinstance(cpu, int) or isinstance(cpu, bool) or cpu < 0:
                raise CPUSetError(f"invalid CPU id {cpu!r}: must be a non-negative integer")
            mask |= 1 << cpu
        object.__setattr__(self, "_mask", mask)

    # -- constructors ------------------------------------------------------------------
    @classmethod
    def from_mask(cls, mask: int) -> CPUSet:
        """Build a set from a bitmask (bit n = CPU n)."""
        if mask < 0:
            raise CPUSetError(f"invalid CPU mask {mask!r}: must be non-negative")
        result = cls.__new__(cls)
        object.__setattr__(result, "_mask", mask)
        return result

    @classmethod
    def parse(cls, text: str) -> CPUSet:
        """Parse a Linux cpulist such as ``"0-3,8\\n"``; see :func:`parse_cpulist`."""
        return parse_cpulist(text)

    @classmethod
    def range(cls, first: int, last: int) -> CPUSet:
        """All CPUs from ``first`` to ``last`` inclusive."""
        if first < 0 or last < first:
            raise CPUSetError(f"invalid CPU range {first}-{last}")
        return cls.from_mask(((1 << (last - first + 1)) - 1) << first)

    # -- immutability ------------------------------------------------------------------
    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("CPUSet is immutable")

    def __reduce__(self) -> tuple[object, tuple[int]]:
        return (CPUSet.from_mask, (self._mask,))

    # -- queries -----------------------------------------------------------------------
    @property
    def mask(self) -> int:
        """The bitmask (bit n = CPU n)."""
        return self._mask

    def __len__(self) -> int:
        return self._mask.bit_count()

    def __bool__(self) -> bool:
        return self._mask != 0

    def __contains__(self, cpu: object) -> bool:
        return isinstance(cpu, int) and cpu >= 0 and bool(self._mask >> cpu & 1)

    def __iter__(self) -> Iterator[int]:
        mask = self._mask
        while mask:
            low = mask & -mask
            yield low.bit_length() - 1
            mask ^= low

    def sorted(self) -> list[int]:
        """The ids in ascending order."""
        return list(self)

    def min(self) -> int:
        """The lowest id; raises ``ValueError`` on the empty set."""
        if not self._mask:
            raise ValueError("min() of an empty CPUSet")
        return (self._mask & -self._mask).bit_length() - 1

    def is_empty(self) -> bool:
        return self._mask == 0

    def is_subset_of(self, other: CPUSet) -> bool:
        return self._mask & ~other._mask == 0

    def is_disjoint(self, other: CPUSet) -> bool:
        return self._mask & other._mask == 0

    # -- algebra -----------------------------------------------------------------------
    def union(self, *others: CPUSet) -> CPUSet:
        mask = self._mask
        for other in others:
            mask |= other._mask  # noqa: SLF001 (one CPUSet reading another's slot, on the planner's hot path)
        return CPUSet.from_mask(mask)

    def intersection(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask & other._mask)

    def difference(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._mask & ~other._mask)

    __or__ = union

    def __and__(self, other: CPUSet) -> CPUSet:
        return self.intersection(other)

    def __sub__(self, other: CPUSet) -> CPUSet:
        return self.difference(other)

    def __le__(self, other: CPUSet) -> bool:
        return self.is_subset_of(other)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CPUSet) and self._mask == other._mask

    def __hash__(self) -> int:
        return hash(("CPUSet", self._mask))

    # -- text --------------------------------------------------------------------------
    def __str__(self) -> str:
        parts: list[str] = []
        ids = list(self)
        i = 0
        while i < len(ids):
            j = i
            while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
                j += 1
            parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
            i = j + 1
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"CPUSet({str(self)!r})"


EMPTY = CPUSet()


def _parse_id(token: str, text: str) -> int:
    token = token.strip()
    if not token.isdigit() or not token.isascii():
        raise CPUSetError(f"invalid cpulist {text!r}: {token!r} is not a CPU id")
    value = int(token)
    if value > MAX_CPU_ID:
        raise CPUSetError(f"invalid cpulist {text!r}: CPU id {value} exceeds {MAX_CPU_ID}")
    return value


def parse_cpulist(text: str) -> CPUSet:
    """Parse a Linux cpulist (``"0-3,8"``, ``"0-3\\n"``, ``""``) into a :class:`CPUSet`.

    Surrounding whitespace and newlines are ignored, as are empty elements
    produced by a trailing comma. Anything else that is not an id or an
    ascending ``a-b`` range raises :class:`CPUSetError` quoting the input.
    """
    if not isinstance(text, str):
        raise CPUSetError(f"invalid cpulist {text!r}: not a string")
    mask = 0
    body = text.strip()
    if not body:
        return EMPTY
    for raw in body.split(","):
        element = raw.strip()
        if not element:
            continue
        if "-" in element:
            first_text, sep, last_text = element.partition("-")
            if not sep or "-" in last_text:
                raise CPUSetError(f"invalid cpulist {text!r}: bad range {element!r}")
            first, last = _parse_id(first_text, text), _parse_id(last_text, text)
            if last < first:
                raise CPUSetError(f"invalid cpulist {text!r}: range {element!r} is descending")
            mask |= ((1 << (last - first + 1)) - 1) << first
        else:
            mask |= 1 << _parse_id(element, text)
    return CPUSet.from_mask(mask)
