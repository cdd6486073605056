"""``TupleWindow``: what ``WindowedBolt.execute`` receives (Storm's ``TupleWindow``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["TupleWindow"]


class TupleWindow:
    """One firing of a window: its tuples, those new since the last firing, those that left.

    ``get()`` is every tuple in the window (oldest first: by timestamp in event time, by
    arrival otherwise); ``get_new()`` the ones that were not in the previous firing;
    ``get_expired()`` the ones that left the window since the previous firing (already acked,
    readable, not to be anchored to). A window fires with no tuples only to report tuples
    that left (``get()`` empty, ``get_expired()`` not); its start is then its end. Timestamps are seconds: for a duration window the window
    is ``(start_timestamp, end_timestamp]``; for a count window they are the timestamps of its
    oldest and newest tuple (arrival time on the runtime's clock, or event time).
    """

    __slots__ = ("_expired", "_new", "_tuples", "end_timestamp", "start_timestamp")

    def __init__(
        self,
        tuples: Sequence[Any],
        new: Sequence[Any],
        expired: Sequence[Any],
        start_timestamp: float,
        end_timestamp: float,
    ) -> None:
        self._tuples = list(tuples)
        self._new = list(new)
        self._expired = list(expired)
        self.start_timestamp = start_timestamp
        self.end_timestamp = end_timestamp

    def get(self) -> list[Any]:
        return self._tuples

    def get_new(self) -> list[Any]:
        return self._new

    def get_expired(self) -> list[Any]:
        return self._expired

    def __len__(self) -> int:
        return len(self._tuples)

    def __iter__(self) -> Any:
        return iter(self._tuples)

    def __repr__(self) -> str:
        return (
            f"TupleWindow({len(self._tuples)} tuples, {len(self._new)} new, "
            f"{len(self._expired)} expired, ({self.start_timestamp}, {self.end_timestamp}])"
        )
