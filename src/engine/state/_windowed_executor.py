"""``StatefulWindowedBoltExecutor``: runs a ``StatefulWindowedBolt`` (Storm's
``StatefulWindowedBoltExecutor``).

It is the windowed executor plus the stateful hooks: ``create_topology`` wraps it in a
``StatefulBoltExecutor`` like any stateful bolt, whose collector holds every ack until the
commit that covers it. The window acks a tuple when the tuple leaves it, so the ack
reaches the acker at the first commit after that. On ``init_state`` (start, and after a
rollback) and ``pre_rollback`` the window is emptied and its tuples are failed: their
effect, if any, was rolled back with the state, and their replays rebuild the window.
"""

from __future__ import annotations

from typing import Any

from ..windowing._executor import WindowedBoltExecutor
from ._bolt import StatefulComponent

__all__ = ["StatefulWindowedBoltExecutor"]


class StatefulWindowedBoltExecutor(StatefulComponent, WindowedBoltExecutor):
    """The windowed executor with Storm's stateful hooks forwarded to the user's bolt."""

    def init_state(self, state: Any) -> Any:
        self.reset_window()
        return self.bolt.init_state(state)

    def pre_prepare(self, txid: int) -> Any:
        return self.bolt.pre_prepare(txid)

    def pre_commit(self, txid: int) -> Any:
        return self.bolt.pre_commit(txid)

    def pre_rollback(self) -> Any:
        self.reset_window()
        return self.bolt.pre_rollback()
