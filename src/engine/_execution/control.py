"""The records of an executor's control lane (``Inbox.put_control``), one kind each.

Control items are served before any data: a spout task hears its trees' completions, a
bolt task its tick tuples.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._model.tuple import Tuple

__all__ = ["Completions", "Tick"]


class Completions(NamedTuple):
    """Trees of spout ``task`` that completed: ``outcomes[i]`` (``ACKED``, ``FAILED`` or
    ``TIMED_OUT``) of ``roots[i]``; ``acked_emitted_ns`` the emit times of the acked ones,
    in order (their complete latency runs to when the spout hears it), or None."""

    task: int
    #: uint64
    roots: np.ndarray[Any, Any]
    #: uint8, one per root
    outcomes: np.ndarray[Any, Any]
    acked_emitted_ns: np.ndarray[Any, Any] | None = None


class Tick(NamedTuple):
    """Deliver the tick tuple ``tuple`` to bolt ``task``."""

    task: int
    tuple: Tuple
