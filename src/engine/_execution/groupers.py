"""Groupers: one class per stream grouping, each of which knows everything about it.

As Storm's ``GrouperFactory`` hands a sending task one grouper per subscription
(``FieldsGrouper``, ``ShuffleGrouper``, ``AllGrouper``, ...), ``make_grouper`` builds one
``Grouper`` per (sending task, stream, subscriber) from the declared ``Grouping`` (a model
record, ``_model.grouping``). Each grouper class carries its grouping out three ways:

- ``choose(values)``: the target tasks of one tuple (per-tuple emits). One-target results
  are cached tuples, so routing a tuple allocates nothing; ``fixed`` names the targets when
  they never depend on the values (global, all, one target), so emit skips the call.
- ``route(columns, n)``: which rows of a batch go to which task (batch emits), exactly where
  ``choose`` would send them one by one (shuffle apart, which only promises an even
  spread), vectorized where the key allows: contiguous slices for shuffles, the stable hash
  of a numpy integer column in one numpy expression, other keys through a bounded cache, the
  fixed tasks with no per-row work at all; partial key and custom groupings call ``choose``
  per row. It returns ``[(task, rows)]``, ``rows`` an int64 index array or ``None`` for
  "every row" (so a one-target route copies nothing).
- ``spark_routing(grouping)`` (a class method: it needs no sending task): how a columnar
  runner computes each row's target task index, as a plain description (``HashTask``,
  ``RandomTask``, ...) that the Spark runner turns into Spark expressions; the engine
  imports no pyspark.

``grouper_class`` is the one place that maps a declared kind to its class.
"""

from __future__ import annotations

import abc
import contextlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._columnar.batch import column_as_list
from .._model.context import TopologyContext
from .._model.errors import EmitError
from .._model.fields import Fields
from .._model.grouping import Grouping, GroupingKind, stable_hash

__all__ = [
    "FIELDS_CACHE_SIZE",
    "AllGrouper",
    "ChosenTask",
    "CustomGrouper",
    "DirectGrouper",
    "EveryTask",
    "FieldsGrouper",
    "FirstTask",
    "GlobalGrouper",
    "Grouper",
    "HashTask",
    "LocalOrShuffleGrouper",
    "LocalTask",
    "NoColumnRouting",
    "NoneGrouper",
    "PartialKeyGrouper",
    "Partition",
    "RandomTask",
    "Sender",
    "ShuffleGrouper",
    "SparkRouting",
    "grouper_class",
    "make_grouper",
]

_MASK64 = (1 << 64) - 1
#: Fields-grouping keys cached per grouper before the cache is cleared (bounds memory).
FIELDS_CACHE_SIZE = 1 << 16

#: values -> target tasks
Chooser = Callable[[Sequence[Any]], tuple[int, ...]]
#: ``(task, rows)``: ``rows`` is an int64 index array into the batch, or None for all rows.
Partition = tuple[int, "np.ndarray | None"]

_INTEGER_KINDS = frozenset("iub")


# --- the descriptions a columnar runner carries out ---------------------------------------


@dataclass(frozen=True)
class HashTask:
    """Each row's task index is a hash of ``fields`` modulo the task count: rows with equal
    keys meet on one task (the runner's own hash, the same in every run)."""

    fields: tuple[str, ...]


@dataclass(frozen=True)
class RandomTask:
    """A seeded random task index per row: an even spread, no order kept."""


@dataclass(frozen=True)
class FirstTask:
    """Every row to task index 0 (the lowest task id)."""


@dataclass(frozen=True)
class EveryTask:
    """Every row to every task."""


@dataclass(frozen=True)
class ChosenTask:
    """The task the emitter chose (``emit_direct``): its task id, as an index into the
    subscriber's tasks; rows for other components' tasks are not this subscriber's."""


@dataclass(frozen=True)
class LocalTask:
    """The sending task's own index where both sides run as many tasks over the same
    partitions (no exchange at all); otherwise as ``RandomTask``."""


