"""Named constants shared by the jitted kernel and its Python owner.

Op codes, outcome codes and entry flags are plain integers because they cross into
Numba-compiled code; the public enums in ``_ledger`` carry the same values.
"""

from __future__ import annotations

import numpy as np

# --- operations (Storm's acker streams) -----------------------------------------------
OP_INIT = 0  # __ack_init: root, XOR of the spout's edge ids, spout task
OP_ACK = 1  # __ack_ack: root, ack value
OP_FAIL = 2  # __ack_fail: root
OP_RESET = 3  # __ack_reset_timeout: root
N_OPS = 4  # a power of two: the kernel validates op codes with one OR over the batch

# --- outcomes reported for a completed root -------------------------------------------
OUTCOME_ACKED = 1
OUTCOME_FAILED = 2
OUTCOME_TIMED_OUT = 3

# --- entry flags ----------------------------------------------------------------------
FLAG_USED = 1  # the slot holds an entry; empty slots have flags == 0, so every uint64 is a key
FLAG_FAILED = 2
FLAG_SPOUT_KNOWN = 4

# --- table sizing -----------------------------------------------------------------------
#: Smallest table, in slots (a power of two); the table never shrinks below it.
INITIAL_CAPACITY = 1 << 12
#: Grow (double) when an insert would push the load above this.
MAX_LOAD_FACTOR = 0.75
#: Shrink (halve, repeatedly) when the load falls below this after an operation.
MIN_LOAD_FACTOR = 0.125

# --- the counters array the kernel updates in place -----------------------------------
META_COUNT = 0  # live entries
META_ACKED = 1
META_FAILED = 2
META_TIMED_OUT = 3
META_ORPHANS = 4  # entries that expired before their spout task was known
META_MIN_DEADLINE = 5  # a lower bound of every live deadline: expire() skips the sweep below it
META_LEN = 6

#: One slot of the table, 40 bytes. The fields a lookup reads (flags, root) come first, so
#: with the table 64-byte aligned they share the record's first cache line 7 times in 8;
#: one probe touches one or two cache lines instead of six separate arrays.
ENTRY_DTYPE = np.dtype(
    [
        ("flags", np.uint8),
        ("spout_task", np.int32),
        ("root", np.uint64),
        ("val", np.uint64),
        ("deadline", np.int64),
        ("start", np.int64),
    ],
    align=True,
)
#: The table's first slot starts on a cache-line boundary.
TABLE_ALIGNMENT = 64
ENTRY_BYTES = ENTRY_DTYPE.itemsize

#: ``apply`` prefetches the home slot of the operation this many places ahead, so its
#: cache misses overlap the work on the current one (tuned on bench/acker_ledger.py).
PREFETCH_DISTANCE = 12
#: ... and this many cache lines from the home slot on: three 64-byte lines always hold the
#: home slot and the two after it, which covers nearly every probe run at our load.
PREFETCH_LINES = 3
CACHE_LINE_BYTES = 64

#: Fibonacci hashing multiplier (2**64 / golden ratio): spreads sequential and adversarial
#: root ids over the table; the bucket is the top ``log2(capacity)`` bits of the product.
HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)

# --- columnar batches (``_batch``) ----------------------------------------------------------
#: Tree ids are SplitMix64 of a Weyl sequence: id(counter) = mix(key + counter * ID_GAMMA),
#: ``key`` derived from the seed. The gamma is odd, so distinct counters give distinct
#: inputs, and ``mix`` (below) is a bijection: 2**64 ids before a repeat.
ID_GAMMA = np.uint64(0x9E3779B97F4A7C15)
#: SplitMix64's finalizer: z ^= z >> 30; z *= C1; z ^= z >> 27; z *= C2; z ^= z >> 31.
ID_MIX_C1 = np.uint64(0xBF58476D1CE4E5B9)
ID_MIX_C2 = np.uint64(0x94D049BB133111EB)
#: The one counter per seed whose mixed value is 0 yields this id instead: 0 is the XOR
#: identity, and an edge id 0 would let a tree look complete with a tuple still pending.
ID_ZERO_SUBSTITUTE = np.uint64(0x6A09E667F3BCC909)
