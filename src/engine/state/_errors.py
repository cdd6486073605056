"""The state package's errors, a branch of the engine's tree::

    SquallRuntimeError
    └── StateError                  a state store could not be read or written
        └── StateFormatError          stored bytes in an unknown or newer format

Configuration mistakes (an unknown provider, a missing SQLite path) are
``engine.InvalidConfigError``, raised when the topology is submitted.
"""

from __future__ import annotations

from .._model.errors import SquallRuntimeError

__all__ = ["StateError", "StateFormatError"]


class StateError(SquallRuntimeError):
    """A state store failed; the checkpoint it belonged to is rolled back and replayed."""


class StateFormatError(StateError):
    """Bytes in a state store were not written by this format version."""
