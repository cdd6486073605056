"""Stream groupings: ``stable_hash`` and the groupers ``make_grouper`` builds (Storm §2):
their choice per tuple, and what they tell a columnar runner."""

from __future__ import annotations

import collections
import json
import math
import os
import random
import re
import struct
import subprocess
import sys
import zlib
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import (
    BasicBolt,
    Bolt,
    CustomStreamGrouping,
    EmitError,
    Fields,
    Spout,
    TopologyBuilder,
    run_topology,
)
from engine._execution.groupers import (
    AllGrouper,
    ChosenTask,
    CustomGrouper,
    DirectGrouper,
    EveryTask,
    FieldsGrouper,
    FirstTask,
    GlobalGrouper,
    HashTask,
    LocalOrShuffleGrouper,
    LocalTask,
    NoColumnRouting,
    NoneGrouper,
    PartialKeyGrouper,
    RandomTask,
    ShuffleGrouper,
    grouper_class,
    make_grouper,
)
from engine._model.context import TopologyContext, build_plan
from engine._model.grouping import Grouping, GroupingKind, stable_hash
from engine.testing import complete_topology, simulate

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
    return make_grouper(grouping, FIELDS, list(targets), random.Random(seed), None, STREAM).choose


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
from engine._model.grouping import stable_hash
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


def test_direct_grouping_chooses_nothing_itself() -> None:
    grouping = Grouping(GroupingKind.DIRECT)
    grouper = make_grouper(grouping, FIELDS, [1, 2], random.Random(0), None, STREAM)
    assert grouper.direct
    with pytest.raises(
        EmitError,
        match="^"
        + re.escape(
            "component 'split' emitted on direct stream 'default' with emit; use "
            "emit_direct(task, ...)"
        )
        + "$",
    ):
        grouper.choose(row("a"))


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
    monkeypatch.setattr("engine._execution.groupers.FIELDS_CACHE_SIZE", 4)
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
    ).choose


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


class EvenNowhereOddEverywhere(CustomStreamGrouping):
    """Sends an even key to no task and an odd one to every task."""

    def prepare(self, context: Any, stream: tuple[str, str], target_tasks: list[int]) -> None:
        self.targets = target_tasks

    def choose_tasks(self, task_id: int, values: Sequence[Any]) -> list[int]:
        return [] if values[0] % 2 == 0 else self.targets


