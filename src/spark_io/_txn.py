"""Exactly-once publishing for the transactional sink: staged batches, atomic renames, and
a log of the row keys already published.

A batch is written by Spark into ``<output>/_squall_staging/<txid>/`` with a manifest of its
row keys (``_squall_txn.json``), then published by one ``os.rename`` to
``<output>/squall_txid=<txid>/``: readers (Spark ignores ``_``-prefixed paths) see all of a
batch or none of it. Before publishing, rows whose key was already published by any
transaction are dropped, under a lock shared by every writer of the output (threads and
processes), so a replayed row is never written twice however the replay is batched.

Plain (non-transactional) appends are staged too (``stage_dir`` / ``publish_files``): Spark's
file committer keeps its temporary files in ``<output>/_temporary`` and deletes that
directory when a job ends, so concurrent appends into one directory delete each other's
files. Each write gets its own staging directory, and its data files are then renamed into
the output one by one (each rename atomic; part file names are unique per Spark job).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ._checkpoint import write_atomic
from ._errors import SinkError

__all__ = [
    "MANIFEST",
    "STAGING_DIR",
    "SUMMARY_FILES",
    "TXID_COLUMN",
    "KeyRanges",
    "TransactionLog",
    "clean_stale_staging",
    "data_files",
    "key_ranges",
    "listed_by_spark",
    "publish_files",
    "stage_dir",
]

TXID_COLUMN = "squall_txid"
STAGING_DIR = "_squall_staging"
MANIFEST = "_squall_txn.json"
_LOCK_FILE = "_squall_txn.lock"
#: This process's writers stage under names holding it (after a one-letter kind: ``t`` for
#: transactions, ``a`` for appends); the leftovers of processes that are gone are stale.
RUN_ID = uuid.uuid4().hex[:10]


#: A process that stages under an output holds, while it lives, a lock on the file
#: ``<output>/_squall_staging/.<RUN_ID>.live`` (``_claim``): its staging is not stale.
_LIVE = ".live"
#: staging folder -> the open file whose lock this process holds there
_claimed: dict[Path, int] = {}
_claimed_guard = threading.Lock()


def _claim(output: Path) -> None:
    """Mark ``output``'s staging folder as used by this process for as long as it lives,
    before it stages anything there (``clean_stale_staging`` in another process then
    leaves this one's entries alone)."""
    staging = output / STAGING_DIR
    with _claimed_guard:
        if staging in _claimed:
            return
        # Locked before it has its name, so that no other process finds it unlocked.
        tmp = staging / f".{RUN_ID}-{uuid.uuid4().hex[:6]}.tmp"
        fd = -1
        try:
            staging.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_CREAT | os.O_RDWR, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(tmp, staging / f".{RUN_ID}{_LIVE}")
        except OSError:  # no locks there (or no folder yet): the write says what is wrong
            if fd >= 0:
                os.close(fd)
                tmp.unlink(missing_ok=True)
            fd = -1
        _claimed[staging] = fd


def _alive(staging: Path, run: str) -> bool:
    """Whether the process of ``run`` still holds its lock in ``staging``."""
    try:
        fd = os.open(staging / f".{run}{_LIVE}", os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held (or no telling): leave its entries alone
        return True
    finally:
        os.close(fd)  # (and with it the lock, if this process took it)
    return False


def clean_stale_staging(output: Path) -> None:
    """Remove what processes that are gone staged under ``output`` and never published
    (a process still running may be writing there); claims the folder for this one."""
    _claim(output)
    staging = output / STAGING_DIR
    if not staging.is_dir():
        return
    for entry in staging.iterdir():
        run = entry.name[1 : 1 + len(RUN_ID)]
        if run == RUN_ID or _alive(staging, run):
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.name == f".{run}{_LIVE}":
            entry.unlink(missing_ok=True)


def stage_dir(output: Path) -> Path:
    """A fresh directory, private to one write, for a plain append into ``output``."""
    _claim(output)
    return output / STAGING_DIR / f"a{RUN_ID}-{uuid.uuid4().hex[:12]}"


#: The parquet summary files: Spark's listing keeps them, and no rows are read from them.
SUMMARY_FILES = ("_metadata", "_common_metadata")


def listed_by_spark(name: str) -> bool:
    """Whether Spark's file listing keeps a file or folder named ``name``: not one starting
    with ``.`` (``.crc`` checksums, staging folders), nor with ``_`` unless it holds ``=``
    (``_k=1`` is a partition folder, ``_a=b.parquet`` a data file) or is a summary file
    (``_SUCCESS``, ``_temporary`` are left out), nor a copy in progress (``._COPYING_``)."""
    if name.startswith(SUMMARY_FILES):
        return True
    return not (
        name.startswith(".")
        or name.endswith("._COPYING_")
        or (name.startswith("_") and "=" not in name)
    )


def data_files(root: Path, listed: Callable[[str], bool] = listed_by_spark) -> Iterator[Path]:
    """The data files under the directory ``root``, partition directories included: what
    Spark reads there (``listed``: whether a name is listed, Spark's rule unless another
    reader's is given), summary files aside."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if listed(d)]
        for name in files:
            if listed(name) and not name.startswith(SUMMARY_FILES):
                yield Path(folder) / name


def publish_files(staged: Path, output: Path) -> int:
    """Move the data files Spark wrote under ``staged`` into ``output`` (same relative paths,
    partition directories included); Spark's markers and checksums (``_*``, ``.*``) are left
    behind. Returns the number of files moved."""
    moved = 0
    touched: set[Path] = set()
    for source in list(data_files(staged)):
        target = output / source.relative_to(staged)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():  # pragma: no cover - Spark names part files per job
            raise FileExistsError(f"{str(target)!r} exists already")
        os.rename(source, target)
        touched.add(target.parent)
        moved += 1
    for directory in touched:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return moved


def key_ranges(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique int64 ``keys`` as half-open runs ``[starts[i], ends[i])``."""
    if keys.size == 0:
        empty = np.empty(0, np.int64)
        return empty, empty
    breaks = np.flatnonzero(np.diff(keys) != 1) + 1
    starts = keys[np.concatenate(([0], breaks))]
    ends = keys[np.concatenate((breaks - 1, [keys.size - 1]))] + 1
    return starts.astype(np.int64), ends.astype(np.int64)


class KeyRanges:
    """A set of int64 keys kept as disjoint sorted runs."""

    def __init__(self) -> None:
        self.starts = np.empty(0, np.int64)
        self.ends = np.empty(0, np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self._pending.append((np.asarray(starts, np.int64), np.asarray(ends, np.int64)))

    def _merge(self) -> None:
        if not self._pending:
            return
        starts = np.concatenate([self.starts, *(s for s, _ in self._pending)])
        ends = np.concatenate([self.ends, *(e for _, e in self._pending)])
        self._pending.clear()
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
        # A run starts where it begins after every earlier run ended.
        reach = np.maximum.accumulate(ends)
        new = np.ones(starts.size, bool)
        new[1:] = starts[1:] > reach[:-1]
        idx = np.flatnonzero(new)
        self.starts = starts[idx]
        self.ends = np.maximum.reduceat(ends, idx) if idx.size else ends[:0]

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """A bool mask: which ``keys`` are in the set."""
        self._merge()
        if self.starts.size == 0:
            return np.zeros(keys.shape, bool)
        i = np.searchsorted(self.starts, keys, side="right") - 1
        inside = i >= 0
        inside[inside] = keys[inside] < self.ends[i[inside]]
        return inside

    def __len__(self) -> int:
        self._merge()
        return int((self.ends - self.starts).sum())


def _manifest_checksum(payload: dict[str, Any]) -> str:
    body = {k: v for k, v in payload.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


_path_locks: dict[Path, threading.Lock] = {}
_path_locks_guard = threading.Lock()


class TransactionLog:
    """The published transactions of one output directory and the keys they hold."""

    def __init__(self, output: Path, key_field: str) -> None:
        self.output = output
        self.key_field = key_field
        self.staging = output / STAGING_DIR
        self.keys = KeyRanges()
        self._seen: set[str] = set()
        # Transaction ids are unique per process (RUN_ID) and per writer (this log).
        self._writer_id = uuid.uuid4().hex[:6]
        _claim(output)  # this process stages there from now on
        with _path_locks_guard:
            self._thread_lock = _path_locks.setdefault(output, threading.Lock())

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive against every writer of this output, in this process and others."""
        with self._thread_lock, open(self.output / _LOCK_FILE, "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def clean_stale_staging(self) -> None:
        """Remove batches staged by earlier runs that never published them."""
        clean_stale_staging(self.output)

    def refresh(self) -> KeyRanges:
        """Read the manifests of transactions published since the last refresh."""
        prefix = f"{TXID_COLUMN}="
        try:
            entries = [e for e in os.scandir(self.output) if e.name.startswith(prefix)]
        except FileNotFoundError:
            return self.keys
        for entry in entries:
            if entry.name in self._seen:
                continue
            manifest = Path(entry.path) / MANIFEST
            payload = self._read_manifest(manifest)
            self.keys.add(
                np.array(payload["starts"], np.int64), np.array(payload["ends"], np.int64)
            )
            self._seen.add(entry.name)
        return self.keys

    def _read_manifest(self, path: Path) -> dict[str, Any]:
        try:
            payload = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise SinkError(
                f"transaction manifest {str(path)!r} is missing or corrupt ({exc}); the "
                f"transactional sink cannot tell which rows it holds"
            ) from exc
        if (
            not isinstance(payload, dict)
            or payload.get("checksum") != _manifest_checksum(payload)
            or payload.get("key_field") != self.key_field
        ):
            raise SinkError(
                f"transaction manifest {str(path)!r} is corrupt or was written with another "
                f"key field (expected {self.key_field!r})"
            )
        return payload

    def new_txid(self, task: int, seq: int) -> str:
        return f"t{RUN_ID}-{self._writer_id}-{task:03d}-{seq:06d}"

    def write_manifest(
        self, staged: Path, txid: str, starts: np.ndarray, ends: np.ndarray, rows: int
    ) -> None:
        payload: dict[str, Any] = {
            "version": 1,
            "txid": txid,
            "key_field": self.key_field,
            "rows": rows,
            "starts": starts.tolist(),
            "ends": ends.tolist(),
        }
        payload["checksum"] = _manifest_checksum(payload)
        write_atomic(staged / MANIFEST, json.dumps(payload).encode())

    def publish(self, staged: Path, txid: str, starts: np.ndarray, ends: np.ndarray) -> None:
        """The commit point: one rename makes the staged batch visible. Call under ``locked``."""
        final = self.output / f"{TXID_COLUMN}={txid}"
        os.rename(staged, final)
        fd = os.open(self.output, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.keys.add(starts, ends)
        self._seen.add(final.name)
