"""Garbage-collector management while topologies run.

Every tuple is a GC-tracked object, so CPython's default policy (a young collection every
700 allocations, full collections that walk every object, numba's included) costs about a
third of the engine's time. While at least one topology with
``topology.python.gc.managed`` runs, the objects that existed before are frozen out of the
collector's sight, automatic collection is off, and the runtime collects the young
generations itself every ``topology.python.gc.interval.secs`` (a full collection every
tenth time), so reference cycles are still reclaimed. The previous state is restored when
the last managed topology stops.
"""

from __future__ import annotations

import gc

__all__ = ["ManagedGC"]


class ManagedGC:
    """The policy the module describes, held by one running topology: a context manager
    (entered when it starts, left when it stops) whose ``collect`` the runtime calls on
    its timer. Topologies running at once share the frozen state; the last one out
    restores what was there before the first came in."""

    _users = 0
    _was_enabled = True

    def __init__(self) -> None:
        self._ticks = 0
        self._active = False

    def __enter__(self) -> ManagedGC:
        if ManagedGC._users == 0:
            ManagedGC._was_enabled = gc.isenabled()
            gc.disable()
            gc.freeze()
        ManagedGC._users += 1
        self._active = True
        return self

    def collect(self) -> None:
        """Called by the runtime every interval."""
        self._ticks += 1
        gc.collect(2 if self._ticks % 10 == 0 else 1)

    def __exit__(self, *exc: object) -> None:
        if not self._active:
            return
        self._active = False
        ManagedGC._users -= 1
        if ManagedGC._users == 0:
            gc.unfreeze()
            if ManagedGC._was_enabled:
                gc.enable()
