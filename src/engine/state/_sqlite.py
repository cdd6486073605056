"""``SqliteStateStore``: the embedded durable store (``topology.state.provider = "sqlite"``).

One SQLite file (``topology.state.provider.config``: its path) holds every namespace of a
topology in three tables: ``squall_state`` (committed entries), ``squall_state_prepared``
(the prepared transaction; a NULL value is a delete) and ``squall_state_txid``. Each
prepare and commit is one SQLite transaction in WAL mode, so a killed process leaves either
the old or the new state, never half of one. A file written by another format version is
refused (``squall_state_meta``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping

from ._errors import StateError, StateFormatError
from ._serialization import FORMAT_VERSION
from ._store import StateStore

__all__ = ["SqliteStateStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS squall_state_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS squall_state (
    ns TEXT NOT NULL, k BLOB NOT NULL, v BLOB NOT NULL, PRIMARY KEY (ns, k)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS squall_state_prepared (
    ns TEXT NOT NULL, k BLOB NOT NULL, v BLOB, PRIMARY KEY (ns, k)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS squall_state_txid (
    ns TEXT PRIMARY KEY, prepared INTEGER, committed INTEGER);
"""


class SqliteStateStore(StateStore):
    """One namespace in the SQLite file at ``path`` (created with its directory)."""

    def __init__(self, path: str | os.PathLike[str], namespace: str) -> None:
        self.namespace = namespace
        self.path = os.fspath(path)
        try:
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self._db.execute(
                "INSERT OR IGNORE INTO squall_state_meta VALUES ('format_version', ?)",
                (str(FORMAT_VERSION),),
            )
            (version,) = self._db.execute(
                "SELECT v FROM squall_state_meta WHERE k = 'format_version'"
            ).fetchone()
        except sqlite3.Error as exc:
            raise StateError(f"state store {self.path!r}: cannot open it: {exc}") from exc
        if version != str(FORMAT_VERSION):
            raise StateFormatError(
                f"state store {self.path!r} holds format version {version}, this squall "
                f"reads version {FORMAT_VERSION}; point topology.state.provider.config at "
                f"another file"
            )

    def _txid(self, column: str) -> int | None:
        row = self._db.execute(
            f"SELECT {column} FROM squall_state_txid WHERE ns = ?", (self.namespace,)
        ).fetchone()
        return None if row is None else row[0]

    def load(self) -> dict[bytes, bytes]:
        try:
            rows = self._db.execute(
                "SELECT k, v FROM squall_state WHERE ns = ?", (self.namespace,)
            ).fetchall()
        except sqlite3.Error as exc:
            raise StateError(f"state store {self.path!r}: cannot read: {exc}") from exc
        return {bytes(k): bytes(v) for k, v in rows}

    def prepare(self, txid: int, changes: Mapping[bytes, bytes | None]) -> None:
        ns = self.namespace
        try:
            with self._transaction():
                self._db.execute("DELETE FROM squall_state_prepared WHERE ns = ?", (ns,))
                self._db.executemany(
                    "INSERT INTO squall_state_prepared VALUES (?, ?, ?)",
                    [(ns, k, v) for k, v in changes.items()],
                )
                self._db.execute(
                    "INSERT INTO squall_state_txid VALUES (?, ?, NULL) "
                    "ON CONFLICT (ns) DO UPDATE SET prepared = excluded.prepared",
                    (ns, txid),
                )
        except sqlite3.Error as exc:
            raise StateError(f"state store {self.path!r}: prepare {txid}: {exc}") from exc

    def commit(self, txid: int) -> None:
        ns = self.namespace
        try:
            with self._transaction():
                if self._txid("prepared") != txid:
                    return
                self._db.execute(
                    "INSERT OR REPLACE INTO squall_state SELECT ns, k, v "
                    "FROM squall_state_prepared WHERE ns = ? AND v IS NOT NULL",
                    (ns,),
                )
                self._db.execute(
                    "DELETE FROM squall_state WHERE ns = ? AND k IN (SELECT k FROM "
                    "squall_state_prepared WHERE ns = ? AND v IS NULL)",
                    (ns, ns),
                )
                self._db.execute("DELETE FROM squall_state_prepared WHERE ns = ?", (ns,))
                self._db.execute(
                    "UPDATE squall_state_txid SET prepared = NULL, committed = ? WHERE ns = ?",
                    (txid, ns),
                )
        except sqlite3.Error as exc:
            raise StateError(f"state store {self.path!r}: commit {txid}: {exc}") from exc

    def rollback(self) -> None:
        ns = self.namespace
        try:
            with self._transaction():
                self._db.execute("DELETE FROM squall_state_prepared WHERE ns = ?", (ns,))
                self._db.execute("UPDATE squall_state_txid SET prepared = NULL WHERE ns = ?", (ns,))
        except sqlite3.Error as exc:
            raise StateError(f"state store {self.path!r}: rollback: {exc}") from exc

    def prepared_txid(self) -> int | None:
        return self._txid("prepared")

    def committed_txid(self) -> int | None:
        return self._txid("committed")

    def close(self) -> None:
        self._db.close()

    def _transaction(self) -> _Tx:
        return _Tx(self._db)


class _Tx:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on an exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("COMMIT" if exc_type is None else "ROLLBACK")
