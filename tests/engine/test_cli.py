"""The ``squall`` command: run (progress, table, exit codes, Ctrl-C, timeout, import errors,
--ui), the REST client commands, visualize, and the quick start example."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine import Spout, TopologyBuilder
from engine._command.cli import ProgressLine, _Run, main, run_with_progress
from engine._runtime import start_topology
from engine._time.loop import new_event_loop, run_sync
from engine.testing import simulate
from engine.ui import UIServer, serve_ui
from squall_cli import main as squall_main

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


class FiniteSpout(Spout):
    """Emits 50 sentences and then nothing, without saying so through ``is_exhausted``."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.i = collector, 0

    def next_tuple(self) -> None:
        if self.i < 50:
            self.i += 1
            self.collector.emit([f"sentence {self.i}"], msg_id=self.i)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


def never_exhausted() -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", FiniteSpout())
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
    # Storm's kill at the deadline: spouts deactivated, the trees in flight drain.
    assert "squall: 5 s timeout reached: spouts deactivated, in-flight trees have up to 30 s" in err
    assert "still pending 0" in out
    # Virtual time: one line per second, each stamped with the topology's uptime.
    clock = [line.split()[0] for line in err.splitlines() if "spout emitted" in line]
    assert clock[:4] == ["1.0s", "2.0s", "3.0s", "4.0s"]


def test_a_spout_without_is_exhausted_gets_a_hint_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        ["run", "tests.engine.test_cli:never_exhausted", "--timeout", "30"], runner=simulate
    )
    assert code == 124
    out, err = capsys.readouterr()
    assert table_rows(out)["sentences"][5] == "50"  # all acked early on; then nothing
    hints = [line for line in err.splitlines() if "is_exhausted" in line]
    assert hints == [
        "squall: no spout has emitted for 10 s and no tree is pending, yet the run goes on: "
        "it ends when every spout's is_exhausted() returns True, which sentences "
        "(FiniteSpout) does not define; define it (True once the input is done) or stop "
        "the run with Ctrl-C"
    ]
    # Said after 10 s of quiet on the topology's clock: the line before it is at 11 s.
    before = err.splitlines()[err.splitlines().index(hints[0]) - 1]
    assert before.split()[0] == "11.0s", before
    # A topology whose spouts define is_exhausted completes; nothing to hint.
    assert main(["run", "tests.engine.test_cli:finite"], runner=simulate) == 0
    assert "is_exhausted" not in capsys.readouterr().err


def test_ctrl_c_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "tests.engine.test_cli:interrupted"]) == 130
    out, err = capsys.readouterr()
    assert "squall: interrupted (SIGINT; drained and stopped)" in err
    assert "topology 'test_cli': KILLED" in out
    assert "still pending 0" in out
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    assert int(table_rows(out)["sentences"][2].replace(",", "")) >= 1000


# --- stopping from outside: signals and the timeout, while user code holds the loop --------

BLOCKING_TOPOLOGY = """
import asyncio, os, sys, time
from engine import BasicBolt, Spout, TopologyBuilder

BLOCK_SECS = float(os.environ["BLOCK_SECS"])


class Blocking(Spout):
    # Emits 10 tuples, then blocks in every next_tuple (a poll of a source with nothing
    # new) and says so on stderr: the tests' cue to send their signal.
    def open(self, conf, context, collector):
        self.collector, self.i = collector, 0

    def next_tuple(self):
        if self.i < 10:
            self.i += 1
            self.collector.emit([self.i], msg_id=self.i)
            return
        print("blocking", file=sys.stderr, flush=True); time.sleep(BLOCK_SECS)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class Slow(BasicBolt):
    # Holds every tree for 2 s: they are in flight when the signal comes.
    async def execute(self, tuple, collector):
        await asyncio.sleep(2)

    def declare_output_fields(self, declarer):
        pass


def build():
    builder = TopologyBuilder()
    builder.set_spout("blocking", Blocking())
    builder.set_bolt("slow", Slow()).shuffle_grouping("blocking")
    return builder.create_topology()
"""
#: One line, so that a signal finds next_tuple on it whether it is printing or sleeping.
SLEEPING = '        print("blocking", file=sys.stderr, flush=True); time.sleep(BLOCK_SECS)'
SQUALL = "import sys; from squall_cli import main; sys.exit(main(sys.argv[1:]))"