@dataclass(frozen=True)
class NoColumnRouting:
    """The grouping chooses per tuple in Python, which a columnar runner cannot do."""

    reason: str


#: What ``Grouper.spark_routing`` answers: one of the descriptions above.
SparkRouting = (
    HashTask | RandomTask | FirstTask | EveryTask | ChosenTask | LocalTask | NoColumnRouting
)


# --- the groupers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Sender:
    """The sending side of a subscription, as a grouper may need it."""

    #: ``(component, stream id)``
    stream: tuple[str, str]
    #: the stream's declared fields
    fields: Fields
    #: the sending task's random source (seeded from the topology's seed)
    rng: random.Random
    #: the sending task's context (a custom grouping's ``prepare`` gets it)
    context: TopologyContext | None


class Grouper(abc.ABC):
    """One subscription's grouping, as one sending task carries it out (see the module
    docstring). Each class sets ``choose`` (``_fix`` sets it with ``fixed``), says how a
    columnar runner routes it, and may route batches faster than row by row."""

    #: the declared kind this class carries out
    kind: ClassVar[GroupingKind]
    #: the emitter names the task (``emit_direct``): the grouping itself chooses nothing
    direct: ClassVar[bool] = False
    #: ``choose`` names one task for every tuple (not so a custom grouping, which may
    #: choose none or several)
    one_task: ClassVar[bool] = False
    #: values -> target tasks, for one tuple
    choose: Chooser

    def __init__(self, grouping: Grouping, sender: Sender, targets: Sequence[int]) -> None:
        #: the subscriber's tasks, sorted
        self.targets: tuple[int, ...] = tuple(sorted(targets))
        self._singles = [(t,) for t in self.targets]
        #: the tasks of every tuple when they never depend on the values, else None
        self.fixed: tuple[int, ...] | None = None

    def _fix(self, targets: tuple[int, ...]) -> None:
        """Every tuple goes to ``targets``."""
        self.fixed = targets
        self.choose = lambda values: targets

    def route(self, columns: Sequence[Any], n: int) -> list[Partition]:
        """The rows of a batch of ``n`` rows (its ``columns``) per target task."""
        if self.fixed is not None:
            return [(t, None) for t in self.fixed]
        if n == 0:
            return []
        return self._route(columns, n)

    def _route(self, columns: Sequence[Any], n: int) -> list[Partition]:
        """Row by row through ``choose`` (groupings no vectorized form serves)."""
        choose = self.choose
        cols = [column_as_list(c) for c in columns]
        rows_of: dict[int, list[int]] = {}
        for i, values in enumerate(zip(*cols, strict=True)):
            for t in choose(list(values)):
                rows_of.setdefault(t, []).append(i)
        return [(t, np.array(rows, np.int64)) for t, rows in sorted(rows_of.items())]

    @classmethod
    @abc.abstractmethod
    def spark_routing(cls, grouping: Grouping) -> SparkRouting:
        """How a columnar runner (Spark) routes rows for ``grouping``."""

    @classmethod
    def keeps_together(cls, grouping: Grouping, key: Sequence[str]) -> bool:
        """Every row with equal values of the ``key`` fields reaches the same task(s), so a
        combiner on that key may pre-aggregate upstream of the exchange."""
        return False


class _Spread(Grouper):
    """Groupings that only promise an even spread: a batch goes out as contiguous slices,
    the first slice's task rotating from batch to batch, so tasks stay even whatever the
    batch sizes."""

    one_task = True

    def __init__(self, grouping: Grouping, sender: Sender, targets: Sequence[int]) -> None:
        super().__init__(grouping, sender, targets)
        self._next = 0

    def _route(self, columns: Sequence[Any], n: int) -> list[Partition]:
        # Round robin in counts: the first ``n % k`` slices are one row longer, and the
        # next batch starts after them, so every task's total stays within one row.
        targets = self.targets
        k = len(targets)
        start = self._next
        base, extra = divmod(n, k)
        self._next = (start + extra) % k
        parts: list[Partition] = []
        lo = 0
        for j in range(min(k, n)):
            hi = lo + base + (j < extra)
            parts.append((targets[(start + j) % k], np.arange(lo, hi, dtype=np.int64)))
            lo = hi
        return parts

    @classmethod
    def spark_routing(cls, grouping: Grouping) -> SparkRouting:
        return RandomTask()


