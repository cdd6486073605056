"""The REST API: Storm UI's shapes, numbers that agree with ``info()``, actions, guards."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from engine import Bolt, TopologyBuilder, run_topology
from engine._time.loop import run_sync
from engine.ui import UIServer, attach_ui, serve_ui
from tests.engine.test_loop import cancelled_while_stopping, slow_to_stop

from .paced import PacedSpout, paced_topology

Scenario = Callable[[UIServer, Any, aiohttp.ClientSession], Awaitable[Any]]


def with_ui(scenario: Scenario, *, limit: int | None = None, token: str | None = None) -> Any:
    async def main() -> Any:
        topology = paced_topology(pause=0.001, limit=limit)
        async with (
            await serve_ui(port=0, token=token) as ui,
            run_topology(topology, {"topology.seed": 5}, name="word-count") as running,
            aiohttp.ClientSession(base_url=ui.url) as http,
        ):
            ui.register(running)
            return await scenario(ui, running, http)

    return run_sync(main())


async def get(http: aiohttp.ClientSession, path: str, status: int = 200, **kw: Any) -> Any:
    async with http.get(path, **kw) as resp:
        body = await resp.json()
        assert resp.status == status, body
        return body


async def post(http: aiohttp.ClientSession, path: str, status: int = 200, **kw: Any) -> Any:
    async with http.post(path, **kw) as resp:
        body = await resp.json()
        assert resp.status == status, body
        return body


def test_reads_agree_with_info_once_complete() -> None:
    async def scenario(ui: UIServer, running: Any, http: aiohttp.ClientSession) -> None:
        await running.wait_until_complete(timeout=30)
        info = running.info()
        summary = await get(http, "/api/v1/topology/summary")
        assert [t["name"] for t in summary["topologies"]] == ["word-count"]
        entry = summary["topologies"][0]
        assert entry["status"] == "COMPLETED"
        assert entry["executorsTotal"] == 5 and entry["tasksTotal"] == 5
        assert entry["acked"] + entry["failed"] == 300 and entry["failed"] > 0
        topo = await get(http, "/api/v1/topology/word-count")
        assert topo["window"] == ":all-time"
        assert [s["spoutId"] for s in topo["spouts"]] == ["sentences"]
        assert sorted(b["boltId"] for b in topo["bolts"]) == ["count", "split"]
        spout = topo["spouts"][0]
        assert spout["emitted"] == info.components["sentences"].emitted
        assert spout["acked"] == info.components["sentences"].acked > 0
        assert spout["completeLatency"] > 0
        split = next(b for b in topo["bolts"] if b["boltId"] == "split")
        assert split["executed"] == info.components["split"].executed
        assert split["executors"] == 2 and 0 <= split["capacity"] <= 1
        count = next(b for b in topo["bolts"] if b["boltId"] == "count")
        assert count["errors"] == len(info.components["count"].errors) > 0
        assert count["lastError"].startswith("ValueError('no umbrella for rain")
        windows = [w["window"] for w in topo["topologyStats"]]
        assert windows == ["60", "600", ":all-time"]
        error = topo["topologyErrors"][-1]
        assert error["component"] == "count"
        assert "Traceback" in error["traceback"] and "no umbrella" in error["traceback"]
        last_minute = await get(http, "/api/v1/topology/word-count?window=60")
        assert last_minute["windowHint"] == "1 min"
        component = await get(http, "/api/v1/topology/word-count/component/split")
        assert component["componentType"] == "bolt"
        tasks = component["executorStats"]
        assert sorted(t["task"] for t in tasks) == sorted(info.components["split"].tasks)
        assert sum(t["executed"] for t in tasks) == info.components["split"].executed
        assert all(t["queue"]["capacity"] > 0 for t in tasks)
        assert component["inputs"] == [
            {"component": "sentences", "stream": "default", "grouping": "shuffle_grouping"}
        ]
        graph = await get(http, "/api/v1/topology/word-count/visualization")
        assert sorted(n["id"] for n in graph["nodes"]) == ["count", "sentences", "split"]

    with_ui(scenario, limit=300)


def test_unknown_names_and_bad_windows_are_explained() -> None:
    async def scenario(ui: UIServer, running: Any, http: aiohttp.ClientSession) -> None:
        body = await get(http, "/api/v1/topology/nope", 404)
        assert body["errorMessage"] == "no topology named 'nope' (topologies: ['word-count'])"
        body = await get(http, "/api/v1/topology/word-count/component/nope", 404)
        assert body["errorMessage"] == (
            "topology 'word-count' has no component 'nope' (components: "
            "['count', 'sentences', 'split'])"
        )
        body = await get(http, "/api/v1/topology/word-count?window=soon", 400)
        assert body["errorMessage"] == (
            "window must be ':all-time' or a number of seconds > 0 (e.g. 60, 600), got 'soon'"
        )

    with_ui(scenario)


def test_deactivate_activate_rebalance_kill() -> None:
    async def scenario(ui: UIServer, running: Any, http: aiohttp.ClientSession) -> None:
        path = "/api/v1/topology/word-count"
        body = await post(http, f"{path}/deactivate")
        assert body == {
            "topologyOperation": "deactivate",
            "topologyId": "word-count",
            "status": "success",
            "topologyStatus": "INACTIVE",
        }
        assert running.info().status == "INACTIVE"
        assert (await post(http, f"{path}/activate"))["topologyStatus"] == "ACTIVE"
        options = {"rebalanceOptions": {"executors": {"split": 1}}}
        body = await post(http, f"{path}/rebalance", json=options)
        assert body["executors"] == {"split": 1}
        assert running.info().components["split"].executors == 1
        assert running.info().status == "ACTIVE"
        svg_nodes = await (await http.get(f"{path}/visualization.svg")).text()
        assert "1 exec · 2 tasks" in svg_nodes
        bad = {"rebalanceOptions": {"numWorkers": 3, "executors": {"split": 2}}}
        body = await post(http, f"{path}/rebalance", 400, json=bad)
        assert body["errorMessage"].startswith(
            "squall runs a topology in one process: numWorkers can only be 1, got 3"
        )
        missing = {"rebalanceOptions": {"executors": {"nope": 2}}}
        body = await post(http, f"{path}/rebalance", 404, json=missing)
        assert body["errorMessage"] == (
            "topology 'word-count' has no component 'nope' to rebalance (components: "
            "['count', 'sentences', 'split'])"
        )
        body = await post(http, f"{path}/rebalance", 400, json={"rebalanceOptions": {}})
        assert body["errorMessage"] == "rebalance needs rebalanceOptions.executors: {component: n}"
        body = await post(http, f"{path}/kill/0")
        assert body["topologyOperation"] == "kill" and body["waitSeconds"] == 0
        await ui.close()  # waits for the kill it started
        assert running.info().status == "KILLED"

    with_ui(scenario)


def test_a_token_guards_the_api_and_is_required_beyond_loopback() -> None:
    with pytest.raises(ValueError) as excinfo:
        UIServer(0, "0.0.0.0")
    assert str(excinfo.value) == (
        "serve_ui: host '0.0.0.0' is reachable from other machines and the UI can kill and "
        "rebalance topologies; pass token=... (clients send 'Authorization: Bearer <token>') "
        "or bind to 127.0.0.1"
    )

    async def scenario(ui: UIServer, running: Any, http: aiohttp.ClientSession) -> None:
        body = await get(http, "/api/v1/topology/summary", 401)
        assert body["errorMessage"] == (
            "this UI was started with a token: send it as 'Authorization: Bearer <token>' "
            "(squall CLI: --token or SQUALL_UI_TOKEN)"
        )
        wrong = {"Authorization": "Bearer guess"}
        body = await get(http, "/api/v1/topology/summary", 401, headers=wrong)
        assert body == {
            "error": "wrong token",
            "errorMessage": "this UI was started with another token than the one sent "
            "(squall CLI: --token or SQUALL_UI_TOKEN)",
        }
        await post(http, "/api/v1/topology/word-count/deactivate", 401)
        assert running.info().status == "ACTIVE"
        auth = {"Authorization": "Bearer s3cret"}
        await post(http, "/api/v1/topology/word-count/deactivate", headers=auth)
        assert running.info().status == "INACTIVE"
        async with http.get("/") as resp:  # the page itself loads; it asks for the token
            assert resp.status == 200

    with_ui(scenario, token="s3cret")


def test_foreign_origins_and_hosts_are_refused() -> None:
    async def scenario(ui: UIServer, running: Any, http: aiohttp.ClientSession) -> None:
        body = await post(
            http,
            "/api/v1/topology/word-count/kill/0",
            403,
            headers={"Origin": "http://evil.example"},
        )
        assert body["errorMessage"].startswith(
            "actions are refused from origin 'http://evil.example'"
        )
        assert running.info().status == "ACTIVE"
        body = await get(
            http, "/api/v1/topology/summary", 403, headers={"Host": "rebound.example:80"}
        )
        assert body["error"] == "forbidden host"
        same = {"Origin": ui.url.rstrip("/")}
        await post(http, "/api/v1/topology/word-count/deactivate", headers=same)
        assert running.info().status == "INACTIVE"

    with_ui(scenario)


def test_attach_ui_puts_a_process_topologies_on_one_server() -> None:
    async def main() -> None:
        async with (
            run_topology(paced_topology(), name="one") as one,
            run_topology(paced_topology(), name="two") as two,
        ):
            async with attach_ui(one, port=0) as ui_one:
                async with attach_ui(two, port=0) as ui_two:
                    assert ui_one is ui_two
                    assert ui_one.names == ["one", "two"]
                    async with aiohttp.ClientSession() as http:
                        summary = await get(http, ui_one.url + "api/v1/topology/summary")
                    assert [t["name"] for t in summary["topologies"]] == ["one", "two"]
                assert ui_one.names == ["one"]
            with pytest.raises(aiohttp.ClientConnectionError):
                async with aiohttp.ClientSession() as http:
                    await http.get(ui_one.url)

    run_sync(main())


def test_register_refuses_a_second_live_topology_of_the_same_name() -> None:
    async def scenario(ui: UIServer, running: Any, http: aiohttp.ClientSession) -> None:
        async with run_topology(paced_topology(), name="word-count") as twin:
            with pytest.raises(ValueError) as excinfo:
                ui.register(twin)
        assert str(excinfo.value) == (
            "a topology named 'word-count' is already shown by this UI; give each topology "
            "its own name (run_topology(..., name=...))"
        )
        with pytest.raises(KeyError):
            ui.unregister("nope")

    with_ui(scenario)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_run_topology_ui_port_shows_the_topology() -> None:
    port = _free_port()

    async def main() -> Any:
        topology = paced_topology(pause=0.001, limit=20)
        async with (
            run_topology(topology, {"topology.seed": 5}, name="shown", ui=port) as running,
            aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}") as http,
        ):
            summary = await get(http, "/api/v1/topology/summary")
            await running.wait_until_complete(timeout=30)
            return [t["name"] for t in summary["topologies"]]

    assert run_sync(main()) == ["shown"]


def test_local_cluster_ui_port_shows_and_hides_its_topologies() -> None:
    import json
    import urllib.request

    from engine import LocalCluster

    port = _free_port()

    def names(url: str) -> list[str]:
        with urllib.request.urlopen(f"{url}api/v1/topology/summary", timeout=10) as resp:
            return [t["name"] for t in json.load(resp)["topologies"]]

    with LocalCluster(ui=port) as cluster:
        url = cluster.ui_url
        assert url == f"http://127.0.0.1:{port}/"
        cluster.submit_topology("a", {"topology.seed": 1}, paced_topology(pause=0.001, limit=5))
        assert names(url) == ["a"]
        cluster.kill_topology("a", wait_secs=0)
        assert names(url) == []
    with LocalCluster() as plain:
        assert plain.ui_url is None


NO_FRAMING = {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'"}


def test_no_response_may_be_framed_by_another_site() -> None:
    async def scenario(ui: UIServer, running: Any, http: aiohttp.ClientSession) -> None:
        auth = {"Authorization": "Bearer s3cret"}
        requests = [
            ("GET", "/", {}, 200),
            ("GET", "/static/ui.js", {}, 200),
            ("GET", "/static/nope.js", {}, 404),
            ("GET", "/nowhere", {}, 404),
            ("GET", "/api/v1/topology/summary", {}, 401),
            ("GET", "/api/v1/topology/summary", auth, 200),
            ("GET", "/api/v1/topology/nope", auth, 404),
            ("GET", "/api/v1/topology/word-count/visualization.svg", auth, 200),
            ("POST", "/api/v1/topology/word-count/kill", {"Origin": "http://evil.example"}, 403),
            ("PUT", "/api/v1/topology/word-count/kill", auth, 405),
        ]
        for method, path, headers, status in requests:
            async with http.request(method, path, headers=headers) as resp:
                assert resp.status == status, (method, path)
                framing = {k: resp.headers.get(k) for k in NO_FRAMING}
                assert framing == NO_FRAMING, (method, path, status)
        assert running.info().status == "ACTIVE"

    with_ui(scenario, token="s3cret")


def test_deep_malformed_and_huge_bodies_are_refused_with_400_or_413() -> None:
    async def scenario(ui: UIServer, running: Any, http: aiohttp.ClientSession) -> None:
        path = "/api/v1/topology/word-count/rebalance"
        deep = b"[" * 100_000 + b"]" * 100_000
        body = await post(http, path, 400, data=io.BytesIO(deep))
        assert body == {
            "error": "bad body",
            "errorMessage": "rebalance body nests arrays or objects more than 16 levels deep",
        }
        body = await post(http, path, 400, data=b'{"rebalanceOptions": ')
        assert body["errorMessage"] == (
            "rebalance body is not JSON: Expecting value: line 1 column 22 (char 21)"
        )
        body = await post(http, path, 400, data=b'{"\xff": 1}')
        assert body["errorMessage"] == "rebalance body is not UTF-8 text"
        body = await post(http, path, 413, data=io.BytesIO(b" " * ((1 << 20) + 1)))
        assert body["errorMessage"] == "rebalance body is over 1,048,576 bytes"
        # Brackets inside strings are not nesting: a component may be named "[[[[...".
        odd = {"rebalanceOptions": {"executors": {"[" * 40: 1}}}
        body = await post(http, path, 404, json=odd)
        assert body["errorMessage"].startswith("topology 'word-count' has no component '[[[[")
        assert running.info().status == "ACTIVE"

    with_ui(scenario)


def test_rebalance_refuses_absurd_values_and_reports_what_it_applied() -> None:
    async def scenario(ui: UIServer, running: Any, http: aiohttp.ClientSession) -> None:
        path = "/api/v1/topology/word-count/rebalance"
        split = {"rebalanceOptions": {"executors": {"split": 1}}}
        wait_range = "wait must be a finite number of seconds in 0..86400 (a day), got "
        for wait, shown in [
            ("inf", "inf"),
            ("1e9", "1000000000.0"),
            ("-1", "-1.0"),
            ("nan", "nan"),
            ("soon", "'soon'"),
        ]:
            body = await post(http, f"{path}/{wait}", 400, json=split)
            assert body == {"error": "bad rebalance", "errorMessage": wait_range + shown}
            assert running.info().status == "ACTIVE"
        for n in (1e23, 0, -2, 1.5, True, "two", "²"):  # "²" is a digit int() refuses: 500
            bad = {"rebalanceOptions": {"executors": {"split": n}}}
            body = await post(http, path, 400, json=bad)
            assert body["errorMessage"] == (
                f"rebalanceOptions.executors['split'] must be a positive integer (1 and up; at "
                f"most 2 take effect, its task count), got {n!r}"
            )
        assert running.info().components["split"].executors == 2
        huge = {"rebalanceOptions": {"executors": {"split": 10**23, "count": "1"}}}
        body = await post(http, f"{path}/30", json=huge)
        assert body["executors"] == {"split": 2, "count": 1}  # what was applied
        assert body["requestedExecutors"] == {"split": 10**23, "count": 1}
        assert body["notes"] == [
            f"'split' got 2 executor(s), not {10**23}: capped at its 2 task(s) (an executor "
            "runs at least one task; the task count is fixed at submission, raise it with "
            "set_num_tasks)"
        ]
        assert body["topologyStatus"] == "ACTIVE"
        info = running.info()
        assert (info.components["split"].executors, info.components["count"].executors) == (2, 1)

    with_ui(scenario)


def test_close_cancelled_while_the_sampler_stops_is_cancelled() -> None:
    """``close`` stops the sampler task and waits for it; if ``close`` itself is cancelled
    meanwhile, that cancellation goes on up instead of being taken for the sampler's."""

    async def scenario() -> str:
        ui = UIServer(port=0)
        release = asyncio.Event()
        ui._sampler_task = asyncio.ensure_future(slow_to_stop(release))
        await asyncio.sleep(0)
        return await cancelled_while_stopping(ui.close)

    assert run_sync(scenario()) == "cancelled"


