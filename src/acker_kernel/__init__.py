"""acker_kernel: Storm's pending-tuple ledger as a Numba-jitted 64-bit XOR table.

The engine feeds ``AckerLedger.apply`` batches of INIT / ACK / FAIL / RESET operations as
numpy arrays and gets back the roots that completed; ``expire`` sweeps out roots whose
deadline passed. Nothing Python-object-shaped crosses into the jitted code.

For columnar batches, ``_batch`` does the rest of the acker's bookkeeping on arrays: tree
ids in bulk (``TreeIdSource``), ack values per anchor (``xor_per_anchor``), ack/fail ops
per row (``ack_ops``) and folding a batch's ops per root (``fold_ops``).
"""

from ._batch import (
    AckOps,
    FoldedOps,
    TreeIdSource,
    ack_ops,
    fold_ops,
    multi_root_ack_ops,
    xor_per_anchor,
    xor_per_anchors,
)
from ._constants import INITIAL_CAPACITY, MAX_LOAD_FACTOR, MIN_LOAD_FACTOR
from ._ledger import AckerLedger, Completions, LedgerStatistics, Op, Outcome, Snapshot

__all__ = [
    "INITIAL_CAPACITY",
    "MAX_LOAD_FACTOR",
    "MIN_LOAD_FACTOR",
    "AckOps",
    "AckerLedger",
    "Completions",
    "FoldedOps",
    "LedgerStatistics",
    "Op",
    "Outcome",
    "Snapshot",
    "TreeIdSource",
    "ack_ops",
    "fold_ops",
    "multi_root_ack_ops",
    "xor_per_anchor",
    "xor_per_anchors",
]
