"""KeyValueState, the stored format and the stores, against a dict model."""

from __future__ import annotations

import re
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.state import (
    FORMAT_VERSION,
    InMemoryStateStore,
    KeyValueState,
    SqliteStateStore,
    StateFormatError,
    decode,
    encode,
)
from engine.state import _key_value as key_value
from engine.state._serialization import decode_many, encode_many
from engine.state._store import DELETED


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


KEYS = st.one_of(
    st.text(max_size=8),
    st.integers(),
    st.binary(max_size=8),
    st.tuples(st.text(max_size=3), st.integers()),
)
VALUES = st.one_of(KEYS, st.lists(st.integers(), max_size=4), st.floats(allow_nan=False), st.none())


def test_format_is_documented_bytes() -> None:
    assert FORMAT_VERSION == 1
    assert encode("cat") == b"1scat"
    assert encode(-3) == b"1i-3"
    assert encode(b"\x00") == b"1b\x00"
    assert encode((1, "a"))[:2] == b"1p"


@given(KEYS)
def test_keys_round_trip_and_equal_keys_give_equal_bytes(key: Any) -> None:
    assert decode(encode(key)) == key
    assert encode(decode(encode(key))) == encode(key)


@given(st.one_of(st.lists(KEYS), st.lists(st.text()), st.lists(st.integers()), st.lists(VALUES)))
def test_many_at_once_is_one_by_one(objs: list[Any]) -> None:
    encoded = encode_many(objs)
    assert encoded == [encode(o) for o in objs]
    decoded = decode_many(encoded)
    assert decoded == [decode(e) for e in encoded] == objs
    assert list(map(type, decoded)) == list(map(type, objs))


def test_unknown_format_version_is_refused() -> None:
    with pytest.raises(
        StateFormatError,
        match=exactly(
            "stored state b'2scat' is not in format version 1 (it starts with b'2'): it was "
            "written by another version of squall or by another program; point "
            "topology.state.provider.config at a store of this version"
        ),
    ):
        decode(b"2scat")


def stores(tmp_path: Path) -> list[Any]:
    InMemoryStateStore.clear("test")
    return [
        lambda ns: InMemoryStateStore(ns, scope="test"),
        lambda ns: SqliteStateStore(tmp_path / "s.sqlite", ns),
    ]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS, VALUES),
        st.tuples(st.just("delete"), KEYS, st.none()),
        st.tuples(st.just("prepare"), st.none(), st.none()),
        st.tuples(st.just("commit"), st.none(), st.none()),
        st.tuples(st.just("rollback"), st.none(), st.none()),
        st.tuples(st.just("reopen"), st.booleans(), st.none()),
    ),
    max_size=30,
)


@pytest.mark.parametrize(
    "snapshot_max_keys", [10_000, 2, -1], ids=["snapshot", "mixed", "tracking"]
)
@pytest.mark.parametrize("kind", [0, 1], ids=["memory", "sqlite"])
@settings(max_examples=25, deadline=None)
@given(ops=OPS)
def test_state_follows_a_two_phase_dict_model(kind: int, snapshot_max_keys: int, ops: Any) -> None:
    """Both ways of finding a checkpoint's changes (and switching between them as the
    state grows past the snapshot limit) commit what a dict model commits."""
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(key_value, "SNAPSHOT_MAX_KEYS", snapshot_max_keys)
        check_model(stores(Path(tmp))[kind], ops)


def check_model(open_store: Any, ops: Any) -> None:
    ns = "model/0"
    state = KeyValueState(open_store(ns))
    live: dict[Any, Any] = {}
    committed: dict[Any, Any] = {}
    prepared: dict[Any, Any] | None = None
    txid = 0
    for op, key, value in ops:
        if op == "put":
            state.put(key, value)
            live[key] = value
        elif op == "delete":
            state.delete(key)
            live.pop(key, None)
        elif op == "prepare":
            txid += 1
            state.prepare_commit(txid)
            prepared = dict(live)
        elif op == "commit":
            state.commit(txid)
            if prepared is not None:
                committed, prepared = prepared, None
        elif op == "rollback":
            state.rollback()
            live, prepared = dict(committed), None
        else:
            # A crash: what survives is the committed state and a prepared transaction,
            # which recovery commits or rolls back before the state is loaded (the
            # checkpoint spout's COMMIT or ROLLBACK comes before INITSTATE).
            store = open_store(ns)
            if key and prepared is not None:
                store.commit(txid)
                committed = prepared
            else:
                store.rollback()
            prepared = None
            state = KeyValueState(store)
            live = dict(committed)
        assert dict(state.items()) == live
        assert len(state) == len(live)
        assert sorted(map(repr, state)) == sorted(map(repr, live))


def test_get_default_and_contains() -> None:
    state = KeyValueState(InMemoryStateStore("unit/0", scope="unit"))
    assert state.get("x") is None and state.get("x", 5) == 5 and "x" not in state
    state.put("x", 1)
    assert "x" in state and state.delete("x") == 1 and state.delete("x") is None


