"""Stream groupings: ``stable_hash`` and the choosers ``make_grouper`` builds (Storm §2)."""

from __future__ import annotations

import collections
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import Bolt, CustomStreamGrouping, EmitError, Fields, Spout, TopologyBuilder
from engine._context import TopologyContext, build_plan
from engine._grouping import Grouping, GroupingKind, make_grouper, stable_hash

SRC = Path(__file__).resolve().parents[2] / "src"
FIELDS = Fields("word", "count", "extra")
STREAM = ("split", "default")

# Strategy for task id lists: distinct positive ids in any order.
targets_st = st.lists(st.integers(1, 10_000), min_size=1, max_size=16, unique=True)
keys_st = st.one_of(
    st.text(max_size=20),
    st.binary(max_size=20),
    st.integers(-(2**70), 2**70),
    st.tuples(st.text(max_size=5), st.integers()),
)


def chooser(kind: GroupingKind, targets: Sequence[int], *fields: str, seed: int = 0) -> Any:
    grouping = Grouping(kind, Fields(*fields) if fields else None)
    result = make_grouper(grouping, FIELDS, list(targets), random.Random(seed), None, STREAM)
    assert result is not None
    return result


def row(word: Any, count: Any = 0, extra: Any = None) -> list[Any]:
    return [word, count, extra]


# --- stable_hash ---------------------------------------------------------------------------

#: Expressions evaluated here and in two subprocesses with different PYTHONHASHSEEDs.
STABLE = [
    "'word'",
    "''",
    "'ünïcödé ✓'",
    "'\\ud800'",  # a lone surrogate: encoded with surrogatepass
    "b'bytes'",
    "0",
    "7",
    "-3",
    "2**70",
    "1.5",
    "True",
    "(1, 'a')",
    "['a', ['b', b'c']]",
    "()",
    "('x', ('y', ('z',)))",
]
#: Common key types whose hash() Python salts per process (or, for None before 3.12,
#: derives from an address): stable_hash falls back to hash() for them.
#: expression -> salted on every Python version (else only before 3.12).
UNSTABLE = {
    "None": False,
    "('user', None)": False,
    "datetime.date(2024, 1, 31)": True,
    "datetime.datetime(2024, 1, 31, 12, 30)": True,
    "enum.Enum('Color', 'RED').RED": True,
}
SCRIPT = """
import datetime, enum, json, sys
from engine._grouping import stable_hash
print(json.dumps([stable_hash(eval(e)) for e in json.loads(sys.argv[1])]))
"""


@pytest.fixture(scope="module")
def hashes_by_seed() -> dict[str, tuple[int, int]]:
    """expression -> (hash with PYTHONHASHSEED=1, hash with PYTHONHASHSEED=2)."""
    exprs = STABLE + list(UNSTABLE)
    procs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(SRC)}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", SCRIPT, json.dumps(exprs)],
                env=env,
                cwd=SRC,  # not a directory holding the tests' own 'engine' package
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    one, two = (json.loads(out) for out in outs)
    return {e: (a, b) for e, a, b in zip(exprs, one, two, strict=True)}


def _eval(expr: str) -> Any:
    import datetime  # noqa: F401  (used by eval)
    import enum  # noqa: F401

    return eval(expr)


@pytest.mark.parametrize("expr", STABLE)
def test_stable_hash_is_the_same_in_every_process(
    expr: str, hashes_by_seed: dict[str, tuple[int, int]]
) -> None:
    seed1, seed2 = hashes_by_seed[expr]
    assert seed1 == seed2 == stable_hash(_eval(expr))


@pytest.mark.parametrize("expr", list(UNSTABLE))
def test_stable_hash_of_other_common_keys_is_the_same_in_every_process(
    expr: str, hashes_by_seed: dict[str, tuple[int, int]]
) -> None:
    # Keys whose built-in hash() is salted per process (None before 3.12, dates, enums).
    seed1, seed2 = hashes_by_seed[expr]
    assert seed1 == seed2 == stable_hash(_eval(expr))


def test_stable_hash_known_values() -> None:
    # Pinned: changing these re-routes every fields-grouped key of every running topology.
    assert stable_hash("word") == 3287381265  # zlib.crc32(b"word")
    assert stable_hash(b"word") == 3287381265
    assert stable_hash(7) == 7
    assert stable_hash(-1) == 2**64 - 1
    assert stable_hash(()) == 17


