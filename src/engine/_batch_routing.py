"""Groupings on batches: which rows of a ``TupleBatch`` go to which subscriber task.

A ``BatchRouter`` is made per (sending task, stream, subscriber) beside the per-tuple
chooser and sends rows exactly where that chooser would send them one by one — shuffle
apart, which only promises an even spread. Vectorized where the key allows:

- shuffle, local-or-shuffle, none: contiguous slices, the first slice's task rotating
  from batch to batch, so tasks stay even whatever the batch sizes;
- fields: the stable hash per row — numpy integer columns in one numpy expression, other
  columns through a bounded key -> task cache (strings hash once per distinct key);
- global, all, one target: every row to the fixed tasks, no per-row work at all;
- partial key, custom, anything else: the per-tuple chooser called per row (the fallback).

``route`` returns ``[(task, rows)]`` with ``rows`` an int64 index array, or ``None`` for
"every row" (so a one-target route copies nothing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._batch import column_as_list
from ._grouping import Grouping, GroupingKind, stable_hash

__all__ = ["BatchRouter", "Partition", "make_batch_router"]

#: ``(task, rows)``: ``rows`` is an int64 index array into the batch, or None for all rows.
Partition = tuple[int, "np.ndarray | None"]
#: Keys cached per router before the cache is cleared (bounds memory).
KEY_CACHE_SIZE = 1 << 16

_INTEGER_KINDS = frozenset("iub")


class BatchRouter:
    """Routes a batch's rows for one subscriber (see the module docstring)."""

    __slots__ = ("_cache", "_fallback", "_key_index", "_kind", "_next", "fixed", "targets")

    def __init__(
        self,
        kind: str,
        targets: Sequence[int],
        fallback: Callable[[Sequence[Any]], Sequence[int]] | None,
        key_index: Sequence[int] = (),
        fixed: tuple[int, ...] | None = None,
    ) -> None:
        self._kind = kind
        self.targets = np.array(sorted(targets), np.int64)
        self._fallback = fallback
        self._key_index = list(key_index)
        self._next = 0
        self._cache: dict[Any, int] = {}
        #: tasks that receive every row (global, all, a single target); None otherwise
        self.fixed = fixed

    def route(self, columns: Sequence[Any], n: int) -> list[Partition]:
        if self.fixed is not None:
            return [(t, None) for t in self.fixed]
        if n == 0:
            return []
        kind = self._kind
        if kind == "slices":
            return self._slices(n)
        if kind == "fields":
            return self._partition(self._field_indexes(columns, n))
        return self._per_row(columns, n)

    # --- shuffle ------------------------------------------------------------------------
    def _slices(self, n: int) -> list[Partition]:
        # Round robin in counts: the first ``n % k`` slices are one row longer, and the
        # next batch starts after them, so every task's total stays within one row.
        k = int(self.targets.shape[0])
        start = self._next
        base, extra = divmod(n, k)
        self._next = (start + extra) % k
        targets = self.targets.tolist()
        parts: list[Partition] = []
        lo = 0
        for j in range(min(k, n)):
            hi = lo + base + (j < extra)
            parts.append((targets[(start + j) % k], np.arange(lo, hi, dtype=np.int64)))
            lo = hi
        return parts

    # --- fields -------------------------------------------------------------------------
    def _field_indexes(self, columns: Sequence[Any], n: int) -> np.ndarray:
        """Per row, the index of its target in the sorted targets (the chooser's
        ``stable_hash(key) % len(targets)``)."""
        k = int(self.targets.shape[0])
        if len(self._key_index) == 1:
            col = columns[self._key_index[0]]
            if isinstance(col, np.ndarray) and col.dtype.kind in _INTEGER_KINDS:
                # stable_hash(int) is the int modulo 2**64 (two's complement wraps it)
                return (col.astype(np.uint64) % np.uint64(k)).astype(np.int64)
            keys = column_as_list(col)
        else:
            cols = [column_as_list(columns[i]) for i in self._key_index]
            keys = list(zip(*cols, strict=True))
        cache = self._cache
        get = cache.get
        out = [get(key, -1) for key in keys] if _hashable(keys) else [-1] * n
        if -1 in out:
            if len(cache) >= KEY_CACHE_SIZE:
                cache.clear()
            for i, key in enumerate(keys):
                if out[i] == -1:
                    index = _key_hash(key, len(self._key_index)) % k
                    out[i] = index
                    with contextlib.suppress(TypeError):  # an unhashable key: not cached
                        cache[key] = index
        return np.array(out, np.int64)

    def _partition(self, index: np.ndarray) -> list[Partition]:
        targets = self.targets.tolist()
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

    # --- fallback -----------------------------------------------------------------------
    def _per_row(self, columns: Sequence[Any], n: int) -> list[Partition]:
        choose = self._fallback
        assert choose is not None
        cols = [column_as_list(c) for c in columns]
        rows_of: dict[int, list[int]] = {}
        for i, values in enumerate(zip(*cols, strict=True)):
            for t in choose(list(values)):
                rows_of.setdefault(t, []).append(i)
        return [(t, np.array(rows, np.int64)) for t, rows in sorted(rows_of.items())]


def _hashable(keys: list[Any]) -> bool:
    try:
        hash(keys[0]) if keys else None
    except TypeError:
        return False
    return True


def _key_hash(key: Any, width: int) -> int:
    # The per-tuple chooser hashes the value itself for one key field, the tuple of values
    # for several.
    return stable_hash(key if width == 1 else tuple(key))


def make_batch_router(
    grouping: Grouping,
    source_fields: Any,
    target_tasks: Sequence[int],
    chooser: Callable[[Sequence[Any]], Sequence[int]] | None,
    fixed: tuple[int, ...] | None,
) -> BatchRouter:
    """The batch router beside ``chooser`` (the per-tuple one for the same subscription);
    ``fixed`` is the chooser's constant targets, when it has them."""
    if fixed is not None:
        return BatchRouter("fixed", target_tasks, chooser, fixed=fixed)
    kind = grouping.kind
    if kind in (GroupingKind.SHUFFLE, GroupingKind.LOCAL_OR_SHUFFLE, GroupingKind.NONE):
        return BatchRouter("slices", target_tasks, chooser)
    if kind is GroupingKind.FIELDS and grouping.fields is not None:
        idx = [source_fields.index(f) for f in grouping.fields]
        return BatchRouter("fields", target_tasks, chooser, key_index=idx)
    return BatchRouter("per_row", target_tasks, chooser)
