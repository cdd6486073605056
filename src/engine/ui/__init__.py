"""engine.ui: Storm UI for a process — a web page and a JSON REST API (the ``ui`` extra).

One page lists the process's topologies, each with its graph (SVG: spouts, bolts, streams,
groupings, parallelism), Storm UI's tables per component and per task over the whole run and
the last 1 or 10 minutes, plots of throughput and complete latency, the last errors with
their tracebacks, and the actions activate, deactivate, rebalance and kill::

    from engine import run_topology
    from engine.ui import serve_ui

    async def main(topology):
        async with await serve_ui(port=8080) as ui, run_topology(topology) as running:
            ui.register(running)                    # http://127.0.0.1:8080/
            await running.wait_until_complete()

The REST API (``/api/v1/``, shaped like Storm UI's) is described in ``engine.ui._server``;
``squall list / kill / activate / deactivate / rebalance`` are its command-line client.
``topology_graph(topology).to_svg()`` / ``.to_dot()`` draw a topology without a server
(``squall visualize``). aiohttp is imported only by ``serve_ui`` / ``UIServer``.
"""

import typing

from .._model.public import lazy_exports as _lazy_exports
from .._model.public import publish as _publish
from ._graph import GraphEdge, GraphNode, TopologyGraph, topology_graph
from ._sampler import StatsSampler

if typing.TYPE_CHECKING:
    from ._server import DEFAULT_UI_PORT, UIServer, attach_ui, serve_ui

__all__ = [
    "DEFAULT_UI_PORT",
    "GraphEdge",
    "GraphNode",
    "StatsSampler",
    "TopologyGraph",
    "UIServer",
    "attach_ui",
    "serve_ui",
    "topology_graph",
]

#: Names that need aiohttp (an optional dependency), imported on first use only.
_LAZY = {
    "DEFAULT_UI_PORT": "._server",
    "UIServer": "._server",
    "attach_ui": "._server",
    "serve_ui": "._server",
}

__getattr__, __dir__ = _lazy_exports(__name__, globals(), _LAZY, extra="ui")

_publish(__name__, globals(), sorted(set(__all__) - set(_LAZY)))
