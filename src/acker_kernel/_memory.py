"""Zeroed arrays for large tables, each a private mapping of its own.

A large ``np.zeros`` may come from the allocator's heap, reused, and then is cleared with a
write to every page, on the caller's thread; a mapping of its own gets zero pages that
fault in as they are first touched (by the caller, or by a thread: ``touch_pages``,
``fault_in_background``). On a virtual machine whose host takes freed pages back, first
touches are slow, which is what the threads are for: 160 MB first written in 85 ms in a
private mapping, 130 ms in a shared one, 330 ms through ``np.zeros`` (2-vCPU VM).

Private, not shared: earlier versions mapped shared anonymous memory, which the kernel
keeps as shared memory. Its pages were slower to fault in, a forked child would have
written into this process's tables, and the same topologies ran faster on private pages,
alternating: the ledger alone (two million roots pending) 16-18M against 21-24M operations
per second, the time window of ``bench/windows.py``, batch, 1.2-2.0M against 1.6-2.6M
tuples/s, and its held-acks baseline 2.2-2.4M against 3.0-3.2M.

No huge pages are asked for. The old code's ``MADV_HUGEPAGE`` did nothing on the shared
mapping (transparent huge pages are off for shared memory by default); on a private
mapping it does give them, and the ledger alone then did 20-25 % more operations per
second, but the engine's time-window and held-acks topologies ran slower, with runs at
0.8-1.8M tuples/s against 1.9-2.4M: making a huge page can stop the faulting thread to
compact memory. Where the system gives transparent huge pages to every mapping, these
get them too."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import sys
import threading
from collections.abc import Callable
from typing import cast

import numpy as np

__all__ = ["OWN_MAPPING_MIN_BYTES", "touch_pages", "warm_up", "zeroed"]

#: An array of at least this many bytes is mapped on its own.
OWN_MAPPING_MIN_BYTES = 8 << 20


def zeroed(
    n: int, dtype: np.dtype | type, align: int = 64, *, fault_in_background: bool = False
) -> np.ndarray:
    """A zeroed one-dimensional array of ``n`` items of ``dtype`` (not object) whose first
    item starts on an ``align``-byte boundary (a power of two, at most a page).

    ``fault_in_background``: a large array (mapped on its own) has its pages made resident
    by a thread while the caller goes on using it (Linux's ``MADV_POPULATE_WRITE``, which
    leaves what is written alone, so the two may overlap), instead of a fault at a time
    on the caller's first touches: 64 MB first read in 8 KB slices took 80-100 ms on the
    loop, 20 ms once populated. Elsewhere (an older kernel, another system) a no-op."""
    dtype = np.dtype(dtype)
    nbytes = n * dtype.itemsize
    if nbytes >= OWN_MAPPING_MIN_BYTES:
        # Page-aligned and zeroed, freed with the array.
        mapped = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        array = np.frombuffer(mapped, np.uint8).view(dtype)
        if fault_in_background and _madvise is not None:
            threading.Thread(target=_populate, args=(array,), name="fault-in", daemon=True).start()
        return array
    buffer = np.zeros(nbytes + align, np.uint8)
    offset = -buffer.ctypes.data % align
    return buffer[offset : offset + nbytes].view(dtype)


def _libc_madvise() -> Callable[[int, int, int], int] | None:
    """libc's ``madvise``, called through ctypes, which lets go of the GIL for the call (the
    ``mmap`` module's ``madvise`` holds it); None off Linux."""
    if sys.platform != "linux":
        return None
    try:
        madvise = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return cast(Callable[[int, int, int], int], madvise)


_madvise = _libc_madvise()
#: Linux 5.14+: fault the range in, writable, leaving its contents as they are.
_MADV_POPULATE_WRITE = 23


def _populate(array: np.ndarray) -> None:
    """Make ``array``'s pages resident (page-aligned; see ``zeroed``). An older kernel
    refuses the advice (-1, EINVAL): the pages then fault in as they are touched."""
    assert _madvise is not None
    _madvise(array.ctypes.data, array.nbytes, _MADV_POPULATE_WRITE)


def warm_up(nbytes: int) -> threading.Thread:
    """Write ``nbytes`` of fresh memory on a thread of its own and free it: an allocation
    made soon after (arrays that cannot be made ahead, such as object arrays, which numpy
    fills holding the GIL) then gets pages the system already backs. On a virtual machine
    whose host takes freed pages back (after a couple of seconds), the first write of a
    page costs some 10 us; measured there, a 128 MB object array and a 128 MB table took
    0.09-0.44 s to make on the loop, and 0.045 s after a warm-up. Returns the thread."""
    thread = threading.Thread(target=_touch, args=(nbytes,), name="warm-up", daemon=True)
    thread.start()
    return thread


def _touch(nbytes: int) -> None:
    touch_pages(np.zeros(nbytes, np.uint8))


#: The system's page: a write to each makes it resident.
_PAGE_BYTES = 4096


def touch_pages(array: np.ndarray) -> None:
    """Write a byte of every page of ``array`` (contiguous; zeroed memory stays zero), so
    that its page faults happen now, on the calling thread: numpy writes without the GIL."""
    array.view(np.uint8)[::_PAGE_BYTES] = 0
