"""Windowed bolts (Storm's ``BaseWindowedBolt``): sliding and tumbling windows by count or
duration, in processing time (the runtime's clock) or event time (a timestamp field or
extractor, a lag, watermarks, a late tuple stream).

- ``WindowedBolt``: subclass it, implement ``execute(window)``, declare it with ``set_bolt``.
- ``Count`` / ``Duration``: window lengths and slides.
- ``TupleWindow``: ``get()``, ``get_new()``, ``get_expired()``, ``start_timestamp``,
  ``end_timestamp``; the same as columns, without a ``Tuple`` per row: ``column(field)``,
  ``new_column(field)``, ``expired_column(field)``.
- ``WindowManager``: the window core without the engine, for wrappers (stateful windows):
  arrays of row ids and timestamps, batches in (``add_ids``), windows out.
- ``WindowedBoltExecutor``: the bolt that runs a ``WindowedBolt`` (``set_bolt`` wraps it).
"""

from .._model.public import publish
from ._bolt import LATE_TUPLE_FIELDS, WindowedBolt
from ._executor import WindowedBoltExecutor, WindowedOutputCollector
from ._length import Count, Duration
from ._manager import WindowManager
from ._window import TupleWindow

__all__ = [
    "LATE_TUPLE_FIELDS",
    "Count",
    "Duration",
    "TupleWindow",
    "WindowManager",
    "WindowedBolt",
    "WindowedBoltExecutor",
    "WindowedOutputCollector",
]

publish(__name__, globals(), __all__)
del publish
