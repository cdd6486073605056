"""The ``squall`` command: run a topology, drive a running one, draw one.

``squall run MODULE:FUNCTION`` runs a topology in this process (``FUNCTION`` returns a
``StormTopology`` or a ``(StormTopology, conf)`` pair) with a live progress line on stderr
and a stats table at the end — also after Ctrl-C, SIGTERM and ``--timeout``. It stops by
itself when every spout is exhausted and nothing is pending. Ctrl-C, SIGTERM and the
timeout stop it as Storm's kill does (spouts deactivated, in-flight trees drained for up to
the message timeout), even while user code holds the event loop; a second signal meanwhile
exits at once. Exit status: 0 done; 1 tuple trees failed or errors were reported
(``--fail-on`` chooses); 2 bad usage or a target that cannot be loaded; 124 ``--timeout``
reached; 130 Ctrl-C (SIGINT); 143 SIGTERM.

``squall list``, ``kill``, ``activate``, ``deactivate`` and ``rebalance`` act on topologies
running in another process started with ``--ui`` (or ``run_topology(..., ui=PORT)``),
through its REST API (``--url``, default ``http://127.0.0.1:8080``), like Storm's CLI; they
live in ``squall_cli``, which loads no more than the standard library for them.
``squall visualize MODULE:FUNCTION`` writes the topology's graph as SVG and DOT.
``squall submit --runner spark MODULE:FUNCTION ...`` runs it on Spark as one Structured
Streaming query (``spark_io``, loaded by name only then: the engine does not depend on it);
``--runner local`` is ``squall run``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import signal
import sys
import sysconfig
import tempfile
import threading
import traceback
from asyncio import FIRST_COMPLETED
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, NoReturn, TextIO

from squall_cli import (
    DEFAULT_UI_PORT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_TIMEOUT,
    CliError,
    add_client_commands,
    positive_float,
    run_client,
)

from .._model.component import Spout
from .._model.config import check_config
from .._model.errors import InvalidConfigError, SquallError
from .._model.topology import StormTopology
from .._monitor.stats import TopologyInfo
from .._runtime import RunningTopology, run_topology
from .._time.loop import cancel_and_wait, run_sync
from .._time.virtual import VirtualTimeLoop

__all__ = ["ProgressLine", "format_stats", "main", "run_with_progress"]

# A bad command line (``--conf``, the target): ``squall submit`` (spark_io) raises it too.
_CliError = CliError

#: How long the spouts emit nothing, with nothing pending, before the hint about
#: ``is_exhausted`` (seconds of the topology's clock).
EXHAUSTED_HINT_SECS = 10.0
#: The stop ``_cmd_run``'s watchdog requests at the ``--timeout`` deadline.
TIMEOUT = "timeout"
FAIL_ON = ("any", "failed", "errors", "never")
#: The entry point group of runners: ``squall submit --runner NAME ARGS...`` calls the
#: ``main(ARGS) -> int`` registered under NAME (spark_io registers ``spark``).
RUNNERS_GROUP = "squall.runners"
#: The shortest ``--interval`` between progress lines.
MIN_INTERVAL_SECS = 0.1


# --- the progress line ---------------------------------------------------------------------


def _spout_totals(info: TopologyInfo) -> tuple[int, int, int]:
    spouts = [c for cid, c in info.components.items() if c.kind == "spout" and cid[:2] != "__"]
    return (
        sum(c.emitted for c in spouts),
        sum(c.acked for c in spouts),
        sum(c.failed for c in spouts),
    )


def _progress_line(info: TopologyInfo, emit_rate: float, ack_rate: float) -> str:
    """What the spouts did: emits and tree acks (per second since the last line), not every
    hop; the clock is the topology's uptime."""
    emitted, acked, failed = _spout_totals(info)
    return (
        f"{info.uptime_secs:7.1f}s {info.status:<8} spout emitted {emitted:>11,} "
        f"({emit_rate:>9,.0f}/s)  acked {acked:>11,} ({ack_rate:>9,.0f}/s)  failed "
        f"{failed:>7,}  pending {info.pending_trees:>7,}  errors {info.error_count:>4,}"
    )