def test_stable_hash_treats_lists_like_tuples() -> None:
    assert stable_hash(["a", 1, [b"x"]]) == stable_hash(("a", 1, (b"x",)))
    assert stable_hash(("a", "b")) != stable_hash(("b", "a"))


@given(st.recursive(keys_st, lambda inner: st.lists(inner, max_size=4), max_leaves=10))
def test_stable_hash_is_a_64_bit_unsigned_int(value: Any) -> None:
    h = stable_hash(value)
    assert type(h) is int
    assert 0 <= h < 2**64


@given(st.integers(-(2**53), 2**53))
def test_equal_numbers_hash_alike(n: int) -> None:
    assert stable_hash(n) == stable_hash(float(n))
    if n in (0, 1):
        assert stable_hash(n) == stable_hash(bool(n))


def test_equal_large_numbers_route_alike() -> None:
    assert stable_hash(2**61) == stable_hash(2.0**61)
    targets = [1, 2, 3]
    assert chooser(GroupingKind.FIELDS, targets, "word")([2.0**61]) == chooser(
        GroupingKind.FIELDS, targets, "word"
    )([2**61])


# --- direct, global, all -------------------------------------------------------------------


def test_direct_has_no_chooser() -> None:
    grouping = Grouping(GroupingKind.DIRECT)
    assert make_grouper(grouping, FIELDS, [1, 2], random.Random(0), None, STREAM) is None


@given(targets_st)
def test_global_is_the_lowest_task(targets: list[int]) -> None:
    choose = chooser(GroupingKind.GLOBAL, targets)
    assert {choose(row(w)) for w in ["a", "b", "c"]} == {(min(targets),)}


@given(targets_st)
def test_all_is_every_task_sorted(targets: list[int]) -> None:
    choose = chooser(GroupingKind.ALL, targets)
    assert choose(row("a")) == tuple(sorted(targets))
    assert choose(row("b")) == tuple(sorted(targets))


# --- shuffle ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [GroupingKind.SHUFFLE, GroupingKind.LOCAL_OR_SHUFFLE])
@given(targets=targets_st, seed=st.integers(0, 2**32), rounds=st.integers(1, 5))
def test_shuffle_is_round_robin_over_every_task(
    kind: GroupingKind, targets: list[int], seed: int, rounds: int
) -> None:
    choose = chooser(kind, targets, seed=seed)
    n = len(targets)
    picks = [choose(row("same key")) for _ in range(n * rounds)]
    assert all(len(p) == 1 for p in picks)
    tasks = [p[0] for p in picks]
    # Every window of n picks is one pass over all tasks, in the same order each pass.
    for r in range(rounds):
        assert sorted(tasks[r * n : (r + 1) * n]) == sorted(targets)
        assert tasks[r * n : (r + 1) * n] == tasks[:n]


@given(targets=targets_st, seed=st.integers(0, 2**32))
def test_shuffle_is_deterministic_for_a_seeded_rng(targets: list[int], seed: int) -> None:
    a = chooser(GroupingKind.SHUFFLE, targets, seed=seed)
    b = chooser(GroupingKind.SHUFFLE, list(reversed(targets)), seed=seed)
    c = chooser(GroupingKind.LOCAL_OR_SHUFFLE, targets, seed=seed)
    seq = [a(row(i)) for i in range(3 * len(targets))]
    assert seq == [b(row(i)) for i in range(3 * len(targets))]
    assert seq == [c(row(i)) for i in range(3 * len(targets))]


def test_shuffle_order_depends_on_the_seed() -> None:
    targets = list(range(1, 11))
    orders = {
        tuple(chooser(GroupingKind.SHUFFLE, targets, seed=s)(row("a"))[0] for _ in targets)
        for s in range(5)
    }
    assert len(orders) > 1


def test_shuffle_over_one_task() -> None:
    choose = chooser(GroupingKind.SHUFFLE, [9])
    assert [choose(row(i)) for i in range(3)] == [(9,), (9,), (9,)]


# --- none ------------------------------------------------------------------------------


