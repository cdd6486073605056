"""Who may talk to the engine's HTTP servers (the web UI, the DRPC endpoint): one set of rules.

Both servers act on running topologies for whoever reaches them, so both follow the same
three rules, checked on every request before any handler runs:

- **Loopback names only on loopback.** A server bound to a loopback address (127.0.0.1,
  ::1, localhost) answers only requests whose ``Host`` is a loopback name. A web page on
  another site can make its own name resolve to 127.0.0.1 (DNS rebinding) and then call the
  server as if it were same-origin; its requests still carry that foreign name in ``Host``,
  and are refused (403).
- **No actions from another web origin.** A request that can change something (any method
  but GET, HEAD and OPTIONS) carrying an ``Origin`` other than the server's own is refused
  (403): a browser adds ``Origin`` to cross-site requests, so a foreign page cannot drive
  the server through its visitor's browser. Clients that are not browsers send no
  ``Origin`` and are not affected.
- **A token beyond loopback.** A server reachable from other machines must be given a
  token, and refuses to start without one (``ValueError``); requests then carry it as
  ``Authorization: Bearer <token>`` (401 without it or with another one). On loopback the
  token is optional.

``HttpGuard`` holds the rules for one server and makes its middleware; each server renders
a ``Refusal`` in its own format (JSON for the UI's REST API, a line of text for DRPC). Imported only by the servers,
which need aiohttp (an optional dependency).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import secrets
from collections.abc import Callable

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

__all__ = ["HttpGuard", "Refusal", "is_loopback"]

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
#: Methods that only read: the origin rule leaves them alone (a foreign page cannot read
#: their answers anyway, the browser keeps them from it).
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def is_loopback(host: str) -> bool:
    """Is ``host`` (a name or an address, IPv6 with or without brackets) this machine only?"""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a request is refused: an HTTP status, a short error and a sentence for the user."""

    status: int
    error: str
    message: str


class HttpGuard:
    """The rules for one server, bound to ``host``.

    ``server`` names the server in messages (``"this UI"``), ``where`` the call that
    configured it (``"serve_ui"``), ``powers`` says what a stranger could do with it (why a
    token is needed), ``token_hint`` how a client sends the token, and only paths under
    ``protected`` need it (the UI's page and assets load without it, and then ask for it).
    """

    def __init__(
        self,
        host: str,
        token: str | None,
        *,
        server: str,
        where: str,
        powers: str,
        token_hint: str = "",
        protected: str = "/",
    ) -> None:
        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError(f"{where}: token must be a non-empty string (or None on loopback)")
        if token is None and not is_loopback(host):
            raise ValueError(
                f"{where}: host {host!r} is reachable from other machines and {powers}; pass "
                f"token=... (clients send 'Authorization: Bearer <token>') or bind to 127.0.0.1"
            )
        self.host = host
        self.token = token
        self.server = server
        self.token_hint = token_hint
        self.protected = protected
        self._loopback = is_loopback(host)

    def check(self, request: web.Request) -> Refusal | None:
        """The reason to refuse ``request``, or None to serve it."""
        if self._loopback and not is_loopback(request.url.host or ""):
            return Refusal(
                403,
                "forbidden host",
                f"{self.server} is bound to {self.host} and answers only loopback names, "
                f"not Host {request.host!r}",
            )
        if request.method not in _SAFE_METHODS:
            origin = request.headers.get("Origin")
            if origin is not None and origin != f"{request.scheme}://{request.host}":
                return Refusal(
                    403,
                    "foreign origin",
                    f"actions are refused from origin {origin!r}; use {self.server}'s own page "
                    f"or a client without an Origin header",
                )
        if self.token is not None and request.path.startswith(self.protected):
            given = request.headers.get("Authorization")
            if given is None:
                return Refusal(
                    401,
                    "token required",
                    f"{self.server} was started with a token: send it as 'Authorization: "
                    f"Bearer <token>'{self.token_hint}",
                )
            expected = f"Bearer {self.token}"
            if not secrets.compare_digest(given.encode(), expected.encode()):
                return Refusal(
                    401,
                    "wrong token",
                    f"{self.server} was started with another token than the one sent"
                    f"{self.token_hint}",
                )
        return None

    def middleware(self, render: Callable[[Refusal], web.StreamResponse]) -> Middleware:
        """An aiohttp middleware that answers ``render(refusal)`` to a refused request."""

        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            refusal = self.check(request)
            if refusal is not None:
                return render(refusal)
            return await handler(request)

        return guard