class ProgressLine:
    """One status line kept at the bottom of a terminal, under whatever else is printed.

    On a terminal the line is redrawn in place; while it is shown, ``sys.stdout`` and
    ``sys.stderr`` are wrapped so that anything printed (user ``print``, logging) first
    erases it and it is redrawn below. Elsewhere (a pipe, a file) each update is a line.
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.text = ""
        self._shown = False
        self._mid_line = False  # user output did not end its line: do not draw over it

    def _erase(self) -> None:
        if self._shown:
            self.out.write("\r\x1b[2K")
            self._shown = False

    def _draw(self) -> None:
        if self.text and not self._mid_line:
            self.out.write("\r\x1b[2K" + self.text)
            self.out.flush()
            self._shown = True

    def show(self, text: str) -> None:
        """Replace the line's text (on a terminal, redrawn in place; elsewhere, a new line).
        User output that did not end its line is ended first, never drawn over."""
        self.text = text
        if not self.tty:
            self.out.write(text + "\n")
            self.out.flush()
            return
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False
        self._draw()

    def user_write(self, stream: TextIO, data: str) -> int:
        """Write ``data`` to ``stream`` above the line: the line is erased, the data
        written, and the line drawn again under it. Returns what ``stream.write`` did."""
        self._erase()
        n = stream.write(data)
        if data:
            self._mid_line = not data.endswith("\n")
        stream.flush()
        self._draw()
        return n

    def say(self, text: str) -> None:
        """A line of our own above the progress line."""
        self.user_write(self.out, text + "\n")

    def finish(self) -> None:
        """Leave the last line on screen and end it."""
        if self.tty and self._shown:
            self.out.write("\n")
            self.out.flush()
            self._shown = False

    @contextlib.contextmanager
    def capturing(self) -> Iterator[ProgressLine]:
        """Route ``sys.stdout`` / ``sys.stderr`` through the line while the block runs."""
        if not self.tty:
            yield self
            return
        saved = sys.stdout, sys.stderr
        sys.stdout = _Through(self, saved[0])
        sys.stderr = _Through(self, saved[1])
        try:
            yield self
        finally:
            sys.stdout, sys.stderr = saved
            self.finish()


class _Through:
    """A text stream that writes through a ``ProgressLine``."""

    def __init__(self, line: ProgressLine, stream: TextIO) -> None:
        self._line = line
        self._stream = stream

    def write(self, data: str) -> int:
        return self._line.user_write(self._stream, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _CurrentStderr:
    """Logging's stream: whatever ``sys.stderr`` is at the time of the write."""

    def write(self, data: str) -> int:
        return sys.stderr.write(data)

    def flush(self) -> None:
        sys.stderr.flush()


class _ExhaustedHint:
    """Says once why a run that looks finished goes on: a topology completes when every
    spout's ``is_exhausted()`` returns True (Storm's ``CompletableSpout``), and a finite
    spout that does not define it leaves the run waiting forever."""

    def __init__(self, topology: StormTopology) -> None:
        self.spouts = [
            f"{sid} ({type(spec.component).__name__})"
            for sid, spec in topology.spouts.items()
            if getattr(type(spec.component), "is_exhausted", None) is Spout.is_exhausted
            and not sid.startswith("__")
        ]
        self.said = not self.spouts  # every spout decides: nothing to hint
        self.emitted = -1
        self.quiet_since = 0.0

    def update(self, info: TopologyInfo) -> str | None:
        """The hint, the first time the spouts have emitted nothing and no tree has been
        pending for ``EXHAUSTED_HINT_SECS`` of the topology's clock."""
        if self.said or info.status != "ACTIVE":
            return None
        emitted = _spout_totals(info)[0]
        if emitted != self.emitted or info.pending_trees:
            self.emitted, self.quiet_since = emitted, info.uptime_secs
            return None
        if info.uptime_secs - self.quiet_since < EXHAUSTED_HINT_SECS:
            return None
        self.said = True
        return (
            f"squall: no spout has emitted for {EXHAUSTED_HINT_SECS:g} s and no tree is "
            f"pending, yet the run goes on: it ends when every spout's is_exhausted() returns "
            f"True, which {', '.join(self.spouts)} does not define; define it (True once the "
            f"input is done) or stop the run with Ctrl-C"
        )


# --- the final table -----------------------------------------------------------------------


