"""Why a raw pod dict was refused.

Every refusal is a :class:`PodSpecError` whose message is ``"<field>: <detail>"``,
with ``field`` and the offending ``value`` also kept as attributes so the
reconciler can put them in an Event without parsing text. Messages come in two
families, and the difference is deliberate:

* **Shape errors** (a field of the wrong JSON type, a missing required field,
  a quantity that does not parse). The API server fails these while decoding,
  without a field path, so podpin words them itself. ``field`` is the dotted
  JSON path into the raw document and values are quoted Python-style::

      spec.containers[1].resources.limits.cpu: invalid quantity '1.5.0'

* **API validation rules** (request above limit, pod-level request below the
  container aggregate, unsupported pod-level resource, ...). These are worded
  byte for byte as the API server's ``field.Error`` renders them, including its
  path notation with the resource name as a key, so an operator can match
  podpin's Event against the text ``kubectl apply`` prints (one line)::

      spec.resources.requests[cpu]: Invalid value: "1": must be greater than or equal to aggregate
      container requests of 1500m
"""

from __future__ import annotations

import json
from collections.abc import Iterable

__all__ = ["PodSpecError"]

_REPR_LIMIT = 60


def _go_quote(text: str) -> str:
    """Go's ``%q`` for the plain strings that occur here (names and quantities)."""
    return json.dumps(text, ensure_ascii=False)


def describe(value: object) -> str:
    """``"<type> <repr>"`` of a wrong-typed value, the repr cut to a readable length."""
    text = repr(value)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return f"{type(value).__name__} {text}"


class PodSpecError(ValueError):
    """A pod that is malformed, or that the API server would have refused.

    Attributes:
        field: where the problem is, e.g. ``spec.containers[1].resources.limits.cpu``
            (``""`` for the document itself).
        value: the offending value as found (``None`` when the field is missing).
        message: the full message, ``"<field>: <detail>"``.
    """

    def __init__(self, field: str, value: object, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.value = value
        self.message = message

    # -- shape errors (podpin's wording) -------------------------------------------------
    @classmethod
    def shape(cls, field: str, value: object, problem: str) -> PodSpecError:
        """A field of the wrong type or form; ``problem`` says what was expected and got."""
        return cls(field, value, f"{field or 'pod'}: {problem}")

    @classmethod
    def wrong_type(cls, field: str, value: object, expected: str) -> PodSpecError:
        """``<field>: expected <expected>, got <type> <repr>``."""
        return cls.shape(field, value, f"expected {expected}, got {describe(value)}")

    @classmethod
    def missing(cls, field: str) -> PodSpecError:
        """``<field>: required field is missing``."""
        return cls(field, None, f"{field}: required field is missing")

    # -- API validation rules (the API server's wording) ---------------------------------
    @classmethod
    def invalid(cls, field: str, value: str, detail: str) -> PodSpecError:
        """``field.Invalid``: ``<field>: Invalid value: "<value>": <detail>``."""
        return cls(field, value, f"{field}: Invalid value: {_go_quote(value)}: {detail}")

    @classmethod
    def required(cls, field: str, detail: str) -> PodSpecError:
        """``field.Required``: ``<field>: Required value: <detail>``."""
        return cls(field, None, f"{field}: Required value: {detail}")

    @classmethod
    def forbidden(cls, field: str, value: object, detail: str) -> PodSpecError:
        """``field.Forbidden``: ``<field>: Forbidden: <detail>``."""
        return cls(field, value, f"{field}: Forbidden: {detail}")

    @classmethod
    def unsupported(cls, field: str, value: str, supported: Iterable[str]) -> PodSpecError:
        """``field.NotSupported``: ``<field>: Unsupported value: "<v>": supported values: "a", "b"``."""
        listed = ", ".join(_go_quote(item) for item in supported)
        return cls(field, value, f"{field}: Unsupported value: {_go_quote(value)}: supported values: {listed}")
