"""Exactly-once values and maps against a plain model; the state stores."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.transactional import (
    FileMapState,
    FileStateStore,
    MemoryMapState,
    MemoryStateStore,
    OpaqueMap,
    OpaqueValue,
    RotatingTransactionalState,
    TransactionalMap,
    TransactionalStateError,
    TransactionalValue,
)

# A run of commits: each transaction adds a delta; a replay of the last transaction may
# come again (the ack of its commit was lost), carrying the same batch (transactional) or
# another one (opaque).
commits_st = st.lists(
    st.tuples(st.integers(-5, 5), st.booleans(), st.integers(-5, 5)), min_size=1, max_size=30
)


@given(commits_st)
def test_a_transactional_value_applies_each_transaction_once(commits: list[Any]) -> None:
    value = TransactionalValue(None, 0)
    model = 0
    for txid, (delta, replay, _) in enumerate(commits, start=1):
        value = value.update(txid, lambda n, d=delta: n + d)
        model += delta
        if replay:
            value = value.update(txid, lambda n, d=delta: n + d)
        assert value == TransactionalValue(txid, model)


@given(commits_st)
def test_an_opaque_value_applies_the_last_replay_of_each_transaction(commits: list[Any]) -> None:
    value = OpaqueValue(None, 0)
    model = 0
    for txid, (delta, replay, other) in enumerate(commits, start=1):
        value = value.update(txid, lambda n, d=delta: n + d)
        applied = delta
        if replay:  # replayed with a different batch: the replay's delta counts, not both
            value = value.update(txid, lambda n, d=other: n + d)
            applied = other
        assert value == OpaqueValue(txid, model + applied, model)
        model += applied
        assert value.get() == model


def test_going_backwards_is_an_error() -> None:
    with pytest.raises(TransactionalStateError) as info:
        TransactionalValue(5, 1).update(4, lambda n: n)
    assert str(info.value) == (
        "transaction 4 updates a value transaction 5 already changed; commits went backwards"
    )
    with pytest.raises(TransactionalStateError) as info:
        OpaqueValue(5, 1, 0).update(4, lambda n: n)
    assert str(info.value) == (
        "transaction 4 updates a value transaction 5 already changed; commits went backwards"
    )


@pytest.mark.parametrize("backing", ["memory", "file"])
def test_maps_over_a_backing_state(tmp_path: Path, backing: str) -> None:
    def fresh() -> Any:
        if backing == "memory":
            return MemoryMapState()
        return FileMapState(tmp_path / f"{len(list(tmp_path.iterdir()))}.pickle", fsync=False)

    counts = TransactionalMap(fresh())
    assert counts.multi_update(1, ["a", "b"], [lambda n: (n or 0) + 1] * 2) == [1, 1]
    assert counts.multi_update(1, ["a"], [lambda n: (n or 0) + 1]) == [1]  # replay skipped
    assert counts.multi_update(2, ["a", "c"], [lambda n: (n or 0) + 5] * 2) == [6, 5]
    assert counts.multi_get(["a", "b", "c", "d"]) == [6, 1, 5, None]

    opaque = OpaqueMap(fresh())
    assert opaque.multi_update(1, ["a"], [lambda n: (n or 0) + 1]) == [1]
    assert opaque.multi_update(2, ["a"], [lambda n: (n or 0) + 2]) == [3]
    assert opaque.multi_update(2, ["a"], [lambda n: (n or 0) + 7]) == [8]  # replay, new batch
    assert opaque.multi_get(["a", "z"]) == [8, None]


def test_a_file_map_survives_its_process_and_its_copies(tmp_path: Path) -> None:
    state = FileMapState(tmp_path / "sub" / "m.pickle", fsync=True)
    state.multi_put(["k"], [TransactionalValue(3, "v")])
    copy = pickle.loads(pickle.dumps(state))
    assert copy.multi_get(["k", "x"]) == [TransactionalValue(3, "v"), None]
    assert FileMapState(tmp_path / "sub" / "m.pickle").read() == {"k": TransactionalValue(3, "v")}
    (tmp_path / "bad.pickle").write_bytes(b"not a pickle")
    with pytest.raises(TransactionalStateError) as info:
        FileMapState(tmp_path / "bad.pickle").read()
    assert str(info.value).startswith(f"cannot read the state file {tmp_path / 'bad.pickle'}: ")


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_state_stores_keep_namespaces_apart_and_reopen(tmp_path: Path, kind: str) -> None:
    store: Any = MemoryStateStore() if kind == "memory" else FileStateStore(tmp_path, fsync=False)
    coordinator = store.open("counts", "coordinator")
    coordinator.set_data("currtx", 4)
    coordinator.set_data("meta/4", {"n": 4})
    coordinator.set_data("meta/5", {"n": 5})
    store.open("counts", "partition-0").set_data("meta/4", (0, 10))
    again = pickle.loads(pickle.dumps(store)).open("counts", "coordinator")
    assert again.get_data("currtx") == 4
    assert again.list("meta") == ["meta/4", "meta/5"]
    again.delete("meta/4")
    assert store.open("counts", "coordinator").list("meta") == ["meta/5"]
    assert store.open("counts", "partition-0").get_data("meta/4") == (0, 10)
    assert store.open("other", "coordinator").get_data("currtx") is None


def test_names_must_be_safe_file_names(tmp_path: Path) -> None:
    with pytest.raises(TransactionalStateError) as info:
        FileStateStore(tmp_path).open("../escape", "coordinator")
    assert str(info.value) == (
        "the transactional id must be a non-empty string of letters, digits, '.', '_' or '-' "
        "(it names files), got '../escape'"
    )


def test_rotating_state_creates_in_order_and_cleans_up() -> None:
    state = MemoryStateStore().open("t", "coordinator")
    metas = RotatingTransactionalState(state, "meta", strict_order=True)
    made: list[tuple[int, Any]] = []

    def init(txid: int, prev: Any) -> Any:
        made.append((txid, prev))
        return txid * 10

    assert [metas.get_state(t, init) for t in (1, 2, 3, 2)] == [10, 20, 30, 20]
    assert made == [(1, None), (2, 10), (3, 20)]
    metas.cleanup_before(3)
    assert state.list("meta") == ["meta/3"]
    reloaded = RotatingTransactionalState(state, "meta", strict_order=True)
    assert reloaded.has_cache(3) and not reloaded.has_cache(2)
    with pytest.raises(TransactionalStateError) as info:
        reloaded.get_state(5, init)
    assert str(info.value) == (
        "initializing transaction 5 of 'meta', but the last stored transaction is 3"
    )
    # without strict order, a transaction older than a stored one is skipped (None)
    loose = RotatingTransactionalState(state, "meta")
    assert loose.get_state_or_create(2, init) is None
    assert loose.get_state(2, init) is None
    assert made[-1] == (3, 20)  # init was not called for 2