def format_stats(info: TopologyInfo) -> str:
    """A table of per-component stats, like Storm UI's component summary."""
    header = (
        f"{'component':<16}{'tasks':>6}{'emitted':>12}{'transferred':>13}{'executed':>12}"
        f"{'acked':>12}{'failed':>9}{'latency ms':>14}{'capacity':>10}"
    )
    lines = [
        f"topology {info.name!r}: {info.status}, uptime {info.uptime_secs:.2f} s, seed {info.seed}",
        header,
        "-" * len(header),
    ]
    for cid, comp in info.components.items():
        if cid.startswith("__"):
            continue
        tasks = list(comp.tasks.values())
        if comp.kind == "spout":  # complete latency: spout emit -> tree acked
            lat = [t.complete_latency for t in tasks if t.complete_latency.count]
            latency = f"{max(x.p99_ms for x in lat):.2f} p99" if lat else "-"
            capacity = "-"
        else:  # execute latency
            lat = [t.execute_latency for t in tasks if t.execute_latency.count]
            latency = f"{max(x.p99_ms for x in lat):.4f} p99" if lat else "-"
            capacity = f"{max((t.capacity for t in tasks), default=0.0):.3f}"
        lines.append(
            f"{cid:<16}{len(tasks):>6}{comp.emitted:>12,}{comp.transferred:>13,}"
            f"{comp.executed:>12,}{comp.acked:>12,}{comp.failed:>9,}{latency:>14}{capacity:>10}"
        )
    acker = info.acker
    lines.append("latency: spouts complete (emit -> tree acked), bolts execute; p99 over tasks")
    # Pending: the spouts' trees, as the progress line and the UI count them. The ledger
    # may hold more: late acks of trees already failed, dropped at their own timeout.
    late = acker["pending_roots"] - info.pending_trees
    late_acks = f" (ledger: {late:,} late acks of finished trees, dropped at their timeout)"
    lines.append(
        f"acker: {acker['ackers']} ledger(s), trees acked {acker['acked']:,}, failed "
        f"{acker['failed']:,}, timed out {acker['timed_out']:,}, still pending "
        f"{info.pending_trees:,}{late_acks if late > 0 else ''}"
    )
    errors = info.errors
    if errors:
        lines.append(f"errors ({info.error_count:,}; last 3):")
        for e in errors[-3:]:
            lines.append(f"  [{e.component} task {e.task} at {e.time_secs:.2f}s] {e.error}")
    return "\n".join(lines)


# --- running -------------------------------------------------------------------------------


class _Run:
    """The state of one ``run_with_progress``, shared with what stops it from outside.

    Its last ``TopologyInfo`` survives a Ctrl-C or a timeout, so the caller can still print
    the table. ``request_stop`` may be called from a signal handler or another thread: it
    only records the request and wakes the loop, whatever the loop is doing.
    """

    info: TopologyInfo | None = None
    ui_url: str | None = None
    #: the option whose service is starting (``--ui``, ``--prometheus``), while it starts
    starting: str | None = None
    #: what asked for a stop (``"SIGINT"``, ``"SIGTERM"``), once something did
    stop_requested: str | None = None
    #: the run is stopping (a requested stop or the timeout): in-flight trees are draining
    stopping: bool = False
    #: what stopped the run before it completed, once it has drained and stopped
    stopped_by: str | None = None
    #: the run's loop, once it runs; virtual (``engine.testing.simulate``) or not
    loop: asyncio.AbstractEventLoop | None = None
    virtual: bool = False
    #: the run is over (set from the loop; read by the watchdog thread)
    over: threading.Event
    #: the running topology's ``deactivate``, once it runs
    deactivate: Callable[[], None] | None = None

    def __init__(self) -> None:
        self.over = threading.Event()
        self._stop: asyncio.Future[str] | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[str]:
        """The future a stop request resolves (at once if one came before the loop ran)."""
        self._stop = loop.create_future()
        self.loop = loop
        self.virtual = isinstance(loop, VirtualTimeLoop)
        if self.stop_requested is not None:
            self._wake()
        return self._stop

    def request_stop(self, reason: str) -> None:
        """Stop the run cleanly, as soon as its loop turns (any thread, signal handlers)."""
        self.stop_requested = reason
        loop = self.loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the run is over
                loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if self._stop is not None and not self._stop.done() and self.stop_requested is not None:
            self._stop.set_result(self.stop_requested)
            # The spouts stop emitting now, in this callback: the task that drains wakes
            # a few loop turns later, and each turn may be one long call of user code.
            if self.deactivate is not None:
                with contextlib.suppress(SquallError):  # completed or killed meanwhile
                    self.deactivate()


@contextlib.asynccontextmanager
async def _services(
    running: RunningTopology,
    ui: int | None,
    ui_host: str,
    ui_token: str | None,
    prometheus: int | None,
    out: TextIO,
    state: _Run,
) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        if ui is not None:
            from ..ui import attach_ui

            state.starting = "--ui"
            server = await stack.enter_async_context(
                attach_ui(running, ui, ui_host, token=ui_token)
            )
            state.ui_url = server.url
            print(f"squall: web UI and REST API at {server.url}", file=out, flush=True)
        if prometheus is not None:
            from ..prometheus import serve_prometheus

            state.starting = "--prometheus"
            exporter = serve_prometheus(running, prometheus)
            stack.callback(exporter.close)
            print(
                f"squall: Prometheus metrics at http://127.0.0.1:{exporter.port}/metrics",
                file=out,
                flush=True,
            )
        state.starting = None
        yield


