"""Window lengths and sliding intervals: ``Count(n)`` tuples or ``Duration(seconds)``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Count", "Duration", "WindowLength"]


@dataclass(frozen=True)
class Count:
    """A length or slide of ``n`` tuples (Storm's ``BaseWindowedBolt.Count``)."""

    n: int

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n <= 0:
            raise ValueError(f"Count(n) needs a positive int, got {self.n!r}")


@dataclass(frozen=True)
class Duration:
    """A length or slide of ``seconds`` (Storm's ``BaseWindowedBolt.Duration``)."""

    seconds: float

    def __post_init__(self) -> None:
        s = self.seconds
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not s > 0:
            raise ValueError(f"Duration(seconds) needs a number > 0, got {s!r}")

    @property
    def ns(self) -> int:
        """The length in integer nanoseconds, the unit the window manager keeps time in.

        Rounded once here so that window boundaries are exact integers and repeated slides
        never accumulate float error.
        """
        return round(self.seconds * 1e9)


WindowLength = Count | Duration