class Child:
    """``squall run`` in a child process, its stderr read line by line as it comes."""

    def __init__(self, cwd: Path, block_secs: float, *args: str) -> None:
        env = {**os.environ, "BLOCK_SECS": str(block_secs), "PYTHONPATH": str(ROOT / "src")}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SQUALL, "run", "blocking_topology:build", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.err: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float = 60) -> None:
        """Until a line of stderr contains ``text`` (fails after ``timeout`` s)."""
        while True:
            line = self.lines.get(timeout=timeout)
            assert line is not None, f"exited before printing {text!r}:\n{''.join(self.err)}"
            self.err.append(line)
            if text in line:
                return

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        assert self.proc.stdout is not None
        try:
            self.proc.wait(timeout=timeout)  # stdout holds only the table: the pipe has room
        finally:
            self.proc.kill()
        with self.proc.stdout:
            out = self.proc.stdout.read()
        while (line := self.lines.get(timeout=10)) is not None:
            self.err.append(line)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return self.proc.returncode, out, "".join(self.err)


@pytest.fixture
def blocking_module(tmp_path: Path) -> Path:
    (tmp_path / "blocking_topology.py").write_text(BLOCKING_TOPOLOGY)
    return tmp_path


@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_a_signal_while_user_code_blocks_drains_and_prints_the_table(
    blocking_module: Path, sig: signal.Signals, code: int, said: str
) -> None:
    child = Child(blocking_module, 1.0)
    child.wait_for("blocking")  # the 10 trees are in flight, held by the slow bolt
    child.proc.send_signal(sig)
    returncode, out, err = child.finish()
    assert returncode == code, err
    assert f"squall: {sig.name}: stopping: the spouts stop emitting" in err
    assert f"squall: {said} ({sig.name}; drained and stopped)" in err
    assert "Traceback" not in err
    assert "topology 'blocking_topology': KILLED" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("blocking "))
    assert row[2:7] == ["10", "10", "0", "10", "0"]  # emitted, transferred, executed, acked, failed
    assert "still pending 0" in out


def test_a_second_signal_while_stopping_exits_at_once_naming_the_blocking_call(
    blocking_module: Path,
) -> None:
    child = Child(blocking_module, 600.0)
    child.wait_for("blocking")
    child.proc.send_signal(signal.SIGINT)
    child.wait_for("squall: SIGINT: stopping")
    child.proc.send_signal(signal.SIGINT)
    returncode, out, err = child.finish()
    assert returncode == 130
    line = BLOCKING_TOPOLOGY.splitlines().index(SLEEPING) + 1
    assert err.splitlines()[-1] == (
        f"squall: SIGINT while stopping: exiting now, without draining or the final table; "
        f"user code holds the event loop in next_tuple (blocking_topology.py:{line})"
    )
    assert "Traceback" not in err
    assert out == ""


def test_the_timeout_drains_while_user_code_blocks(blocking_module: Path) -> None:
    child = Child(blocking_module, 1.0, "--timeout", "1")
    returncode, out, err = child.finish()
    assert returncode == 124, err
    assert "squall: 1 s timeout reached: spouts deactivated, in-flight trees have up to 30 s" in err
    assert "did not become complete within 1.0 s (pending trees: " in err
    row = next(line.split() for line in out.splitlines() if line.startswith("blocking "))
    assert row[2:7] == ["10", "10", "0", "10", "0"]  # every tree in flight finished
    assert "still pending 0" in out


def test_the_timeout_ends_a_run_whose_loop_user_code_holds(blocking_module: Path) -> None:
    child = Child(blocking_module, 600.0, "--timeout", "1")
    returncode, _, err = child.finish()
    assert returncode == 124
    line = BLOCKING_TOPOLOGY.splitlines().index(SLEEPING) + 1
    assert err.splitlines()[-1] == (
        f"squall: --timeout 1 s passed and the event loop has not turned for 5 s; user code "
        f"holds the event loop in next_tuple (blocking_topology.py:{line}): exiting now, "
        f"without draining or the final table"
    )


def test_a_module_that_cannot_be_imported_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["run", "no_such_module:build"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "squall: cannot import 'no_such_module' (No module named 'no_such_module'); run "
        "squall from the directory that holds it, add that directory to PYTHONPATH, or give "
        "path/to/file.py:FUNCTION\n"
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


def test_a_syntax_error_names_its_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "typo_topology.py").write_text("import os\n\ndef build(:\n    pass\n")
    assert main(["run", "typo_topology:build"]) == 2
    assert capsys.readouterr().err == (
        "squall: importing 'typo_topology' failed: SyntaxError: invalid syntax at "
        "typo_topology.py:3 (--log-level DEBUG shows the traceback)\n"
    )
    assert main(["run", "typo_topology.py:build"]) == 2
    assert capsys.readouterr().err == (
        "squall: importing 'typo_topology.py' failed: SyntaxError: invalid syntax at "
        "typo_topology.py:3 (--log-level DEBUG shows the traceback)\n"
    )