async def run_with_progress(
    topology: StormTopology,
    conf: Mapping[str, Any] | None = None,
    *,
    name: str = "topology",
    timeout: float | None = None,
    interval: float = 1.0,
    out: TextIO | None = None,
    on_complete: Callable[[RunningTopology], Any] | None = None,
    ui: int | None = None,
    ui_host: str = "127.0.0.1",
    ui_token: str | None = None,
    prometheus: int | None = None,
    _state: _Run | None = None,
) -> TopologyInfo:
    """Run until complete (or ``timeout``), showing progress every ``interval`` seconds.

    The line counts what the spouts did (emits and acks, per second) on the topology's
    clock. ``on_complete(running)`` is called before the topology is stopped, to read final
    state. ``ui=PORT`` serves the web UI and REST API on 127.0.0.1 (``ui_host``, with
    ``ui_token`` beyond loopback) while it runs; ``prometheus=PORT`` serves ``/metrics``.
    A kill through the UI ends the run like completion does.
    """
    out = out if out is not None else sys.stderr
    state = _state if _state is not None else _Run()
    line = ProgressLine(out)
    stop = state.attach(asyncio.get_running_loop())
    ran: RunningTopology | None = None
    try:
        async with (
            run_topology(topology, conf, name=name) as running,
            _services(running, ui, ui_host, ui_token, prometheus, out, state),
        ):
            ran = running
            state.deactivate = running.deactivate
            last = state.info = running.info()
            hint = _ExhaustedHint(topology)

            async def show_until(fut: asyncio.Future[Any], *until: asyncio.Future[Any]) -> None:
                """A progress line every ``interval`` until ``fut`` (or one of ``until``)
                is done."""
                nonlocal last
                awaited = [fut, *until]
                while not any(f.done() for f in awaited):
                    await asyncio.wait(awaited, timeout=interval, return_when=FIRST_COMPLETED)
                    info = state.info = running.info()
                    dt = max(info.uptime_secs - last.uptime_secs, 1e-9)
                    (e1, a1, _), (e0, a0, _) = _spout_totals(info), _spout_totals(last)
                    line.show(_progress_line(info, (e1 - e0) / dt, (a1 - a0) / dt))
                    last = info
                    if (said := hint.update(info)) is not None:
                        line.say(said)

            done = asyncio.ensure_future(running.wait_until_complete(timeout))
            try:
                with line.capturing():
                    await show_until(done, stop)
                    timed_out: BaseException | None = None
                    if done.done():
                        timed_out = done.exception()
                        if not isinstance(timed_out, TimeoutError):
                            timed_out = None
                    elif stop.result() == TIMEOUT:  # the wall-clock watchdog (_cmd_run)
                        timed_out = TimeoutError(
                            f"topology {name!r} did not become complete within {timeout} s "
                            f"(pending trees: {running.runtime.pending()})"
                        )
                    if timed_out is not None or not done.done():
                        # A stop request or the timeout: Storm's kill. Spouts are
                        # deactivated and in-flight trees get up to the message timeout to
                        # finish (or time out); a second signal forces an exit meanwhile.
                        state.stopping = True
                        await cancel_and_wait(done)
                        drain = float(running.conf["topology.message.timeout.secs"])
                        if timed_out is not None:
                            line.say(
                                f"squall: {timeout:g} s timeout reached: spouts deactivated, "
                                f"in-flight trees have up to {drain:g} s to finish"
                            )
                        draining = asyncio.ensure_future(running.kill(drain))
                        try:
                            await show_until(draining)
                        finally:
                            await cancel_and_wait(draining)
                        draining.result()
                        if timed_out is not None:
                            raise timed_out
                        state.stopped_by = stop.result()
                if state.stopped_by is None:
                    try:
                        done.result()
                    except SquallError:
                        if running.info().status != "KILLED":  # killed through the UI: an end
                            raise
                    if on_complete is not None:
                        on_complete(running)
            finally:
                await cancel_and_wait(done)
    finally:
        state.over.set()
        if ran is not None:  # stopped now: the table shows the final state
            state.info = ran.info()
    assert state.info is not None
    return state.info


# --- loading a target ----------------------------------------------------------------------


