"""``Fields`` (a stream's field names) and ``Values`` (one tuple's values)."""

from __future__ import annotations

import pickle
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import Fields, InvalidDeclarationError, Values


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


@pytest.mark.parametrize(
    "fields",
    [
        Fields("word", "count"),
        Fields(["word", "count"]),
        Fields(("word", "count")),
        Fields(iter(["word", "count"])),
        Fields(Fields("word", "count")),
    ],
)
def test_construction_forms_agree(fields: Fields) -> None:
    assert list(fields) == ["word", "count"]
    assert fields == Fields("word", "count")


def test_sequence_behaviour() -> None:
    fields = Fields("word", "count", "ts")
    assert isinstance(fields, Sequence)
    assert len(fields) == 3
    assert fields[0] == "word"
    assert fields[-1] == "ts"
    assert fields[1:] == ("count", "ts")
    assert fields.to_list() == ["word", "count", "ts"]
    assert repr(fields) == "Fields('word', 'count', 'ts')"


def test_empty_fields() -> None:
    fields = Fields()
    assert len(fields) == 0
    assert list(fields) == []
    assert fields == Fields([])
    assert repr(fields) == "Fields()"


def test_index() -> None:
    fields = Fields("word", "count")
    assert fields.index("word") == 0
    assert fields.index("count") == 1
    assert fields.field_index("count") == 1


def test_index_of_unknown_field_names_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match=exactly("unknown field 'cnt'; known fields: ['word', 'count']")
    ):
        Fields("word", "count").index("cnt")


def test_contains() -> None:
    fields = Fields("word", "count")
    assert "word" in fields
    assert fields.contains("count")
    assert "cnt" not in fields
    assert not fields.contains("cnt")
    assert 0 not in fields


def test_select_follows_the_selectors_order() -> None:
    fields = Fields("word", "count", "ts")
    values = ["storm", 3, 1700]
    assert fields.select(Fields("ts", "word"), values) == [1700, "storm"]
    assert fields.select(["count"], values) == [3]
    assert fields.select(Fields(), values) == []


def test_select_of_unknown_field() -> None:
    with pytest.raises(ValueError, match=exactly("unknown field 'x'; known fields: ['word']")):
        Fields("word").select(["x"], ["storm"])


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("a", "b", "a"), "duplicate field name 'a' in ['a', 'b', 'a']"),
        ((["w", "w"],), "duplicate field name 'w' in ['w', 'w']"),
        (("a", 1), "field names must be strings, got 1 (int)"),
        (([b"a"],), "field names must be strings, got b'a' (bytes)"),
        (([None],), "field names must be strings, got None (NoneType)"),
    ],
)
def test_bad_names_are_rejected(names: tuple[Any, ...], message: str) -> None:
    with pytest.raises(InvalidDeclarationError, match=exactly(message)):
        Fields(*names)


def test_single_non_string_name_is_rejected() -> None:
    with pytest.raises(
        InvalidDeclarationError, match=exactly("field names must be strings, got 1 (int)")
    ):
        Fields(1)  # type: ignore[arg-type]


def test_equality_and_hash() -> None:
    assert Fields("a", "b") == Fields(["a", "b"])
    assert hash(Fields("a", "b")) == hash(Fields(["a", "b"]))
    assert Fields("a", "b") != Fields("b", "a")
    assert Fields("a") != Fields("a", "b")
    assert Fields("a", "b") != ["a", "b"]  # a Fields is not a list
    assert Fields("a", "b") != ("a", "b")
    assert len({Fields("a"), Fields(["a"]), Fields("b")}) == 2


names_st = st.lists(st.text(max_size=8), max_size=8, unique=True)


@given(names_st)
def test_pickling_keeps_names_and_index(names: list[str]) -> None:
    fields = Fields(names)
    copy = pickle.loads(pickle.dumps(fields))
    assert copy == fields
    assert [copy.index(n) for n in names] == list(range(len(names)))


@given(names_st)
def test_index_is_the_position(names: list[str]) -> None:
    fields = Fields(*names)
    for i, name in enumerate(names):
        assert fields.index(name) == i
        assert fields[i] == name
        assert name in fields


def test_values_is_a_list_of_its_arguments() -> None:
    values = Values("storm", 3)
    assert isinstance(values, list)
    assert values == ["storm", 3]
    assert Values() == []
    assert Values(["a", "b"]) == [["a", "b"]]  # one value, a list
