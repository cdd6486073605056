"""``KeyValueState``: Storm's ``KeyValueState`` over a ``StateStore``.

The whole state of a task is held in memory (read from the store when the task is given
its state) and written back as the changes of each checkpoint: ``prepare_commit(txid)``
records the keys changed or deleted since the last prepare in the store (encoded, unless
the store keeps objects: the in-memory one, which gets mutable values as copies),
``commit(txid)`` makes them the committed state, ``rollback()`` drops what was not committed
and reloads. A value mutated in place is a change only once it is ``put`` again.

How the changes are found is chosen at every checkpoint, for the interval that follows:

- *Snapshot*: while the state holds at most ``SNAPSHOT_MAX_KEYS`` keys and every value is
  of an immutable plain type (``str``, ``int``, ``float``, ``bytes``, ``bool``, ``None``),
  ``put`` only sets the value, and the checkpoint finds the changes by comparing the state
  with a shallow copy taken at the previous one (keys whose value is not the same object).
  That comparison runs in C, about 10 ns a key: less, on a small state, than recording
  every ``put`` (measured: a put that records costs a stateful word count 2 % of its CPU
  time). Immutable values make the copy safe: a value that is the same object holds the
  same value.
- *Tracking*: otherwise ``put`` records the key in a change set as well. A large state
  (comparing all of it at every checkpoint would cost more than the puts of an interval)
  and mutable values (a list mutated in place and put again is the same object, so the
  comparison would miss it) need it.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from itertools import compress, repeat
from operator import is_not
from typing import Any

from ._serialization import decode_many, encode_many
from ._store import DELETED, StateStore

__all__ = ["SNAPSHOT_MAX_KEYS", "KeyValueState"]

_DELETED = DELETED

#: The most keys a state may hold for its changes to be found by comparison with a copy
#: (see the module's doc): 10,000 keys compare in about 0.1-1 ms, once per checkpoint.
SNAPSHOT_MAX_KEYS = 10_000
#: The value types whose objects cannot change: a copy of the state holding them stays true.
_IMMUTABLE = frozenset({str, int, float, bytes, bool, type(None)})


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
    __slots__ = (
        "_changed",
        "_data",
        "_deletes",
        "_snapshot",
        "_store",
        "_uncommitted",
        "get",
    )

    #: ``get(key, default=None)``: the value of ``key``, or ``default`` (Storm's ``get``).
    #: The dict's own method, so a read costs no Python call of ours.
    get: Callable[..., Any]

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._data: dict[Any, Any] = {}
        self._changed: dict[Any, Any] = {}
        #: the state as of the last prepare, in the snapshot mode; None when tracking
        self._snapshot: dict[Any, Any] | None = None
        self._deletes = False  # some key was deleted since the last prepare
        #: the changes of a prepared, not yet committed transaction, as given to the
        #: store: a second prepare before the commit must carry them too
        self._uncommitted: dict[Any, Any] = {}
        self._load()

    def _load(self) -> None:
        stored = self._store.load()
        if self._store.keeps_objects:
            self._data = _copies(stored)  # ``load`` gave a dict of its own
        else:
            self._data = dict(zip(decode_many(stored), decode_many(stored.values()), strict=True))
        self.get = self._data.get
        self._uncommitted = {}
        self._choose_mode()

    def _choose_mode(self) -> None:
        """Start an interval: the snapshot mode if the state allows it, else tracking."""
        data = self._data
        self._changed = {}
        self._deletes = False
        if len(data) <= SNAPSHOT_MAX_KEYS and _IMMUTABLE.issuperset(map(type, data.values())):
            self._snapshot = data.copy()
        else:
            self._snapshot = None

    @property
    def namespace(self) -> str:
        """Where this state lives in its provider: ``<topology name>/<component>/<task>``.

        Built from names, not from anything a run draws, so a restarted topology of the same
        name finds the state its tasks committed before; two topologies that must not share
        state need two names.
        """
        return self._store.namespace

    @property
    def tracks_puts(self) -> bool:
        """Whether this interval's ``put`` records each change (tests read it)."""
        return self._snapshot is None

    # --- Storm's KeyValueState ------------------------------------------------------------
    def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value`` (an unhashable key fails here, not at the checkpoint)."""
        # One method with a test, not a callable swapped per mode: a bound C method
        # (``dict.__setitem__``) or a closure measured slower than this.
        self._data[key] = value
        if self._snapshot is None:
            self._changed[key] = value

    def delete(self, key: Any) -> Any:
        """Remove ``key``; returns its value (None if it had none)."""
        value = self._data.pop(key, None)
        if self._snapshot is None:
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
    def _changes(self) -> dict[Any, Any]:
        """The keys put or deleted since the last prepare (``_DELETED`` for a delete)."""
        snapshot = self._snapshot
        if snapshot is None:
            return self._changed
        data = self._data
        # the keys whose value is not the object the snapshot holds, in C
        differs = map(is_not, map(snapshot.get, data, repeat(_DELETED)), data.values())
        changed = dict(compress(data.items(), differs))
        if self._deletes:
            changed.update(zip(snapshot.keys() - data.keys(), repeat(_DELETED)))
        return changed

    def prepare_commit(self, txid: int) -> None:
        """Record the changes since the last prepare as transaction ``txid``."""
        changed = self._changes()
        if self._store.keeps_objects:
            # The objects themselves, mutable ones copied: a change in place after this
            # must not reach the store before it is put and checkpointed again.
            changes = _copies(changed)
            if self._uncommitted:
                changes = {**self._uncommitted, **changes}
            self._store.prepare(txid, changes)
            self._uncommitted = changes
            self._choose_mode()
            return
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
        self._choose_mode()

    def commit(self, txid: int) -> None:
        """Make the prepared transaction ``txid`` the committed state."""
        self._store.commit(txid)
        self._uncommitted = {}

    def rollback(self) -> None:
        """Drop every change not committed and reload the committed state."""
        self._store.rollback()
        self._load()


def _copies(entries: dict[Any, Any]) -> dict[Any, Any]:
    """``entries`` (a dict nobody changes afterwards) for a store that keeps objects, or
    from one: values of immutable types (and ``DELETED``) as they are, others copied (by
    pickling, as a store that encodes would copy them), so the state and the store never
    share a mutable object."""
    types = set(map(type, entries.values()))
    if _IMMUTABLE.issuperset(types):
        return entries
    return {
        k: v if type(v) in _IMMUTABLE or v is DELETED else pickle.loads(pickle.dumps(v, 5))
        for k, v in entries.items()
    }
