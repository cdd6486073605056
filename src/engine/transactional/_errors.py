"""Errors of transactional topologies, a branch of the engine's runtime errors::

    TransactionalStateError (SquallRuntimeError)   stored state cannot be read or written,
                                                   or is ahead of the batch being applied

Failures of a batch itself are not errors: they fail its attempt, which is replayed.
"""

from __future__ import annotations

from .._model.errors import SquallRuntimeError

__all__ = ["TransactionalStateError"]


class TransactionalStateError(SquallRuntimeError):
    """A state store cannot be read or written, or a value is updated with a txid older
    than the one it already holds (commits went backwards: a bug or two topologies writing
    the same state)."""