FILE_TOPOLOGY = """
from helper import SENTENCES  # a sibling module: the file's directory is on sys.path
from tests.engine.topologies import sentences, word_count_topology


def build():
    return word_count_topology(sentences(SENTENCES), 2), {"topology.seed": 4}
"""


def test_run_takes_a_file_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "file_topology.py").write_text(FILE_TOPOLOGY)
    (folder / "helper.py").write_text("SENTENCES = 30\n")
    try:
        assert main(["run", str(folder / "file_topology.py") + ":build"]) == 0
        out = capsys.readouterr().out
        assert "topology 'file_topology': COMPLETED" in out
        assert table_rows(out)["sentences"][2] == "30"
        monkeypatch.chdir(tmp_path)
        assert main(["run", "jobs/nothing_here.py:build"]) == 2
        assert capsys.readouterr().err == (
            f"squall: no file 'jobs/nothing_here.py' (looked from {tmp_path})\n"
        )
        assert main(["run", "jobs/file_topology:build"]) == 2
        assert capsys.readouterr().err == (
            "squall: 'jobs/file_topology' is neither a module name nor a .py file; give "
            "MODULE:FUNCTION (run from the directory that holds it) or FILE.py:FUNCTION\n"
        )
    finally:
        for name in ("file_topology", "helper"):
            sys.modules.pop(name, None)


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
    target = "tests.engine.test_cli:finite"
    assert main(["run", target, "--conf", "topology.max.spout.pendng=1"]) == 2
    assert capsys.readouterr().err == (
        "squall: --conf: unknown config key 'topology.max.spout.pendng'; did you mean "
        "'topology.max.spout.pending'?\n"
    )
    assert main(["run", target, "--conf", "topology.max.spout.pending=abc"]) == 2
    assert capsys.readouterr().err == (
        "squall: --conf: 'topology.max.spout.pending' must be a positive int or None, got 'abc'\n"
    )


def bad_conf() -> Any:
    return word_count_topology(sentences(10), 2), {"topology.acker.executors": -1}


def test_a_bad_conf_from_the_target_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "tests.engine.test_cli:bad_conf"]) == 2
    assert capsys.readouterr().err.startswith(
        "squall: the conf tests.engine.test_cli:bad_conf returned: 'topology.acker.executors' "
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--timeout", "-1"], "argument --timeout: must be a number of seconds above 0, got '-1'"),
        (["--timeout", "0"], "argument --timeout: must be a number of seconds above 0, got '0'"),
        (["--timeout", "soon"], "argument --timeout: expected a number of seconds, got 'soon'"),
        (["--interval", "0"], "argument --interval: must be a number of seconds above 0, got '0'"),
        (["--interval", "0.01"], "argument --interval: must be at least 0.1 s, got '0.01'"),
    ],
)
def test_run_refuses_times_that_make_no_sense(
    option: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["run", "tests.engine.test_cli:finite", *option])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"squall run: error: {message}"


@pytest.mark.parametrize("option", [["--ui-host", "0.0.0.0"], ["--token", "t"]])
def test_ui_options_without_ui_are_refused(
    option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "tests.engine.test_cli:finite", *option]) == 2
    assert capsys.readouterr() == (
        "",
        f"squall: {option[0]} is for the web UI: add --ui [PORT] or drop it\n",
    )


