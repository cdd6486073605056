"""Exactly-once state: values stored with the transaction that last changed them.

Commits come strictly in txid order and a replayed transaction carries the identical
batch, so a committer can tell a replay from new work by the txid stored with a value:

* ``TransactionalValue(txid, value)``: the stored txid equals this batch's -> the batch was
  applied already (the commit's ack was lost): skip it.
* ``OpaqueValue(curr_txid, curr, prev)``: also keeps the value before the last change, so a
  replay is applied again on top of ``prev`` — right even if the replayed batch differs
  (Trident's opaque state, for sources that cannot replay identically).

``TransactionalMap`` and ``OpaqueMap`` apply these rules to many keys at once over a
``MapState`` backend: ``MemoryMapState``, ``FileMapState``, or your own.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import TransactionalStateError
from ._state import write_atomically

__all__ = [
    "FileMapState",
    "MapState",
    "MemoryMapState",
    "OpaqueMap",
    "OpaqueValue",
    "TransactionalMap",
    "TransactionalValue",
]


@dataclass(frozen=True)
class TransactionalValue:
    """A value and the txid that last changed it.

    >>> v = TransactionalValue(None, 0).update(7, lambda n: n + 5)
    >>> v, v.update(7, lambda n: n + 5)      # txid 7 again: a replay, skipped
    (TransactionalValue(txid=7, value=5), TransactionalValue(txid=7, value=5))
    """

    txid: int | None
    value: Any

    def update(self, txid: int, fn: Callable[[Any], Any]) -> TransactionalValue:
        """The value after applying ``fn`` for transaction ``txid`` (itself for a replay)."""
        if self.txid is not None:
            if txid == self.txid:
                return self
            if txid < self.txid:
                raise TransactionalStateError(
                    f"transaction {txid} updates a value transaction {self.txid} already "
                    f"changed; commits went backwards"
                )
        return TransactionalValue(txid, fn(self.value))


@dataclass(frozen=True)
class OpaqueValue:
    """A value, the one before it, and the txid that made the change.

    >>> v = OpaqueValue(None, 0).update(3, lambda n: n + 2)
    >>> v.update(3, lambda n: n + 4)         # txid 3 replayed with another batch
    OpaqueValue(curr_txid=3, curr=4, prev=0)
    """

    curr_txid: int | None
    curr: Any
    prev: Any = None

    def update(self, txid: int, fn: Callable[[Any], Any]) -> OpaqueValue:
        """Apply ``fn`` for ``txid``: on top of ``curr`` for a new txid, of ``prev`` for a
        replay of the last one."""
        if self.curr_txid is None or self.curr_txid < txid:
            base = self.curr
        elif self.curr_txid == txid:
            base = self.prev
        else:
            raise TransactionalStateError(
                f"transaction {txid} updates a value transaction {self.curr_txid} already "
                f"changed; commits went backwards"
            )
        return OpaqueValue(txid, fn(base), base)

    def get(self) -> Any:
        """The current value (what readers see)."""
        return self.curr


class MapState:
    """A key-value backend read and written in bulk (Trident's ``IBackingMap``).

    Subclass it for another store: ``TransactionalMap`` and ``OpaqueMap`` keep their txids
    inside the values, so the backend only needs bulk reads and all-or-nothing writes.

    >>> from engine.transactional import MapState, TransactionalMap
    >>> class DictState(MapState):               # stands for a real database
    ...     def __init__(self):
    ...         self.rows = {}
    ...     def multi_get(self, keys):
    ...         return [self.rows.get(k) for k in keys]
    ...     def multi_put(self, keys, values):
    ...         self.rows.update(zip(keys, values))
    >>> TransactionalMap(DictState()).multi_update(1, ["a"], [lambda n: (n or 0) + 1])
    [1]
    """

    def multi_get(self, keys: Sequence[Any]) -> list[Any]:
        """The stored value of each key, None where absent."""
        raise NotImplementedError

    def multi_put(self, keys: Sequence[Any], values: Sequence[Any]) -> None:
        """Store ``values[i]`` under ``keys[i]``, all of them, or none if it fails: a batch
        half written could not be told apart from one written whole."""
        raise NotImplementedError


class MemoryMapState(MapState):
    """A dict. Lives in one task's bolt object (and is pickled with it, if declared)."""

    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}

    def multi_get(self, keys: Sequence[Any]) -> list[Any]:
        return [self.data.get(k) for k in keys]

    def multi_put(self, keys: Sequence[Any], values: Sequence[Any]) -> None:
        """Update the dict (it cannot fail half way)."""
        self.data.update(zip(keys, values, strict=True))


