"""``StatefulWindowedBolt``: a windowed bolt with checkpointed state (Storm's
``IStatefulWindowedBolt`` / ``BaseStatefulWindowedBolt``).

The guarantee (Storm's, for its non-persistent stateful windows): the window's contents are
not saved; a tuple is acked only once it has left the window *and* the checkpoint that
holds its effect on the state committed. After a crash or a rollback the state is the last
committed one, and every tuple whose effect it lacks (in the window, or left it since that
commit) is failed, or times out, and is replayed by its reliable spout: at-least-once, no
tuple lost. So the message timeout must cover the window's length + slide plus a
checkpoint interval; a shorter one is refused at start, naming the bolt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._model.config import TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS
from .._model.errors import InvalidConfigError
from ..windowing._bolt import WindowedBolt
from ._bolt import StatefulComponent

__all__ = ["StatefulWindowedBolt"]

#: The checkpoint interval when the topology sets none (the checkpoint spout's default).
_DEFAULT_INTERVAL_MS = 1000


class StatefulWindowedBolt(StatefulComponent, WindowedBolt):
    """A ``WindowedBolt`` whose ``KeyValueState`` (from ``init_state``) survives restarts.

    >>> from engine.state import StatefulWindowedBolt
    >>> from engine.windowing import Duration
    >>> class PageViews(StatefulWindowedBolt):
    ...     def init_state(self, state):
    ...         self.views = state                    # committed with every checkpoint
    ...     def execute(self, window):                # every 5 s: the last 5 s of views
    ...         for t in window.get():
    ...             self.views.put(t["page"], self.views.get(t["page"], 0) + 1)
    >>> bolt = PageViews().with_tumbling_window(Duration(5))
    >>> # builder.set_bolt("views", bolt, 3).fields_grouping("clicks", Fields("page"))

    ``init_state`` runs before the first window and again after every rollback; a rollback
    also empties the window (its tuples are failed and replayed), so no window is ever
    evaluated against a state that lacks part of it.
    """

    def as_bolt(self) -> Any:
        """The bolt that runs this one; ``create_topology`` wraps it for the checkpoints."""
        from ._windowed_executor import StatefulWindowedBoltExecutor

        return StatefulWindowedBoltExecutor(self)

    def validate_topology_conf(
        self, component_id: str, conf: Mapping[str, Any], *, persistent: bool | None = None
    ) -> None:
        """Refuse a message timeout shorter than a tuple may wait for its ack: a checkpoint
        interval when the window is saved with the checkpoints (``persistent``: the spouts
        rewind), else the window and a checkpoint interval, as the tuples are then acked
        only at the first commit after they left. ``persistent`` is None when not known yet
        (at declaration): only the first rule applies then."""
        super().validate_topology_conf(component_id, conf)
        timeout = conf.get("topology.message.timeout.secs")
        enabled = conf.get("topology.enable.message.timeouts", True)
        interval = (conf.get(TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS) or _DEFAULT_INTERVAL_MS) / 1e3
        if timeout is None or not enabled:
            return
        if persistent is not False and timeout <= interval:
            raise InvalidConfigError(
                f"stateful windowed bolt {component_id!r}: topology.message.timeout.secs = "
                f"{timeout} does not cover the checkpoint interval ({interval:g} s): its "
                f"tuples are acked at the first commit after they arrive, so they would "
                f"time out; set the timeout above {interval:g} s or checkpoint more often"
            )
        span = self.window_span_secs()
        if persistent is False and span and timeout <= span + interval:
            raise InvalidConfigError(
                f"stateful windowed bolt {component_id!r}: topology.message.timeout.secs = "
                f"{timeout} does not cover the window's {self._span_words()} plus the "
                f"checkpoint interval ({interval:g} s): its tuples are acked only at the "
                f"first commit after they leave the window, so they would time out; set the "
                f"timeout above {span + interval:g} s, shorten the window or checkpoint more "
                f"often"
            )
