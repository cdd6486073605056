"""Stream groupings as declared: how a stream's tuples are to be split among a subscriber's
tasks, and the process-independent hash fields grouping routes by.

``Grouping`` is the declarative part kept in the topology (plain, picklable data); the
groupers that carry it out at run time (one class per kind) are machinery and live in
``_execution.groupers``.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import math
import numbers
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .fields import Fields

__all__ = [
    "CustomStreamGrouping",
    "Grouping",
    "GroupingKind",
    "stable_hash",
]

_MASK64 = (1 << 64) - 1


class GroupingKind(enum.Enum):
    """The groupings Storm declares (``TopologyBuilder``'s ``*_grouping`` methods)."""

    SHUFFLE = "shuffle"
    FIELDS = "fields"
    ALL = "all"
    GLOBAL = "global"
    NONE = "none"
    DIRECT = "direct"
    LOCAL_OR_SHUFFLE = "local_or_shuffle"
    PARTIAL_KEY = "partial_key"
    CUSTOM = "custom"


class CustomStreamGrouping:
    """Storm's ``CustomStreamGrouping``: subclass it and pass it to ``custom_grouping``.

    >>> class Even(CustomStreamGrouping):
    ...     def prepare(self, context, stream, target_tasks):
    ...         self.tasks = target_tasks
    ...     def choose_tasks(self, task_id, values):
    ...         return [self.tasks[values[0] % 2 % len(self.tasks)]]
    """

    def prepare(self, context: Any, stream: tuple[str, str], target_tasks: list[int]) -> None:
        """Called once per sending task with the sending task's ``TopologyContext``, the
        ``(component, stream)`` it sends on and the subscriber's sorted task ids."""

    def choose_tasks(self, task_id: int, values: Sequence[Any]) -> Sequence[int]:
        """The tasks (among the prepared ``target_tasks``) that the tuple ``values``, emitted by
        task ``task_id``, goes to."""
        raise NotImplementedError


@dataclass(frozen=True)
class Grouping:
    """A subscription's grouping, as declared (``fields`` for fields / partial key)."""

    kind: GroupingKind
    fields: Fields | None = None
    custom: CustomStreamGrouping | None = None

    def __repr__(self) -> str:
        if self.fields is not None:
            return f"{self.kind.value}_grouping({list(self.fields)})"
        return f"{self.kind.value}_grouping"


def stable_hash(value: Any) -> int:
    """A 64-bit hash that is the same in every process, and alike for keys that compare equal.

    Python salts ``hash`` of strings, bytes and dates per process (and ``hash(None)`` is an
    address before 3.12); fields grouping must send a key to the same task in every run and
    in every Spark executor a topology is shipped to, and a key must go to one task whatever
    type it arrives as (``3``, ``3.0``, ``np.int64(3)``, ``True == 1``; ``"a"`` and
    ``np.str_("a")``). The definition, which a vectorized version must match:

    - an integral number ``n`` (``int``, ``bool``, numpy integers and ``np.bool_``, a float
      with an integral value, ``-0.0``): ``n mod 2**64``;
    - any other float ``x`` (``float``, numpy floats, a ``Fraction`` / ``Decimal`` / complex
      equal to one): ``crc32(struct.pack("<d", x)) | 1 << 32``, every NaN as the canonical
      NaN ``0x7FF8000000000000`` (NaN equals nothing, but one NaN key stays on one task);
    - ``str`` (and ``np.str_``): ``crc32`` of its UTF-8 bytes (surrogates passed through);
      ``bytes`` (and ``np.bytes_``): ``crc32`` of the bytes;
    - a tuple or list: ``h = 17``, then ``h = (h * 1_000_003 ^ stable_hash(item)) mod 2**64``
      for each item;
    - ``None``: ``0x5EED000000000001``.

    Numbers equal to no float (``Fraction(1, 3)``, ``Decimal("0.1")``) use Python's numeric
    hash, which is the same in every process and alike for equal numbers of any type. Enums
    hash as (qualified class name, member name), dates and times as their ISO format, sets as
    the XOR of their mixed element hashes. Other objects fall back to ``hash``, which is
    stable across processes for numbers and for objects whose ``__hash__`` is built from
    such values.
    """
    t = type(value)
    if t is str:
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))
    if t is int:
        n: int = value
        return n & _MASK64
    if t is bytes:
        return zlib.crc32(value)
    if t is tuple or t is list:
        h = 17
        for item in value:
            h = (h * 1_000_003 ^ stable_hash(item)) & _MASK64
        return h
    if value is None:
        return _NONE_HASH
    if t is float:
        return _float_hash(value)
    if isinstance(value, str):  # np.str_ and other subclasses: their characters
        return zlib.crc32(str.encode(value, "utf-8", "surrogatepass"))
    if isinstance(value, bytes):  # np.bytes_ and other subclasses: their bytes
        return zlib.crc32(value)
    if isinstance(value, (int, numbers.Integral)):  # bool, IntEnum, numpy integers
        return int(value) & _MASK64
    if isinstance(value, float):  # np.float64 and other subclasses
        return _float_hash(float(value))
    if isinstance(value, enum.Enum):
        return stable_hash((type(value).__qualname__, value.name))
    if isinstance(value, (numbers.Number, decimal.Decimal)):
        return _number_hash(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return stable_hash(value.isoformat())
    if isinstance(value, (frozenset, set)):
        h = 0x5E7
        for item in value:  # order-free: XOR of the mixed element hashes
            h ^= (stable_hash(item) * 0x9E3779B97F4A7C15) & _MASK64
        return h
    if t.__module__ == "numpy" and hasattr(value, "item"):
        # np.bool_ and the numpy scalars numbers does not know: hash the Python value.
        item = value.item()
        if type(item) is not t:
            return stable_hash(item)
    return hash(value) & _MASK64


_NONE_HASH = 0x5EED_0000_0000_0001
_FLOAT_TAG = 1 << 32
_NAN_HASH = zlib.crc32(struct.pack("<Q", 0x7FF8_0000_0000_0000)) | _FLOAT_TAG


def _float_hash(x: float) -> int:
    if x != x:
        return _NAN_HASH
    if x.is_integer():
        return int(x) & _MASK64
    return zlib.crc32(struct.pack("<d", x)) | _FLOAT_TAG


def _number_hash(value: Any) -> int:
    """A number that is no int, float or subclass: Fraction, Decimal, complex, np.float32."""
    if isinstance(value, complex) or (
        isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real)
    ):
        if value.imag != 0:
            return stable_hash(("complex", float(value.real), float(value.imag)))
        value = value.real
    if isinstance(value, decimal.Decimal):
        if value.is_nan():
            return _NAN_HASH
        if value.is_finite() and value == value.to_integral_value():
            return int(value) & _MASK64
    elif isinstance(value, numbers.Rational):
        if value.denominator == 1:
            return int(value.numerator) & _MASK64
    elif isinstance(value, numbers.Real) and math.isnan(value):
        return _NAN_HASH
    try:
        as_float = float(value)
    except (OverflowError, ValueError):
        as_float = math.nan
    if as_float == value:
        return _float_hash(as_float)
    return hash(value) & _MASK64