def _parse_conf(items: list[str]) -> dict[str, Any]:
    conf: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise _CliError(f"squall: --conf takes KEY=VALUE, got {item!r}")
        try:
            conf[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            conf[key] = raw
    return conf


def _where(exc: BaseException) -> str:
    """`` at FILE:LINE``: where ``exc`` was raised in user code (the import machinery's
    frozen frames are no help), or the offending line of a ``SyntaxError``."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f" at {os.path.relpath(exc.filename)}:{exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    if not frames:
        return ""
    f = frames[-1]
    return f" at {os.path.relpath(f.filename)}:{f.lineno}"


def _what(exc: BaseException) -> str:
    # A SyntaxError's str() repeats its file and line, which _where gives.
    message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return f"{type(exc).__name__}: {message}"


def _split_target(target: str) -> tuple[str, str]:
    """``MODULE:FUNCTION`` or ``path/to/file.py:FUNCTION`` -> (module or file, function)."""
    where, sep, func_name = target.rpartition(":")  # the last colon: C:\\ paths have one
    if not sep or not where or not func_name:
        raise _CliError(f"squall: expected MODULE:FUNCTION, got {target!r} (or FILE.py:FUNCTION)")
    return where, func_name


def _target_name(target: str) -> str:
    """A topology's default name: its module's (``pkg.word_count`` or ``word_count.py``:
    ``word_count``)."""
    where, _ = _split_target(target)
    return Path(where).stem if where.endswith(".py") else where.rsplit(".", 1)[-1]


def _import_file(path_text: str) -> ModuleType:
    """Import a ``.py`` file as the module named after it, with its directory on
    ``sys.path`` (as ``python FILE`` does), so that its sibling modules import."""
    path = Path(path_text)
    if not path.is_file():
        raise _CliError(f"squall: no file {path_text!r} (looked from {os.getcwd()})")
    name = path.stem
    already = sys.modules.get(name)
    if already is not None and getattr(already, "__file__", None) != str(path.resolve()):
        raise _CliError(
            f"squall: {path_text} is named like the module {name!r}, which is already "
            f"imported; rename the file"
        )
    directory = str(path.resolve().parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(name, path.resolve())
    assert spec is not None and spec.loader is not None  # a .py file always has both
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pickling and dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _load(target: str) -> tuple[StormTopology, dict[str, Any]]:
    module_name, func_name = _split_target(target)
    is_file = module_name.endswith(".py")
    if not is_file and ("/" in module_name or os.sep in module_name):
        raise _CliError(
            f"squall: {module_name!r} is neither a module name nor a .py file; give "
            f"MODULE:FUNCTION (run from the directory that holds it) or FILE.py:FUNCTION"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = _import_file(module_name) if is_file else importlib.import_module(module_name)
    except _CliError:
        raise
    except ModuleNotFoundError as exc:
        if not is_file and exc.name is not None and module_name.startswith(exc.name):
            raise _CliError(
                f"squall: cannot import {module_name!r} ({exc}); run squall from the "
                f"directory that holds it, add that directory to PYTHONPATH, or give "
                f"path/to/file.py:FUNCTION"
            ) from exc
        logging.getLogger("squall.cli").debug("importing %s failed", module_name, exc_info=exc)
        raise _CliError(
            f"squall: importing {module_name!r} failed: {_what(exc)}"
            f"{_where(exc)} (install the missing package; --log-level DEBUG shows the traceback)"
        ) from exc
    except Exception as exc:
        logging.getLogger("squall.cli").debug("importing %s failed", module_name, exc_info=exc)
        raise _CliError(
            f"squall: importing {module_name!r} failed: {_what(exc)}"
            f"{_where(exc)} (--log-level DEBUG shows the traceback)"
        ) from exc
    try:
        func = getattr(module, func_name)
    except AttributeError:
        raise _CliError(f"squall: module {module_name!r} has no {func_name!r}") from None
    try:
        result = func()
    except Exception as exc:
        logging.getLogger("squall.cli").debug("%s raised", target, exc_info=exc)
        raise _CliError(
            f"squall: {target}() raised {type(exc).__name__}: {exc}{_where(exc)} "
            f"(--log-level DEBUG shows the traceback)"
        ) from exc
    conf: dict[str, Any] = {}
    if isinstance(result, tuple):
        result, conf = result[0], dict(result[1] or {})
    if not isinstance(result, StormTopology):
        raise _CliError(
            f"squall: {target} returned {type(result).__name__}; return a StormTopology "
            f"(TopologyBuilder.create_topology()) or (topology, conf)"
        )
    return result, conf


def _failure(info: TopologyInfo, policy: str) -> str | None:
    _, _, failed = _spout_totals(info)
    errors = info.error_count
    reasons = []
    if failed and policy in ("any", "failed"):
        reasons.append(f"{failed:,} tuple tree(s) failed or timed out")
    if errors and policy in ("any", "errors"):
        reasons.append(f"{errors:,} error(s) were reported")
    if not reasons:
        return None
    return f"squall: {' and '.join(reasons)} (exit {EXIT_FAILED}; --fail-on never exits 0)"


def _check_conf(conf: Mapping[str, Any], where: str) -> None:
    try:
        check_config(conf, where)
    except InvalidConfigError as exc:
        raise _CliError(f"squall: {exc}") from None


# --- stopping from outside the loop: signals and the timeout's watchdog --------------------

#: After ``--timeout``, how long user code may hold the event loop (a ``time.sleep`` in
#: ``next_tuple``) before the process exits without draining: a clean stop needs the loop.
HELD_LOOP_GRACE_SECS = 5.0
_EXIT_FOR_SIGNAL = {"SIGINT": EXIT_INTERRUPTED, "SIGTERM": EXIT_TERMINATED}
#: Our packages: a frame in one of them is not user code.
_OURS = ("engine", "acker_kernel", "spark_io", "squall_cli")


def _say(text: str) -> None:
    """One line on stderr's file descriptor: safe in a signal handler, which may have
    interrupted a write to ``sys.stderr`` (a second buffered write would fail as reentrant)."""
    erase = "\r\x1b[2K" if os.isatty(2) else ""  # the progress line, on a terminal
    with contextlib.suppress(OSError):
        os.write(2, f"{erase}{text}\n".encode())


def _exit_now(text: str, code: int) -> NoReturn:
    """End the process at once: no drain, no table, no traceback."""
    _say(text)
    with contextlib.suppress(Exception):  # a signal may have interrupted a write to it
        sys.stdout.flush()
    os._exit(code)


def _held_at(frame: FrameType | None) -> str:
    """Where user code holds the event loop, from the main thread's innermost frame (a
    spout's ``next_tuple`` sleeping, say); empty when no user code is running."""
    ours = [
        os.path.dirname(mod.__file__)
        for name in _OURS
        if (mod := sys.modules.get(name)) is not None and mod.__file__
    ]
    stdlib = sysconfig.get_paths()["stdlib"]

    def kind(f: FrameType) -> str:
        path = f.f_code.co_filename
        if any(path.startswith(d + os.sep) for d in ours):
            return "ours"
        if path.startswith("<") or (path.startswith(stdlib) and "-packages" not in path):
            return "stdlib"
        return "user"

    # From the innermost user frame outward (past our signal handler, if it is running)
    # until a frame of ours: the engine called the outermost user frame of that stretch.
    while frame is not None and kind(frame) != "user":
        frame = frame.f_back
    user = frame
    while frame is not None and kind(frame) != "ours":
        if kind(frame) == "user":
            user = frame
        frame = frame.f_back
    if user is None or frame is None:  # no engine frame below it: not a held loop
        return ""
    where = f"{os.path.relpath(user.f_code.co_filename)}:{user.f_lineno}"
    return f"; user code holds the event loop in {user.f_code.co_name} ({where})"


@contextlib.contextmanager
def _stopped_by_signals(state: _Run) -> Iterator[None]:
    """Ctrl-C (SIGINT) and SIGTERM stop the run as Storm's kill does; a second one, while it
    stops, ends the process at once.

    ``signal.signal``, not ``loop.add_signal_handler``: Python runs this handler in the
    main thread between two bytecodes even while user code holds the loop (a
    ``time.sleep`` in ``next_tuple``), where a loop handler would wait for the loop to
    turn. The first signal only records the request and wakes the loop.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if state.stop_requested is None and not state.stopping:
            state.request_stop(name)
            _say(
                f"squall: {name}: stopping: the spouts stop emitting and in-flight trees get "
                f"up to the message timeout to finish; a second Ctrl-C or SIGTERM exits at once"
            )
            return
        _exit_now(
            f"squall: {name} while stopping: exiting now, without draining or the final "
            f"table{_held_at(frame)}",
            _EXIT_FOR_SIGNAL[name],
        )

    saved = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, previous in saved.items():
            signal.signal(sig, previous)


@contextlib.contextmanager
def _timeout_watchdog(state: _Run, timeout: float | None) -> Iterator[None]:
    """``--timeout`` on the wall clock, kept by a thread: the run's own deadline is a timer
    on the loop, which fires late, or never, while user code holds the loop. At the
    deadline the thread asks for a stop (as a first Ctrl-C does), then pings the loop;
    unanswered for ``HELD_LOOP_GRACE_SECS``, it ends the process (exit 124). Virtual time
    (``simulate``) keeps the run's own deadline."""
    if timeout is None:
        yield
        return

    def watch() -> None:
        if state.over.wait(timeout) or state.virtual:
            return
        if state.stop_requested is None:
            state.request_stop(TIMEOUT)
        while not state.over.is_set():
            pong = threading.Event()
            if state.loop is not None:
                try:
                    state.loop.call_soon_threadsafe(pong.set)
                except RuntimeError:  # closed: the run is over
                    return
            answered = pong.wait(HELD_LOOP_GRACE_SECS)
            if state.over.is_set():
                return
            if not answered:
                frame = sys._current_frames().get(threading.main_thread().ident or 0)
                _exit_now(
                    f"squall: --timeout {timeout:g} s passed and the event loop has not turned "
                    f"for {HELD_LOOP_GRACE_SECS:g} s{_held_at(frame)}: exiting now, without "
                    f"draining or the final table",
                    EXIT_TIMEOUT,
                )
            state.over.wait(1.0)

    threading.Thread(target=watch, name="squall-timeout-watchdog", daemon=True).start()
    try:
        yield
    finally:
        state.over.set()


def _cmd_run(args: argparse.Namespace, runner: Callable[[Coroutine[Any, Any, Any]], Any]) -> int:
    for option, value in (("--ui-host", args.ui_host), ("--token", args.token)):
        if value is not None and args.ui is None:
            raise _CliError(f"squall: {option} is for the web UI: add --ui [PORT] or drop it")
    overrides = _parse_conf(args.conf)
    _check_conf(overrides, "--conf: ")
    topology, conf = _load(args.target)
    _check_conf(conf, f"the conf {args.target} returned: ")
    conf.update(overrides)
    name = args.name or _target_name(args.target)
    state = _Run()
    token = args.token or os.environ.get("SQUALL_UI_TOKEN") or None
    coro = run_with_progress(
        topology,
        conf,
        name=name,
        timeout=args.timeout,
        interval=args.interval,
        ui=args.ui,
        ui_host=args.ui_host or "127.0.0.1",
        ui_token=token,
        prometheus=args.prometheus,
        _state=state,
    )
    code = 0
    try:
        with _stopped_by_signals(state), _timeout_watchdog(state, args.timeout):
            info = runner(coro)
        if state.stopped_by is not None:
            code = _EXIT_FOR_SIGNAL[state.stopped_by]
            what = "interrupted" if state.stopped_by == "SIGINT" else "terminated"
            print(f"squall: {what} ({state.stopped_by}; drained and stopped)", file=sys.stderr)
    except KeyboardInterrupt:  # a Ctrl-C before the handlers were in place
        print("\nsquall: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
        info = state.info
    except TimeoutError as exc:
        print(f"squall: {exc} (--timeout {args.timeout:g})", file=sys.stderr)
        code = EXIT_TIMEOUT
        info = state.info
    except (SquallError, ValueError, OSError) as exc:
        if state.starting is not None:  # a port in use, a host that needs a token: usage
            hint = " (squall run: --token TOKEN)" if "token" in str(exc) and not token else ""
            raise _CliError(f"squall: {state.starting}: {exc}{hint}") from None
        print(f"squall: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if info is not None:
        print(format_stats(info), flush=True)
        if code == 0:
            reason = _failure(info, args.fail_on)
            if reason is not None:
                print(reason, file=sys.stderr)
                code = EXIT_FAILED
    return code


# --- visualize -----------------------------------------------------------------------------


def _cmd_visualize(args: argparse.Namespace) -> int:
    from ..ui import topology_graph

    topology, _ = _load(args.target)
    name = _target_name(args.target)
    graph = topology_graph(topology)
    render = {"svg": lambda: graph.to_svg(title=name), "dot": lambda: graph.to_dot(name)}
    if args.output == "-":
        sys.stdout.write(render[args.format or "dot"]())
        return 0
    output = args.output
    if output is not None and not output.endswith(("/", os.sep)) and not Path(output).is_dir():
        fmt = args.format or ("dot" if output.endswith((".dot", ".gv")) else "svg")
        targets = [(Path(output), fmt)]
    else:  # a directory: the default one, or the one given
        folder = Path(output) if output is not None else visualize_dir()
        formats = [args.format] if args.format else ["svg", "dot"]
        targets = [(folder / f"{name}.{fmt}", fmt) for fmt in formats]
    for path, fmt in targets:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render[fmt](), encoding="utf-8")
        except OSError as exc:
            raise _CliError(f"squall: cannot write {path}: {exc.strerror or exc}") from None
        print(f"squall: wrote {path} ({fmt}, {len(graph.nodes)} components)")
    return 0


def visualize_dir() -> Path:
    """Where ``squall visualize`` writes without ``-o``: a folder of its own in the
    temporary directory, never the current one (a source tree, most often)."""
    return Path(tempfile.gettempdir()).resolve() / "squall-visualize"


# --- the parser ----------------------------------------------------------------------------

_TARGET_HELP = (
    "MODULE:FUNCTION or path/to/file.py:FUNCTION; FUNCTION returns a topology or (topology, conf)"
)
_CONF_HELP = (
    "set a topology config key, e.g. --conf topology.max.spout.pending=1000 "
    "(repeatable; VALUE is read as a Python literal - int, float, True/False, None, "
    "list - or else kept as a string; a mistyped topology.* key is an error naming the "
    "closest key; overrides the conf returned by FUNCTION)"
)


def _interval(text: str) -> float:
    """``--interval``: more than a few lines a second is a flood nobody reads."""
    value = positive_float(text)
    if value < MIN_INTERVAL_SECS:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_INTERVAL_SECS:g} s, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(
        prog="squall",
        description=__doc__.split("\n")[0].replace("``", ""),
        epilog="'squall COMMAND --help' describes each command.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="run a topology in this process until it completes",
        description="Run MODULE:FUNCTION's topology here, with a progress line on stderr "
        "(spout emits and acks per second, on the topology's clock) and a stats table on "
        "stdout at the end, also after Ctrl-C, SIGTERM and --timeout, which deactivate the "
        "spouts and let in-flight trees finish (up to the message timeout); a second Ctrl-C "
        "or SIGTERM exits at once. Exit status: 0 done; 1 tuple trees failed or errors were "
        "reported (see --fail-on); 2 bad usage or a target that cannot be loaded; 124 "
        "--timeout reached; 130 Ctrl-C; 143 SIGTERM.",
    )
    run.add_argument("target", help=_TARGET_HELP)
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help=_CONF_HELP)
    run.add_argument("--name", default=None, help="the topology's name (default: the module's)")
    run.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        help="seconds (wall clock) before stopping as Ctrl-C does (exit 124)",
    )
    run.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default="any",
        help="exit 1 when: tuple trees failed or errors were reported (any, the default), "
        "only trees failed (failed), only errors (errors), or never",
    )
    run.add_argument(
        "--ui",
        type=int,
        nargs="?",
        const=DEFAULT_UI_PORT,
        default=None,
        metavar="PORT",
        help=f"serve the web UI and REST API while running (default port {DEFAULT_UI_PORT}; "
        f"0: any free port)",
    )
    run.add_argument(
        "--ui-host",
        default=None,
        help="address the UI binds (with --ui; default 127.0.0.1; any other needs --token)",
    )
    run.add_argument(
        "--token", default=None, help="the UI's token (with --ui; or env SQUALL_UI_TOKEN)"
    )
    run.add_argument(
        "--prometheus",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics (the metrics extra)",
    )
    run.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        help="logging level of the engine and your components (default %(default)s)",
    )
    run.add_argument(
        "--interval",
        type=_interval,
        default=1.0,
        help=f"seconds between progress lines (default %(default)s, at least "
        f"{MIN_INTERVAL_SECS:g})",
    )

    add_client_commands(sub)
    p = sub.add_parser(
        "submit",
        help="run a topology here (--runner local) or on Spark (--runner spark)",
        description="--runner local: 'squall run' with the same arguments. --runner spark: "
        "one Spark Structured Streaming query (needs the spark extra); "
        "'squall submit --runner spark --help' lists its arguments.",
    )
    p.add_argument("--runner", default="local", help="local, or a runner installed by name")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the runner's arguments")
    p = sub.add_parser("visualize", help="write a topology's graph as SVG and DOT")
    p.add_argument("target", help=_TARGET_HELP)
    p.add_argument(
        "-o",
        "--output",
        default=None,
        help="FILE.svg or FILE.dot to write, a DIR/ to write both into, or '-' for stdout "
        "(default: NAME.svg and NAME.dot in <temporary directory>/squall-visualize; the "
        "paths written are printed)",
    )
    p.add_argument("--format", choices=["svg", "dot"], default=None)
    return parser