class ShuffleGrouper(_Spread):
    """Storm's shuffle grouping: round robin over the tasks in a seeded random order."""

    kind = GroupingKind.SHUFFLE

    def __init__(self, grouping: Grouping, sender: Sender, targets: Sequence[int]) -> None:
        super().__init__(grouping, sender, targets)
        order = list(self._singles)
        sender.rng.shuffle(order)
        n = len(order)
        if n == 1:
            self._fix(order[0])
            return
        state = [0]

        def shuffle(values: Sequence[Any]) -> tuple[int, ...]:
            i = state[0]
            state[0] = i + 1 if i + 1 < n else 0
            return order[i]

        self.choose = shuffle


class LocalOrShuffleGrouper(ShuffleGrouper):
    """Storm's local-or-shuffle grouping: a shuffle here (one process has every task); a
    columnar runner keeps each row on its own task where the two sides line up."""

    kind = GroupingKind.LOCAL_OR_SHUFFLE

    @classmethod
    def spark_routing(cls, grouping: Grouping) -> SparkRouting:
        return LocalTask()


class NoneGrouper(_Spread):
    """Storm's none grouping ("don't care"): a random task per tuple."""

    kind = GroupingKind.NONE

    def __init__(self, grouping: Grouping, sender: Sender, targets: Sequence[int]) -> None:
        super().__init__(grouping, sender, targets)
        singles = self._singles
        randrange = sender.rng.randrange
        n = len(singles)
        self.choose = lambda values: singles[randrange(n)]


