"""Where a transactional topology keeps what must survive a restart (Storm keeps it in
ZooKeeper): the next transaction id to commit, the metadata of every transaction not yet
committed, each partition's batch metadata.

A ``StateStore`` opens one ``TransactionalState`` per (transactional id, namespace); each
namespace is written by a single task (the coordinator, or the emitter task owning a
partition), so namespaces never need locking. ``FileStateStore`` persists every change
before it returns (atomic file replace); ``MemoryStateStore`` lives as long as the process.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._attempt import INIT_TXID
from ._errors import TransactionalStateError

__all__ = ["FileStateStore", "MemoryStateStore", "StateStore", "TransactionalState"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_name(what: str, name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise TransactionalStateError(
            f"{what} must be a non-empty string of letters, digits, '.', '_' or '-' "
            f"(it names files), got {name!r}"
        )
    return name


class TransactionalState:
    """One namespace of a state store: keys (strings, ``/``-separated) to values.

    >>> state = MemoryStateStore().open("counts", "coordinator")
    >>> state.set_data("meta/3", {"offset": 30})
    >>> state.get_data("meta/3"), state.list("meta")
    ({'offset': 30}, ['meta/3'])
    """

    def __init__(
        self, data: dict[str, Any], persist: Callable[[dict[str, Any]], None] | None = None
    ) -> None:
        self._data = data
        self._persist = persist

    def get_data(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key``, else ``default``."""
        return self._data.get(key, default)

    def set_data(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``: persisted before this returns (a file store
        rewrites the namespace), because the caller acts on it next."""
        self._data[key] = value
        if self._persist is not None:
            self._persist(self._data)

    def delete(self, key: str) -> None:
        """Remove ``key`` (nothing happens if it is absent), persisted before returning."""
        if self._data.pop(key, _GONE) is not _GONE and self._persist is not None:
            self._persist(self._data)

    def delete_many(self, keys: list[str]) -> None:
        """Remove every key of ``keys`` with one write, not one per key."""
        removed = [k for k in keys if self._data.pop(k, _GONE) is not _GONE]
        if removed and self._persist is not None:
            self._persist(self._data)

    def list(self, prefix: str) -> list[str]:
        """Keys directly under ``prefix`` (``prefix/...``)."""
        start = prefix + "/"
        return sorted(k for k in self._data if k.startswith(start))

    def close(self) -> None:
        """Nothing to release: every change was persisted when it was made."""


_GONE: Any = object()


class StateStore:
    """Opens the namespaces of transactional topologies. Subclass it for another backend.

    A backend returns a ``TransactionalState`` over the namespace's data, with a function
    that persists the whole namespace; each namespace has a single writer, so nothing
    needs locking.

    >>> from engine.transactional import StateStore, TransactionalState
    >>> class KeptHere(StateStore):              # stands for a real database
    ...     def __init__(self):
    ...         self.saved = {}
    ...     def open(self, transactional_id, namespace):
    ...         key = (transactional_id, namespace)
    ...         data = dict(self.saved.get(key, {}))
    ...         return TransactionalState(data, lambda d: self.saved.update({key: dict(d)}))
    >>> store = KeptHere()
    >>> store.open("counts", "coordinator").set_data("next", 7)
    >>> store.open("counts", "coordinator").get_data("next")
    7
    """

    def open(self, transactional_id: str, namespace: str) -> TransactionalState:
        """The namespace ``namespace`` of the topology ``transactional_id``, with what was
        stored there before. Both names are checked: they name files."""
        raise NotImplementedError


_MEMORY: dict[str, dict[str, Any]] = {}
_MEMORY_LOCK = threading.Lock()


class MemoryStateStore(StateStore):
    """State in this process's memory: it survives restarting a topology, not the process.

    Copies of the store (components are pickled per task) share the same data.
    """

    def __init__(self) -> None:
        self._id = uuid.uuid4().hex

    def open(self, transactional_id: str, namespace: str) -> TransactionalState:
        check_name("the transactional id", transactional_id)
        check_name("the namespace", namespace)
        key = f"{self._id}/{transactional_id}/{namespace}"
        with _MEMORY_LOCK:
            data = _MEMORY.setdefault(key, {})
        return TransactionalState(data)


class FileStateStore(StateStore):
    """State in files under ``directory``: ``<transactional id>/<namespace>.pickle``.

    Every change rewrites its namespace's file atomically (write, fsync, rename), so a
    crash leaves the old or the new state, never a mix. ``fsync=False`` skips the fsync
    (faster, but a machine crash may lose the last changes).
    """

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = Path(directory)
        self.fsync = fsync

    def __repr__(self) -> str:
        return f"FileStateStore({str(self.directory)!r})"

    def _path(self, transactional_id: str, namespace: str) -> Path:
        check_name("the transactional id", transactional_id)
        check_name("the namespace", namespace)
        return self.directory / transactional_id / f"{namespace}.pickle"

    def open(self, transactional_id: str, namespace: str) -> TransactionalState:
        path = self._path(transactional_id, namespace)
        data: dict[str, Any] = {}
        if path.exists():
            try:
                with path.open("rb") as f:
                    data = pickle.load(f)
            except (OSError, pickle.UnpicklingError, EOFError) as exc:
                raise TransactionalStateError(f"cannot read the state file {path}: {exc}") from exc
        return TransactionalState(data, lambda d: write_atomically(path, d, self.fsync))


def write_atomically(path: Path, data: Any, fsync: bool) -> None:
    """Pickle ``data`` to ``path`` through a temporary file and a rename."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)
                if fsync:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise TransactionalStateError(f"cannot write the state file {path}: {exc}") from exc


class RotatingTransactionalState:
    """txid -> value under one prefix of a namespace; committed txids are cleaned away.

    Storm's ``RotatingTransactionalState``: ``get_state(txid, init)`` returns the stored
    value or creates it with ``init(txid, value of the closest earlier txid)`` — unless a
    later txid already has a value, in which case this one is stored as None (skipped).
    """

    def __init__(self, state: TransactionalState, prefix: str, strict_order: bool = False) -> None:
        self._state = state
        self._prefix = prefix
        self._strict = strict_order
        self._curr: dict[int, Any] = {}
        for key in state.list(prefix):
            self._curr[int(key.rsplit("/", 1)[1])] = state.get_data(key)

    def _key(self, txid: int) -> str:
        return f"{self._prefix}/{txid}"

    def has_cache(self, txid: int) -> bool:
        """Whether ``txid`` has a value (or was skipped) already."""
        return txid in self._curr

    def get_state(self, txid: int, init: Callable[[int, Any], Any]) -> Any:
        """The value of ``txid``, created and stored first if needed (see the class): a
        replayed transaction gets back exactly what it had. With ``strict_order``, a txid
        that does not follow the last stored one is a ``TransactionalStateError``."""
        curr = self._curr
        if txid not in curr:
            earlier = [t for t in curr if t < txid]
            later = [t for t in curr if t > txid]
            prev = max(earlier) if earlier else None
            if self._strict:
                if prev is None and txid != INIT_TXID:
                    raise TransactionalStateError(
                        f"initializing transaction {txid} of {self._prefix!r}, but the state "
                        f"has no value for the transaction before it"
                    )
                if prev is not None and prev != txid - 1:
                    raise TransactionalStateError(
                        f"initializing transaction {txid} of {self._prefix!r}, but the last "
                        f"stored transaction is {prev}"
                    )
                if later:
                    raise TransactionalStateError(
                        f"initializing transaction {txid} of {self._prefix!r}, but later "
                        f"transactions {sorted(later)} already have state"
                    )
            value = None if later else init(txid, curr[prev] if prev is not None else None)
            curr[txid] = value
            self._state.set_data(self._key(txid), value)
        return curr[txid]

    def get_state_or_create(self, txid: int, init: Callable[[int, Any], Any]) -> Any:
        """The stored value, or None after creating it with ``init``."""
        if txid in self._curr:
            return self._curr[txid]
        self.get_state(txid, init)
        return None

    def cleanup_before(self, txid: int) -> None:
        """Forget every txid before ``txid``: they are committed and never replayed."""
        old = [t for t in self._curr if t < txid]
        for t in old:
            del self._curr[t]
        if old:
            self._state.delete_many([self._key(t) for t in old])
