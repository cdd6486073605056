"""Offset checkpoints: atomic, checksummed, refusing corrupt or foreign files by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_io import CheckpointError
from spark_io._checkpoint import CHECKPOINT_FILE, SharedCheckpoint, read_checkpoint

SOURCE = "parquet files at '/data/in'"


def open_store(
    directory: Path, partitions: int = 2, chunk_rows: int = 10, partition: int = 0
) -> tuple[SharedCheckpoint, int | None]:
    store = SharedCheckpoint(directory)
    return store, store.open(SOURCE, "id", partitions, chunk_rows, partition)


def test_a_fresh_directory_has_no_commit(tmp_path: Path) -> None:
    store, committed = open_store(tmp_path / "ck")
    assert committed is None
    assert not store.path.exists()  # nothing is written before the first commit


def test_commits_survive_a_restart(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    store.commit(0, 40)
    store.commit(1, 17)
    assert open_store(tmp_path, partition=0)[1] == 40
    assert open_store(tmp_path, partition=1)[1] == 17
    state = read_checkpoint(tmp_path / CHECKPOINT_FILE)
    assert state is not None and state.committed == (40, 17)


def test_a_commit_leaves_no_temporary_files(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    for value in range(5):
        store.commit(0, value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT_FILE]


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda text: text[: len(text) // 2], "is corrupt (not valid JSON)"),
        (
            lambda text: text.replace('"committed": [\n  40', '"committed": [\n  41'),
            "is corrupt (checksum mismatch)",
        ),
        (
            lambda text: json.dumps({"version": 1}),
            "is corrupt (it must be a JSON object with the keys",
        ),
        (lambda text: "[]", "is corrupt (it must be a JSON object with the keys"),
    ],
)
def test_a_corrupt_checkpoint_is_an_error_naming_its_path(
    tmp_path: Path, edit, reason: str
) -> None:  # type: ignore[no-untyped-def]
    store, _ = open_store(tmp_path)
    store.commit(0, 40)
    path = tmp_path / CHECKPOINT_FILE
    path.write_text(edit(path.read_text()))
    with pytest.raises(CheckpointError) as info:
        open_store(tmp_path)
    assert str(info.value).startswith(f"checkpoint {str(path)!r} {reason}")


def test_an_unknown_version_is_refused(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    store.commit(0, 1)
    path = tmp_path / CHECKPOINT_FILE
    payload = json.loads(path.read_text())
    payload["version"] = 99
    path.write_text(json.dumps(payload))
    with pytest.raises(CheckpointError) as info:
        open_store(tmp_path)
    assert str(info.value) == (
        f"checkpoint {str(path)!r} has version 99, but this spout reads versions 1 to 2"
    )


def test_a_checkpoint_of_another_source_is_refused(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    store.commit(0, 1)
    other = SharedCheckpoint(tmp_path)
    with pytest.raises(CheckpointError) as info:
        other.open("table 'events'", "id", 2, 10, 0)
    assert str(info.value) == (
        f"checkpoint {str(tmp_path / CHECKPOINT_FILE)!r} belongs to {SOURCE} (offset column "
        f"'id'), not table 'events' (offset column 'id'); give this spout its own checkpoint "
        f"directory"
    )


def test_an_unwritable_directory_is_an_error_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(CheckpointError) as info:
        open_store(blocker / "ck")
    assert str(info.value).startswith(
        f"checkpoint directory {str(blocker / 'ck')!r} is not writable: "
    )


def test_a_new_layout_resumes_everyone_from_the_lowest_commit(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path, partitions=3)
    for partition, value in enumerate((90, 40, 75)):
        store.commit(partition, value)
    for partition in range(2):
        assert open_store(tmp_path, partitions=2, partition=partition)[1] == 40
    state = read_checkpoint(tmp_path / CHECKPOINT_FILE)
    assert state is not None and (state.partitions, state.committed) == (2, (40, 40))


def test_a_new_layout_with_an_uncommitted_partition_starts_over(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path, partitions=3)
    store.commit(0, 90)  # partitions 1 and 2 never committed: their rows may be anywhere
    assert open_store(tmp_path, partitions=2, chunk_rows=10)[1] is None
    assert open_store(tmp_path, partitions=3, chunk_rows=20)[1] is None


def test_a_run_records_its_commits_and_never_moves_them_back(tmp_path: Path) -> None:
    store, _ = open_store(tmp_path)
    store.commit(0, 40, "run-a")
    store.commit(0, 30, "run-a")  # a stale task of the same run: ignored
    assert (open_store(tmp_path)[1], store.run_of(0)) == (40, "run-a")
    store.commit(0, 10, "run-b")  # a new run may start lower (EARLIEST)
    assert (open_store(tmp_path)[1], store.run_of(0), store.run_of(1)) == (10, "run-b", None)


def test_a_version_1_file_reads_as_an_earlier_runs_commits(tmp_path: Path) -> None:
    from spark_io._checkpoint import _checksum

    payload = {
        "version": 1,
        "source": SOURCE,
        "offset_column": "id",
        "partitions": 2,
        "chunk_rows": 10,
        "committed": [40, None],
    }
    payload["checksum"] = _checksum(payload)
    (tmp_path / CHECKPOINT_FILE).write_text(json.dumps(payload))
    store, committed = open_store(tmp_path)
    assert (committed, store.run_of(0)) == (40, None)
    store.commit(0, 50, "run-a")
    state = read_checkpoint(tmp_path / CHECKPOINT_FILE)
    assert state is not None and (state.committed, state.runs) == ((50, None), ("run-a", None))