def _cmd_submit(argv: list[str], runner: Callable[[Coroutine[Any, Any, Any]], Any]) -> int:
    """``squall submit [--runner local|spark] ARGS...``: ARGS go on, in order, to ``squall
    run`` or to the Spark runner's own parser."""
    chosen = "local"
    rest: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--runner":
            chosen = next(it, "")
        elif arg.startswith("--runner="):
            chosen = arg.partition("=")[2]
        else:
            rest.append(arg)
    if chosen == "local":
        return main(["run", *rest], runner=runner)
    # Found by name among the installed runners: spark_io depends on the engine, never the
    # reverse.
    found = {ep.name: ep for ep in importlib.metadata.entry_points(group=RUNNERS_GROUP)}
    if chosen not in found:
        raise _CliError(
            f"squall submit: --runner must be one of {', '.join(['local', *sorted(found)])}, "
            f"got {chosen!r}"
            + ("; --runner spark needs pip install 'squall[spark]'" if chosen == "spark" else "")
        )
    try:
        submit = found[chosen].load()
    except ImportError as exc:
        raise _CliError(
            f"squall: --runner {chosen} cannot load its module ({exc}); "
            f"pip install 'squall[{chosen}]'"
        ) from exc
    code: int = submit(rest)
    return code


def main(
    argv: list[str] | None = None,
    *,
    runner: Callable[[Coroutine[Any, Any, Any]], Any] = run_sync,
) -> int:
    """The ``squall`` command; ``runner`` runs ``squall run``'s coroutine (tests pass
    ``engine.testing.simulate`` to run it in virtual time)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["submit"] and not {"-h", "--help"} & set(argv[1:2]):
        try:
            return _cmd_submit(argv[1:], runner)
        except _CliError as exc:
            print(exc, file=sys.stderr)
            return exc.code
    args = _parser().parse_args(argv)
    if args.command == "run":
        logging.basicConfig(
            level=args.log_level,
            format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
            stream=_CurrentStderr(),
            force=True,
        )
    try:
        if args.command == "run":
            return _cmd_run(args, runner)
        if args.command == "visualize":
            return _cmd_visualize(args)
        return run_client(args)
    except _CliError as exc:
        print(exc, file=sys.stderr)
        return exc.code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
