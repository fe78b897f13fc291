"""Resource lists of a pod: exact parsing, the API server's defaulting, aggregate (effective) requests.

Two representations, for two consumers:

* :class:`Amount` (exact value plus the Kubernetes format it prints in) is what
  defaulting, validation and QoS work on, because the API server compares exact
  quantities and prints them in canonical form (``1500m``, ``1536Mi``) in its
  messages. Values are rounded up to nano precision on parsing, as
  ``resource.ParseQuantity`` does.
* :data:`Resources` (``Mapping[str, int]``) is what a :class:`~agent.pods.model.PodView`
  carries for the planner: ``cpu`` in millicores (``MilliValue()``), everything
  else (``memory``, ``hugepages-<size>``, extended resources) as ``Value()``, i.e.
  bytes or counts; both round up, as the kubelet does. Eligibility therefore
  works at the kubelet's own millicore granularity.

Defaulting is the API server's ``SetDefaults_Pod``, in its order:

1. Container level, init and app containers alike: a resource with a limit and
   no request gets request = limit.
2. Pod-level hugepages limits, when ``spec.resources`` has any request or limit:
   a ``hugepages-*`` resource some container limits but the pod does not gets
   the aggregated container limit (``defaultHugePagePodLimits``).
3. Pod-level requests, only when ``spec.resources`` has non-empty limits: a
   resource with a pod limit and no pod request defaults to the aggregated
   container request when some container requests it, else to the pod limit.
   Upstream descriptions disagree on whether cpu and memory take the aggregate;
   podpin follows the KEP (``docs/kubelet-semantics.md``, "Pod-level
   defaulting"), so pod limits 4 CPU / 4Gi with one container requesting
   2 / 2Gi default to requests 2 / 2Gi and the pod is Burstable. Hugepages
   are the exception: they are not overcommittable (request must equal limit),
   so an aggregate below the limit could only produce an invalid pod; they
   default to the pod limit, as upstream's ``IsOvercommitAllowed`` guard does.
   Resources the pod level does not support are left alone (validation
   rejects them).

Defaulting is idempotent, so running it on a pod the API server already
defaulted changes nothing; it matters for manifests read from files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType
from typing import Literal, TypeVar

from agent.pods.errors import PodSpecError
from agent.quantity import QuantityError, parse_quantity

__all__ = [
    "Resources",
    "ContainerKind",
    "ResourceSpec",
    "Amount",
    "ExactResources",
    "ContainerResources",
    "parse_resource_list",
    "aggregate",
    "aggregate_requests",
    "aggregate_limits",
    "default_pod_level",
    "frozen_resources",
    "is_hugepages",
    "is_native",
    "is_overcommittable",
    "is_extended",
    "is_supported_pod_level",
]

Resources = Mapping[str, int]
"""Resource name -> amount: ``cpu`` in millicores, ``memory``/``hugepages-*`` in bytes, others as ``Value()``."""


class ContainerKind(StrEnum):
    """What a container is to its pod: a regular init container, a sidecar, or an app container.

    ``sidecar`` is an init container with ``restartPolicy: Always`` (KEP-753):
    it starts in init order and keeps running beside the app containers.
    """

    INIT = "init"
    SIDECAR = "sidecar"
    APP = "app"


Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]
"""The three ``resource.Format`` values; they decide how a quantity prints."""

_NANO = Fraction(1, 10**9)
_BINARY_SUFFIX = re.compile(r"(Ki|Mi|Gi|Ti|Pi|Ei)$")
_EXPONENT_SUFFIX = re.compile(r"[eE][+-]?[0-9]+$")
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_EMPTY: Mapping[str, int] = MappingProxyType({})


def frozen_resources(values: Mapping[str, int]) -> Resources:
    """A read-only copy of ``values``."""
    return MappingProxyType(dict(values))


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceSpec:
    """Requests and limits of a container or pod after defaulting (a missing request is the limit)."""

    requests: Resources = field(default_factory=lambda: _EMPTY)
    limits: Resources = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class Amount:
    """An exact quantity and its format: Go's ``resource.Quantity`` where its arithmetic matters.

    ``+`` keeps the left operand's format unless the left is zero (``Quantity.Add``);
    ``<``/``>`` compare values (``Cmp``); ``str()`` is the canonical form (``String()``).
    """

    value: Fraction
    format: Format = "DecimalSI"

    @classmethod
    def parse(cls, raw: object) -> Amount:
        """Parse a quantity string or JSON number; JSON ``null`` is zero, as Go decodes it.

        Raises:
            QuantityError: the text is not a quantity.
        """
        if raw is None:
            return cls(Fraction(0))
        quantity = parse_quantity(raw)
        return cls(_round_to_nano(quantity.value), _format_of(quantity.text))

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.value + other.value, other.format if self.value == 0 else self.format)

    def __lt__(self, other: Amount) -> bool:
        return self.value < other.value

    def __gt__(self, other: Amount) -> bool:
        return self.value > other.value

    def __str__(self) -> str:
        return _canonical(self.value, self.format)

    def milli(self) -> int:
        """``MilliValue()``: thousandths, rounded up."""
        return math.ceil(self.value * 1000)

    def as_int(self, resource: str) -> int:
        """The planner's integer: ``MilliValue()`` for ``cpu``, ``Value()`` otherwise (both round up)."""
        return self.milli() if resource == "cpu" else math.ceil(self.value)


