"""The DRPC client's errors, a branch of the engine's runtime errors::

    DRPCExecutionError (SquallRuntimeError)   a DRPC call returned no result
    ├── DRPCRequestFailed                       the request's tuple tree failed in the
    │                                           topology, or the DRPC server shut down
    └── DRPCTimeout (TimeoutError)              no result within the request timeout

Each carries the ``function`` and the server's ``request_id`` (None if it never got one).
"""

from __future__ import annotations

from .._model.errors import SquallRuntimeError

__all__ = ["DRPCExecutionError", "DRPCRequestFailed", "DRPCTimeout"]


class DRPCExecutionError(SquallRuntimeError):
    """A DRPC call returned no result (Storm's ``DRPCExecutionException``)."""

    def __init__(self, message: str, function: str, request_id: str | None) -> None:
        super().__init__(message)
        self.function = function
        self.request_id = request_id

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.function, self.request_id))


class DRPCRequestFailed(DRPCExecutionError):
    """The topology failed the request (a tuple of its tree failed or timed out), or the
    DRPC server was shut down before the result came."""


class DRPCTimeout(DRPCExecutionError, TimeoutError):
    """No result within the server's request timeout (``drpc.request.timeout.secs``)."""
