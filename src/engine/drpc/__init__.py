"""engine.drpc: Storm's distributed RPC in one process.

A topology computes a function; callers get its result like a function call's::

    from engine import LocalCluster
    from engine.drpc import LinearDRPCTopologyBuilder, LocalDRPC

    builder = LinearDRPCTopologyBuilder("reach")
    builder.add_bolt(GetTweeters(), 2)
    builder.add_bolt(GetFollowers(), 4).shuffle_grouping()
    builder.add_bolt(PartialUniquer(), 4).fields_grouping(["id", "follower"])
    builder.add_bolt(CountAggregator(), 2).fields_grouping(["id"])
    with LocalDRPC() as drpc, LocalCluster() as cluster:
        cluster.submit_topology("reach", {}, builder.create_local_topology(drpc))
        print(drpc.execute("reach", "http://example.com/storm"))

In a service, ``await drpc.execute_async(function, args)``; to expose it over HTTP,
``DRPCHttpServer(drpc)`` or ``make_drpc_app(drpc)`` (these two need aiohttp, the ``drpc``
extra, and import it only when first used).
"""

import typing

from .._model.public import lazy_exports as _lazy_exports
from .._model.public import publish as _publish
from ._bolts import ID_STREAM, RETURN_STREAM, JoinResult, PrepareRequest, ReturnResults
from ._builder import (
    DRPC_SPOUT_ID,
    PREPARE_REQUEST_ID,
    LinearDRPCInputDeclarer,
    LinearDRPCTopologyBuilder,
    bolt_id,
)
from ._errors import DRPCExecutionError, DRPCRequestFailed, DRPCTimeout
from ._server import DRPC_REQUEST_TIMEOUT_SECS, DRPCRequest, DRPCStatistics, LocalDRPC
from ._spout import DRPCSpout

if typing.TYPE_CHECKING:
    from ._http import DRPCHttpServer, make_drpc_app

__all__ = [
    "DRPC_REQUEST_TIMEOUT_SECS",
    "DRPC_SPOUT_ID",
    "ID_STREAM",
    "PREPARE_REQUEST_ID",
    "RETURN_STREAM",
    "DRPCExecutionError",
    "DRPCHttpServer",
    "DRPCRequest",
    "DRPCRequestFailed",
    "DRPCSpout",
    "DRPCStatistics",
    "DRPCTimeout",
    "JoinResult",
    "LinearDRPCInputDeclarer",
    "LinearDRPCTopologyBuilder",
    "LocalDRPC",
    "PrepareRequest",
    "ReturnResults",
    "bolt_id",
    "make_drpc_app",
]

#: Names that need aiohttp (an optional dependency), imported on first use only.
_LAZY = {
    "DRPCHttpServer": "._http",
    "make_drpc_app": "._http",
}

__getattr__, __dir__ = _lazy_exports(__name__, globals(), _LAZY, extra="drpc")

_publish(__name__, globals(), sorted(set(__all__) - set(_LAZY)))
