"""A sink whose output is published by checkpoint: exactly-once outputs, as Flink's
two-phase-commit sinks give.

A bolt that writes to the outside world as tuples arrive writes again what a recovery
replays: the state rolls back to the last checkpoint and the spouts send what came after
it once more. ``CheckpointedSink`` instead keys what it writes by checkpoint. The rows of
checkpoint ``txid`` (those that arrived between the barriers of the previous checkpoint
and of this one) are *staged* when the checkpoint is prepared, durably and out of the
readers' sight, and the staged ``txid`` is recorded in the sink's own state, in the same
checkpoint. They are *published* when the checkpoint commits; rows of a checkpoint that
rolls back are dropped with it (the recovery sends them again, into a later checkpoint).

A crash can come between the commit of the state and the publication. The recovery then
finds the staged ``txid`` recorded in the committed state and publishes it (publication
is idempotent: doing it twice leaves one copy); staged checkpoints above the committed one
are dropped. So every row reaches the output once per checkpoint that holds it, and with
spouts that rewind with the state (``RewindableSpout``) every input's output is published
exactly once.

Subclass and implement ``stage``, ``publish``, ``discard`` and ``staged``, or use
``CheckpointedFileSink`` (JSON-lines files, one a task and checkpoint).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._model.component import OutputFieldsDeclarer
from .._model.context import TopologyContext
from .._model.errors import InvalidComponentError
from ._bolt import BasicStatefulBolt

__all__ = ["CheckpointedFileSink", "CheckpointedSink"]

#: The key of the last staged checkpoint in the sink's state.
_STAGED = "__staged_txid"


class CheckpointedSink(BasicStatefulBolt):
    """Buffers rows per checkpoint, stages them at ``PREPARE``, publishes them at
    ``COMMIT`` (or at the recovery that finds the commit made); see the module's docstring.

    Implement, for this task (``self.task_index``):

    - ``stage(txid, rows)``: write ``rows`` (lists of values) durably where readers do not
      see them, replacing what a failed earlier try staged under ``txid``;
    - ``publish(txid)``: make the staged rows of ``txid`` visible, atomically; a ``txid``
      already published (or never staged: it had no rows) is left as it is;
    - ``discard(txid)``: forget the staged rows of ``txid``;
    - ``staged()``: the txids staged and not yet published or discarded.
    """

    task_index = 0

    def prepare(self, conf: Mapping[str, Any], context: TopologyContext) -> None:
        self.task_index = context.get_this_task_index()
        self._component = context.get_this_component_id()

    def init_state(self, state: Any) -> None:
        """The last committed state (at start, after every rollback): publish what it says
        was staged and committed, drop what was staged after it."""
        self._state = state
        self._rows: list[list[Any]] = []
        committed = state.get(_STAGED, 0)
        for txid in sorted(self.staged()):
            if txid <= committed:
                self.publish(txid)
            else:
                self.discard(txid)

    def execute(self, tuple: Any, collector: Any) -> None:
        self._rows.append(list(tuple.values))

    def pre_prepare(self, txid: int) -> None:
        rows, self._rows = self._rows, []
        if rows:
            self.stage(txid, rows)
            self._state.put(_STAGED, txid)

    def pre_commit(self, txid: int) -> None:
        for staged in sorted(self.staged()):
            if staged <= txid:
                self.publish(staged)

    def pre_rollback(self) -> None:
        self._rows = []  # the recovery sends them again

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        pass  # a sink: nothing goes downstream

    # --- the target ---------------------------------------------------------------------------
    def stage(self, txid: int, rows: list[list[Any]]) -> None:
        """Write ``rows`` (each a list of a tuple's values) durably, where readers do not see
        them, under ``txid``; replace what an earlier try staged under the same ``txid``.

        Runs at ``PREPARE``, before the state records ``txid`` as staged: once the state
        commits, the rows must survive a crash, or the recovery could not publish them.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement stage(txid, rows)")

    def publish(self, txid: int) -> None:
        """Make the rows staged under ``txid`` visible to readers, all at once.

        Must be idempotent: a crash after the commit and before the end of ``publish`` makes
        the recovery publish ``txid`` again, and a ``txid`` already published, or never
        staged because its checkpoint had no rows, is left as it is.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement publish(txid)")

    def discard(self, txid: int) -> None:
        """Forget the rows staged under ``txid``: its checkpoint never committed.

        The recovery that calls it sends those rows again, into a later checkpoint, so
        keeping them would publish them twice.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement discard(txid)")

    def staged(self) -> list[int]:
        """The txids this task staged and has not yet published or discarded, in any order.

        Read at every ``INITSTATE`` to finish what a crash interrupted: a txid at or below the
        committed one is published, any above it discarded. So it must read what is durably
        staged (files, rows of a table), not a list kept in memory.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement staged()")


class CheckpointedFileSink(CheckpointedSink):
    """Writes each task's rows of each checkpoint as one JSON-lines file,
    ``<directory>/part-<task>-<txid>.jsonl`` (a JSON array of the tuple's values a line),
    staged under ``<directory>/_staging/`` and published by one atomic rename: a reader
    that skips names starting with ``_`` sees a checkpoint's rows all or not at all, and
    each exactly once.

    >>> from engine.state import CheckpointedFileSink
    >>> sink = CheckpointedFileSink("out/counts")
    >>> # builder.set_bolt("sink", sink, 2).fields_grouping("count", Fields("word"))
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        if not isinstance(directory, (str, os.PathLike)) or not os.fspath(directory):
            raise InvalidComponentError(
                f"CheckpointedFileSink: directory must be a path, got {directory!r}"
            )
        self.directory = Path(directory)

    def prepare(self, conf: Mapping[str, Any], context: TopologyContext) -> None:
        super().prepare(conf, context)
        self._staging = self.directory / "_staging"
        try:
            self._staging.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidComponentError(
                f"sink {self._component!r}: cannot create {str(self._staging)!r}: "
                f"{exc.strerror or exc}; give CheckpointedFileSink a writable directory"
            ) from exc

    def _name(self, txid: int) -> str:
        return f"part-{self.task_index}-{txid}.jsonl"

    def stage(self, txid: int, rows: list[list[Any]]) -> None:
        final = self._staging / self._name(txid)
        tmp = final.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, separators=(",", ":")))
                f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)  # staged whole or not at all
        _fsync_dir(self._staging)

    def publish(self, txid: int) -> None:
        staged = self._staging / self._name(txid)
        if staged.exists():
            os.replace(staged, self.directory / self._name(txid))
            _fsync_dir(self.directory)

    def discard(self, txid: int) -> None:
        (self._staging / self._name(txid)).unlink(missing_ok=True)

    def staged(self) -> list[int]:
        prefix = f"part-{self.task_index}-"
        found = []
        for path in self._staging.glob(f"{prefix}*.jsonl"):
            number = path.name[len(prefix) : -len(".jsonl")]
            if number.isdigit():
                found.append(int(number))
        return found


def _fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (the directory's entry survives a power cut)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
