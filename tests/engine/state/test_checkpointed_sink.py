"""``CheckpointedFileSink``'s recovery, step by step: a checkpoint staged and committed but
not published before a crash is published by the next start; one staged and not committed
is dropped; publishing twice leaves one copy. (The SIGKILL campaign with a real broker is
in tests/engine/kafka/test_exactly_once.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import InvalidComponentError
from engine.state import CheckpointedFileSink, KeyValueState, SqliteStateStore


class Context:
    def get_this_task_index(self) -> int:
        return 0

    def get_this_component_id(self) -> str:
        return "sink"


class Row:
    def __init__(self, *values: Any) -> None:
        self.values = list(values)


def started(directory: Path, db: Path) -> CheckpointedFileSink:
    """A sink task as a (re)start makes it: prepared, then handed the committed state."""
    sink = CheckpointedFileSink(directory / "out")
    sink.prepare({}, Context())
    sink.init_state(KeyValueState(SqliteStateStore(db, "t/sink/0")))
    return sink


def published(directory: Path) -> dict[str, list[Any]]:
    return {
        p.name: [json.loads(line) for line in p.read_text().splitlines()]
        for p in sorted(directory.glob("part-*.jsonl"))
    }


def test_a_committed_checkpoint_is_published_once_even_if_the_crash_came_first(
    tmp_path: Path,
) -> None:
    store = tmp_path / "state.sqlite"
    sink = started(tmp_path, store)
    sink.execute(Row("a", 1), None)
    sink.execute(Row("b", 1), None)
    sink.pre_prepare(1)
    sink._state.prepare_commit(1)
    assert published(tmp_path / "out") == {}  # staged only
    sink._state.commit(1)  # the state committed ... and the process died before pre_commit
    again = started(tmp_path, store)  # the restart publishes what the state says committed
    assert published(tmp_path / "out") == {"part-0-1.jsonl": [["a", 1], ["b", 1]]}
    again.pre_commit(1)  # a recovery COMMIT of the same checkpoint: nothing more
    started(tmp_path, store)
    assert published(tmp_path / "out") == {"part-0-1.jsonl": [["a", 1], ["b", 1]]}


def test_a_checkpoint_staged_and_not_committed_is_dropped(tmp_path: Path) -> None:
    store = tmp_path / "state.sqlite"
    sink = started(tmp_path, store)
    sink.execute(Row("a", 1), None)
    sink.pre_prepare(1)
    sink._state.prepare_commit(1)
    sink._state.commit(1)
    sink.pre_commit(1)
    sink.execute(Row("b", 1), None)
    sink.pre_prepare(2)  # staged, then the process died before the commit
    sink._state.prepare_commit(2)
    started(tmp_path, store)
    assert published(tmp_path / "out") == {"part-0-1.jsonl": [["a", 1]]}
    assert list((tmp_path / "out" / "_staging").iterdir()) == []


def test_rows_of_a_rolled_back_checkpoint_are_not_written(tmp_path: Path) -> None:
    store = tmp_path / "state.sqlite"
    sink = started(tmp_path, store)
    sink.execute(Row("a", 1), None)
    sink.pre_rollback()
    sink.execute(Row("b", 1), None)
    sink.pre_prepare(1)
    sink._state.prepare_commit(1)
    sink._state.commit(1)
    sink.pre_commit(1)
    assert published(tmp_path / "out") == {"part-0-1.jsonl": [["b", 1]]}


def test_a_bad_directory_is_refused() -> None:
    with pytest.raises(
        InvalidComponentError, match=r"^CheckpointedFileSink: directory must be a path, got 3$"
    ):
        CheckpointedFileSink(3)  # type: ignore[arg-type]
