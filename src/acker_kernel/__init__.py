"""acker_kernel: Storm's pending-tuple ledger as a Numba-jitted 64-bit XOR table.

The engine feeds ``AckerLedger.apply`` batches of INIT / ACK / FAIL / RESET operations as
numpy arrays and gets back the roots that completed; ``expire`` sweeps out roots whose
deadline passed. Nothing Python-object-shaped crosses into the jitted code.
"""

from ._constants import INITIAL_CAPACITY, MAX_LOAD_FACTOR, MIN_LOAD_FACTOR
from ._ledger import AckerLedger, Completions, LedgerStatistics, Op, Outcome, Snapshot

__all__ = [
    "INITIAL_CAPACITY",
    "MAX_LOAD_FACTOR",
    "MIN_LOAD_FACTOR",
    "AckerLedger",
    "Completions",
    "LedgerStatistics",
    "Op",
    "Outcome",
    "Snapshot",
]
