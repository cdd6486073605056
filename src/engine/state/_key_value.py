"""``KeyValueState``: Storm's ``KeyValueState`` over a ``StateStore``.

The whole state of a task is held in memory (read from the store when the task is given
its state) and written back as the changes of each checkpoint: ``prepare_commit(txid)``
encodes the keys put or deleted since the last prepare and records them in the store,
``commit(txid)`` makes them the committed state, ``rollback()`` drops what was not committed
and reloads. A value mutated in place is a change only once it is ``put`` again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ._serialization import decode_many, encode_many
from ._store import StateStore

__all__ = ["KeyValueState"]

_DELETED = object()


class KeyValueState:
    """A task's key-value state; keys and values as ``engine.state`` serializes them.

    >>> from engine.state import InMemoryStateStore, KeyValueState
    >>> state = KeyValueState(InMemoryStateStore("doc/counts/0"))
    >>> state.put("cat", state.get("cat", 0) + 1)
    >>> state.get("cat"), len(state), list(state)
    (1, 1, ['cat'])
    """

    # Slots: reads and puts are the hot path of every stateful bolt, and a slot is the
    # quickest attribute to find.
    __slots__ = ("_changed", "_data", "_deletes", "_store", "_uncommitted", "get")

    #: ``get(key, default=None)``: the value of ``key``, or ``default`` (Storm's ``get``).
    #: The dict's own method, so a read costs no Python call of ours.
    get: Callable[..., Any]

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._data: dict[Any, Any] = {}
        self._changed: dict[Any, Any] = {}
        self._deletes = False  # some value in _changed is _DELETED
        #: the encoded changes of a prepared, not yet committed transaction: a second
        #: prepare before the commit must carry them too
        self._uncommitted: dict[bytes, bytes | None] = {}
        self._load()

    def _load(self) -> None:
        stored = self._store.load()
        self._data = dict(zip(decode_many(stored), decode_many(stored.values()), strict=True))
        self.get = self._data.get
        self._changed = {}
        self._deletes = False
        self._uncommitted = {}

    @property
    def namespace(self) -> str:
        return self._store.namespace

    # --- Storm's KeyValueState ------------------------------------------------------------
    def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value`` (an unhashable key fails here, not at the checkpoint)."""
        self._data[key] = value
        self._changed[key] = value

    def delete(self, key: Any) -> Any:
        """Remove ``key``; returns its value (None if it had none)."""
        value = self._data.pop(key, None)
        self._changed[key] = _DELETED
        self._deletes = True
        return value

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._data))

    def items(self) -> Iterator[tuple[Any, Any]]:
        """``(key, value)`` pairs (Storm's ``iterator()``)."""
        return iter(list(self._data.items()))

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __repr__(self) -> str:
        return f"KeyValueState({self.namespace!r}, {len(self._data)} keys)"

    # --- Storm's State: the checkpoint protocol -------------------------------------------
    def prepare_commit(self, txid: int) -> None:
        """Record the changes since the last prepare as transaction ``txid``."""
        changed = self._changed
        changes = dict(self._uncommitted)
        keys = encode_many(changed)
        if self._deletes:
            puts = [v for v in changed.values() if v is not _DELETED]
            values = iter(encode_many(puts))
            changes.update(
                (k, None if v is _DELETED else next(values))
                for k, v in zip(keys, changed.values(), strict=True)
            )
        else:
            changes.update(zip(keys, encode_many(changed.values()), strict=True))
        self._store.prepare(txid, changes)
        self._uncommitted = changes
        self._changed = {}
        self._deletes = False

    def commit(self, txid: int) -> None:
        """Make the prepared transaction ``txid`` the committed state."""
        self._store.commit(txid)
        self._uncommitted = {}

    def rollback(self) -> None:
        """Drop every change not committed and reload the committed state."""
        self._store.rollback()
        self._load()
