"""``repr`` for error messages about untrusted values: bounded in length and in work.

An error message quotes the value that was wrong, and the value may be a
megabyte-long string, a list of a million items, or an integer that Python
refuses to print (``repr`` raises ``ValueError`` beyond 4,300 digits).
:func:`short_repr` builds only the part it shows (``reprlib``), cuts long
strings in the middle, and names a huge integer by its size. Pure: the pod
model, quantities and the configuration use it alike.
"""

from __future__ import annotations

import reprlib

__all__ = ["short_repr"]

_HUGE = 10**24


class _ShortRepr(reprlib.Repr):
    """``reprlib.Repr`` that never prints an integer of more than 24 digits."""

    def __init__(self, limit: int) -> None:
        super().__init__()  # keyword arguments only from Python 3.12
        self.maxlevel = 2
        self.maxstring = self.maxother = limit
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 6

    def repr_int(self, x: int, level: int) -> str:  # noqa: ARG002 (reprlib's signature)
        """The integer, or ``<an integer of N bits>`` when it is too long to be worth printing."""
        return repr(x) if -_HUGE < x < _HUGE else f"<an integer of {x.bit_length()} bits>"


_BY_LIMIT: dict[int, _ShortRepr] = {}


def short_repr(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters, computed without building the whole repr."""
    short = _BY_LIMIT.get(limit)
    if short is None:
        short = _BY_LIMIT.setdefault(limit, _ShortRepr(limit))
    return short.repr(value)
