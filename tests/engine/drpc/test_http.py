"""The DRPC HTTP endpoint (aiohttp), against 127.0.0.1 only."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine import run_topology
from engine.drpc import LinearDRPCTopologyBuilder, LocalDRPC

from ..topologies import run
from .bolts import Hold, exclaim, upper_words

aiohttp = pytest.importorskip("aiohttp")

from engine.drpc import DRPCHttpServer, make_drpc_app  # noqa: E402  (needs aiohttp)


async def post(session: Any, url: str, body: bytes | str) -> tuple[int, str, str]:
    async with session.post(url, data=body) as response:
        return response.status, await response.text(), response.content_type


def test_results_and_errors_as_status_codes() -> None:
    stuck = LinearDRPCTopologyBuilder("stuck")
    stuck.add_bolt(Hold())

    async def main() -> None:
        with LocalDRPC(request_timeout_secs=0.3) as drpc:
            async with (
                run_topology(exclaim(drpc), name="exclaim"),
                run_topology(upper_words(drpc, 2, poison=frozenset({"bad"})), name="upper"),
                run_topology(stuck.create_local_topology(drpc), name="stuck"),
                DRPCHttpServer(drpc, "127.0.0.1", 0) as server,
                aiohttp.ClientSession() as session,
            ):
                base = f"{server.url}/drpc"
                assert server.url.startswith("http://127.0.0.1:")
                assert await post(session, f"{base}/exclaim", "héllo") == (
                    200,
                    "héllo!",
                    "text/plain",
                )
                concurrent = await asyncio.gather(
                    *(post(session, f"{base}/upper", f"b{i} a{i}") for i in range(50))
                )
                assert [c[:2] for c in concurrent] == [(200, f"A{i} B{i}") for i in range(50)]
                status, text, _ = await post(session, f"{base}/upper", "a bad one")
                assert status == 502
                assert text.endswith(
                    "to function 'upper' failed: bolt 'bolt1' raised FailedException: injected\n"
                )
                status, text, _ = await post(session, f"{base}/stuck", "x")
                assert status == 504
                assert text.endswith(
                    "to function 'stuck' got no result within 0.3 s (request_timeout_secs)\n"
                )
                assert await post(session, f"{base}/nothing", "x") == (
                    404,
                    "no running topology serves the DRPC function 'nothing'\n",
                    "text/plain",
                )
                assert await post(session, f"{base}/exclaim", b"\xff\xfe") == (
                    400,
                    "the request body (the DRPC arguments) must be UTF-8 text\n",
                    "text/plain",
                )
                async with session.get(f"{base}/exclaim") as response:
                    assert response.status == 405
                drpc.shutdown()
                assert await post(session, f"{base}/exclaim", "x") == (
                    503,
                    f"the DRPC server {drpc.service_id} is shut down\n",
                    "text/plain",
                )

    run(main())


def test_bodies_over_the_limit_are_refused() -> None:
    async def main() -> None:
        with LocalDRPC() as drpc:
            async with (
                run_topology(exclaim(drpc)),
                DRPCHttpServer(drpc, max_body_bytes=1024) as server,
                aiohttp.ClientSession() as session,
            ):
                status, _, _ = await post(session, f"{server.url}/drpc/exclaim", "x" * 2048)
                assert status == 413
                assert (await post(session, f"{server.url}/drpc/exclaim", "y"))[:2] == (200, "y!")

    run(main())


def test_the_app_mounts_in_a_service_and_checks_its_server() -> None:
    with LocalDRPC() as drpc:
        app = make_drpc_app(drpc)
        assert [r.method for r in app.router.routes()] == ["POST"]
    with pytest.raises(TypeError) as info:
        make_drpc_app("not a server")  # type: ignore[arg-type]
    assert str(info.value) == "make_drpc_app needs a LocalDRPC, got str"
    with LocalDRPC() as idle, pytest.raises(RuntimeError) as not_running:
        _ = DRPCHttpServer(idle).url
    assert str(not_running.value) == "the DRPC HTTP server is not running"


def test_foreign_origins_and_rebound_hosts_are_refused_before_the_topology_runs() -> None:
    async def main() -> None:
        with LocalDRPC() as drpc:
            async with (
                run_topology(exclaim(drpc)),
                DRPCHttpServer(drpc) as server,
                aiohttp.ClientSession() as session,
            ):
                url = f"{server.url}/drpc/exclaim"
                evil = {"Origin": "http://evil.example"}
                async with session.post(url, data="x", headers=evil) as response:
                    assert response.status == 403
                    assert await response.text() == (
                        "actions are refused from origin 'http://evil.example'; use this DRPC "
                        "server's own page or a client without an Origin header\n"
                    )
                # DNS rebinding: evil.example resolved to 127.0.0.1, the browser sends its name.
                rebound = {"Host": f"evil.example:{server.port}"}
                async with session.post(url, data="x", headers=rebound) as response:
                    assert response.status == 403
                    assert await response.text() == (
                        f"this DRPC server is bound to 127.0.0.1 and answers only loopback "
                        f"names, not Host 'evil.example:{server.port}'\n"
                    )
                assert drpc.statistics().succeeded == 0  # neither reached the topology
                async with session.post(url, data="x", headers={"Origin": server.url}) as ok:
                    assert (ok.status, await ok.text()) == (200, "x!")
                same = {"Origin": f"http://localhost:{server.port}"}
                async with session.post(
                    f"http://localhost:{server.port}/drpc/exclaim", data="y", headers=same
                ) as ok:
                    assert (ok.status, await ok.text()) == (200, "y!")
                assert drpc.statistics().succeeded == 2

    run(main())


def test_a_token_is_required_beyond_loopback_and_checked_when_given() -> None:
    with LocalDRPC() as drpc:
        with pytest.raises(ValueError) as info:
            DRPCHttpServer(drpc, "0.0.0.0")
        assert str(info.value) == (
            "DRPCHttpServer: host '0.0.0.0' is reachable from other machines and it runs the "
            "topologies' DRPC functions for anyone who reaches it; pass token=... (clients "
            "send 'Authorization: Bearer <token>') or bind to 127.0.0.1"
        )
        with pytest.raises(ValueError) as info:
            make_drpc_app(drpc, host="10.1.2.3")
        assert str(info.value).startswith("make_drpc_app: host '10.1.2.3' is reachable")
        with pytest.raises(ValueError) as info:
            DRPCHttpServer(drpc, token="")
        assert str(info.value) == (
            "DRPCHttpServer: token must be a non-empty string (or None on loopback)"
        )
        DRPCHttpServer(drpc, "0.0.0.0", token="s3cret")  # made, not started: it may bind

    async def main() -> None:
        with LocalDRPC() as drpc:
            async with (
                run_topology(exclaim(drpc)),
                DRPCHttpServer(drpc, token="s3cret") as server,
                aiohttp.ClientSession() as session,
            ):
                url = f"{server.url}/drpc/exclaim"
                assert await post(session, url, "x") == (
                    401,
                    "this DRPC server was started with a token: send it as 'Authorization: "
                    "Bearer <token>'\n",
                    "text/plain",
                )
                async with session.post(
                    url, data="x", headers={"Authorization": "Bearer guess"}
                ) as response:
                    assert (response.status, await response.text()) == (
                        401,
                        "this DRPC server was started with another token than the one sent\n",
                    )
                assert drpc.statistics().succeeded == 0
                async with session.post(
                    url, data="x", headers={"Authorization": "Bearer s3cret"}
                ) as response:
                    assert (response.status, await response.text()) == (200, "x!")

    run(main())
