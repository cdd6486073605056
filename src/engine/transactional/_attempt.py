"""``TransactionAttempt``: the id of one attempt at one transaction."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INIT_TXID", "TransactionAttempt"]

#: The first transaction id (Storm's ``TransactionalSpoutCoordinator.INIT_TXID``).
INIT_TXID = 1


@dataclass(frozen=True)
class TransactionAttempt:
    """``(transaction_id, attempt_id)``: the first value of every tuple of a batch.

    Transaction ids count up from ``INIT_TXID`` and are committed strictly in order; a
    replayed transaction keeps its id and gets a new random ``attempt_id``, so tuples of a
    failed attempt can never be mistaken for the retry's.
    """

    transaction_id: int
    attempt_id: int

    def __repr__(self) -> str:
        return f"TransactionAttempt(txid={self.transaction_id}, attempt={self.attempt_id})"
