"""Which object runs each Kafka task of a run, so that a crashed one's client is closed.

A task that crashes gets no ``close``/``cleanup``, as a dead process gets none. A dead
process's connections die with it; a crashed object's client lives on in this process,
connected to the broker (and logging its absence once it is gone) until the object is
collected, which a reference cycle can put off to the interpreter's exit. The task's next
object, opening under the same key, closes the crashed object's client instead.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["take_over_task"]

#: (storm id, component id, task index) -> the object open for that task.
_OPEN: weakref.WeakValueDictionary[tuple[str, str, int], Any] = weakref.WeakValueDictionary()


def take_over_task(key: tuple[str, str, int], obj: Any) -> Any | None:
    """Make ``obj`` the object of task ``key``; returns the one it replaces (a crashed
    object whose client the caller closes), or None (the first, or the same object opened
    again, as a rebalance does after a clean ``close``)."""
    prior = _OPEN.get(key)
    _OPEN[key] = obj
    return None if prior is obj else prior
