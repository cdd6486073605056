"""``StatefulWindowedBolt``: a windowed bolt with checkpointed state (Storm's
``IStatefulWindowedBolt`` / ``BaseStatefulWindowedBolt``).

What survives a rollback or a crash depends on how the spouts replay:

- Spouts that replay by message id (Storm's stateful windows): the window's contents are
  not saved; a tuple is acked only once it has left the window *and* the checkpoint that
  holds its effect on the state committed. After a crash or a rollback the state is the
  last committed one, and every tuple whose effect it lacks (in the window, or left it
  since that commit) is failed, or times out, and is replayed by its reliable spout:
  at-least-once, no tuple lost. So the message timeout must cover the window's length +
  slide plus a checkpoint interval; a shorter one is refused at start, naming the bolt.
- Spouts that rewind (``RewindableSpout``; Storm's persistent windows): the window is
  saved whole with every checkpoint and put back as committed at every ``INITSTATE``
  while the spouts rewind to the same checkpoint: every record affects the state exactly
  once, and a tuple is acked at the first commit after it arrived, whatever the window's
  length (``StatefulWindowedBoltExecutor`` says how, and what it costs).
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
    also takes the window back to the same checkpoint as the state (emptied, its tuples
    failed and replayed, when the spouts replay by message id; as the checkpoint saved it
    when they rewind), so no window is ever evaluated against a state that lacks part of
    it, or that holds its effect already.
    """

    def as_bolt(self) -> Any:
        """The bolt that runs this one; ``create_topology`` wraps it for the checkpoints."""
        from ._windowed_executor import StatefulWindowedBoltExecutor

        return StatefulWindowedBoltExecutor(self)

    def validate_topology_conf(
        self, component_id: str, conf: Mapping[str, Any], *, persistent: bool | None = None
    ) -> None:
        """Refuse a message timeout that does not cover the window and a checkpoint
        interval when the tuples are acked only at the first commit after they left (the
        window is not saved: ``persistent`` False). A saved window's tuples are acked at the
        first commit after they arrive, which the checkpoint spout's own check covers; and
        at declaration (``persistent`` None) which one applies is not known yet."""
        if persistent is not False:
            return
        timeout = conf.get("topology.message.timeout.secs")
        enabled = conf.get("topology.enable.message.timeouts", True)
        interval = (conf.get(TOPOLOGY_STATE_CHECKPOINT_INTERVAL_MS) or _DEFAULT_INTERVAL_MS) / 1e3
        span = self.window_span_secs()
        if timeout is not None and enabled and span and timeout <= span + interval:
            raise InvalidConfigError(
                f"stateful windowed bolt {component_id!r}: topology.message.timeout.secs = "
                f"{timeout} does not cover the window's {self._span_words()} plus the "
                f"checkpoint interval ({interval:g} s): its tuples are acked only at the "
                f"first commit after they leave the window, so they would time out; set the "
                f"timeout above {span + interval:g} s, shorten the window or checkpoint more "
                f"often"
            )