def test_an_int_too_long_for_text_is_stored(tmp_path: Path) -> None:
    # Python refuses str() of an int of more than 4300 digits: such a value (a bitmap kept
    # as an int) failed every PREPARE (sqlite, redis) while the state held it.
    big = 7**6000
    assert decode(encode(big)) == big
    assert encode_many([big, 1]) == [encode(big), encode(1)]
    assert encode_many(["a", -big]) == [encode("a"), encode(-big)]
    store = SqliteStateStore(tmp_path / "big.sqlite", "a")
    state = KeyValueState(store)
    state.put(big, big + 1)
    state.put("n", big)
    state.prepare_commit(1)
    state.commit(1)
    assert dict(KeyValueState(store).items()) == {big: big + 1, "n": big}
    store.close()


def test_sqlite_store_refuses_another_format_version(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    SqliteStateStore(path, "a").close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE squall_state_meta SET v = '9'")
    with pytest.raises(
        StateFormatError,
        match=exactly(
            f"state store {str(path)!r} holds format version 9, this squall reads version 1; "
            f"point topology.state.provider.config at another file"
        ),
    ):
        SqliteStateStore(path, "a")


def committed(store: InMemoryStateStore) -> dict[Any, Any]:
    return store.load()  # it keeps objects


def test_a_small_state_of_plain_values_finds_its_changes_by_comparison() -> None:
    """Puts only set the value; the checkpoint compares with the previous one's copy:
    a value put again as the same object is no change, a delete is found too."""
    InMemoryStateStore.clear("modes")
    store = InMemoryStateStore("modes/0", scope="modes")
    state = KeyValueState(store)
    assert not state.tracks_puts
    state.put("a", 1)
    state.put("b", "x")
    state.prepare_commit(1)
    state.commit(1)
    assert committed(store) == {"a": 1, "b": "x"}
    state.put("a", 1)  # the same object: nothing to write
    state.put("b", "y")
    state.delete("a")
    state.put("c", 2.5)
    state.prepare_commit(2)
    assert store._ns.prepared == {"b": "y", "a": DELETED, "c": 2.5}
    state.commit(2)
    assert committed(store) == {"b": "y", "c": 2.5}


def test_a_mutable_value_makes_the_state_record_its_puts() -> None:
    """A list mutated in place and put again is the same object, which a comparison would
    miss: from the checkpoint that sees it on, every put is recorded."""
    InMemoryStateStore.clear("modes")
    store = InMemoryStateStore("modes/1", scope="modes")
    state = KeyValueState(store)
    items = [1]
    state.put("list", items)
    assert not state.tracks_puts  # decided at the next checkpoint
    state.prepare_commit(1)
    state.commit(1)
    assert state.tracks_puts
    items.append(2)
    state.put("list", items)
    state.prepare_commit(2)
    state.commit(2)
    assert committed(store) == {"list": [1, 2]}
    state.delete("list")
    state.prepare_commit(3)
    state.commit(3)
    assert committed(store) == {} and not state.tracks_puts  # plain values again


def test_a_large_state_records_its_puts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``SNAPSHOT_MAX_KEYS`` keys, comparing the whole state at every checkpoint
    would cost more than recording the puts: the state records them."""
    monkeypatch.setattr(key_value, "SNAPSHOT_MAX_KEYS", 3)
    InMemoryStateStore.clear("modes")
    store = InMemoryStateStore("modes/2", scope="modes")
    state = KeyValueState(store)
    for i in range(4):
        state.put(i, i)
    state.prepare_commit(1)
    state.commit(1)
    assert state.tracks_puts
    state.put(0, 10)
    state.prepare_commit(2)
    assert store._ns.prepared == {0: 10}
    state.commit(2)
    assert KeyValueState(store).tracks_puts  # loaded that large: recorded from the start
    assert committed(store) == {0: 10, 1: 1, 2: 2, 3: 3}


def test_the_memory_store_keeps_objects_and_shares_no_mutable_one() -> None:
    """Nothing leaves the process, so nothing is encoded; a mutable value is copied on
    its way in and out, so a change in place reaches the store only when put and
    checkpointed, as with a store that encodes."""
    InMemoryStateStore.clear("objects")
    store = InMemoryStateStore("objects/0", scope="objects")
    state = KeyValueState(store)
    items = [1]
    state.put("list", items)
    state.put("n", 3)
    state.prepare_commit(1)
    state.commit(1)
    assert store.load() == {"list": [1], "n": 3} and store.load()["list"] is not items
    items.append(2)  # not put again
    loaded = KeyValueState(store)
    assert loaded.get("list") == [1]
    loaded.get("list").append(9)
    assert store.load()["list"] == [1]
    state.put("list", items)
    state.prepare_commit(2)
    state.commit(2)
    assert KeyValueState(store).get("list") == [1, 2]
