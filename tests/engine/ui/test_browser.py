"""The web UI in a real headless Chromium (Debian's, driven over the DevTools protocol):
the page loads, draws a node per component, updates its numbers while the topology runs,
its actions work, and it is not blank.

Skipped with a reason when ``/usr/bin/chromium`` is absent, except in CI (``CI=true``),
where a missing browser fails: ``scripts/test.sh`` installs it.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from engine import run_topology
from engine._time.loop import run_sync
from engine.ui import UIServer, serve_ui

from .cdp import CHROMIUM, Browser, Page
from .paced import paced_topology

pytestmark = pytest.mark.browser


@pytest.fixture(autouse=True)
def chromium() -> None:
    if os.path.exists(CHROMIUM):
        return
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI=true but {CHROMIUM} is missing: scripts/test.sh installs chromium")
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium; CI installs it)")


def in_browser(scenario: Callable[[UIServer, Any, Page], Awaitable[None]]) -> None:
    async def main() -> None:
        async with (
            await serve_ui(port=0, interval=0.25) as ui,
            run_topology(paced_topology(pause=0.002), name="word-count") as running,
            Browser.launch(1400, 1100) as browser,
        ):
            ui.register(running)
            page = await browser.new_page()
            await page.goto(ui.url)
            await scenario(ui, running, page)

    run_sync(main())


def text(selector: str) -> str:
    return f"(document.querySelector({selector!r}) || {{}}).textContent"


SECTION = 'section[data-topology="word-count"]'
ACKED = f'{SECTION} [data-field="acked"]'
STATUS = f"{SECTION} .status"


async def wait_refreshes(page: Page, n: int) -> None:
    start = await page.evaluate("Number(document.body.dataset.refreshed || 0)")
    await page.wait_for(f"Number(document.body.dataset.refreshed || 0) >= {start + n}")


def test_page_draws_a_node_per_component_and_numbers_update() -> None:
    async def scenario(ui: UIServer, running: Any, page: Page) -> None:
        await page.wait_for(f"document.querySelectorAll('{SECTION} .graph .node').length > 0")
        nodes = await page.evaluate(
            f"[...document.querySelectorAll('{SECTION} .graph .node')]"
            ".map(g => g.dataset.component).sort()"
        )
        assert nodes == sorted(running.runtime.topology.components)
        assert await page.evaluate(text(STATUS)) == "ACTIVE"
        first = int((await page.wait_for(text(ACKED))).replace(",", "") or 0)
        await page.wait_for(f"Number({text(ACKED)}.replace(/,/g, '')) > {first}")
        second = int((await page.evaluate(text(ACKED))).replace(",", ""))
        await page.wait_for(f"Number({text(ACKED)}.replace(/,/g, '')) > {second}")
        # The tables list every component; the bolts' executed counts move too.
        rows = await page.evaluate(
            f"[...document.querySelectorAll('{SECTION} tr[data-component]')]"
            ".map(r => r.dataset.component).sort()"
        )
        assert rows == ["count", "sentences", "split"]
        # The plots have points, the node labels live rates.
        await page.wait_for(
            f"Number(document.querySelector('{SECTION} [data-plot=throughput]')"
            ".dataset.points) >= 2"
        )
        stat = await page.wait_for(
            text(f'{SECTION} .graph .node[data-component="sentences"] .node-stat')
        )
        assert stat.startswith("acked ") and stat.endswith("/s")
        # A component's tasks open on click, with their queue depth.
        await page.click(f'{SECTION} tr[data-component="split"]')
        await page.wait_for(f"document.querySelectorAll('{SECTION} .tasks tbody tr').length == 2")
        queue = await page.evaluate(text(f'{SECTION} .tasks tbody tr [data-stat="queue"]'))
        assert "/" in queue

    in_browser(scenario)


def test_deactivate_activate_and_kill_from_the_page() -> None:
    async def scenario(ui: UIServer, running: Any, page: Page) -> None:
        await page.wait_for(f"{text(STATUS)} === 'ACTIVE'")
        await page.click(f'{SECTION} button[data-action="deactivate"]')
        await page.wait_for(f"{text(STATUS)} === 'INACTIVE'")
        assert running.info().status == "INACTIVE"
        await page.click(f'{SECTION} button[data-action="activate"]')
        await page.wait_for(f"{text(STATUS)} === 'ACTIVE'")
        assert running.info().status == "ACTIVE"
        kill = f'{SECTION} button[data-action="kill"]'
        await page.click(kill)  # the first click only arms the button
        assert await page.evaluate(text(kill)) == "Confirm kill"
        assert running.info().status == "ACTIVE"
        await page.click(kill)
        await page.wait_for(f"{text(STATUS)} === 'KILLED'")
        assert running.info().status == "KILLED"

    in_browser(scenario)


def png_pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB / RGBA PNG (what Chromium writes) into rows of raw pixels."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = data
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6), (depth, color)
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def test_screenshot_is_not_blank() -> None:
    async def scenario(ui: UIServer, running: Any, page: Page) -> None:
        await page.wait_for(f"document.querySelectorAll('{SECTION} .graph .node').length == 3")
        await wait_refreshes(page, 3)
        height = await page.evaluate(f"document.querySelector('{SECTION}').offsetHeight")
        assert height > 600
        png = await page.screenshot(scale=0.5)
        width, rows_n, rows = png_pixels(png)
        assert width == 700 and rows_n > 400
        colors: dict[bytes, int] = {}
        bpp = len(rows[0]) // width
        for row in rows[::2]:
            for x in range(0, len(row) - bpp, 2 * bpp):
                px = row[x : x + 3]
                colors[px] = colors.get(px, 0) + 1
        total = sum(colors.values())
        background = max(colors.values())
        assert len(colors) > 50, "a screenshot with this few colours is a blank page"
        assert background / total < 0.85, "the page is mostly one colour: blank?"

    in_browser(scenario)


# --- the papercuts of issue 16 ---------------------------------------------------------------

ERRORS = f"{SECTION} .errors details.error"


def test_an_opened_traceback_stays_open_across_redraws() -> None:
    async def scenario(ui: UIServer, running: Any, page: Page) -> None:
        await page.wait_for(f"document.querySelectorAll('{ERRORS}').length > 0")
        key = await page.evaluate(
            f"(() => {{ const d = document.querySelector('{ERRORS}');"
            " d.querySelector('summary').click(); window.opened = d; return d.dataset.key; })()"
        )
        await wait_refreshes(page, 3)
        still = await page.evaluate(
            f"(() => {{ const d = document.querySelector('{ERRORS}[data-key=\"' + {key!r} + '\"]');"
            " return d ? [d.open, d === window.opened, d.querySelector('pre').textContent] : null;"
            " })()"
        )
        assert still is not None, "the opened error is gone from the list"
        is_open, same_node, traceback = still
        assert is_open and same_node
        assert "Traceback" in traceback and "no umbrella" in traceback

    in_browser(scenario)


def test_throughput_lines_are_told_apart_and_the_charts_have_time_ticks() -> None:
    plot = f"{SECTION} [data-plot=throughput] svg"

    async def scenario(ui: UIServer, running: Any, page: Page) -> None:
        await page.wait_for(f"document.querySelectorAll('{plot} .x-tick').length >= 2")
        drawn = await page.evaluate(
            f"[...document.querySelectorAll('{plot} path[data-series]')]"
            ".map(p => [p.dataset.series, p.getAttribute('stroke-dasharray'),"
            " p.getAttribute('stroke-width')])"
        )
        # acked underneath (wide), emitted dashed on top of it: equal rates show both lines.
        assert [d[0] for d in drawn] == ["acked", "emitted", "failed"]
        styles = {series: (dash, width) for series, dash, width in drawn}
        assert styles["acked"][0] is None and styles["emitted"][0] == "5 3"
        assert float(styles["acked"][1]) > float(styles["emitted"][1])
        legend = await page.evaluate(
            f"[...document.querySelectorAll('{plot} .legend')].map(g => [g.dataset.series,"
            " g.textContent, g.querySelector('line').getAttribute('stroke-dasharray')])"
        )
        assert sorted(legend) == [
            ["acked", "acked/s", None],
            ["emitted", "emitted/s", "5 3"],
            ["failed", "failed/s", None],
        ]
        ticks = await page.evaluate(
            f"[...document.querySelectorAll('{plot} .x-tick')]"
            ".map(t => [Number(t.getAttribute('x')), t.textContent])"
        )
        xs = [x for x, _ in ticks]
        assert xs == sorted(xs) and len(set(xs)) == len(xs)
        for _, label in ticks:
            minutes, _, seconds = label.partition(":")
            assert minutes.isdigit() and len(seconds) == 2 and seconds.isdigit(), label
        # The latency chart shares the time axis.
        latency = f"{SECTION} [data-plot=latency] svg .x-tick"
        await page.wait_for(f"document.querySelectorAll('{latency}').length >= 2")

    in_browser(scenario)


def test_the_configuration_is_on_the_page() -> None:
    async def scenario(ui: UIServer, running: Any, page: Page) -> None:
        row = f'{SECTION} .configuration tr[data-key="topology.message.timeout.secs"]'
        await page.wait_for(f"!!document.querySelector('{row}')")
        assert await page.evaluate(text(f'{row} [data-stat="value"]')) == str(
            running.conf["topology.message.timeout.secs"]
        )
        keys = await page.evaluate(
            f"[...document.querySelectorAll('{SECTION} .configuration tbody tr')]"
            ".map(r => r.dataset.key)"
        )
        assert keys == sorted(running.conf)
        assert await page.evaluate(f"document.querySelector('{SECTION} details.config').open")

    in_browser(scenario)


def test_after_a_kill_the_page_says_so_and_keeps_the_final_state() -> None:
    conn = "document.getElementById('conn').textContent"
    note = f"{SECTION} .ended-note"

    async def scenario(ui: UIServer, running: Any, page: Page) -> None:
        await page.wait_for(f"{text(STATUS)} === 'ACTIVE'")
        kill = f'{SECTION} button[data-action="kill"]'
        await page.click(kill)
        await page.click(kill)
        await page.wait_for(f"{text(STATUS)} === 'KILLED'")
        acked = await page.evaluate(text(ACKED))
        # The topology leaves the process (LocalCluster.kill_topology does that): its
        # section stays, with its last numbers, and says why nothing moves any more.
        ui.unregister("word-count")
        await page.wait_for(f"!document.querySelector('{note}').hidden")
        assert await page.evaluate(text(note)) == (
            "Topology killed and no longer shown by this process: its last state is shown."
        )
        # Then the process exits (squall run --ui does, once its topology is killed).
        await ui.close()
        await page.wait_for(f"{conn}.startsWith('ended')")
        assert await page.evaluate(conn) == "ended: 'word-count' killed; the process has exited"
        assert await page.evaluate(text(note)) == (
            "Topology killed; the process that served it has exited or does not answer: its "
            "last state is shown."
        )
        assert await page.evaluate(text(STATUS)) == "KILLED"
        assert await page.evaluate(text(ACKED)) == acked
        assert await page.evaluate(
            f"[...document.querySelectorAll('{SECTION} button[data-action]')]"
            ".every(b => b.disabled)"
        )
        await page.wait_for(f"document.querySelectorAll('{SECTION} .graph .node').length == 3")

    in_browser(scenario)
