"""The ``squall`` command: run (progress, table, exit codes, Ctrl-C, timeout, import errors,
--ui), the REST client commands, visualize, and the quick start example."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine import Spout, TopologyBuilder
from engine._cli import ProgressLine, _Run, main, run_with_progress
from engine._loop import new_event_loop, run_sync
from engine._runtime import start_topology
from engine.testing import simulate
from engine.ui import UIServer, serve_ui

from .topologies import sentences, word_count_topology
from .ui.paced import Split, paced_topology

ROOT = Path(__file__).resolve().parents[2]


def finite() -> Any:
    return word_count_topology(sentences(200), 2), {"topology.seed": 4}


def failing() -> Any:
    return word_count_topology(sentences(200), 2, fail_rate=0.1), {"topology.seed": 4}


def endless() -> Any:
    return paced_topology(pause=0.01)


class InterruptingSpout(Spout):
    """Sends this process a SIGINT (a Ctrl-C) once 1,000 of its tuples were acked."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.i, self.acked = collector, 0, 0

    def next_tuple(self) -> None:
        self.i += 1
        self.collector.emit([f"sentence {self.i}"], msg_id=self.i)

    def ack(self, msg_id: Any) -> None:
        self.acked += 1
        if self.acked == 1000:
            os.kill(os.getpid(), signal.SIGINT)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


def interrupted() -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", InterruptingSpout())
    builder.set_bolt("split", Split()).shuffle_grouping("sentences")
    return builder.create_topology()


def table_rows(out: str) -> dict[str, list[str]]:
    return {
        line.split()[0]: line.split()
        for line in out.splitlines()
        if line.split() and line.split()[0] in ("sentences", "split", "count")
    }


# --- run -----------------------------------------------------------------------------------


def test_run_prints_spout_progress_and_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "tests.engine.test_cli:finite", "--interval", "0.2"]) == 0
    out, err = capsys.readouterr()
    assert "topology 'test_cli': COMPLETED" in out
    assert table_rows(out)["sentences"][2] == "200"
    progress = [line for line in err.splitlines() if "spout emitted" in line]
    assert progress, err
    last = progress[-1].split()
    assert last[1] == "COMPLETED"
    assert " acked " in progress[-1] and "/s)" in progress[-1]


def test_run_exit_status_follows_the_fail_on_policy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "tests.engine.test_cli:failing"]) == 1
    out, err = capsys.readouterr()
    failed = int(table_rows(out)["sentences"][6].replace(",", ""))
    assert failed > 0
    assert (
        f"squall: {failed:,} tuple tree(s) failed or timed out (exit 1; --fail-on never exits 0)"
        in err
    )
    assert main(["run", "tests.engine.test_cli:failing", "--fail-on", "never"]) == 0
    # FailedException fails a tuple without reporting an error (Storm's semantics).
    assert main(["run", "tests.engine.test_cli:failing", "--fail-on", "errors"]) == 0


def test_timeout_prints_the_table_with_the_clock_of_the_topology(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["run", "tests.engine.test_cli:endless", "--timeout", "5"], runner=simulate)
    assert code == 124
    out, err = capsys.readouterr()
    assert "topology 'test_cli': KILLED" in out
    assert int(table_rows(out)["sentences"][2].replace(",", "")) > 100
    assert "did not become complete within 5.0 s" in err and "(--timeout 5)" in err
    # Virtual time: one line per second, each stamped with the topology's uptime.
    clock = [line.split()[0] for line in err.splitlines() if "spout emitted" in line]
    assert clock[:4] == ["1.0s", "2.0s", "3.0s", "4.0s"]


def test_ctrl_c_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "tests.engine.test_cli:interrupted"]) == 130
    out, err = capsys.readouterr()
    assert "squall: interrupted" in err
    assert "topology 'test_cli': KILLED" in out
    assert int(table_rows(out)["sentences"][2].replace(",", "")) >= 1000


def test_a_module_that_cannot_be_imported_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["run", "no_such_module:build"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "squall: cannot import 'no_such_module' (No module named 'no_such_module'); run "
        "squall from the directory that holds it or add that directory to PYTHONPATH\n"
    )
    (tmp_path / "broken_topology.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    assert main(["run", "broken_topology:build"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "squall: importing 'broken_topology' failed: RuntimeError: boom at "
        "broken_topology.py:2 (--log-level DEBUG shows the traceback)\n"
    )
    (tmp_path / "wrong_return.py").write_text("def build():\n    return 42\n")
    assert main(["run", "wrong_return:build"]) == 2
    assert capsys.readouterr().err == (
        "squall: wrong_return:build returned int; return a StormTopology "
        "(TopologyBuilder.create_topology()) or (topology, conf)\n"
    )
    assert main(["run", "wrong_return:nope"]) == 2
    assert capsys.readouterr().err == "squall: module 'wrong_return' has no 'nope'\n"


def test_help_documents_conf_and_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    assert done.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for text in (
        "--conf KEY=VALUE",
        "--conf topology.max.spout.pending=1000",
        "Python literal",
        "--ui [PORT]",
        "--prometheus PORT",
        "--log-level",
        "--fail-on {any,failed,errors,never}",
        "124 --timeout reached",
    ):
        assert text in out, text


