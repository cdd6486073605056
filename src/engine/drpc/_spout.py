"""``DRPCSpout``: turns the requests a ``LocalDRPC`` holds for one function into tuples."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._model.component import OutputFieldsDeclarer, Spout
from .._model.errors import TopologyStateError
from ._server import LocalDRPC, lookup

__all__ = ["DRPC_SPOUT_IDLE_WAIT_SECS", "DRPCSpout"]

#: How long an idle spout waits for the next request inside ``next_tuple`` before it lets
#: its executor look at acks, fails and activation again. A new request ends the wait.
DRPC_SPOUT_IDLE_WAIT_SECS = 0.05


class DRPCSpout(Spout):
    """Emits ``(args, return-info)`` for each request to ``function``, with the request id
    as message id; a failed tree fails the request (``LocalDRPC.fail_request``).

    Components are copied per task, so the spout holds the server's ``service_id`` and
    finds the live ``LocalDRPC`` in this process when it opens.

    ``next_tuple`` is ``async``: when no request waits, it waits for one (at most
    ``DRPC_SPOUT_IDLE_WAIT_SECS`` of the topology's clock), so a request starts at once instead of at the next
    poll, and an idle spout costs nothing.
    """

    def __init__(self, function: str, drpc: LocalDRPC) -> None:
        if not isinstance(function, str) or not function:
            raise TypeError(f"the DRPC function must be a non-empty string, got {function!r}")
        if not isinstance(drpc, LocalDRPC):
            raise TypeError(f"DRPCSpout needs a LocalDRPC, got {type(drpc).__name__}")
        self.function = function
        self.service_id = drpc.service_id

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        server = lookup(self.service_id)
        if server is None or server.closed:
            raise TopologyStateError(
                f"DRPC spout for function {self.function!r}: {self.service_id} is shut down "
                f"or does not exist in this process"
            )
        self._collector = collector
        self._emitted_last = False
        self._clock = getattr(context, "clock", None)  # None: the running loop's
        self._timeout_secs = conf.get("topology.message.timeout.secs")
        self._emitted_at: dict[str, int] = {}  # request id -> emit time, while in flight
        server.register_spout(self.function, self._clock)
        self._registered = True
        self._host = json.dumps(self.service_id)

    async def next_tuple(self) -> None:
        server = lookup(self.service_id)
        if server is None:
            return
        req = server.fetch_request(self.function)
        if req is None:
            if self._emitted_last:
                self._emitted_last = False  # end of a burst: let the executor flush it
                return
            await server.wait_for_request(self.function, DRPC_SPOUT_IDLE_WAIT_SECS, self._clock)
            req = server.fetch_request(self.function)
            if req is None:
                return
        # Storm's return info, {"id": ..., "host": ..., "port": ...}, spelled out: the
        # request id is the server's own string of digits
        info = f'{{"id": "{req.request_id}", "host": {self._host}, "port": 0}}'
        self._collector.emit([req.args, info], msg_id=req.request_id)
        if self._clock is not None:
            self._emitted_at[req.request_id] = self._clock.now_ns()
        self._emitted_last = True

    def ack(self, msg_id: Any) -> None:
        self._emitted_at.pop(msg_id, None)

    def fail(self, msg_id: Any) -> None:
        emitted = self._emitted_at.pop(msg_id, None)
        server = lookup(self.service_id)
        if server is None:
            return
        timeout = self._timeout_secs
        if (
            emitted is not None
            and timeout is not None
            and self._clock is not None
            and self._clock.now_ns() - emitted >= timeout * 1e9
        ):
            # no bolt said why and the message timeout passed: the tree timed out (or was
            # failed for having waited that long, like JoinResult's halves)
            reason = (
                f"its tuple tree timed out in the topology (no result within "
                f"topology.message.timeout.secs = {timeout:g} s)"
            )
        else:
            reason = "its tuple tree failed in the topology (no bolt reported an error)"
        server.fail_request(msg_id, reason)

    def close(self) -> None:
        if getattr(self, "_registered", False):
            self._registered = False
            server = lookup(self.service_id)
            if server is not None:
                server.unregister_spout(self.function)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["args", "return-info"])
