"""acker_kernel: Storm's pending-tuple ledger as a Numba-jitted 64-bit XOR table.

The engine feeds ``AckerLedger.apply`` batches of INIT / ACK / FAIL / RESET operations as
numpy arrays and gets back the roots that completed; ``expire`` sweeps out roots whose
deadline passed. Nothing Python-object-shaped crosses into the jitted code.

For columnar batches, ``_batch`` does the rest of the acker's bookkeeping on arrays, on
one representation of a batch's trees (a root per row, or CSR for rows with several): tree
ids in bulk (``TreeIdSource``), ack values per anchor (``xor_per_anchor``), the ACKs of
acked rows (``ack_ops``) and the roots of rows, for FAILs and for their children
(``gather_roots``). The engine calls each of them.

``zeroed`` makes the zeroed arrays of large tables (the ledger's, and the engine's own
tables of trees in flight), each mapped on its own; ``warm_up`` readies fresh memory on a
thread for an allocation soon to come.
"""

from ._batch import AckOps, TreeIdSource, ack_ops, gather_roots, xor_per_anchor
from ._constants import INITIAL_CAPACITY, MAX_LOAD_FACTOR, MIN_LOAD_FACTOR
from ._ledger import AckerLedger, Completions, LedgerStatistics, Op, Outcome, Snapshot
from ._memory import warm_up, zeroed

__all__ = [
    "INITIAL_CAPACITY",
    "MAX_LOAD_FACTOR",
    "MIN_LOAD_FACTOR",
    "AckOps",
    "AckerLedger",
    "Completions",
    "LedgerStatistics",
    "Op",
    "Outcome",
    "Snapshot",
    "TreeIdSource",
    "ack_ops",
    "gather_roots",
    "warm_up",
    "xor_per_anchor",
    "zeroed",
]