class FieldsGrouper(Grouper):
    """Storm's fields grouping: ``stable_hash`` of the key (one field's value, or the tuple
    of several) modulo the task count picks the task; on no fields, a global grouping."""

    kind = GroupingKind.FIELDS
    one_task = True

    def __init__(self, grouping: Grouping, sender: Sender, targets: Sequence[int]) -> None:
        super().__init__(grouping, sender, targets)
        assert grouping.fields is not None
        idx = [sender.fields.index(f) for f in grouping.fields]
        self._key_index = idx
        #: batch routing's key -> index into ``targets``
        self._index_cache: dict[Any, int] = {}
        singles = self._singles
        n = len(singles)
        if n == 1 or not idx:  # Storm: a fields grouping on no fields is a global grouping
            self._fix(singles[0])
            return
        cache: dict[Any, tuple[int, ...]] = {}
        get = cache.get

        def miss(key: Any) -> tuple[int, ...]:
            try:
                if len(cache) >= FIELDS_CACHE_SIZE:
                    cache.clear()
                hit = cache[key] = singles[stable_hash(key) % n]
            except TypeError:  # unhashable key (a list, say): no cache
                return singles[stable_hash(key) % n]
            return hit

        if len(idx) == 1:
            i0 = idx[0]

            def one_field(values: Sequence[Any]) -> tuple[int, ...]:
                key = values[i0]
                try:
                    return get(key) or miss(key)
                except TypeError:
                    return miss(key)

            self.choose = one_field
            return

        def fields(values: Sequence[Any]) -> tuple[int, ...]:
            key = tuple([values[i] for i in idx])
            try:
                return get(key) or miss(key)
            except TypeError:
                return miss(key)

        self.choose = fields

    def _route(self, columns: Sequence[Any], n: int) -> list[Partition]:
        index = self._target_indexes(columns, n)
        targets = self.targets
        first = int(index[0])
        if (index == first).all():
            return [(targets[first], None)]
        order = np.argsort(index, kind="stable")
        counts = np.bincount(index, minlength=len(targets))
        parts: list[Partition] = []
        pos = 0
        for j, c in enumerate(counts.tolist()):
            if c:
                parts.append((targets[j], order[pos : pos + c]))
                pos += c
        return parts

    def _target_indexes(self, columns: Sequence[Any], n: int) -> np.ndarray:
        """Per row, the index of its target in ``targets``: ``choose``'s
        ``stable_hash(key) % len(targets)``."""
        k = len(self.targets)
        width = len(self._key_index)
        if width == 1:
            col = columns[self._key_index[0]]
            if isinstance(col, np.ndarray) and col.dtype.kind in _INTEGER_KINDS:
                # stable_hash(int) is the int modulo 2**64 (two's complement wraps it)
                return (col.astype(np.uint64) % np.uint64(k)).astype(np.int64)
            keys = column_as_list(col)
        else:
            cols = [column_as_list(columns[i]) for i in self._key_index]
            keys = list(zip(*cols, strict=True))
        cache = self._index_cache
        get = cache.get
        out = [get(key, -1) for key in keys] if _hashable(keys) else [-1] * n
        if -1 in out:
            if len(cache) >= FIELDS_CACHE_SIZE:
                cache.clear()
            for i, key in enumerate(keys):
                if out[i] == -1:
                    # one key field hashes as the value itself, several as their tuple
                    index = stable_hash(key if width == 1 else tuple(key)) % k
                    out[i] = index
                    with contextlib.suppress(TypeError):  # an unhashable key: not cached
                        cache[key] = index
        return np.array(out, np.int64)

    @classmethod
    def spark_routing(cls, grouping: Grouping) -> SparkRouting:
        if not grouping.fields:
            return FirstTask()
        return HashTask(tuple(grouping.fields))

    @classmethod
    def keeps_together(cls, grouping: Grouping, key: Sequence[str]) -> bool:
        return set(grouping.fields or ()) <= set(key)


class PartialKeyGrouper(Grouper):
    """Storm's partial key grouping: each key goes to the less loaded (by this sender's
    count) of two tasks its hash picks, so a hot key is split over two tasks."""

    kind = GroupingKind.PARTIAL_KEY
    one_task = True

    def __init__(self, grouping: Grouping, sender: Sender, targets: Sequence[int]) -> None:
        super().__init__(grouping, sender, targets)
        assert grouping.fields is not None
        idx = [sender.fields.index(f) for f in grouping.fields]
        singles = self._singles
        n = len(singles)
        if n == 1:
            self._fix(singles[0])
            return
        sent = [0] * n

        def partial_key(values: Sequence[Any]) -> tuple[int, ...]:
            h = stable_hash(tuple([values[i] for i in idx]))
            first = h % n
            second = (first + 1 + _mix(h) % (n - 1)) % n
            pick = first if sent[first] <= sent[second] else second
            sent[pick] += 1
            return singles[pick]

        self.choose = partial_key

    @classmethod
    def spark_routing(cls, grouping: Grouping) -> SparkRouting:
        assert grouping.fields is not None
        return HashTask(tuple(grouping.fields))


class GlobalGrouper(Grouper):
    """Storm's global grouping: every tuple to the lowest task."""

    kind = GroupingKind.GLOBAL
    one_task = True

    def __init__(self, grouping: Grouping, sender: Sender, targets: Sequence[int]) -> None:
        super().__init__(grouping, sender, targets)
        self._fix(self._singles[0])

    @classmethod
    def spark_routing(cls, grouping: Grouping) -> SparkRouting:
        return FirstTask()

    @classmethod
    def keeps_together(cls, grouping: Grouping, key: Sequence[str]) -> bool:
        return True


