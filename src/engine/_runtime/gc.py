"""Garbage-collector management while topologies run.

Every tuple is a GC-tracked object, so CPython's default policy (a young collection every
700 allocations, full collections that walk every object, numba's included) costs about a
third of the engine's time. While at least one topology with
``topology.python.gc.managed`` runs, the objects that existed before are frozen out of the
collector's sight, automatic collection is off, and the runtime collects the young
generations itself every ``topology.python.gc.interval.secs`` (a full collection every
tenth time), so reference cycles are still reclaimed.

A collection walks every object that survived since the last one, garbage or not: what a
window, a join or a state holds for a second or more (a time window of a second holds a
second of tuples) is walked once whatever the interval, so collecting every second can cost
a tenth of the run. Collections are therefore held to a share of the time,
``TIME_SHARE``: after a collection that took ``d`` seconds (wall clock), the runtime's
calls within ``d / TIME_SHARE`` of it are skipped. Only cyclic garbage waits longer for
its collection (everything else is freed as it is dropped); a heap that is cheap to walk is
still collected every interval. The previous state is restored when the last managed
topology stops.

A stopped topology, once dropped, is cyclic garbage (its executors and collectors refer to
each other), with all it held: the acker's and the spouts' tables of trees in flight, the
windows' rows. The next managed topology would freeze that garbage with the rest and keep
it for as long as it runs (measured: 0.4-0.8 GB after a one-second time window at two
million tuples a second, and the next such run 30-50 % slower for the memory it had to
find). So the first topology in, after one that ran ``LONG_RUN_SECS`` or longer or raised
the process's peak memory by ``LARGE_RUN_BYTES``, collects before it freezes; after a short,
small run it does not (its garbage is small, and a full collection costs some 40 ms in a
process with the engine and Spark's modules loaded). Nor does it when everything such a run
held is already gone: the runtime names what it holds (its acker and executors, ``held``),
and weak references to them tell the next start whether a collection since (the caller's
own ``gc.collect()``, as a service between two topologies or a benchmark makes, or an
automatic one) freed them. A full collection walks the whole heap, 60-80 ms after a
per-tuple word count over 200,000 sentences, a few percent of the next run. What is still
referenced, or is garbage not yet collected, keeps a reference alive, and the start
collects as before. The references see the runtime's own objects only (the acker and the
executors refer back to the runtime, so they die with it, in a full collection, which
frees every other cycle of the run with them): cyclic garbage that user code made
outside them and dropped after that collection is frozen by the next start, as any
garbage is after a short run.
"""

from __future__ import annotations

import gc
import sys
import time
import weakref
from collections.abc import Callable, Iterable
from typing import ClassVar

__all__ = ["LARGE_RUN_BYTES", "LONG_RUN_SECS", "TIME_SHARE", "ManagedGC"]

#: The share of the wall-clock time the managed collections may take (see the module).
TIME_SHARE = 0.02

#: Every this many collections, a full one (the older generations too).
_FULL_EVERY = 10

#: After a managed topology that ran this long (wall clock), the next first one in collects
#: before it freezes (see the module).
LONG_RUN_SECS = 2.0
#: ... or raised the process's peak resident memory by this much.
LARGE_RUN_BYTES = 64 << 20


def _peak_rss_bytes() -> int:
    """The process's peak resident memory (0 where the platform does not say)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, else KiB


class ManagedGC:
    """The policy the module describes, held by one running topology: a context manager
    (entered when it starts, left when it stops) whose ``collect`` the runtime calls on
    its timer. Topologies running at once share the frozen state; the last one out
    restores what was there before the first came in. ``timer`` is the wall clock the
    collections are timed with (a test's own)."""

    _users = 0
    _was_enabled = True
    #: what the long or large runs stopped since the last freeze held, weakly (None: not
    #: known): the next first one in collects before it freezes unless all of it is gone
    _left: ClassVar[list[weakref.ref[object] | None]] = []

    def __init__(
        self,
        *,
        time_share: float = TIME_SHARE,
        timer: Callable[[], float] = time.perf_counter,
        held: Callable[[], Iterable[object]] | None = None,
    ) -> None:
        #: what the topology holds when it stops (see the module); None: not known
        self._held = held
        self._collections = 0
        self._active = False
        self._share = time_share
        self._timer = timer
        #: no collection before this (``timer`` seconds)
        self._next = float("-inf")
        self._entered = 0.0  # when it was entered (``timer`` seconds)
        self._entered_peak = 0  # the peak memory then (bytes)

    def __enter__(self) -> ManagedGC:
        if ManagedGC._users == 0:
            ManagedGC._was_enabled = gc.isenabled()
            gc.disable()
            left, ManagedGC._left = ManagedGC._left, []
            if any(ref is None or ref() is not None for ref in left):
                gc.collect()
            gc.freeze()
        ManagedGC._users += 1
        self._active = True
        self._entered = self._timer()
        self._entered_peak = _peak_rss_bytes()
        return self

    def collect(self) -> bool:
        """Called by the runtime every interval: collects, unless the last collection was
        too recent for its cost (see the module); returns whether it collected."""
        timer = self._timer
        start = timer()
        if start < self._next:
            return False
        self._collections += 1
        gc.collect(2 if self._collections % _FULL_EVERY == 0 else 1)
        end = timer()
        self._next = end + (end - start) / self._share
        return True

    def __exit__(self, *exc: object) -> None:
        if not self._active:
            return
        self._active = False
        ManagedGC._users -= 1
        if (
            self._timer() - self._entered >= LONG_RUN_SECS
            or _peak_rss_bytes() - self._entered_peak >= LARGE_RUN_BYTES
        ):
            # (what is gone already is dropped: a service that always runs a topology
            # never starts a first one, and the list would grow with every stopped run)
            left = [ref for ref in ManagedGC._left if ref is None or ref() is not None]
            if self._held is None:
                left.append(None)
            else:
                left.extend(weakref.ref(obj) for obj in self._held())
            ManagedGC._left = left
        if ManagedGC._users == 0:
            gc.unfreeze()
            if ManagedGC._was_enabled:
                gc.enable()