def test_a_ui_that_cannot_start_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    target = "tests.engine.test_cli:finite"
    assert main(["run", target, "--ui", "0", "--ui-host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("squall: --ui: serve_ui: host '0.0.0.0' is reachable from other ")
    assert err.endswith(" (squall run: --token TOKEN)\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["run", target, "--ui", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"squall: --ui: [Errno 98] serve_ui: cannot listen on 127.0.0.1:{port} (")
    assert err.endswith("; choose another port (0: any free one)\n")


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


@contextlib.contextmanager
def ui_in_a_thread(token: str | None = None) -> Iterator[str]:
    """A topology with its UI on a loop thread, as another process would have it."""
    loop = new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> tuple[UIServer, Any]:
        running = await start_topology(paced_topology(pause=0.005), name="word-count")
        ui = await serve_ui(port=0, token=token)
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


@pytest.fixture
def ui_process() -> Iterator[str]:
    with ui_in_a_thread() as url:
        yield url


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


def test_a_url_that_is_not_one_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--url", "notaurl"]) == 2
    assert capsys.readouterr().err == (
        "squall: --url takes the UI's address, such as http://127.0.0.1:8080, got 'notaurl'\n"
    )
    assert main(["kill", "x", "--url", "http://127.0.0.1:port"]) == 2
    assert capsys.readouterr().err.startswith(
        "squall: --url 'http://127.0.0.1:port' is not a usable address ("
    )


def said(err: str) -> list[str]:
    """The command's own lines of stderr (the topology in the thread may log errors)."""
    return [line for line in err.splitlines() if line.startswith("squall: ")]


def test_the_client_tells_a_wrong_token_from_a_missing_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SQUALL_UI_TOKEN", raising=False)
    with ui_in_a_thread(token="s3cret") as page:
        url = page.rstrip("/")
        assert main(["list", "--url", url, "--token", "guess"]) == 2
        assert said(capsys.readouterr().err) == [
            f"squall: wrong token: the UI at {url} refused it; give the token it was started "
            f"with (--token or SQUALL_UI_TOKEN)"
        ]
        assert main(["deactivate", "word-count", "--url", url]) == 2
        assert said(capsys.readouterr().err) == [
            f"squall: the UI at {url} needs a token: give --token or set SQUALL_UI_TOKEN"
        ]
        monkeypatch.setenv("SQUALL_UI_TOKEN", "s3cret")
        assert main(["list", "--url", url]) == 0
        assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["word-count", "ACTIVE"]


#: What a client verb must not load: the engine's machinery and its numeric stack.
HEAVY = ("engine", "acker_kernel", "spark_io", "numba", "numpy", "uvloop", "aiohttp")
CLIENT_PROBE = """
import sys
from importlib.metadata import entry_points
(script,) = entry_points(group="console_scripts", name="squall")
code = script.load()(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
print(code, script.value, heavy)
"""


def test_client_verbs_do_not_load_the_engine(ui_process: str) -> None:
    for verb in (["list"], ["deactivate", "word-count"], ["activate", "word-count"]):
        proc = subprocess.run(
            [sys.executable, "-c", CLIENT_PROBE.format(heavy=HEAVY), *verb, "--url", ui_process],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[-1] == "0 squall_cli:main []", proc.stdout


def test_the_light_front_door_hands_other_commands_to_the_engine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert squall_main(["run", "tests.engine.test_cli:finite"]) == 0
    assert "topology 'test_cli': COMPLETED" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        squall_main(["--help"])
    assert done.value.code == 0
    listed = capsys.readouterr().out
    for command in ("run", "list", "kill", "activate", "deactivate", "rebalance", "submit"):
        assert re.search(rf"^    {command}\b", listed, re.MULTILINE), command


# --- visualize and the quick start ---------------------------------------------------------


def test_visualize_writes_svg_and_dot_away_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    here, temp = tmp_path / "here", tmp_path / "temp"
    here.mkdir()
    temp.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    assert main(["visualize", "examples.quickstart:build"]) == 0
    drawn = temp / "squall-visualize"
    assert capsys.readouterr().out == (
        f"squall: wrote {drawn / 'quickstart.svg'} (svg, 3 components)\n"
        f"squall: wrote {drawn / 'quickstart.dot'} (dot, 3 components)\n"
    )
    assert list(here.iterdir()) == []
    root = ET.fromstring((drawn / "quickstart.svg").read_text())
    nodes = [g.get("data-component") for g in root.iter() if g.get("data-component")]
    assert sorted(nodes) == ["count", "sentences", "split"]
    dot = (drawn / "quickstart.dot").read_text()
    assert '"sentences" -> "split" [label="default · shuffle"];' in dot
    assert '"split" -> "count" [label="default · fields(word)"];' in dot
    assert main(["visualize", "examples.quickstart:build", "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith('digraph "quickstart" {')
    assert main(["visualize", "examples.quickstart:build", "-o", "graphs/"]) == 0
    assert sorted(p.name for p in (here / "graphs").iterdir()) == [
        "quickstart.dot",
        "quickstart.svg",
    ]
    capsys.readouterr()
    assert main(["visualize", "examples.quickstart:build", "-o", "wc.dot"]) == 0
    assert capsys.readouterr().out == "squall: wrote wc.dot (dot, 3 components)\n"
    assert (here / "wc.dot").read_text().startswith('digraph "quickstart" {')


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