class FileMapState(MapState):
    """A dict pickled to ``path``, rewritten atomically on every ``multi_put``: a whole
    batch's changes land together or not at all. The file is the truth: every call reads
    it, so several readers see one writer's commits. Give each writer its own file."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync

    def __repr__(self) -> str:
        return f"FileMapState({str(self.path)!r})"

    def read(self) -> dict[Any, Any]:
        """Everything stored."""
        try:
            with self.path.open("rb") as f:
                data: dict[Any, Any] = pickle.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, pickle.UnpicklingError, EOFError) as exc:
            raise TransactionalStateError(f"cannot read the state file {self.path}: {exc}") from exc
        return data

    def multi_get(self, keys: Sequence[Any]) -> list[Any]:
        data = self.read()
        return [data.get(k) for k in keys]

    def multi_put(self, keys: Sequence[Any], values: Sequence[Any]) -> None:
        """Read the file, update it, and replace it atomically with the result."""
        data = self.read()
        data.update(zip(keys, values, strict=True))
        write_atomically(self.path, data, self.fsync)


class TransactionalMap:
    """Keys to ``TransactionalValue`` s in a ``MapState``: each batch applied exactly once.

    >>> counts = TransactionalMap(MemoryMapState())
    >>> counts.multi_update(1, ["a", "b"], [lambda n: (n or 0) + 2] * 2)
    [2, 2]
    >>> counts.multi_update(1, ["a"], [lambda n: (n or 0) + 2])   # replay of txid 1
    [2]
    """

    def __init__(self, backing: MapState) -> None:
        self.backing = backing

    def multi_get(self, keys: Sequence[Any]) -> list[Any]:
        """The current value of each key, None where absent (the txids stay inside)."""
        return [None if v is None else v.value for v in self.backing.multi_get(keys)]

    def multi_update(
        self, txid: int, keys: Sequence[Any], updaters: Sequence[Callable[[Any], Any]]
    ) -> list[Any]:
        """Apply ``updaters[i]`` to key ``keys[i]`` for transaction ``txid``, unless that
        transaction already did; returns the values after."""
        stored = self.backing.multi_get(keys)
        new = [
            (v if v is not None else TransactionalValue(None, None)).update(txid, fn)
            for v, fn in zip(stored, updaters, strict=True)
        ]
        changed = [(k, v) for k, v, old in zip(keys, new, stored, strict=True) if v is not old]
        if changed:
            self.backing.multi_put([k for k, _ in changed], [v for _, v in changed])
        return [v.value for v in new]


class OpaqueMap:
    """Keys to ``OpaqueValue`` s in a ``MapState`` (see ``OpaqueValue``)."""

    def __init__(self, backing: MapState) -> None:
        self.backing = backing

    def multi_get(self, keys: Sequence[Any]) -> list[Any]:
        """The current value of each key, None where absent."""
        return [None if v is None else v.curr for v in self.backing.multi_get(keys)]

    def multi_update(
        self, txid: int, keys: Sequence[Any], updaters: Sequence[Callable[[Any], Any]]
    ) -> list[Any]:
        """Apply ``updaters[i]`` to key ``keys[i]`` for transaction ``txid``: over the
        value before ``txid`` when it is a replay (an opaque spout may replay a txid with
        other tuples), so each batch counts once whatever it held; returns the values."""
        stored = self.backing.multi_get(keys)
        new = [
            (v if v is not None else OpaqueValue(None, None)).update(txid, fn)
            for v, fn in zip(stored, updaters, strict=True)
        ]
        self.backing.multi_put(list(keys), new)
        return [v.curr for v in new]