def _round_to_nano(value: Fraction) -> Fraction:
    """Round away from zero to a multiple of 10^-9, as ``ParseQuantity`` does."""
    scaled = value / _NANO
    rounded = math.ceil(scaled) if value >= 0 else math.floor(scaled)
    return rounded * _NANO


def _format_of(text: str) -> Format:
    if _BINARY_SUFFIX.search(text):
        return "BinarySI"
    if _EXPONENT_SUFFIX.search(text):
        return "DecimalExponent"
    return "DecimalSI"


def _canonical(value: Fraction, fmt: Format) -> str:
    """``Quantity.String()``: the largest suffix that keeps an integer mantissa.

    BinarySI falls back to DecimalSI below 1024 and for non-integers
    (``CanonicalizeBytes``); decimal exponents are multiples of 3.
    """
    if value == 0:
        return "0"
    if fmt == "BinarySI" and abs(value) >= 1024 and value.denominator == 1:
        number, power = int(value), 0
        while power < len(_BINARY_SUFFIXES) - 1 and number % 1024 == 0:
            number //= 1024
            power += 1
        return f"{number}{_BINARY_SUFFIXES[power]}"
    number, exponent = math.ceil(value / _NANO), -9
    while number % 10 == 0:
        number //= 10
        exponent += 1
    shift = exponent % 3
    number *= 10**shift
    exponent -= shift
    if fmt == "DecimalExponent" or exponent not in _DECIMAL_SUFFIXES:
        return f"{number}e{exponent}" if exponent else str(number)
    return f"{number}{_DECIMAL_SUFFIXES[exponent]}"


# -- resource names ----------------------------------------------------------------------
def is_hugepages(name: str) -> bool:
    """``hugepages-<size>``."""
    return name.startswith("hugepages-")


def is_native(name: str) -> bool:
    """No domain, or the ``kubernetes.io/`` domain (``IsNativeResource``)."""
    return "/" not in name or "kubernetes.io/" in name


def is_overcommittable(name: str) -> bool:
    """Request may be below limit: native and not hugepages (``IsOvercommitAllowed``)."""
    return is_native(name) and not is_hugepages(name)


def is_extended(name: str) -> bool:
    """A device-plugin style resource (``example.com/gpu``): integer-valued, request == limit."""
    return not is_native(name) and not name.startswith("requests.")


def is_supported_pod_level(name: str) -> bool:
    """``cpu``, ``memory`` and ``hugepages-*`` are the only names allowed in ``spec.resources``."""
    return name in ("cpu", "memory") or is_hugepages(name)


