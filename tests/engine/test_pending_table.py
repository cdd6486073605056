"""``PendingTable`` (a spout task's root -> message id map in arrays) against a dict, the
naive model it replaces: the same entries, the same lookups, the same order of ids."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from engine._columnar.batch_collector import MISSING, PendingTable


def check(table: PendingTable, model: dict[int, Any]) -> None:
    assert len(table) == len(model)
    assert sorted(table) == sorted(model)
    assert sorted(table.roots().tolist()) == sorted(model)
    assert sorted(table.items(), key=lambda kv: kv[0]) == sorted(model.items())


def test_consecutive_runs_fill_slots_and_come_back_in_the_order_asked() -> None:
    table = PendingTable(16)
    roots = np.arange(100, 108, dtype=np.uint64)
    table.add(roots, range(8))
    assert (len(table), table._overflow) == (8, {})
    assert table.pop_many(roots[::-1].copy()) == [7, 6, 5, 4, 3, 2, 1, 0]  # one by one
    assert len(table) == 0 and not table._keys.any()
    roots = np.arange(100, 140, dtype=np.uint64)  # past 3/4 full: grown to 64 slots
    table.add(roots, range(40))
    assert (len(table), table._keys.shape, table._overflow) == (40, (64,), {})
    assert table.pop_many(roots[::-1].copy()) == list(range(39, -1, -1))  # in bulk
    assert len(table) == 0 and not table._keys.any()
    assert table.pop_many(roots) == []  # completions it no longer knows: skipped


def test_message_ids_are_any_objects_and_never_nest() -> None:
    table = PendingTable(16)
    ids: list[Any] = [(1, 2), [3, 4], "s", np.int64(5), {"k": 1}]
    roots = np.arange(7, 12, dtype=np.uint64)
    table.add(roots, ids)
    assert table[8] == [3, 4] and table.get(99) is MISSING and table.get(99, None) is None
    with pytest.raises(KeyError):
        table[99]
    assert table.pop_many(roots) == ids


def test_a_root_held_for_a_whole_lap_sends_the_one_meeting_it_to_the_overflow() -> None:
    table = PendingTable(16)
    table[5] = "hung"  # slot 5, held while later roots go round the table
    model: dict[int, Any] = {5: "hung"}
    met = []
    for start in range(6, 6 + 16 * 4, 4):
        roots = np.arange(start, start + 4, dtype=np.uint64)
        table.add(roots, [f"m{r}" for r in roots.tolist()])
        model.update((r, f"m{r}") for r in roots.tolist())
        met += list(table._overflow)
        check(table, model)
        done = roots[::-1].copy()
        assert table.pop_many(done) == [model.pop(r) for r in done.tolist()]
        check(table, model)
    assert met == [21, 37, 53, 69] and table._keys.shape == (16,)
    assert table.pop(5) == "hung" and table.pop(5) is MISSING


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_match_a_dict(seed: int) -> None:
    rng = random.Random(seed)
    table = PendingTable(16)
    model: dict[int, Any] = {}
    next_root = rng.choice([1, 2**64 - 700, rng.getrandbits(64) | 1])
    for step in range(400):
        kind = rng.random()
        if kind < 0.4:  # a batch emit: consecutive roots (wrapping past 2**64 to 1)
            n = rng.randint(1, 80)
            if next_root + n > 2**64:
                next_root = 1
            roots = np.arange(n, dtype=np.uint64) + np.uint64(next_root)
            next_root += n
            if rng.random() < 0.3:  # untracked rows among them: a subset
                roots = roots[np.array([rng.random() < 0.6 for _ in range(n)])]
            ids = [(step, i) for i in range(roots.shape[0])]
            table.add(roots, ids)
            model.update(zip(roots.tolist(), ids, strict=True))
        elif kind < 0.5:  # a per-tuple emit's random root
            root = rng.getrandbits(64) | 1
            if root not in model:
                table[root] = model[root] = f"t{step}"
        elif kind < 0.6 and model:  # a run of consecutive roots completing in order
            first = rng.choice(sorted(model))
            done = list(range(first, min(first + rng.randint(1, 80), 2**64)))
            want = [model.pop(r) for r in done if r in model]
            assert table.pop_many(np.array(done, np.uint64)) == want
        elif kind < 0.9 and model:  # completions, in any order, some unknown
            done = rng.sample(sorted(model), min(len(model), rng.randint(1, 120)))
            done += [rng.getrandbits(64) | 1 for _ in range(rng.randint(0, 2))]
            rng.shuffle(done)
            want = [model.pop(r) for r in done if r in model]
            assert table.pop_many(np.array(done, np.uint64)) == want
        elif model:
            root = rng.choice(sorted(model))
            assert table.pop(root) == model.pop(root)
        check(table, model)
    assert sorted(map(str, table.pop_many(table.roots()))) == sorted(map(str, model.values()))
    assert len(table) == 0


def test_growing_moves_the_overflow_into_the_slots_it_now_has() -> None:
    table = PendingTable(16)
    table[5] = "a"
    table[21] = "b"  # slot 5 as well: waits in the overflow
    assert table._overflow == {21: "b"}
    table.add(np.arange(200, 212, dtype=np.uint64), range(12))  # past 3/4 full: 32 slots
    assert table._keys.shape == (32,) and table._overflow == {}
    assert table._keys[5] == 5 and table._keys[21] == 21
    check(table, {5: "a", 21: "b", **{200 + i: i for i in range(12)}})


def test_consecutive_roots_fill_the_table_to_three_quarters_before_it_grows() -> None:
    table = PendingTable(16)
    table.add(np.arange(1, 13, dtype=np.uint64), range(12))  # 12 of 16: stays
    assert table.slots == 16 and table._overflow == {}
    table.add(np.arange(13, 14, dtype=np.uint64), range(1))  # 13: past 3/4, grows
    assert table.slots == 32
    check(table, {1 + i: i for i in range(12)} | {13: 0})


def test_make_room_grows_past_eleven_sixteenths_full_and_not_before() -> None:
    table = PendingTable(64)
    table.add(np.arange(1, 45, dtype=np.uint64), range(44))  # 44 of 64: 11/16
    assert table.make_room() == 0.0 and table.slots == 64
    table[1022] = "x"  # slot 62: free
    assert table.make_room() > 0.0 and table.slots == 128
    check(table, {**{1 + i: i for i in range(44)}, 1022: "x"})


def test_a_table_grown_large_warms_up_the_memory_of_its_next_growth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from engine._columnar import batch_collector

    warmed: list[int] = []
    monkeypatch.setattr(batch_collector, "warm_up", warmed.append)
    monkeypatch.setattr(batch_collector, "_WARM_UP_SLOTS", 128)
    table = PendingTable(64)
    table.add(np.arange(1, 46, dtype=np.uint64), range(45))  # past 11/16 of 64
    assert table.make_room() > 0.0 and table.slots == 128
    assert warmed == [32 * 128]  # the next growth's: 16 bytes a slot, twice the slots
    assert table.make_room() == 0.0 and warmed == [32 * 128]
    small = PendingTable(16)
    small.add(np.arange(1, 13, dtype=np.uint64), range(12))
    assert small.make_room() > 0.0 and small.slots == 32 and warmed == [32 * 128]


def test_warm_up_writes_and_frees_on_a_thread() -> None:
    from acker_kernel import warm_up

    thread = warm_up(1 << 20)
    thread.join(timeout=10)
    assert not thread.is_alive()
