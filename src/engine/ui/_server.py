"""The UI's HTTP server (aiohttp): the page, its assets, and the REST API.

Routes (``{id}`` is the topology's name, ``{component}`` a component id):

=======  ==============================================  =====================================
GET      ``/``                                           the page (assets under ``/static/``)
GET      ``/api/v1/topology/summary``                    ``{"topologies": [...]}``
GET      ``/api/v1/topology/{id}?window=W``              stats over ``W`` (``:all-time``, 60,
                                                         600 s), spouts, bolts, errors, series
GET      ``/api/v1/topology/{id}/component/{component}`` per task stats, errors, streams
GET      ``/api/v1/topology/{id}/visualization``         the graph's layout (JSON)
GET      ``/api/v1/topology/{id}/visualization.svg``     the graph (SVG)
POST     ``/api/v1/topology/{id}/activate``              Storm's activate
POST     ``/api/v1/topology/{id}/deactivate``            Storm's deactivate
POST     ``/api/v1/topology/{id}/rebalance[/{wait}]``    body ``{"rebalanceOptions":
                                                         {"executors": {"split": 4}}}``;
                                                         deactivate, wait up to ``wait`` s
                                                         (0..86400; default: the message
                                                         timeout) for in-flight trees, move,
                                                         activate. Answers the executors
                                                         applied (capped at each
                                                         component's tasks) and ``notes``
POST     ``/api/v1/topology/{id}/kill[/{wait}]``         KILLED at once (no more activate,
                                                         deactivate, rebalance); deactivate,
                                                         wait up to ``wait`` s (default: the
                                                         message timeout), stop
=======  ==============================================  =====================================

Errors answer ``{"error": ..., "errorMessage": ...}`` with 400 (bad request, a body that
is not JSON or nests more than ``MAX_BODY_DEPTH`` levels), 401 (token), 403 (foreign origin
or host), 404 (unknown topology or component), 409 (wrong state: an action on a topology
killed, being killed or completed), 413 (a body over ``MAX_BODY_BYTES``). Every response
forbids framing (``X-Frame-Options: DENY`` and CSP ``frame-ancestors 'none'``): no other
site can show the page under a decoy and have its visitor click Kill.

Security, the rules of ``engine._monitor.http_guard`` (the DRPC endpoint follows them too): the
server binds 127.0.0.1 by default and then answers only requests whose ``Host`` is a
loopback name (no DNS rebinding). Bound to any other address it needs a ``token``, sent as
``Authorization: Bearer <token>`` on every ``/api/`` request (the page takes it from its
URL's ``#token=...`` or asks for it). A POST carrying an ``Origin`` other than the server's
own is refused, so another web site cannot drive the actions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import AsyncIterator, Mapping
from importlib import resources
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from aiohttp import web

from .._model.errors import InvalidRebalanceError, SquallError, TopologyStateError
from .._model.rebalance import check_rebalance
from .._model.topology import StormTopology
from .._monitor.http_guard import HttpGuard
from .._monitor.stats import TopologyInfo
from .._time.loop import cancel_and_wait
from ._api import (
    component_json,
    parse_body,
    parse_window,
    topology_json,
    topology_summary_json,
)
from ._graph import topology_graph
from ._sampler import StatsSampler

__all__ = ["DEFAULT_UI_PORT", "UIServer", "attach_ui", "serve_ui"]

#: Storm UI's port.
DEFAULT_UI_PORT = 8080
#: Seconds between two samples of every registered topology's counters.
SAMPLE_INTERVAL_SECS = 1.0
_ASSETS = {
    "ui.js": "text/javascript",
    "ui.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
#: The largest request body accepted (the API's bodies are a few hundred bytes): a body
#: is read whole and its nesting checked before it is parsed.
MAX_BODY_BYTES = 1 << 20
#: On every response: no other site may show the page in a frame, where a visitor could be
#: tricked into clicking Deactivate or Kill under something that looks harmless.
_NO_FRAMING = {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'"}
_SERVER_KEY = web.AppKey("squall_ui", object)


def _error(status: int, error: str, message: str) -> web.Response:
    return web.json_response({"error": error, "errorMessage": message}, status=status)


@runtime_checkable
class RunningTopology(Protocol):
    """What the UI reads and drives of a running topology (``engine.RunningTopology``):
    the UI depends on this view, not on the runtime, so the runtime may start the UI."""

    @property
    def name(self) -> str: ...
    @property
    def topology(self) -> StormTopology: ...
    @property
    def conf(self) -> Mapping[str, Any]: ...
    @property
    def status(self) -> str: ...
    @property
    def clock(self) -> Any: ...
    def info(self) -> TopologyInfo: ...
    def activate(self) -> None: ...
    def deactivate(self) -> None: ...
    async def kill(self, wait_secs: float | None = 0) -> None: ...
    async def rebalance(
        self, component_id: str, num_executors: int, wait_secs: float | None = None
    ) -> int: ...


async def _forbid_framing(request: web.Request, response: web.StreamResponse) -> None:
    # A response hook, not a middleware: it also reaches the router's own 404 / 405.
    response.headers.update(_NO_FRAMING)


def _asset(name: str) -> bytes:
    return (resources.files(__package__) / "assets" / name).read_bytes()


class _Entry:
    def __init__(self, running: RunningTopology, horizon_secs: float) -> None:
        self.running = running
        self.sampler = StatsSampler(horizon_secs)


class UIServer:
    """Serves the web UI and REST API for the topologies registered with it.

    Create and start it with ``await serve_ui(...)`` inside the event loop that runs the
    topologies; ``register(running)`` shows one, ``unregister(name)`` hides it, and
    ``await close()`` stops the server (or use it as ``async with``).
    """

    def __init__(
        self,
        port: int = DEFAULT_UI_PORT,
        host: str = "127.0.0.1",
        *,
        token: str | None = None,
        interval: float = SAMPLE_INTERVAL_SECS,
        horizon_secs: float = 600.0,
    ) -> None:
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(
                f"serve_ui: port must be an int in 0..65535 (0: any free), got {port!r}"
            )
        self._access = HttpGuard(
            host,
            token,
            server="this UI",
            where="serve_ui",
            powers="the UI can kill and rebalance topologies",
            token_hint=" (squall CLI: --token or SQUALL_UI_TOKEN)",
            protected="/api/",
        )
        if interval <= 0:
            raise ValueError(f"serve_ui: interval must be > 0 seconds, got {interval!r}")
        self.host = host
        self.token = token
        self.interval = interval
        self.horizon_secs = horizon_secs
        self._requested_port = port
        self._entries: dict[str, _Entry] = {}
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._sampler_task: asyncio.Task[None] | None = None
        self._actions: set[asyncio.Task[Any]] = set()
        self.port = port
        self.users = 0  # attach_ui's reference count

    # --- lifecycle ---------------------------------------------------------------------
    async def start(self) -> UIServer:
        """Listen (a port in use is an ``OSError`` that says to pick another) and start the
        sampler task; returns the server. ``serve_ui`` calls it for you."""
        refuse = self._access.middleware(lambda r: _error(r.status, r.error, r.message))
        app = web.Application(middlewares=[refuse], client_max_size=MAX_BODY_BYTES)
        app.on_response_prepare.append(_forbid_framing)
        app[_SERVER_KEY] = self
        r = app.router
        r.add_get("/", self._index)
        r.add_get("/static/{name}", self._static)
        r.add_get("/api/v1/topology/summary", self._summary)
        r.add_get("/api/v1/topology/{id}", self._topology)
        r.add_get("/api/v1/topology/{id}/component/{component}", self._component)
        r.add_get("/api/v1/topology/{id}/visualization", self._graph_json)
        r.add_get("/api/v1/topology/{id}/visualization.svg", self._graph_svg)
        r.add_post("/api/v1/topology/{id}/activate", self._activate)
        r.add_post("/api/v1/topology/{id}/deactivate", self._deactivate)
        r.add_post("/api/v1/topology/{id}/rebalance", self._rebalance)
        r.add_post("/api/v1/topology/{id}/rebalance/{wait}", self._rebalance)
        r.add_post("/api/v1/topology/{id}/kill", self._kill)
        r.add_post("/api/v1/topology/{id}/kill/{wait}", self._kill)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, self.host, self._requested_port)
        try:
            await self._site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise OSError(
                exc.errno,
                f"serve_ui: cannot listen on {self.host}:{self._requested_port} ({exc.strerror});"
                f" choose another port (0: any free one)",
            ) from exc
        server = self._site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self._sampler_task = asyncio.get_running_loop().create_task(
            self._sample_forever(), name="squall-ui-sampler"
        )
        return self

    @property
    def url(self) -> str:
        """Where to point a browser: ``http://host:port/`` (the OS's port for port 0)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def close(self) -> None:
        """Stop serving; actions still running (a kill's wait) are awaited."""
        if self._sampler_task is not None:
            await cancel_and_wait(self._sampler_task)
            self._sampler_task = None
        if self._actions:
            await asyncio.gather(*self._actions, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> UIServer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- topologies --------------------------------------------------------------------
    def register(self, running: RunningTopology) -> None:
        """Show ``running`` (under its name) until ``unregister(name)``."""
        if not isinstance(running, RunningTopology):
            raise TypeError(
                f"register needs a RunningTopology (from run_topology / start_topology), got "
                f"{type(running).__name__}"
            )
        old = self._entries.get(running.name)
        if (
            old is not None
            and old.running is not running
            and old.running.info().status
            not in (
                "KILLED",
                "COMPLETED",
            )
        ):
            raise ValueError(
                f"a topology named {running.name!r} is already shown by this UI; give each "
                f"topology its own name (run_topology(..., name=...))"
            )
        entry = _Entry(running, self.horizon_secs)
        entry.sampler.record(running.info())
        self._entries[running.name] = entry

    def unregister(self, name: str) -> None:
        """Stop showing topology ``name`` (unknown names are an error)."""
        if name not in self._entries:
            raise KeyError(
                f"no topology named {name!r} is shown by this UI (shown: {sorted(self._entries)})"
            )
        del self._entries[name]

    @property
    def names(self) -> list[str]:
        """The topologies shown (registered and not yet unregistered), sorted."""
        return sorted(self._entries)

    def sample(self) -> None:
        """Take one sample of every registered topology (the sampler task does, each
        ``interval``)."""
        for entry in list(self._entries.values()):
            entry.sampler.record(entry.running.info())

    async def _sample_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.sample()

    # --- plumbing ----------------------------------------------------------------------
    def _entry(self, request: web.Request) -> _Entry:
        name = request.match_info["id"]
        try:
            return self._entries[name]
        except KeyError:
            raise web.HTTPNotFound(
                text=json.dumps(
                    {
                        "error": "not found",
                        "errorMessage": f"no topology named {name!r} (topologies: "
                        f"{sorted(self._entries)})",
                    }
                ),
                content_type="application/json",
            ) from None

    @staticmethod
    def _window(request: web.Request) -> float | None:
        try:
            return parse_window(request.query.get("window"))
        except ValueError as exc:
            raise web.HTTPBadRequest(
                text=json.dumps({"error": "bad window", "errorMessage": str(exc)}),
                content_type="application/json",
            ) from None

    # --- pages -------------------------------------------------------------------------
    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(body=_asset("index.html"), content_type="text/html", charset="utf-8")

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _ASSETS:
            return _error(404, "not found", f"no asset {name!r}")
        return web.Response(body=_asset(name), content_type=_ASSETS[name], charset="utf-8")

    # --- reads -------------------------------------------------------------------------
    async def _summary(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "topologies": [
                    topology_summary_json(e.running.info())
                    for _, e in sorted(self._entries.items())
                ]
            }
        )

    async def _topology(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        window = self._window(request)
        running = entry.running
        return web.json_response(
            topology_json(running.info(), running.topology, running.conf, entry.sampler, window)
        )

    async def _component(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        window = self._window(request)
        component = request.match_info["component"]
        info = entry.running.info()
        if component not in info.components:
            return _error(
                404,
                "not found",
                f"topology {info.name!r} has no component {component!r} (components: "
                f"{sorted(info.components)})",
            )
        return web.json_response(
            component_json(info, entry.running.topology, component, entry.sampler, window)
        )

    def _graph(self, entry: _Entry) -> Any:
        info = entry.running.info()
        executors = {cid: c.executors for cid, c in info.components.items()}
        return topology_graph(entry.running.topology, executors=executors)

    async def _graph_json(self, request: web.Request) -> web.Response:
        return web.json_response(self._graph(self._entry(request)).to_json())

    async def _graph_svg(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        svg = self._graph(entry).to_svg(title=entry.running.name)
        return web.Response(text=svg, content_type="image/svg+xml", charset="utf-8")

    # --- actions -----------------------------------------------------------------------
    @staticmethod
    def _done(entry: _Entry, operation: str, **extra: Any) -> web.Response:
        return web.json_response(
            {
                "topologyOperation": operation,
                "topologyId": entry.running.name,
                "status": "success",
                "topologyStatus": entry.running.info().status,
                **extra,
            }
        )

    async def _activate(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        try:
            entry.running.activate()
        except SquallError as exc:
            return _error(409, "cannot activate", str(exc))
        return self._done(entry, "activate")

    async def _deactivate(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        try:
            entry.running.deactivate()
        except SquallError as exc:
            return _error(409, "cannot deactivate", str(exc))
        return self._done(entry, "deactivate")

    @staticmethod
    def _wait(request: web.Request, default: float) -> float:
        raw = request.match_info.get("wait")
        if raw is None:
            return default
        try:
            wait = float(raw)
        except ValueError:
            wait = -1.0
        if not 0 <= wait < math.inf:  # an infinite wait cannot be timed: the kill crashed
            raise web.HTTPBadRequest(
                text=json.dumps(
                    {
                        "error": "bad wait time",
                        "errorMessage": f"wait time must be a finite number of seconds >= 0, "
                        f"got {raw!r}",
                    }
                ),
                content_type="application/json",
            )
        return wait

    async def _kill(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        running = entry.running
        wait = self._wait(request, float(running.conf["topology.message.timeout.secs"]))
        status = running.info().status
        if status in ("KILLED", "COMPLETED"):
            return _error(
                409, "cannot kill", f"topology {running.name!r} is already {status.lower()}"
            )
        # Answer at once, as Storm does: the kill waits up to ``wait`` s for in-flight trees.
        task = asyncio.get_running_loop().create_task(running.kill(wait))
        self._actions.add(task)
        task.add_done_callback(self._actions.discard)
        # One turn of the loop: the kill's first step deactivates the spouts and marks the
        # topology KILLED (refusing activate, deactivate and rebalance) before its wait.
        await asyncio.sleep(0)
        return self._done(entry, "kill", waitSeconds=wait)

    async def _rebalance(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        running = entry.running
        try:
            body = parse_body(await request.read(), "rebalance")
        except web.HTTPRequestEntityTooLarge:
            return _error(413, "bad body", f"rebalance body is over {MAX_BODY_BYTES:,} bytes")
        except ValueError as exc:
            return _error(400, "bad body", str(exc))
        options = body.get("rebalanceOptions", {}) if isinstance(body, dict) else None
        if not isinstance(options, dict):
            return _error(
                400,
                "bad body",
                'rebalance body must be {"rebalanceOptions": {"executors": {"component": n}}}',
            )
        unknown = sorted(set(options) - {"executors", "numWorkers"})
        if unknown:
            return _error(400, "bad body", f"unknown rebalanceOptions {unknown}; give 'executors'")
        workers = options.get("numWorkers", 1)
        if workers != 1:
            return _error(
                400,
                "bad body",
                f"squall runs a topology in one process: numWorkers can only be 1, got "
                f"{workers!r}; spread a component's tasks with executors={{component: n}}",
            )
        executors = options.get("executors", {})
        if not isinstance(executors, dict) or not executors:
            return _error(
                400, "bad body", "rebalance needs rebalanceOptions.executors: {component: n}"
            )
        # Storm's UI sends counts as strings; JSON numbers are taken as they are (1e23 is a
        # float, and refused like any count that is not a positive integer). isdecimal, not
        # isdigit: "²" is a digit that int() refuses.
        executors = {
            cid: int(n) if isinstance(n, str) and n.isdecimal() else n
            for cid, n in executors.items()
        }
        info = running.info()
        tasks = {cid: len(info.components[cid].tasks) for cid in running.topology.components}
        try:
            plan = check_rebalance(
                running.name,
                tasks,
                executors,
                _seconds(request.match_info.get("wait")),
                executors_field="rebalanceOptions.executors",
                wait_field="wait",
            )
        except TopologyStateError as exc:  # no such component
            return _error(404, "not found", str(exc))
        except InvalidRebalanceError as exc:
            return _error(400, "bad rebalance", str(exc))
        try:
            for cid, n in plan.requested.items():
                await running.rebalance(cid, n, plan.wait_secs)
        except (SquallError, TimeoutError) as exc:
            return _error(409, "cannot rebalance", str(exc))
        return self._done(
            entry,
            "rebalance",
            executors=dict(plan.executors),
            requestedExecutors=dict(plan.requested),
            notes=plan.notes(),
        )


def _seconds(raw: str | None) -> Any:
    """A path's seconds as a number when it reads as one (else as given, for the error)."""
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        return raw


async def serve_ui(
    port: int = DEFAULT_UI_PORT,
    host: str = "127.0.0.1",
    *,
    token: str | None = None,
    interval: float = SAMPLE_INTERVAL_SECS,
) -> UIServer:
    """Start the web UI and REST API on ``http://host:port/`` in the running event loop.

    >>> async def main(topology):
    ...     async with await serve_ui(port=8080) as ui, run_topology(topology) as running:
    ...         ui.register(running)          # shown at http://127.0.0.1:8080/
    ...         await running.wait_until_complete()

    ``port=0`` picks a free port (read ``ui.port`` / ``ui.url``). Binding beyond loopback
    needs ``token``. Counters are sampled every ``interval`` seconds for the recent windows.
    """
    return await UIServer(port, host, token=token, interval=interval).start()


_shared: dict[tuple[int, str, int], UIServer] = {}


@contextlib.asynccontextmanager
async def attach_ui(
    running: RunningTopology,
    port: int = DEFAULT_UI_PORT,
    host: str = "127.0.0.1",
    *,
    token: str | None = None,
) -> AsyncIterator[UIServer]:
    """Show ``running`` on this loop's UI server on ``host:port`` (started by the first
    topology to ask, closed when the last one leaves): how ``run_topology(..., ui=PORT)``
    and ``LocalCluster(ui=PORT)`` put every topology of a process on one page."""
    key = (id(asyncio.get_running_loop()), host, port)
    server = _shared.get(key)
    if server is None:
        server = await serve_ui(port, host, token=token)
        _shared[key] = server
    elif token != server.token:
        raise ValueError(
            f"the UI on {host}:{port} was started with another token; use the same one"
        )
    server.users += 1
    server.register(running)
    try:
        yield server
    finally:
        with contextlib.suppress(KeyError):
            server.unregister(running.name)
        server.users -= 1
        if server.users == 0:
            _shared.pop(key, None)
            await server.close()