# -- exact resource lists ----------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class ExactResources:
    """Requests and limits as exact :class:`Amount` values, in document order."""

    requests: Mapping[str, Amount]
    limits: Mapping[str, Amount]

    @property
    def is_empty(self) -> bool:
        """Neither requests nor limits name any resource."""
        return not self.requests and not self.limits

    def with_container_defaults(self) -> ExactResources:
        """Container defaulting: every limit without a request becomes the request."""
        requests = dict(self.requests)
        for name, limit in self.limits.items():
            requests.setdefault(name, limit)
        return ExactResources(requests=requests, limits=self.limits)

    def to_spec(self) -> ResourceSpec:
        """The integer form the planner reads."""
        return ResourceSpec(
            requests=frozen_resources({name: amount.as_int(name) for name, amount in self.requests.items()}),
            limits=frozen_resources({name: amount.as_int(name) for name, amount in self.limits.items()}),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerResources:
    """One container's exact, defaulted resources and where it sits in the spec.

    ``path`` is its JSON path (``spec.initContainers[0]``), used by validation messages.
    """

    path: str
    kind: ContainerKind
    resources: ExactResources


def parse_resource_list(raw: object, path: str) -> dict[str, Amount]:
    """Parse a ``requests``/``limits``/``overhead`` mapping found at ``path``.

    A missing (``None``) list is empty.

    Raises:
        PodSpecError: not a mapping, a non-string or empty name, or a bad quantity
            (``spec.containers[1].resources.limits.cpu: invalid quantity '1.5.0'``).
    """
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise PodSpecError.wrong_type(path, raw, "a mapping of resource name to quantity")
    parsed: dict[str, Amount] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not name:
            raise PodSpecError.wrong_type(path, name, "resource names to be non-empty strings")
        try:
            parsed[name] = Amount.parse(value)
        except QuantityError as error:
            raise PodSpecError.shape(f"{path}.{name}", value, str(error)) from None
    return parsed


# -- aggregation and pod-level defaulting ------------------------------------------------
Value = TypeVar("Value", int, Amount)


def _add_into(total: dict[str, Value], more: Mapping[str, Value]) -> None:
    for name, amount in more.items():
        total[name] = total[name] + amount if name in total else amount


def _max_into(total: dict[str, Value], other: Mapping[str, Value]) -> None:
    for name, amount in other.items():
        if name not in total or amount > total[name]:
            total[name] = amount


def aggregate(app: Iterable[Mapping[str, Value]], init: Iterable[tuple[bool, Mapping[str, Value]]]) -> dict[str, Value]:
    """The kubelet's ``AggregateContainerRequests`` (KEP-753 effective requests).

    ``reqs`` = sum of app containers; walking init containers in order, a
    sidecar (``True``) adds to ``reqs`` and to the running sidecar sum and
    contributes that sum as a candidate, a regular init container contributes
    its own amount plus the sidecars declared before it. The result is the
    per-resource max of ``reqs`` and the largest candidate.

    Args:
        app: the app containers' resource lists.
        init: ``(is_sidecar, resources)`` for each init container in spec order.
    """
    total: dict[str, Value] = {}
    for resources in app:
        _add_into(total, resources)
    sidecars: dict[str, Value] = {}
    init_max: dict[str, Value] = {}
    for is_sidecar, resources in init:
        if is_sidecar:
            _add_into(total, resources)
            _add_into(sidecars, resources)
            candidate = dict(sidecars)
        else:
            candidate = dict(resources)
            _add_into(candidate, sidecars)
        _max_into(init_max, candidate)
    _max_into(total, init_max)
    return total


def _aggregate_of(containers: Iterable[ContainerResources], *, limits: bool) -> dict[str, Amount]:
    listed = list(containers)

    def pick(c: ContainerResources) -> Mapping[str, Amount]:
        return c.resources.limits if limits else c.resources.requests

    return aggregate(
        (pick(c) for c in listed if c.kind == ContainerKind.APP),
        ((c.kind == ContainerKind.SIDECAR, pick(c)) for c in listed if c.kind != ContainerKind.APP),
    )


def aggregate_requests(containers: Iterable[ContainerResources]) -> dict[str, Amount]:
    """Exact aggregate container requests; init containers and sidecars keep their spec order."""
    return _aggregate_of(containers, limits=False)


def aggregate_limits(containers: Iterable[ContainerResources]) -> dict[str, Amount]:
    """Exact aggregate container limits, same formula as the requests."""
    return _aggregate_of(containers, limits=True)


def default_pod_level(pod: ExactResources, containers: Iterable[ContainerResources]) -> ExactResources:
    """Pod-level defaulting (steps 2 and 3 of the module docstring) over defaulted containers."""
    listed = list(containers)
    limits = dict(pod.limits)
    if not pod.is_empty:
        for name, amount in aggregate_limits(listed).items():
            if is_hugepages(name) and name not in limits:
                limits[name] = amount
    requests = dict(pod.requests)
    if limits:
        container_requests = aggregate_requests(listed)
        for name, limit in limits.items():
            if name in requests or not is_supported_pod_level(name):
                continue
            if is_overcommittable(name) and name in container_requests:
                requests[name] = container_requests[name]
            else:
                requests[name] = limit
    return ExactResources(requests=requests, limits=limits)
