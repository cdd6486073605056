"""``Fields`` (the names of a stream's values) and ``Values`` (one tuple's values)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from .errors import InvalidDeclarationError

__all__ = ["Fields", "Values"]


class Fields(Sequence[str]):
    """An ordered, duplicate-free list of field names.

    >>> f = Fields("word", "count")
    >>> f.index("count"), "word" in f, f.select(Fields("count"), ["storm", 3])
    (1, True, [3])
    """

    __slots__ = ("_index", "_names")

    def __init__(self, *names: str | Iterable[str]) -> None:
        if len(names) == 1 and not isinstance(names[0], str):
            # A single iterable of names; a single non-string name is rejected below.
            with contextlib.suppress(TypeError):
                names = tuple(names[0])
        flat: list[str] = []
        for name in names:
            if not isinstance(name, str):
                raise InvalidDeclarationError(
                    f"field names must be strings, got {name!r} ({type(name).__name__})"
                )
            flat.append(name)
        index: dict[str, int] = {}
        for i, name in enumerate(flat):
            if name in index:
                raise InvalidDeclarationError(f"duplicate field name {name!r} in {flat}")
            index[name] = i
        self._names = tuple(flat)
        self._index = index

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        return self._names[i]

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Fields):
            return self._names == other._names
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._names)

    def __repr__(self) -> str:
        return f"Fields({', '.join(map(repr, self._names))})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Fields, self._names)

    def index(self, name: str, start: int = 0, stop: int | None = None) -> int:
        """Position of field ``name``; ``ValueError`` naming the known fields if absent."""
        try:
            return self._index[name]
        except KeyError:
            raise ValueError(f"unknown field {name!r}; known fields: {list(self._names)}") from None

    def field_index(self, name: str) -> int:
        """Storm's ``fieldIndex``: same as ``index``."""
        return self.index(name)

    def contains(self, name: str) -> bool:
        """Storm's ``contains``: ``name in fields``."""
        return name in self._index

    def select(self, selector: Fields | Iterable[str], values: Sequence[Any]) -> list[Any]:
        """The values of the fields named by ``selector``, in the selector's order."""
        return [values[self.index(name)] for name in selector]

    def to_list(self) -> list[str]:
        """Storm's ``toList``: the names, as a new list."""
        return list(self._names)


class Values(list[Any]):
    """One tuple's values, as in Storm: ``collector.emit(Values(word, 1))``.

    A ``list`` (any sequence of values can be emitted), spelled as Storm code spells it.

    >>> from engine import Values
    >>> Values("storm", 1)
    ['storm', 1]
    """

    def __init__(self, *values: Any) -> None:
        super().__init__(values)
