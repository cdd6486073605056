"""``StateStore``: where one namespace's committed state and its prepared transaction live.

A store keeps, per namespace (one bolt task, or the checkpoint spout), the committed
entries, at most one prepared transaction (a txid and its changes, ``None`` = delete) and
the last committed txid. Storm's two-phase protocol maps onto it one to one:
``prepare(txid, changes)`` makes the changes durable beside the committed state,
``commit(txid)`` applies them atomically, ``rollback()`` drops them. Keys and values are
bytes in the format of ``engine.state._serialization``, except in a store that
``keeps_objects`` (the in-memory one): nothing leaves the process there, so encoding every
change at each checkpoint and decoding at each load would be work for nothing (most of a
large checkpoint's time); it keeps the objects, a delete being ``DELETED``.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from itertools import repeat
from operator import is_
from typing import Any, ClassVar

__all__ = ["DELETED", "InMemoryStateStore", "StateStore"]


class _Deleted:
    """The value of a deleted key among the changes given to a store that keeps objects
    (where ``None`` is a value like any other)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DELETED"


DELETED: Any = _Deleted()


class StateStore(ABC):
    """One namespace of a state provider."""

    namespace: str
    #: Whether this store takes and gives back keys and values as objects, not bytes
    #: (see the module's doc): ``KeyValueState`` hands it mutable values as copies.
    keeps_objects: ClassVar[bool] = False

    @abstractmethod
    def load(self) -> dict[bytes, bytes]:
        """The committed entries."""

    @abstractmethod
    def prepare(self, txid: int, changes: Mapping[bytes, bytes | None]) -> None:
        """Durably record ``changes`` as transaction ``txid`` (replacing any prepared one)."""

    @abstractmethod
    def commit(self, txid: int) -> None:
        """Apply the prepared transaction ``txid``; nothing if it is not the prepared one
        (already committed, or rolled back)."""

    @abstractmethod
    def rollback(self) -> None:
        """Drop the prepared transaction, if any."""

    @abstractmethod
    def prepared_txid(self) -> int | None:
        """The txid of the prepared transaction, or None."""

    @abstractmethod
    def committed_txid(self) -> int | None:
        """The txid of the last committed transaction, or None."""

    def close(self) -> None:  # noqa: B027 - optional: most stores hold nothing to release
        """Release connections."""


class _Namespace:
    __slots__ = ("committed", "committed_txid", "prepared", "prepared_txid")

    def __init__(self) -> None:
        self.committed: dict[Any, Any] = {}
        self.prepared: dict[Any, Any] = {}
        self.prepared_txid: int | None = None
        self.committed_txid: int | None = None


_LOCK = threading.Lock()
_SPACES: dict[tuple[str, str], _Namespace] = {}


class InMemoryStateStore(StateStore):
    """State in this process's memory (``topology.state.provider = "memory"``, the default).

    It outlives a task crash and a topology restart in the same process (better than
    Storm's in-memory provider, which a worker restart empties), not the process.
    ``scope`` (``topology.state.provider.config``) separates unrelated runs.
    """

    keeps_objects = True

    def __init__(self, namespace: str, scope: str = "") -> None:
        self.namespace = namespace
        with _LOCK:
            self._ns = _SPACES.setdefault((scope, namespace), _Namespace())

    @staticmethod
    def clear(scope: str | None = None) -> None:
        """Forget every namespace (of ``scope`` only, when given)."""
        with _LOCK:
            for key in [k for k in _SPACES if scope is None or k[0] == scope]:
                del _SPACES[key]

    def load(self) -> dict[Any, Any]:
        return dict(self._ns.committed)

    def prepare(self, txid: int, changes: Mapping[Any, Any]) -> None:
        self._ns.prepared = dict(changes)
        self._ns.prepared_txid = txid

    def commit(self, txid: int) -> None:
        ns = self._ns
        if ns.prepared_txid != txid:
            return
        prepared = ns.prepared
        ns.committed.update(prepared)
        if any(map(is_, prepared.values(), repeat(DELETED))):  # deletes: rare
            committed = ns.committed
            for k in [k for k, v in prepared.items() if v is DELETED]:
                del committed[k]
        ns.prepared, ns.prepared_txid, ns.committed_txid = {}, None, txid

    def rollback(self) -> None:
        self._ns.prepared, self._ns.prepared_txid = {}, None

    def prepared_txid(self) -> int | None:
        return self._ns.prepared_txid

    def committed_txid(self) -> int | None:
        return self._ns.committed_txid
