"""An HTTP endpoint for a ``LocalDRPC``, on aiohttp: ``POST /drpc/<function>``.

The request body (UTF-8 text) is the arguments, the response body the result::

    curl -d 'http://example.com/storm' http://127.0.0.1:8080/drpc/reach   ->  200 "57"

Status codes: 200 the result; 400 a body that is not UTF-8; 401 a token is required and
was not sent, or another one was; 403 a foreign ``Host`` or ``Origin`` (below); 404 no running
topology serves the function; 405 not a POST; 413 a body over ``max_body_bytes``; 502 the
request failed in the topology; 503 the DRPC server is shut down; 504 no result within its
request timeout. Error bodies are a one-line explanation (``text/plain``).

Who may call, the same rules as the web UI's (``engine._monitor.http_guard``): bound to a loopback
address (the default, 127.0.0.1), the endpoint answers only requests whose ``Host`` is a
loopback name, so a web page that rebinds its own name to 127.0.0.1 cannot call it; a
request carrying an ``Origin`` header (a browser's, from another site) other than the
server's own is refused; bound to any other address it needs a ``token``, which callers
send as ``Authorization: Bearer <token>``, and it refuses to start without one::

    curl -H 'Authorization: Bearer s3cret' -d 'http://example.com/storm' \\
        http://10.0.0.5:3772/drpc/reach

aiohttp is an optional dependency (the ``drpc`` extra); this module is imported only when
``make_drpc_app`` or ``DRPCHttpServer`` is first used.
"""

from __future__ import annotations

from types import TracebackType

from aiohttp import web

from .._monitor.http_guard import HttpGuard
from ._errors import DRPCRequestFailed, DRPCTimeout
from ._server import LocalDRPC

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DRPCHttpServer", "make_drpc_app"]

#: The largest request body accepted (bytes).
DEFAULT_MAX_BODY_BYTES = 1 << 20

_DRPC_KEY = web.AppKey("drpc", LocalDRPC)


def _text(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n")


async def _call(request: web.Request) -> web.Response:
    drpc = request.app[_DRPC_KEY]
    function = request.match_info["function"]
    if drpc.closed:
        return _text(503, f"the DRPC server {drpc.service_id} is shut down")
    if not drpc.serves(function):
        return _text(404, f"no running topology serves the DRPC function {function!r}")
    body = await request.read()
    try:
        args = body.decode("utf-8")
    except UnicodeDecodeError:
        return _text(400, "the request body (the DRPC arguments) must be UTF-8 text")
    try:
        result = await drpc.execute_async(function, args)
    except DRPCTimeout as exc:
        return _text(504, str(exc))
    except DRPCRequestFailed as exc:
        return _text(503 if drpc.closed else 502, str(exc))
    return web.Response(text=result)


def make_drpc_app(
    drpc: LocalDRPC,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> web.Application:
    """An aiohttp application answering ``POST /drpc/<function>`` from ``drpc``; mount it
    in your own service, or run it with ``DRPCHttpServer``.

    ``host`` is the address the serving site is bound to: it decides the rules (a loopback
    one answers loopback ``Host`` names only; any other needs ``token``)."""
    return _app(drpc, host, token, max_body_bytes, "make_drpc_app")


def _app(
    drpc: LocalDRPC, host: str, token: str | None, max_body_bytes: int, where: str
) -> web.Application:
    if not isinstance(drpc, LocalDRPC):
        raise TypeError(f"{where} needs a LocalDRPC, got {type(drpc).__name__}")
    guard = HttpGuard(
        host,
        token,
        server="this DRPC server",
        where=where,
        powers="it runs the topologies' DRPC functions for anyone who reaches it",
        protected="/",
    )
    refuse = guard.middleware(lambda refusal: _text(refusal.status, refusal.message))
    app = web.Application(client_max_size=max_body_bytes, middlewares=[refuse])
    app[_DRPC_KEY] = drpc
    app.router.add_post("/drpc/{function}", _call)
    return app


class DRPCHttpServer:
    """Serves ``make_drpc_app(drpc)`` on ``host:port`` for the duration of an ``async with``.

    >>> # async with DRPCHttpServer(drpc, "127.0.0.1", 0) as server:   # 0: any free port
    >>> #     print(server.url)   # http://127.0.0.1:54321

    Beyond loopback it needs ``token`` (``DRPCHttpServer(drpc, "0.0.0.0", 3772,
    token=...)``); without one it refuses to be made, before binding anything.
    """

    def __init__(
        self,
        drpc: LocalDRPC,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self._app = _app(drpc, host, token, max_body_bytes, "DRPCHttpServer")
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` while serving (the port the OS picked for port 0);
        ``RuntimeError`` before ``start`` and after ``close``."""
        if self.port is None:
            raise RuntimeError("the DRPC HTTP server is not running")
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Bind and start serving; if binding fails nothing is left half started."""
        runner = web.AppRunner(self._app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._host, self._port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def close(self) -> None:
        """Stop serving and free the port; closing twice is harmless."""
        runner, self._runner = self._runner, None
        self.port = None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> DRPCHttpServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
