"""A small driver for headless Chromium over its own DevTools protocol (CDP), on aiohttp's
websocket client: launch, open a page, evaluate JavaScript, wait for a condition, take a
screenshot. Enough for the UI's browser tests, with no browser download (Debian's
``chromium`` at ``/usr/bin/chromium``)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = os.environ.get("SQUALL_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
]


class CDPError(RuntimeError):
    pass


class _Connection:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        async for msg in self._ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            future = self._waiting.pop(data.get("id", -1), None)
            if future is None or future.done():
                continue
            if "error" in data:
                future.set_exception(CDPError(json.dumps(data["error"])))
            else:
                future.set_result(data.get("result", {}))
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(CDPError("the browser closed the DevTools connection"))

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> Any:
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = future
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        await self._ws.send_str(json.dumps(message))
        return await asyncio.wait_for(future, 30)

    async def close(self) -> None:
        await self._ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


class Page:
    def __init__(self, conn: _Connection, session: str) -> None:
        self._conn = conn
        self._session = session

    async def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return await self._conn.send(method, params, self._session)

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", {"url": url})
        await self.wait_for("document.readyState === 'complete'")

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise CDPError(f"{expression!r} threw: {json.dumps(result['exceptionDetails'])}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        """Poll ``expression`` until it is truthy (a deadline, not a fixed sleep)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if loop.time() > deadline:
                raise TimeoutError(f"{expression!r} still falsy after {timeout} s: {value!r}")
            await asyncio.sleep(0.05)

    async def click(self, selector: str) -> None:
        await self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")

    async def screenshot(self, scale: float = 1.0) -> bytes:
        """The viewport as a PNG, scaled by ``scale``."""
        size = await self.evaluate("[window.innerWidth, window.innerHeight]")
        clip = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": scale}
        result = await self.send("Page.captureScreenshot", {"format": "png", "clip": clip})
        return base64.b64decode(result["data"])


class Browser:
    """``async with Browser.launch(width, height) as browser: page = await browser.new_page()``"""

    def __init__(self, process: asyncio.subprocess.Process, profile: str) -> None:
        self._process = process
        self._profile = profile
        self._session: aiohttp.ClientSession | None = None
        self._conn: _Connection | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def launch(cls, width: int = 1400, height: int = 1000) -> Any:
        profile = tempfile.mkdtemp(prefix="squall-chromium-")
        process = await asyncio.create_subprocess_exec(
            CHROMIUM,
            *ARGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        browser = cls(process, profile)
        try:
            await browser._connect()
            yield browser
        finally:
            await browser._close()

    async def _connect(self) -> None:
        port_file = Path(self._profile) / "DevToolsActivePort"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self._process.returncode is not None:
                raise CDPError(f"chromium exited with {self._process.returncode} at start")
            if loop.time() > deadline:
                raise CDPError("chromium did not open its DevTools port within 30 s")
            await asyncio.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self._session = aiohttp.ClientSession()
        ws = await self._session.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        self._conn = _Connection(ws)

    async def new_page(self) -> Page:
        assert self._conn is not None
        target = await self._conn.send("Target.createTarget", {"url": "about:blank"})
        attached = await self._conn.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        page = Page(self._conn, attached["sessionId"])
        await page.send("Page.enable")
        await page.send("Runtime.enable")
        return page

    async def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.send("Browser.close")
            await self._conn.close()
        if self._session is not None:
            await self._session.close()
        if self._process.returncode is None:
            try:
                await asyncio.wait_for(self._process.wait(), 10)
            except TimeoutError:
                self._process.kill()
                await self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)
