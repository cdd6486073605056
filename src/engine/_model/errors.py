"""The engine's exceptions, one tree::

    SquallError
    ├── TopologyError (ValueError)            a topology or config is misdeclared: raised when
    │   ├── InvalidComponentError               it is built or submitted, naming the component
    │   ├── InvalidDeclarationError             and what to change
    │   ├── InvalidGroupingError
    │   └── InvalidConfigError
    ├── InvalidRebalanceError (ValueError)    a rebalance's executors or wait out of range
    ├── SquallRuntimeError (RuntimeError)     something went wrong while running
    │   ├── EmitError                           emit on an undeclared stream, wrong arity, ...
    │   ├── TupleStateError                     anchoring to / acking a tuple already completed
    │   ├── TopologyStateError                  an unknown or already-running topology name
    │   └── TaskStartError                      a task's open / prepare raised (the cause)
    └── FailedException                       control flow: a BasicBolt fails its input
        └── ReportedFailedException             ... and reports the error first

``asyncio.CancelledError`` is never caught by the engine.
"""

from __future__ import annotations

__all__ = [
    "EmitError",
    "FailedException",
    "InvalidComponentError",
    "InvalidConfigError",
    "InvalidDeclarationError",
    "InvalidGroupingError",
    "InvalidRebalanceError",
    "ReportedFailedException",
    "SquallError",
    "SquallRuntimeError",
    "TaskStartError",
    "TopologyError",
    "TopologyStateError",
    "TupleStateError",
]


class SquallError(Exception):
    """Base class of every error the engine raises on purpose."""


class TopologyError(SquallError, ValueError):
    """A topology or its configuration is misdeclared."""


class InvalidComponentError(TopologyError):
    """A component id is duplicated, reserved or empty, or its parallelism is not positive."""


class InvalidDeclarationError(TopologyError):
    """A component declared its output streams or fields wrongly."""


class InvalidGroupingError(TopologyError):
    """A subscription names an unknown component, stream or field, or misuses a grouping."""


class InvalidConfigError(TopologyError):
    """A configuration key is unknown (mistyped) or its value has the wrong type."""


class InvalidRebalanceError(SquallError, ValueError):
    """A rebalance asks for a number of executors or a wait out of range (nothing moved)."""


class SquallRuntimeError(SquallError, RuntimeError):
    """An error while a topology runs."""


class EmitError(SquallRuntimeError):
    """An emit that cannot be routed: undeclared stream, wrong arity, misused direct stream."""


class TupleStateError(SquallRuntimeError):
    """A tuple was anchored to, acked or failed after it was already acked or failed."""


class TopologyStateError(SquallRuntimeError):
    """A topology name is unknown, already running, or the topology was already killed."""


class TaskStartError(SquallRuntimeError):
    """A task's ``open`` (spout) or ``prepare`` (bolt) raised: the message names the
    component and the task, the user's exception is the ``__cause__``, and the error is
    also recorded in the topology's ``info().errors``.

    The user's exception is mapped to the engine's own so that whoever started the
    topology (or a rebalance, or a crashed task's restart) learns which task would not
    start, not only what some library deep in its ``prepare`` said."""


class FailedException(SquallError):
    """Raise in ``BasicBolt.execute`` to fail the input tuple (it will be replayed)."""


class ReportedFailedException(FailedException):
    """Like ``FailedException``, but the error is also reported in the topology's stats."""
