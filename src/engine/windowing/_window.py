"""``TupleWindow``: what ``WindowedBolt.execute`` receives (Storm's ``TupleWindow``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._rows import Rows

__all__ = ["TupleWindow"]


class TupleWindow:
    """One firing of a window: its tuples, those new since the last firing, those that left.

    ``get()`` is every tuple in the window (oldest first: by timestamp in event time, by
    arrival otherwise); ``get_new()`` the ones that were not in the previous firing;
    ``get_expired()`` the ones that left the window since the previous firing (readable, not
    to be anchored to: they are acked right after this firing). A window fires with no tuples
    only to report tuples that left (``get()`` empty, ``get_expired()`` not); its start is
    then its end. Timestamps are seconds: for a duration window the window is
    ``(start_timestamp, end_timestamp]``; for a count window they are the timestamps of its
    oldest and newest tuple (arrival time on the runtime's clock, or event time).

    The same rows as columns, at batch speed: ``column(field)``, ``new_column(field)`` and
    ``expired_column(field)`` give one field's values (a name, or an index), oldest first,
    without making a ``Tuple`` per row: slices of the batches the window holds (a numpy
    array when they carry numpy columns, else a list).

    >>> from engine.windowing import WindowedBolt
    >>> class Sum(WindowedBolt):
    ...     total = 0
    ...     def execute(self, window):                  # a running sum, as columns
    ...         self.total += sum(window.new_column("n")) - sum(window.expired_column("n"))
    ...         self.collector.emit([self.total])       # anchored to the window
    """

    __slots__ = (
        "_expired",
        "_expired_rows",
        "_new",
        "_new_from",
        "_rows",
        "_tuples",
        "end_timestamp",
        "start_timestamp",
    )

    def __init__(
        self,
        tuples: Sequence[Any],
        new: Sequence[Any],
        expired: Sequence[Any],
        start_timestamp: float,
        end_timestamp: float,
    ) -> None:
        self._rows: Rows | None = None
        self._new_from = 0
        self._expired_rows: Rows | None = None
        self._tuples: list[Any] | None = list(tuples)
        self._new: list[Any] | None = list(new)
        self._expired: list[Any] | None = list(expired)
        self.start_timestamp = start_timestamp
        self.end_timestamp = end_timestamp

    @classmethod
    def of_rows(
        cls, rows: Rows, new_from: int, expired: Rows, start_timestamp: float, end_timestamp: float
    ) -> TupleWindow:
        """A window over rows of a ``RowTable`` (new: those from position ``new_from`` on):
        tuples are made when first asked for."""
        w = cls.__new__(cls)
        w._rows, w._new_from, w._expired_rows = rows, new_from, expired
        w._tuples = w._new = w._expired = None
        w.start_timestamp = start_timestamp
        w.end_timestamp = end_timestamp
        return w

    # --- tuples --------------------------------------------------------------------------
    def get(self) -> list[Any]:
        """Every tuple in the window, built on first call: a bolt that reads only
        ``get_new`` never pays to materialise the whole window."""
        tuples = self._tuples
        if tuples is None:
            rows = self._rows
            assert rows is not None  # a window holds rows or tuples
            tuples = self._tuples = rows.items()
        return tuples

    def get_new(self) -> list[Any]:
        """The tuples that arrived since the last window fired, so an incremental
        aggregate can add just them instead of recomputing the window."""
        new = self._new
        if new is None:
            rows = self._new_rows()
            assert rows is not None
            new = self._new = rows.items()
        return new

    def get_expired(self) -> list[Any]:
        """The tuples that left since the last window fired, so an incremental
        aggregate can subtract them; they are acked once the window is done."""
        expired = self._expired
        if expired is None:
            rows = self._expired_rows
            assert rows is not None
            expired = self._expired = rows.items()
        return expired

    # --- columns -------------------------------------------------------------------------
    def column(self, field: str | int) -> Any:
        """``field`` of every tuple in the window (``get()``'s order)."""
        return _column(self._rows, self._tuples, field)

    def new_column(self, field: str | int) -> Any:
        """``field`` of the tuples new in this window (``get_new()``'s order)."""
        rows = self._rows
        if rows is not None:
            return rows.column(field, self._new_from)
        return [t[field] for t in self.get_new()]

    def expired_column(self, field: str | int) -> Any:
        """``field`` of the tuples that left (``get_expired()``'s order)."""
        return _column(self._expired_rows, self._expired, field)

    def _new_rows(self) -> Rows | None:
        rows = self._rows
        return None if rows is None else rows.tail(self._new_from)

    # --- the rest ------------------------------------------------------------------------
    def __len__(self) -> int:
        rows = self._rows
        return len(rows) if rows is not None else len(self.get())

    def __iter__(self) -> Any:
        return iter(self.get())

    def __repr__(self) -> str:
        def size(rows: Rows | None, items: list[Any] | None) -> int:
            return len(rows) if rows is not None else len(items or ())

        return (
            f"TupleWindow({len(self)} tuples, {size(self._new_rows(), self._new)} new, "
            f"{size(self._expired_rows, self._expired)} expired, "
            f"({self.start_timestamp}, {self.end_timestamp}])"
        )


def _column(rows: Rows | None, items: list[Any] | None, field: str | int) -> Any:
    if rows is not None:
        return rows.column(field)
    assert items is not None  # a window holds rows or tuples
    return [t[field] for t in items]