def test_none_picks_valid_tasks_deterministically_per_seed() -> None:
    targets = [3, 1, 4, 7]
    choose = chooser(GroupingKind.NONE, targets, seed=42)
    picks = [choose(row("k")) for _ in range(200)]
    again = chooser(GroupingKind.NONE, targets, seed=42)
    assert picks == [again(row("k")) for _ in range(200)]
    assert {p for (p,) in picks} == set(targets)  # seeded: covers all four


# --- fields ---------------------------------------------------------------------------


@given(keys=st.lists(keys_st, min_size=1, max_size=30), targets=targets_st, seed=st.integers())
def test_fields_grouping_is_deterministic_and_in_range(
    keys: list[Any], targets: list[int], seed: int
) -> None:
    choose = chooser(GroupingKind.FIELDS, targets, "word", seed=seed)
    other = chooser(GroupingKind.FIELDS, list(reversed(targets)), "word", seed=seed + 1)
    ordered = sorted(targets)
    for key in keys:
        (task,) = choose(row(key, count=len(keys)))
        assert task == ordered[stable_hash(key) % len(ordered)]
        assert choose(row(key)) == (task,)  # from the cache
        assert other(row(key)) == (task,)  # another sender, another rng


def test_fields_grouping_spreads_keys_over_tasks() -> None:
    targets = list(range(1, 9))
    choose = chooser(GroupingKind.FIELDS, targets, "word")
    load = collections.Counter(choose(row(f"key-{i}"))[0] for i in range(4000))
    assert set(load) == set(targets)
    assert max(load.values()) < 1.25 * 500 and min(load.values()) > 0.75 * 500


@given(
    words=st.lists(st.text(max_size=5), min_size=1, max_size=10),
    counts=st.lists(st.integers(0, 5), min_size=1, max_size=10),
    targets=targets_st,
)
def test_multi_field_key_uses_the_fields_in_grouping_order(
    words: list[str], counts: list[int], targets: list[int]
) -> None:
    choose = chooser(GroupingKind.FIELDS, targets, "count", "word")
    ordered = sorted(targets)
    for word, count in zip(words, counts, strict=False):
        expected = (ordered[stable_hash((count, word)) % len(ordered)],)
        assert choose(row(word, count, extra=object())) == expected


def test_multi_field_key_ignores_other_fields() -> None:
    choose = chooser(GroupingKind.FIELDS, list(range(1, 17)), "word", "extra")
    assert {choose(row("w", count=c, extra="x")) for c in range(50)} == {
        choose(row("w", count=0, extra="x"))
    }


def freeze(value: Any) -> Any:
    return tuple(freeze(v) for v in value) if isinstance(value, list) else value


@pytest.mark.parametrize("fields", [("word",), ("word", "extra")])
@pytest.mark.parametrize("value", [["a", "b"], ["a", ["nested", "list"]], [], [b"x", 3]])
def test_unhashable_list_values(fields: tuple[str, ...], value: list[Any]) -> None:
    targets = list(range(1, 8))
    choose = chooser(GroupingKind.FIELDS, targets, *fields)
    key = value if len(fields) == 1 else (value, ["e"])
    expected = (targets[stable_hash(key) % len(targets)],)
    assert choose(row(value, extra=["e"])) == expected
    assert choose(row(value, extra=["e"])) == expected
    # A list routes like the tuple with the same items.
    assert chooser(GroupingKind.FIELDS, targets, *fields)(row(freeze(value), extra=("e",))) == (
        expected
    )


def test_fields_grouping_survives_its_cache_being_cleared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("engine._grouping.FIELDS_CACHE_SIZE", 4)
    targets = [2, 4, 6, 8, 10]
    for fields in (("word",), ("word", "count")):
        choose = chooser(GroupingKind.FIELDS, targets, *fields)
        for _ in range(2):
            for i in range(40):
                key = f"k{i}" if len(fields) == 1 else (f"k{i}", 0)
                assert choose(row(f"k{i}")) == (targets[stable_hash(key) % 5],)


def test_fields_grouping_over_one_task() -> None:
    choose = chooser(GroupingKind.FIELDS, [5], "word")
    assert {choose(row(w)) for w in ["a", "b", ["c"]]} == {(5,)}


