"""User metrics (Storm's ``IMetric``): counters and gauges registered on the context.

>>> from engine import CountMetric
>>> # in prepare(): self.words = context.register_metric("words", CountMetric())
>>> # in execute(): self.words.incr()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["CountMetric", "GaugeMetric", "read_metric"]


class CountMetric:
    """A counter. ``value`` reads it; ``get_value_and_reset`` (Storm's) also zeroes it.

    A plain attribute bumped in place, cheap enough for every tuple; the stats read it
    without resetting it, so several readers (the UI, Prometheus, ``info()``) agree.

    >>> from engine import CountMetric
    >>> words = CountMetric()
    >>> words.incr()
    >>> words.incr_by(2)
    >>> words.value, words.get_value_and_reset(), words.value
    (3, 3, 0)
    """

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def incr(self) -> None:
        """Count one."""
        self.value += 1

    def incr_by(self, n: int) -> None:
        """Count ``n`` (a batch's worth at once)."""
        self.value += n

    def get_value_and_reset(self) -> int:
        """The count so far, and start again from 0: Storm's reporting interval, for a
        reader of your own that wants counts per interval."""
        value, self.value = self.value, 0
        return value


class GaugeMetric:
    """A value read when stats are taken: ``GaugeMetric(lambda: len(self.cache))``."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], Any]) -> None:
        self._read = read

    @property
    def value(self) -> Any:
        """What the read function returns now: computed only when someone looks."""
        return self._read()


def read_metric(metric: Any) -> Any:
    """A metric's current value without resetting it (stats snapshots must not reset)."""
    if isinstance(metric, (CountMetric, GaugeMetric)):
        return metric.value
    if callable(metric):
        return metric()
    value = getattr(metric, "value", None)
    if value is not None:
        return value() if callable(value) else value
    getter = getattr(metric, "get_value_and_reset", None)
    return getter() if callable(getter) else metric
