"""Offset checkpoints: one small JSON file per spout, replaced atomically.

``<checkpoint_dir>/offsets.json`` holds ``{"version", "source", "offset_column",
"partitions", "chunk_rows", "committed": [one offset or null per partition], "runs": [the run
that made each commit, or null], "checksum"}``. The run tells a task that re-opens within the
same run (a crash restart, a rebalance) that the commit is its own, which wins over the
``EARLIEST``/``LATEST`` first-poll strategies, as in Storm's KafkaSpout. Version 1 files (no
``runs``) are read as commits of an earlier run.
The checksum (SHA-256 of the other fields in canonical JSON) catches a torn or edited file,
which is reported with its path rather than trusted. A commit writes a temporary file,
fsyncs it, ``os.replace``s it over the old one and fsyncs the directory, so a crash leaves
either the old or the new commit.

The tasks of one spout share the file (one process): each commits its own entry under a
lock. If a restart changes the layout (the number of tasks or the chunk size), the
partitions change, so every task resumes from the lowest commit of the old layout: rows
after it may be processed again (at least once), none is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ._errors import CheckpointError

__all__ = [
    "CHECKPOINT_FILE",
    "CHECKPOINT_VERSION",
    "CheckpointState",
    "SharedCheckpoint",
    "shared_checkpoint",
    "write_atomic",
]

CHECKPOINT_VERSION = 2
CHECKPOINT_FILE = "offsets.json"
_FIELDS_V1 = ("version", "source", "offset_column", "partitions", "chunk_rows", "committed")
_FIELDS = (*_FIELDS_V1, "runs")


def _checksum(payload: dict[str, Any]) -> str:
    fields = _FIELDS_V1 if payload["version"] == 1 else _FIELDS
    canonical = json.dumps({k: payload[k] for k in fields}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old or the new content, never a mix."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class CheckpointState:
    """What a checkpoint file says: per partition, every offset below ``committed[i]`` of that
    partition is done (None: the partition never committed), and ``runs[i]`` is the run that
    made that commit (None: an earlier layout or a version 1 file)."""

    source: str
    offset_column: str
    partitions: int
    chunk_rows: int
    committed: tuple[int | None, ...]
    runs: tuple[str | None, ...]

    def to_json(self) -> bytes:
        payload: dict[str, Any] = {
            "version": CHECKPOINT_VERSION,
            "source": self.source,
            "offset_column": self.offset_column,
            "partitions": self.partitions,
            "chunk_rows": self.chunk_rows,
            "committed": list(self.committed),
            "runs": list(self.runs),
        }
        payload["checksum"] = _checksum(payload)
        return json.dumps(payload, sort_keys=True, indent=1).encode()


def read_checkpoint(path: Path) -> CheckpointState | None:
    """The state in ``path`` (None if there is no file); a corrupt file is a
    ``CheckpointError`` naming it."""
    where = f"checkpoint {str(path)!r}"
    advice = "restore it from a backup, or delete it to start over"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(f"{where} cannot be read: {exc.strerror or exc}") from exc
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise CheckpointError(f"{where} is corrupt (not valid JSON); {advice}") from exc
    if not isinstance(payload, dict) or "version" not in payload:
        raise CheckpointError(
            f"{where} is corrupt (it must be a JSON object with the keys "
            f"{sorted((*_FIELDS, 'checksum'))}); {advice}"
        )
    if payload["version"] not in (1, CHECKPOINT_VERSION):
        raise CheckpointError(
            f"{where} has version {payload['version']!r}, but this spout reads versions 1 to "
            f"{CHECKPOINT_VERSION}"
        )
    keys = (*(_FIELDS_V1 if payload["version"] == 1 else _FIELDS), "checksum")
    if any(k not in payload for k in keys):
        raise CheckpointError(
            f"{where} is corrupt (it must be a JSON object with the keys {sorted(keys)}); {advice}"
        )
    if payload["checksum"] != _checksum(payload):
        raise CheckpointError(f"{where} is corrupt (checksum mismatch); {advice}")
    committed = payload["committed"]
    if (
        not all(isinstance(payload[k], str) for k in ("source", "offset_column"))
        or not all(type(payload[k]) is int and payload[k] > 0 for k in ("partitions", "chunk_rows"))
        or not isinstance(committed, list)
        or len(committed) != payload["partitions"]
        or not all(c is None or type(c) is int for c in committed)
    ):
        raise CheckpointError(f"{where} is corrupt (a field has the wrong type); {advice}")
    runs = payload.get("runs", [None] * len(committed))
    if (
        not isinstance(runs, list)
        or len(runs) != len(committed)
        or not all(r is None or isinstance(r, str) for r in runs)
    ):
        raise CheckpointError(f"{where} is corrupt (a field has the wrong type); {advice}")
    return CheckpointState(
        payload["source"],
        payload["offset_column"],
        payload["partitions"],
        payload["chunk_rows"],
        tuple(committed),
        tuple(runs),
    )


class SharedCheckpoint:
    """The checkpoint file of one spout, shared by its tasks in this process."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / CHECKPOINT_FILE
        self._lock = threading.Lock()
        self._state: CheckpointState | None = None

    def open(
        self, source: str, offset_column: str, partitions: int, chunk_rows: int, partition: int
    ) -> int | None:
        """Validate the file and return ``partition``'s commit (None: none); ``run_of`` tells
        which run made it.

        Raises ``CheckpointError`` if the directory is not writable, the file is corrupt, or
        it belongs to another source or offset column.
        """
        with self._lock:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                probe = self.directory / f".probe-{os.getpid()}-{threading.get_ident()}"
                probe.write_bytes(b"")
                probe.unlink()
            except OSError as exc:
                raise CheckpointError(
                    f"checkpoint directory {str(self.directory)!r} is not writable: "
                    f"{exc.strerror or exc}"
                ) from exc
            state = read_checkpoint(self.path)
            if state is not None and (state.source, state.offset_column) != (source, offset_column):
                raise CheckpointError(
                    f"checkpoint {str(self.path)!r} belongs to {state.source} (offset column "
                    f"{state.offset_column!r}), not {source} (offset column {offset_column!r}); "
                    f"give this spout its own checkpoint directory"
                )
            if state is None:
                state = CheckpointState(
                    source,
                    offset_column,
                    partitions,
                    chunk_rows,
                    (None,) * partitions,
                    (None,) * partitions,
                )
            elif (state.partitions, state.chunk_rows) != (partitions, chunk_rows):
                # New partitions: everyone resumes from the lowest old commit (or from the
                # first-poll strategy if some old partition never committed). The layout is
                # fixed for a run, so these commits are an earlier run's.
                old = [c for c in state.committed if c is not None]
                start = min(old) if len(old) == len(state.committed) else None
                state = CheckpointState(
                    source,
                    offset_column,
                    partitions,
                    chunk_rows,
                    (start,) * partitions,
                    (None,) * partitions,
                )
                self._write(state)
            self._state = state
            return state.committed[partition]

    def run_of(self, partition: int) -> str | None:
        """The run that made ``partition``'s commit (None: none, or an unknown earlier run)."""
        with self._lock:
            assert self._state is not None, "open() first"
            return self._state.runs[partition]

    def commit(self, partition: int, committed: int, run: str | None = None) -> None:
        """Record ``partition``'s commit, made by ``run``, durably (atomic replace of the file)."""
        with self._lock:
            assert self._state is not None, "open() first"
            current = self._state.committed[partition]
            if run is not None and self._state.runs[partition] == run:
                # Within a run a partition's commit only moves forward: a lower one comes
                # from a stale task object (one that crashed and was replaced).
                if current is not None and committed <= current:
                    return
            elif (current, self._state.runs[partition]) == (committed, run):
                return
            values = list(self._state.committed)
            values[partition] = committed
            runs = list(self._state.runs)
            runs[partition] = run
            state = replace(self._state, committed=tuple(values), runs=tuple(runs))
            self._write(state)
            self._state = state

    def _write(self, state: CheckpointState) -> None:
        try:
            write_atomic(self.path, state.to_json())
        except OSError as exc:
            raise CheckpointError(
                f"cannot write checkpoint {str(self.path)!r}: {exc.strerror or exc}"
            ) from exc


_shared: dict[Path, SharedCheckpoint] = {}
_shared_lock = threading.Lock()


def shared_checkpoint(directory: str | os.PathLike[str]) -> SharedCheckpoint:
    """The one ``SharedCheckpoint`` of ``directory`` in this process."""
    path = Path(directory).absolute()
    with _shared_lock:
        shared = _shared.get(path)
        if shared is None:
            shared = _shared[path] = SharedCheckpoint(path)
        return shared