class ManyKeys(Spout):
    """Emits keys 0..39 in one call of ``next_tuple``: one batch of per-tuple emits."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.done, self.acked = collector, False, []

    def next_tuple(self) -> None:
        if not self.done:
            for key in range(40):
                self.collector.emit([key], msg_id=key)
            self.done = True

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def is_exhausted(self) -> bool:
        return self.done

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["key"])


class Relay(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple["key"]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["key"])


class Keys(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.keys: list[int] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.keys.append(tuple["key"])


@pytest.mark.parametrize("sender", ["spout", "basic bolt"])
def test_custom_grouping_choosing_no_task_or_several_routes_a_batch_of_emits_per_tuple(
    sender: str,
) -> None:
    # Per-tuple emits leave as one batch per task: each row goes where its own choice said,
    # even when the choices name as many tasks in all as there are rows (here 20 rows to
    # no task, 20 to both).
    builder = TopologyBuilder()
    builder.set_spout("keys", ManyKeys())
    grouped = "keys"
    if sender == "basic bolt":
        builder.set_bolt("relay", Relay()).global_grouping("keys")
        grouped = "relay"
    builder.set_bolt("where", Keys(), 2).custom_grouping(grouped, EvenNowhereOddEverywhere())

    async def main() -> tuple[list[list[int]], list[int]]:
        async with run_topology(builder.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=10)
            where = running.task_objects("where").values()
            (spout,) = running.task_objects("keys").values()
            return [sorted(bolt.keys) for bolt in where], sorted(spout.acked)

    received, acked = simulate(main())
    assert received == [list(range(1, 40, 2))] * 2
    assert acked == list(range(40))


# --- equal keys of any type hash alike (numpy scalars included) -----------------------------


def _equal_forms(value: Any) -> list[Any]:
    """``value`` and every other Python / numpy form of it that compares equal to it."""
    with np.errstate(over="ignore"):  # float16(1e6) is inf: dropped below as not equal
        return [form for form in _forms(value) if form == value and _py(form) == value]


def _py(value: Any) -> Any:
    # NumPy compares a Python float to a float16 in float16 (65520.0 == float16(inf)): the
    # promise is for values that are equal, so compare the exact Python values too.
    if isinstance(value, (tuple, list)):
        return type(value)(_py(item) for item in value)
    return value.item() if isinstance(value, np.generic) else value


def _forms(value: Any) -> list[Any]:
    forms: list[Any] = [value]
    if isinstance(value, bool):
        forms += [np.bool_(value), int(value), float(value), np.int8(value), np.uint8(value)]
    elif isinstance(value, int):
        forms += [float(value), np.float64(value), np.float32(value), Fraction(value)]
        forms += [Decimal(value), complex(value), np.complex128(value)]
        if value in (0, 1):
            forms += [bool(value), np.bool_(value)]
        for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64):
            info = np.iinfo(dtype)
            if info.min <= value <= info.max:
                forms.append(dtype(value))
    elif isinstance(value, float):
        forms += [np.float64(value), np.float32(value), np.float16(value), complex(value)]
        if math.isfinite(value):
            forms += [Fraction(value), Decimal(value)]
            if value.is_integer():
                forms.append(int(value))
    elif isinstance(value, str):
        forms += [np.str_(value)]
    elif isinstance(value, bytes):
        forms += [np.bytes_(value)]
    elif isinstance(value, tuple):
        forms += [list(value), tuple(_equal_forms(item)[-1] for item in value)]
    # A narrower form may round (float32, float16) or strip trailing NULs (np.str_): only
    # the forms that still compare equal are promised the same hash.
    return forms


scalars_st = st.one_of(
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.integers(-300, 300),
    st.floats(allow_nan=False, width=64),
    st.floats(allow_nan=False, width=32),
    st.floats(allow_nan=False, width=16),
    st.text(max_size=8),
    st.binary(max_size=8),
)
mixed_keys_st = st.one_of(scalars_st, st.tuples(scalars_st, scalars_st))


@given(mixed_keys_st)
def test_equal_keys_of_any_type_hash_alike_and_go_to_one_task(key: Any) -> None:
    forms = _equal_forms(key)
    assert {stable_hash(form) for form in forms} == {stable_hash(key)}, forms
    for n in (1, 3):
        choose = chooser(GroupingKind.FIELDS, list(range(1, n + 1)), "word")
        assert {choose([form]) for form in forms} == {choose([key])}, forms
        choose_two = chooser(GroupingKind.FIELDS, list(range(1, n + 1)), "word", "count")
        assert {choose_two([form, form]) for form in forms} == {choose_two([key, key])}


def test_numpy_string_and_bytes_keys_hash_like_str_and_bytes() -> None:
    # Before: TypeError: cannot create 'numpy.generic' instances, on every emit.
    assert stable_hash(np.str_("word")) == stable_hash("word") == 3287381265
    assert stable_hash(np.bytes_(b"word")) == stable_hash(b"word")
    assert stable_hash((np.str_("a"), np.int64(3))) == stable_hash(("a", 3))


def test_numpy_numbers_hash_like_the_equal_python_number() -> None:
    assert stable_hash(np.float64(2.5)) == stable_hash(2.5)
    assert stable_hash(np.float32(2.5)) == stable_hash(2.5)
    assert stable_hash(np.int64(3)) == stable_hash(3) == stable_hash(3.0) == 3
    assert stable_hash(np.uint64(2**64 - 1)) == stable_hash(2**64 - 1)
    assert stable_hash(np.int64(-1)) == stable_hash(-1)
    assert stable_hash(np.bool_(True)) == stable_hash(True) == stable_hash(1)
    assert stable_hash(np.longdouble(0.25)) == stable_hash(0.25)
    assert stable_hash(Decimal("2.5")) == stable_hash(Fraction(5, 2)) == stable_hash(2.5)
    # Equal, but neither is a float: Python's own numeric hash, the same in every process.
    assert stable_hash(Decimal("0.1")) == stable_hash(Fraction(1, 10))


def test_nan_keys_all_go_to_one_task() -> None:
    # NaN != NaN, so no equality promise; but one NaN key must not scatter over the tasks.
    nans = [
        float("nan"),
        -float("nan"),
        np.float64("nan"),
        np.float32("nan"),
        struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_0BAD))[0],
        Decimal("NaN"),
        complex(float("nan"), 0.0),
    ]
    assert len({stable_hash(nan) for nan in nans}) == 1
    assert stable_hash(float("inf")) == stable_hash(np.float32("inf"))
    assert stable_hash(float("inf")) != stable_hash(float("-inf"))
    assert stable_hash(-0.0) == stable_hash(0.0) == stable_hash(0)


def test_stable_hash_documented_definition() -> None:
    # The definition a vectorized version must match (see stable_hash's docstring).
    mask = 2**64 - 1
    for n in (0, 5, -5, 2**63, -(2**63), 2**70 + 3, 2**70):
        assert stable_hash(n) == n & mask
        if float(n) == n:
            assert stable_hash(float(n)) == n & mask
    for x in (2.5, -0.1, 1e-300, float("inf")):
        assert stable_hash(x) == zlib.crc32(struct.pack("<d", x)) | (1 << 32)
    assert stable_hash(float("nan")) == zlib.crc32(struct.pack("<d", float("nan"))) | (1 << 32)
    assert stable_hash("ü") == zlib.crc32("ü".encode())
    assert stable_hash(b"\x00\xff") == zlib.crc32(b"\x00\xff")
    h = 17
    for item in ("a", 2):
        h = (h * 1_000_003 ^ stable_hash(item)) & mask
    assert stable_hash(("a", 2)) == h


#: Numpy keys evaluated here and in subprocesses with different PYTHONHASHSEEDs.
NUMPY_KEYS = [
    "np.str_('word')",
    "np.str_('ünï')",
    "np.bytes_(b'bytes')",
    "np.float64(2.5)",
    "np.float32(-0.75)",
    "np.int64(-3)",
    "np.uint64(2**64 - 1)",
    "np.bool_(False)",
    "(np.str_('a'), np.int32(7), np.float64('nan'))",
    "Decimal('0.1')",
    "Fraction(1, 3)",
]
NUMPY_SCRIPT = """
import json, sys
from decimal import Decimal
from fractions import Fraction
import numpy as np
from engine._model.grouping import stable_hash
print(json.dumps([stable_hash(eval(e)) for e in json.loads(sys.argv[1])]))
"""


def test_numpy_keys_hash_alike_in_every_process() -> None:
    outs = []
    for seed in ("3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(SRC)}
        done = subprocess.run(
            [sys.executable, "-c", NUMPY_SCRIPT, json.dumps(NUMPY_KEYS)],
            env=env,
            cwd=SRC,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        outs.append(json.loads(done.stdout))
    here = [stable_hash(eval(e)) for e in NUMPY_KEYS]
    assert outs[0] == outs[1] == here


class MixedKeys(Spout):
    """Emits every form of a few keys once; the bolt records which task saw which key."""

    KEYS: ClassVar[list[Any]] = [
        "word",
        np.str_("word"),
        b"raw",
        np.bytes_(b"raw"),
        2.5,
        np.float64(2.5),
        np.float32(2.5),
        3,
        np.int64(3),
        3.0,
        np.uint8(3),
        True,
        np.bool_(True),
        1,
        ("k", 1),
        (np.str_("k"), np.int16(1)),
    ]

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.i = collector, 0

    def next_tuple(self) -> None:
        if self.i < len(self.KEYS):
            self.collector.emit([self.KEYS[self.i]], msg_id=self.i)
            self.i += 1

    def is_exhausted(self) -> bool:
        return self.i >= len(self.KEYS)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["key"])


class TaskOfKey(Bolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.task = collector, context.get_this_task_id()

    def execute(self, tuple: Any) -> None:
        self.collector.emit([tuple["key"], self.task], anchors=[tuple])
        self.collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["key", "task"])


@pytest.mark.parametrize("parallelism", [1, 3])
def test_fields_grouping_end_to_end_sends_equal_mixed_keys_to_one_task(
    parallelism: int,
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("keys", MixedKeys())
    builder.set_bolt("where", TaskOfKey(), parallelism).fields_grouping("keys", Fields("key"))
    result = complete_topology(builder.create_topology(), conf={"topology.seed": 1})
    seen = result.emitted("where")
    assert len(seen) == len(MixedKeys.KEYS)
    tasks_of: dict[Any, set[int]] = collections.defaultdict(set)
    for key, task in seen:
        tasks_of[key].add(task)  # equal keys are one dict entry, whatever their types
    assert len(tasks_of) == 6
    assert all(len(tasks) == 1 for tasks in tasks_of.values()), tasks_of
    used = set().union(*tasks_of.values())
    assert len(used) == parallelism  # at parallelism 3 the six keys reach every task


# --- batches: every grouper routes a batch where it would send each row ----------------------


def grouper(kind: GroupingKind, fields: Fields, targets: Sequence[int], *keys: str) -> Any:
    keyed = kind in (GroupingKind.FIELDS, GroupingKind.PARTIAL_KEY)
    g = Grouping(kind, Fields(*keys) if keyed else None)
    return make_grouper(g, fields, list(targets), random.Random(1), None, ("s", "d"))


def routed(parts: Any, n: int) -> dict[int, int]:
    """row -> task (each row to one task)."""
    got = {}
    for task, rows in parts:
        for i in range(n) if rows is None else rows.tolist():
            got[i] = task
    return got


batch_keys = st.one_of(
    st.text(max_size=4),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.floats(allow_nan=False),
    st.binary(max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(batch_keys, min_size=1, max_size=60), st.integers(1, 5))
def test_fields_batch_routing_agrees_with_the_per_tuple_choice(values: list, k: int) -> None:
    g = grouper(GroupingKind.FIELDS, Fields("w", "n"), range(10, 10 + k), "w")
    columns = [values, list(range(len(values)))]
    got = routed(g.route(columns, len(values)), len(values))
    assert got == {i: g.choose([v, i])[0] for i, v in enumerate(values)}


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50), st.integers(1, 5))
def test_fields_batch_routing_vectorizes_integer_columns(values: list[int], k: int) -> None:
    g = grouper(GroupingKind.FIELDS, Fields("n"), range(k), "n")
    got = routed(g.route([np.array(values, np.int64)], len(values)), len(values))
    assert got == {i: g.choose([v])[0] for i, v in enumerate(values)}


def test_multi_field_keys_agree_with_the_per_tuple_choice() -> None:
    g = grouper(GroupingKind.FIELDS, Fields("a", "b"), [1, 2, 3], "a", "b")
    a = [f"k{i % 7}" for i in range(40)]
    b = [i % 5 for i in range(40)]
    for task, rows in g.route([a, b], 40):
        for i in rows.tolist():
            assert g.choose([a[i], b[i]]) == (task,)


@pytest.mark.parametrize(
    "kind", [GroupingKind.SHUFFLE, GroupingKind.LOCAL_OR_SHUFFLE, GroupingKind.NONE]
)
def test_shuffle_slices_cover_every_row_once_and_rotate(kind: GroupingKind) -> None:
    g = grouper(kind, Fields("w"), [4, 5, 6])
    load = {4: 0, 5: 0, 6: 0}
    for n in (10, 1, 1, 1, 7, 2):
        parts = g.route([list(range(n))], n)
        seen = sorted(i for _, rows in parts for i in rows.tolist())
        assert seen == list(range(n))
        for task, rows in parts:
            load[task] += rows.shape[0]
    assert max(load.values()) - min(load.values()) <= 1


@pytest.mark.parametrize(
    ("kind", "targets", "keys", "fixed"),
    [
        (GroupingKind.ALL, [2, 1], (), (1, 2)),
        (GroupingKind.GLOBAL, [2, 1], (), (1,)),
        (GroupingKind.SHUFFLE, [7], (), (7,)),
        (GroupingKind.FIELDS, [7], ("w",), (7,)),
        (GroupingKind.FIELDS, [3, 2], (), (2,)),  # on no fields: global
        (GroupingKind.PARTIAL_KEY, [7], ("w",), (7,)),
    ],
)
def test_fixed_routes_copy_nothing(
    kind: GroupingKind, targets: list[int], keys: tuple[str, ...], fixed: tuple[int, ...]
) -> None:
    g = grouper(kind, Fields("w"), targets, *keys)
    assert g.fixed == fixed
    assert g.choose(["a"]) == fixed
    assert g.route([["a", "b"]], 2) == [(t, None) for t in fixed]


def test_partial_key_and_custom_route_batches_row_by_row() -> None:
    g = grouper(GroupingKind.PARTIAL_KEY, Fields("w"), [1, 2, 3], "w")
    twin = grouper(GroupingKind.PARTIAL_KEY, Fields("w"), [1, 2, 3], "w")
    words = [f"w{i % 4}" for i in range(30)]
    assert routed(g.route([words], 30), 30) == {i: twin.choose([w])[0] for i, w in enumerate(words)}
    spy = Spy(choice=_both_or_two)
    ctx = sender_context(spy)
    custom = make_grouper(
        Grouping(GroupingKind.CUSTOM, None, spy),
        Fields("word"),
        [1, 2, 3],
        random.Random(0),
        ctx,
        ("words", "default"),
    )
    parts = custom.route([["both", "one", "both"]], 3)
    assert [(t, rows.tolist()) for t, rows in parts] == [(1, [0, 2]), (2, [1]), (3, [0, 2])]


# --- one class per grouping, and what it tells a columnar runner -----------------------------


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        (GroupingKind.SHUFFLE, ShuffleGrouper),
        (GroupingKind.LOCAL_OR_SHUFFLE, LocalOrShuffleGrouper),
        (GroupingKind.NONE, NoneGrouper),
        (GroupingKind.FIELDS, FieldsGrouper),
        (GroupingKind.PARTIAL_KEY, PartialKeyGrouper),
        (GroupingKind.GLOBAL, GlobalGrouper),
        (GroupingKind.ALL, AllGrouper),
        (GroupingKind.DIRECT, DirectGrouper),
        (GroupingKind.CUSTOM, CustomGrouper),
    ],
)
def test_each_grouping_has_its_class(kind: GroupingKind, cls: type) -> None:
    custom = Spy(choice=[1]) if kind is GroupingKind.CUSTOM else None
    fields = Fields("word") if kind in (GroupingKind.FIELDS, GroupingKind.PARTIAL_KEY) else None
    grouping = Grouping(kind, fields, custom)
    assert grouper_class(grouping) is cls
    ctx = sender_context(custom) if custom is not None else None
    built = make_grouper(grouping, FIELDS, [1, 2], random.Random(0), ctx, ("words", "default"))
    assert type(built) is cls


@pytest.mark.parametrize(
    ("grouping", "routing"),
    [
        (Grouping(GroupingKind.SHUFFLE), RandomTask()),
        (Grouping(GroupingKind.NONE), RandomTask()),
        (Grouping(GroupingKind.LOCAL_OR_SHUFFLE), LocalTask()),
        (Grouping(GroupingKind.FIELDS, Fields("word", "count")), HashTask(("word", "count"))),
        (Grouping(GroupingKind.FIELDS, Fields()), FirstTask()),  # on no fields: global
        (Grouping(GroupingKind.PARTIAL_KEY, Fields("word")), HashTask(("word",))),
        (Grouping(GroupingKind.GLOBAL), FirstTask()),
        (Grouping(GroupingKind.ALL), EveryTask()),
        (Grouping(GroupingKind.DIRECT), ChosenTask()),
        (
            Grouping(GroupingKind.CUSTOM, None, Spy()),
            NoColumnRouting(
                "a CustomStreamGrouping chooses tasks in the sending task's Python while "
                "Spark routes rows by columns"
            ),
        ),
    ],
)
def test_spark_routing_describes_each_grouping(grouping: Grouping, routing: Any) -> None:
    assert grouper_class(grouping).spark_routing(grouping) == routing


@pytest.mark.parametrize(
    ("grouping", "together"),
    [
        (Grouping(GroupingKind.FIELDS, Fields("word")), True),
        (Grouping(GroupingKind.FIELDS, Fields("word", "n")), False),  # finer than the key
        (Grouping(GroupingKind.GLOBAL), True),
        (Grouping(GroupingKind.ALL), True),
        (Grouping(GroupingKind.PARTIAL_KEY, Fields("word")), False),  # a key on two tasks
        (Grouping(GroupingKind.SHUFFLE), False),
        (Grouping(GroupingKind.DIRECT), False),
    ],
)
def test_which_groupings_keep_a_key_together(grouping: Grouping, together: bool) -> None:
    assert grouper_class(grouping).keeps_together(grouping, ["word", "other"]) is together