class AllGrouper(Grouper):
    """Storm's all grouping: every tuple to every task."""

    kind = GroupingKind.ALL

    def __init__(self, grouping: Grouping, sender: Sender, targets: Sequence[int]) -> None:
        super().__init__(grouping, sender, targets)
        self._fix(self.targets)

    @classmethod
    def spark_routing(cls, grouping: Grouping) -> SparkRouting:
        return EveryTask()

    @classmethod
    def keeps_together(cls, grouping: Grouping, key: Sequence[str]) -> bool:
        return True


class DirectGrouper(Grouper):
    """Storm's direct grouping: the emitter names the task of each tuple (``emit_direct``,
    or ``emit_batch(..., tasks=...)``); its collector checks that the task subscribes."""

    kind = GroupingKind.DIRECT
    direct = True

    def __init__(self, grouping: Grouping, sender: Sender, targets: Sequence[int]) -> None:
        super().__init__(grouping, sender, targets)
        self._stream = sender.stream
        self.choose = self._not_for_emit

    def _not_for_emit(self, values: Sequence[Any]) -> tuple[int, ...]:
        raise EmitError(
            f"component {self._stream[0]!r} emitted on direct stream {self._stream[1]!r} "
            f"with emit; use emit_direct(task, ...)"
        )

    @classmethod
    def spark_routing(cls, grouping: Grouping) -> SparkRouting:
        return ChosenTask()


class CustomGrouper(Grouper):
    """A user's ``CustomStreamGrouping`` (Storm's), prepared for this sending task; what it
    chooses must be among the subscriber's tasks."""

    kind = GroupingKind.CUSTOM

    def __init__(self, grouping: Grouping, sender: Sender, targets: Sequence[int]) -> None:
        super().__init__(grouping, sender, targets)
        custom = grouping.custom
        context = sender.context
        stream = sender.stream
        assert custom is not None
        assert context is not None
        allowed_list = list(self.targets)
        custom.prepare(context, stream, list(allowed_list))
        allowed = frozenset(allowed_list)
        this_task = context.get_this_task_id()

        def custom_choice(values: Sequence[Any]) -> tuple[int, ...]:
            chosen = tuple(custom.choose_tasks(this_task, values))
            for task in chosen:
                if task not in allowed:
                    raise EmitError(
                        f"custom grouping {type(custom).__name__} on stream {stream[1]!r} of "
                        f"{stream[0]!r} chose task {task}, which is not a target "
                        f"(targets: {allowed_list})"
                    )
            return chosen

        self.choose = custom_choice

    @classmethod
    def spark_routing(cls, grouping: Grouping) -> SparkRouting:
        return NoColumnRouting(
            "a CustomStreamGrouping chooses tasks in the sending task's Python while Spark "
            "routes rows by columns"
        )


_GROUPERS: dict[GroupingKind, type[Grouper]] = {
    cls.kind: cls
    for cls in (
        ShuffleGrouper,
        LocalOrShuffleGrouper,
        NoneGrouper,
        FieldsGrouper,
        PartialKeyGrouper,
        GlobalGrouper,
        AllGrouper,
        DirectGrouper,
        CustomGrouper,
    )
}


def grouper_class(grouping: Grouping) -> type[Grouper]:
    """The class that carries out ``grouping``."""
    return _GROUPERS[grouping.kind]


def make_grouper(
    grouping: Grouping,
    source_fields: Fields,
    target_tasks: Sequence[int],
    rng: random.Random,
    context: TopologyContext | None,
    stream: tuple[str, str],
) -> Grouper:
    """The grouper of one sending task (its ``rng`` and ``context``) for a subscription
    with ``grouping`` to ``stream`` (``(component, stream id)``, of ``source_fields``)."""
    sender = Sender(stream, source_fields, rng, context)
    return grouper_class(grouping)(grouping, sender, target_tasks)


def _mix(h: int) -> int:
    return ((h * 0x9E3779B97F4A7C15) & _MASK64) >> 32


def _hashable(keys: list[Any]) -> bool:
    try:
        hash(keys[0]) if keys else None
    except TypeError:
        return False
    return True