def test_a_kill_with_an_infinite_wait_is_refused_not_lost() -> None:
    # /kill/inf answered 200 ("waitSeconds": Infinity, not JSON) and its kill then crashed
    # timing the wait: the topology stayed deactivated and was never killed.
    async def scenario(ui: UIServer, running: Any, http: aiohttp.ClientSession) -> None:
        for wait in ("inf", "1e400", "-inf", "nan"):
            body = await post(http, f"/api/v1/topology/word-count/kill/{wait}", 400)
            assert body == {
                "error": "bad wait time",
                "errorMessage": f"wait time must be a finite number of seconds >= 0, got {wait!r}",
            }
        assert running.info().status == "ACTIVE"
        await post(http, "/api/v1/topology/word-count/kill/0")
        await ui.close()
        assert running.info().status == "KILLED"

    with_ui(scenario)


class Hold(Bolt):
    """Never acks: a kill's drain lasts its whole wait."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.held: list[Any] = []

    def execute(self, tuple: Any) -> None:
        self.held.append(tuple)


def test_a_topology_being_killed_shows_killed_and_refuses_activate_and_the_rest() -> None:
    # The status stayed INACTIVE during a kill's wait, so activate restarted the spouts of a
    # topology being killed.
    builder = TopologyBuilder()
    builder.set_spout("sentences", PacedSpout(pause=0.001))
    builder.set_bolt("hold", Hold()).shuffle_grouping("sentences")

    async def main() -> None:
        async with (
            await serve_ui(port=0) as ui,
            run_topology(builder.create_topology(), name="held") as running,
            aiohttp.ClientSession(base_url=ui.url) as http,
        ):
            ui.register(running)
            path = "/api/v1/topology/held"
            while not running.info().components["sentences"].emitted:
                await asyncio.sleep(0.001)  # a tree held, for the kill to wait for
            body = await post(http, f"{path}/kill/0.5")
            assert body["topologyStatus"] == "KILLED"
            summary = await get(http, "/api/v1/topology/summary")
            assert summary["topologies"][0]["status"] == "KILLED"
            for action in ("activate", "deactivate"):
                body = await post(http, f"{path}/{action}", 409)
                assert body == {
                    "error": f"cannot {action}",
                    "errorMessage": "topology 'held' is killed",
                }
            options = {"rebalanceOptions": {"executors": {"hold": 1}}}
            body = await post(http, f"{path}/rebalance", 409, json=options)
            assert body == {
                "error": "cannot rebalance",
                "errorMessage": "topology 'held' is killed",
            }
            body = await post(http, f"{path}/kill", 409)
            assert body["errorMessage"] == "topology 'held' is already killed"
            assert not any(sx.active for sx in running.runtime.table.spouts)
            await ui.close()  # waits for the kill's drain
            assert running.info().status == "KILLED"

    run_sync(main())