def test_bad_conf_is_explained(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "tests.engine.test_cli:finite", "--conf", "oops"]) == 2
    assert capsys.readouterr().err == "squall: --conf takes KEY=VALUE, got 'oops'\n"


def test_ui_serves_while_running_and_a_kill_ends_the_run() -> None:
    async def scenario() -> tuple[Any, Any]:
        state = _Run()
        run = asyncio.ensure_future(
            run_with_progress(endless(), name="endless", ui=0, out=io.StringIO(), _state=state)
        )
        while state.ui_url is None:
            await asyncio.sleep(0.01)
        async with aiohttp.ClientSession(base_url=state.ui_url) as http:
            async with http.get("/api/v1/topology/summary") as resp:
                summary = await resp.json()
            async with http.post("/api/v1/topology/endless/kill/0") as resp:
                assert resp.status == 200
        return summary, await asyncio.wait_for(run, 30)

    summary, info = run_sync(scenario())
    assert [t["name"] for t in summary["topologies"]] == ["endless"]
    assert info.status == "KILLED"


# --- the progress line ---------------------------------------------------------------------


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_keeps_off_user_output() -> None:
    term = FakeTerminal()
    line = ProgressLine(term)
    erase = "\r\x1b[2K"
    line.show("progress 1")
    line.user_write(term, "hello\n")
    assert term.getvalue() == f"{erase}progress 1{erase}hello\n{erase}progress 1"
    term.seek(0)
    term.truncate()
    line.user_write(term, "no newline")  # not drawn over
    line.show("progress 2")
    assert term.getvalue() == f"{erase}no newline\n{erase}progress 2"
    saved = sys.stdout
    with line.capturing():
        assert sys.stdout is not saved
    assert sys.stdout is saved


def test_not_a_terminal_gets_one_line_per_update() -> None:
    out = io.StringIO()
    line = ProgressLine(out)
    line.show("a")
    line.show("b")
    assert out.getvalue() == "a\nb\n"


# --- the REST client -----------------------------------------------------------------------


@pytest.fixture
def ui_process() -> Iterator[str]:
    """A topology with its UI on a loop thread, as another process would have it."""
    loop = new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[UIServer, Any]:
        running = await start_topology(paced_topology(pause=0.005), name="word-count")
        ui = await serve_ui(port=0)
        ui.register(running)
        return ui, running

    ui, running = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield ui.url
    finally:

        async def stop() -> None:
            await running.kill(0)
            await ui.close()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_client_commands_drive_a_running_topology(
    ui_process: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--url", ui_process]
    assert main(["list", *url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["name", "status", "uptime"]
    assert out[1].split()[:2] == ["word-count", "ACTIVE"]
    assert main(["deactivate", "word-count", *url]) == 0
    assert capsys.readouterr().out == "squall: deactivate 'word-count': success (now INACTIVE)\n"
    assert main(["activate", "word-count", *url]) == 0
    assert capsys.readouterr().out == "squall: activate 'word-count': success (now ACTIVE)\n"
    assert main(["rebalance", "word-count", "-e", "split=1", "-n", "1", *url]) == 0
    assert capsys.readouterr().out == (
        "squall: rebalanced 'word-count': split=1 executors (now ACTIVE)\n"
    )
    assert main(["rebalance", "word-count", "-n", "2", "-e", "split=1", *url]) == 2
    assert capsys.readouterr().err == (
        "squall: a topology runs in one process, so -n (workers) can only be 1, got 2; "
        "spread a component's tasks with -e COMPONENT=N\n"
    )
    assert main(["activate", "nope", *url]) == 1
    assert capsys.readouterr().err == (
        "squall: no topology named 'nope' (topologies: ['word-count'])\n"
    )
    assert main(["kill", "word-count", "--wait", "0", *url]) == 0
    out = capsys.readouterr().out
    assert out == (
        "squall: killing 'word-count': deactivated, stops within 0 s\nsquall: 'word-count' killed\n"
    )
    assert main(["list", *url]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["word-count", "KILLED"]


def test_client_without_a_server_says_where_it_looked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list", "--url", "http://127.0.0.1:9", "--http-timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("squall: no Squall UI answers at http://127.0.0.1:9 (")
    assert err.endswith("start the topology with 'squall run ... --ui' or give --url\n")


# --- visualize and the quick start ---------------------------------------------------------


def test_visualize_writes_svg_and_dot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["visualize", "examples.quickstart:build"]) == 0
    assert capsys.readouterr().out == (
        "squall: wrote quickstart.svg (svg, 3 components)\n"
        "squall: wrote quickstart.dot (dot, 3 components)\n"
    )
    root = ET.fromstring((tmp_path / "quickstart.svg").read_text())
    nodes = [g.get("data-component") for g in root.iter() if g.get("data-component")]
    assert sorted(nodes) == ["count", "sentences", "split"]
    dot = (tmp_path / "quickstart.dot").read_text()
    assert '"sentences" -> "split" [label="default · shuffle"];' in dot
    assert '"split" -> "count" [label="default · fields(word)"];' in dot
    assert main(["visualize", "examples.quickstart:build", "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith('digraph "quickstart" {')


def test_the_quick_start_runs_as_written() -> None:
    proc = subprocess.run(
        [sys.executable, "examples/quickstart.py"],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "top words: [('the', 300)," in proc.stdout
    assert "sentences acked: 300" in proc.stdout