# --- partial key -----------------------------------------------------------------------------


@given(key=keys_st, targets=st.lists(st.integers(1, 500), min_size=2, max_size=16, unique=True))
def test_partial_key_sends_a_hot_key_to_exactly_two_tasks_evenly(
    key: Any, targets: list[int]
) -> None:
    choose = chooser(GroupingKind.PARTIAL_KEY, targets, "word")
    load = collections.Counter(choose(row(key))[0] for _ in range(101))
    assert len(load) == 2 and set(load) <= set(targets)
    assert sorted(load.values()) == [50, 51]
    # Another sender splits the same key over the same two tasks.
    other = chooser(GroupingKind.PARTIAL_KEY, list(reversed(targets)), "word", seed=99)
    assert {other(row(key))[0] for _ in range(2)} == set(load)


def test_partial_key_balances_a_skewed_stream() -> None:
    targets = list(range(1, 9))
    choose = chooser(GroupingKind.PARTIAL_KEY, targets, "word")
    words = ["hot"] * 800 + [f"cold-{i}" for i in range(800)]
    random.Random(1).shuffle(words)
    load = collections.Counter(choose(row(w))[0] for w in words)
    # Fields grouping would put all 800 "hot" tuples (half the stream) on one task.
    assert max(load.values()) <= 800 // 2 + 200


def test_partial_key_over_one_task() -> None:
    choose = chooser(GroupingKind.PARTIAL_KEY, [3], "word")
    assert {choose(row("hot")) for _ in range(5)} == {(3,)}


# --- custom ---------------------------------------------------------------------------------


class Spy(CustomStreamGrouping):
    def __init__(self, choice: Any = None) -> None:
        self.choice = choice
        self.prepared: list[tuple[Any, ...]] = []
        self.asked: list[tuple[int, list[Any]]] = []

    def prepare(self, context: Any, stream: tuple[str, str], target_tasks: list[int]) -> None:
        self.prepared.append((context, stream, target_tasks))

    def choose_tasks(self, task_id: int, values: Sequence[Any]) -> list[int]:
        self.asked.append((task_id, list(values)))
        return self.choice(values) if callable(self.choice) else self.choice


class Source(Spout):
    def next_tuple(self) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class Sink(Bolt):
    def execute(self, tuple: Any) -> None:
        pass


def sender_context(custom: CustomStreamGrouping) -> TopologyContext:
    builder = TopologyBuilder()
    builder.set_spout("words", Source(), 2)
    builder.set_bolt("sink", Sink(), 3).custom_grouping("words", custom)
    topology = builder.create_topology()
    # sink: tasks 1-3, words: tasks 4-5; the sender is words' second task.
    return TopologyContext(topology, build_plan(topology), {}, task_id=5)


def custom_chooser(custom: CustomStreamGrouping, targets: list[int]) -> Any:
    grouping = Grouping(GroupingKind.CUSTOM, None, custom)
    ctx = sender_context(custom)
    return ctx, make_grouper(
        grouping, Fields("word"), targets, random.Random(0), ctx, ("words", "default")
    )


def _both_or_two(values: Any) -> list[int]:
    return [3, 1] if values[0] == "both" else [2]


def test_custom_grouping_is_prepared_with_sorted_targets() -> None:
    spy = Spy(choice=_both_or_two)
    ctx, choose = custom_chooser(spy, [3, 1, 2])
    assert spy.prepared == [(ctx, ("words", "default"), [1, 2, 3])]
    assert choose(["both"]) == (3, 1)
    assert choose(["one"]) == (2,)
    assert spy.asked == [(5, ["both"]), (5, ["one"])]


def test_custom_grouping_may_choose_no_task() -> None:
    _, choose = custom_chooser(Spy(choice=[]), [1, 2, 3])
    assert choose(["x"]) == ()


def test_custom_grouping_choosing_a_non_target_is_an_emit_error() -> None:
    _, choose = custom_chooser(Spy(choice=[2, 99]), [2, 3])
    with pytest.raises(
        EmitError,
        match="^"
        + re.escape(
            "custom grouping Spy on stream 'default' of 'words' chose task 99, which is not "
            "a target (targets: [2, 3])"
        )
        + "$",
    ):
        choose(["x"])
