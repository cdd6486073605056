"""The system bolts of a linear DRPC topology: ``PrepareRequest``, ``JoinResult``,
``ReturnResults`` (Storm's, with the same streams and fields)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._model.component import BasicBolt, Bolt, OutputFieldsDeclarer
from .._model.tuple import Tuple, is_tick_tuple
from ..coordination._seeding import task_random
from ._server import lookup

__all__ = [
    "ARGS_STREAM",
    "ID_STREAM",
    "JOIN_EXPIRY_TICK_SECS",
    "RETURN_STREAM",
    "JoinResult",
    "PrepareRequest",
    "ReturnResults",
    "note_bolt_error",
]

#: ``PrepareRequest``'s streams: ``(request, args)``, ``(request, return)``, ``(request)``.
ARGS_STREAM = "default"
RETURN_STREAM = "ret"
ID_STREAM = "id"
#: How often ``JoinResult`` looks for halves that waited longer than the message timeout.
JOIN_EXPIRY_TICK_SECS = 1.0


class PrepareRequest(BasicBolt):
    """Gives each request a random 63-bit id (from ``topology.seed``) and sends it three
    ways: the arguments to the first bolt, the return info to ``JoinResult``, the bare id
    to the last bolt."""

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self._rand = task_random(conf, context, "drpc-requests").getrandbits

    def execute(self, tuple: Tuple, collector: Any) -> None:
        request = self._rand(63)
        _bind(tuple[1], request)
        collector.emit([request, tuple[0]], ARGS_STREAM)
        collector.emit([request, tuple[1]], RETURN_STREAM)
        collector.emit([request], ID_STREAM)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream(ARGS_STREAM, ["request", "args"])
        declarer.declare_stream(RETURN_STREAM, ["request", "return"])
        declarer.declare_stream(ID_STREAM, ["request"])


def _bind(info: Any, request: int) -> None:
    """Tell the ``LocalDRPC`` named in the return info our id for its request, so that a
    bolt's error for ``request`` reaches its caller (an unreadable return info is
    ``ReturnResults``' to report)."""
    try:
        ret = json.loads(info)
        server = lookup(ret["host"])
        request_id = ret["id"]
    except (TypeError, ValueError, KeyError):
        return
    if server is not None:
        server.bind(request_id, request)


def note_bolt_error(service_id: str, request: Any, component_id: str, exc: BaseException) -> None:
    """``CoordinatedBolt``'s ``on_error`` in a linear DRPC topology: the error becomes the
    reason the request's caller reads if the request fails."""
    server = lookup(service_id)
    if server is not None:
        server.note_error(request, f"bolt {component_id!r} raised {type(exc).__name__}: {exc}")


class JoinResult(Bolt):
    """Pairs each request's result (from the last bolt) with its return info (from
    ``return_component``) and emits ``(result as a string, return-info)``, anchored to both.

    Unlike Storm's, a half whose partner never comes (the request failed) is failed and
    forgotten after the message timeout instead of being kept forever.
    """

    def __init__(self, return_component: str) -> None:
        self.return_component = return_component

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector
        self._returns: dict[Any, tuple[Tuple, int]] = {}
        self._results: dict[Any, tuple[Tuple, int]] = {}
        self._now = 0
        tick = conf.get("topology.tick.tuple.freq.secs") or JOIN_EXPIRY_TICK_SECS
        self._expire_ticks = int(conf["topology.message.timeout.secs"] / tick) + 2

    def execute(self, tuple: Tuple) -> None:
        if is_tick_tuple(tuple):
            self._expire()
            return
        request = tuple.values[0]
        if tuple.source_component == self.return_component:
            result = self._results.pop(request, None)
            returner: Tuple | None = tuple
            if result is None:
                self._returns[request] = (tuple, self._now)
                return
            result_tuple = result[0]
        else:
            ret = self._returns.pop(request, None)
            result_tuple = tuple
            if ret is None:
                self._results[request] = (tuple, self._now)
                return
            returner = ret[0]
        assert returner is not None
        collector = self._collector
        collector.emit(
            [str(result_tuple.values[1]), returner.values[1]], anchors=[result_tuple, returner]
        )
        collector.ack(result_tuple)
        collector.ack(returner)

    def _expire(self) -> None:
        self._now += 1
        horizon = self._now - self._expire_ticks
        for waiting in (self._returns, self._results):
            old = [request for request, (_, born) in waiting.items() if born <= horizon]
            for request in old:
                self._collector.fail(waiting.pop(request)[0])

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["result", "return-info"])

    def component_configuration(self) -> Mapping[str, Any] | None:
        return {"topology.tick.tuple.freq.secs": JOIN_EXPIRY_TICK_SECS}


class ReturnResults(Bolt):
    """Hands each ``(result, return-info)`` to the ``LocalDRPC`` named in the return info."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector

    def execute(self, tuple: Tuple) -> None:
        result, info = tuple.values[0], tuple.values[1]
        try:
            ret = json.loads(info)
            host, request_id = ret["host"], ret["id"]
        except (TypeError, ValueError, KeyError) as exc:
            self._collector.report_error(f"unreadable DRPC return info {info!r}: {exc!r}")
            self._collector.fail(tuple)
            return
        server = lookup(host)
        if server is None:
            self._collector.report_error(
                f"DRPC result for request {request_id}: server {host} is gone"
            )
            self._collector.fail(tuple)
            return
        server.result(request_id, result)
        self._collector.ack(tuple)
