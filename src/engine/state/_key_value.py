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

Beside the user's entries a state carries the engine's own (``put_system`` /
``system``): what a stateful window saves of its contents at each checkpoint. They are
stored under one key of the task's namespace that no user key encodes to (its first byte
is no format version; in the in-memory store, an object of this module), so they are
prepared, committed and rolled back in the same transaction as the user's entries, and
``get``, ``items``, ``len`` and iteration never show them.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from itertools import compress, repeat
from operator import is_not
from typing import Any

from ._serialization import decode, decode_many, encode, encode_many
from ._store import DELETED, StateStore

__all__ = ["SNAPSHOT_MAX_KEYS", "KeyValueState"]

_DELETED = DELETED

#: The most keys a state may hold for its changes to be found by comparison with a copy
#: (see the module's doc): 10,000 keys compare in about 0.1-1 ms, once per checkpoint.
SNAPSHOT_MAX_KEYS = 10_000
#: The value types whose objects cannot change: a copy of the state holding them stays true.
_IMMUTABLE = frozenset({str, int, float, bytes, bool, type(None)})


class _SystemKey:
    """The key of the engine's entries in a store that keeps objects (see the module's
    doc): one object, which no user key equals."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SYSTEM"


#: Where the engine's entries are stored: in a store of bytes, a key no encoded user key
#: can be (they all start with the format version); in the in-memory store, an object.
_SYSTEM_BYTES = b"\x00system"
_SYSTEM_OBJECT = _SystemKey()


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
        "_system",
        "_system_next",
        "_system_prepared",
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
        #: the engine's entries (``put_system``): as committed; put since the last
        #: prepare; as the prepared transaction holds them (None: none prepared)
        self._system: dict[str, Any] = {}
        self._system_next: dict[str, Any] = {}
        self._system_prepared: dict[str, Any] | None = None
        self._load()

    def _load(self) -> None:
        stored: dict[Any, Any] = self._store.load()
        if self._store.keeps_objects:
            system = stored.pop(_SYSTEM_OBJECT, None)
            self._system = {} if system is None else dict(system)
            self._data = _copies(stored)  # ``load`` gave a dict of its own
        else:
            raw = stored.pop(_SYSTEM_BYTES, None)
            self._system = {} if raw is None else decode(raw)
            self._data = dict(zip(decode_many(stored), decode_many(stored.values()), strict=True))
        self.get = self._data.get
        self._uncommitted = {}
        self._system_next = {}
        self._system_prepared = None
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

    # --- the engine's entries -------------------------------------------------------------
    def put_system(self, name: str, value: Any) -> None:
        """Set the engine's entry ``name`` (picklable; not copied: give a value nobody
        changes afterwards, such as bytes) for the next ``prepare_commit``."""
        self._system_next[name] = value

    def system(self, name: str, default: Any = None) -> Any:
        """The engine's entry ``name`` as last committed, or ``default``."""
        return self._system.get(name, default)

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
            if self._system_next:
                changes[_SYSTEM_OBJECT] = self._prepare_system()
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
        if self._system_next:
            changes[_SYSTEM_BYTES] = encode(self._prepare_system())
        self._store.prepare(txid, changes)
        self._uncommitted = changes
        self._choose_mode()

    def _prepare_system(self) -> dict[str, Any]:
        """The engine's entries as the transaction being prepared holds them (all of them:
        they are stored as one value)."""
        base = self._system if self._system_prepared is None else self._system_prepared
        prepared = self._system_prepared = {**base, **self._system_next}
        self._system_next = {}
        return prepared

    def commit(self, txid: int) -> None:
        """Make the prepared transaction ``txid`` the committed state."""
        self._store.commit(txid)
        self._uncommitted = {}
        if self._system_prepared is not None:
            self._system, self._system_prepared = self._system_prepared, None

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
