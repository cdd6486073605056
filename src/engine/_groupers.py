"""Choosers: how one sending task routes a stream's tuples to a subscriber's tasks.

``make_grouper`` turns a declared ``Grouping`` (``_grouping``) into the chooser one sending
task uses at run time. A chooser returns a tuple of target task ids; the common one-target
results are cached tuples, so routing a tuple allocates nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from ._context import TopologyContext
from ._errors import EmitError
from ._fields import Fields
from ._grouping import Grouping, GroupingKind, stable_hash

__all__ = ["FIELDS_CACHE_SIZE", "Chooser", "constant_targets", "make_grouper"]

_MASK64 = (1 << 64) - 1
#: Fields-grouping keys cached per sender before the cache is cleared (bounds memory).
FIELDS_CACHE_SIZE = 1 << 16


Chooser = Callable[[Sequence[Any]], tuple[int, ...]]


class _Constant:
    """A chooser that always picks the same tasks; ``targets`` lets emit skip the call."""

    __slots__ = ("targets",)

    def __init__(self, targets: tuple[int, ...]) -> None:
        self.targets = targets

    def __call__(self, values: Sequence[Any]) -> tuple[int, ...]:
        return self.targets


def _constant(targets: tuple[int, ...]) -> Chooser:
    return _Constant(targets)


def constant_targets(chooser: Chooser | None) -> tuple[int, ...] | None:
    """The fixed targets of a chooser that ignores the values, else None."""
    return chooser.targets if isinstance(chooser, _Constant) else None


def _mix(h: int) -> int:
    return ((h * 0x9E3779B97F4A7C15) & _MASK64) >> 32


def make_grouper(
    grouping: Grouping,
    source_fields: Fields,
    target_tasks: list[int],
    rng: random.Random,
    context: TopologyContext | None,
    stream: tuple[str, str],
) -> Chooser | None:
    """The chooser for one sending task; ``None`` for direct groupings (no choice)."""
    targets = sorted(target_tasks)
    singles = [(t,) for t in targets]
    n = len(targets)
    kind = grouping.kind

    if kind is GroupingKind.DIRECT:
        return None
    if kind is GroupingKind.GLOBAL:
        lowest = singles[0]
        return _constant(lowest)
    if kind is GroupingKind.ALL:
        everyone = tuple(targets)
        return _constant(everyone)
    if kind is GroupingKind.NONE:
        randrange = rng.randrange
        return lambda values: singles[randrange(n)]
    if kind in (GroupingKind.SHUFFLE, GroupingKind.LOCAL_OR_SHUFFLE):
        order = list(singles)
        rng.shuffle(order)
        if n == 1:
            only = order[0]
            return _constant(only)
        state = [0]

        def shuffle(values: Sequence[Any]) -> tuple[int, ...]:
            i = state[0]
            state[0] = i + 1 if i + 1 < n else 0
            return order[i]

        return shuffle
    if kind is GroupingKind.FIELDS:
        assert grouping.fields is not None
        idx = [source_fields.index(f) for f in grouping.fields]
        if n == 1 or not idx:  # Storm: a fields grouping on no fields is a global grouping
            only = singles[0]
            return _constant(only)
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

            return one_field

        def fields(values: Sequence[Any]) -> tuple[int, ...]:
            key = tuple([values[i] for i in idx])
            try:
                return get(key) or miss(key)
            except TypeError:
                return miss(key)

        return fields
    if kind is GroupingKind.PARTIAL_KEY:
        assert grouping.fields is not None
        idx = [source_fields.index(f) for f in grouping.fields]
        if n == 1:
            only = singles[0]
            return _constant(only)
        sent = [0] * n

        def partial_key(values: Sequence[Any]) -> tuple[int, ...]:
            h = stable_hash(tuple([values[i] for i in idx]))
            first = h % n
            second = (first + 1 + _mix(h) % (n - 1)) % n
            pick = first if sent[first] <= sent[second] else second
            sent[pick] += 1
            return singles[pick]

        return partial_key
    if kind is GroupingKind.CUSTOM:
        custom = grouping.custom
        assert custom is not None
        assert context is not None
        custom.prepare(context, stream, list(targets))
        allowed = frozenset(targets)
        this_task = context.get_this_task_id()

        def custom_choice(values: Sequence[Any]) -> tuple[int, ...]:
            chosen = tuple(custom.choose_tasks(this_task, values))
            for task in chosen:
                if task not in allowed:
                    raise EmitError(
                        f"custom grouping {type(custom).__name__} on stream {stream[1]!r} of "
                        f"{stream[0]!r} chose task {task}, which is not a target "
                        f"(targets: {targets})"
                    )
            return chosen

        return custom_choice
    raise AssertionError(f"unhandled grouping {kind}")
