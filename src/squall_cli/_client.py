"""The client commands: ``list``, ``kill``, ``activate``, ``deactivate``, ``rebalance``.

Each is one or a few requests to the REST API of a process started with ``squall run --ui``
(or ``run_topology(..., ui=PORT)``), like Storm's CLI talking to Nimbus. They use only the
standard library: a client that imported the engine (Numba, numpy) would spend seconds
loading a stream processor to send one HTTP request.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ._errors import EXIT_FAILED, EXIT_INTERRUPTED, CliError

__all__ = [
    "CLIENT_COMMANDS",
    "DEFAULT_UI_PORT",
    "add_client_commands",
    "positive_float",
    "run_client",
]

#: Storm UI's port, where ``--ui`` serves and the client commands look by default.
DEFAULT_UI_PORT = 8080
CLIENT_COMMANDS = ("list", "kill", "activate", "deactivate", "rebalance")


def positive_float(text: str) -> float:
    """An argparse type: seconds, finite and above 0 (a 0 or negative wait is a typo)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, got {text!r}")
    return value


# --- requests ------------------------------------------------------------------------------


def _base_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port  # noqa: B018 - read for its check: a port must be a number in 0..65535
    except ValueError as exc:
        raise CliError(f"squall: --url {url!r} is not a usable address ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(
            f"squall: --url takes the UI's address, such as "
            f"http://127.0.0.1:{DEFAULT_UI_PORT}, got {url!r}"
        )
    return url.rstrip("/")


def _token(args: argparse.Namespace) -> str | None:
    return args.token or os.environ.get("SQUALL_UI_TOKEN") or None


def _request(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    base = _base_url(args.url)
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    token = _token(args)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=args.http_timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            if token:
                raise CliError(
                    f"squall: wrong token: the UI at {base} refused it; give the token it was "
                    f"started with (--token or SQUALL_UI_TOKEN)"
                ) from None
            raise CliError(
                f"squall: the UI at {base} needs a token: give --token or set SQUALL_UI_TOKEN"
            ) from None
        try:
            message = json.loads(exc.read())["errorMessage"]
        except Exception:
            message = f"{exc.code} {exc.reason}"
        raise CliError(f"squall: {message}", EXIT_FAILED) from None
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(
            f"squall: no Squall UI answers at {base} ({reason}); start the topology with "
            f"'squall run ... --ui' or give --url",
            EXIT_FAILED,
        ) from None
    except (ValueError, http.client.HTTPException) as exc:  # a URL urllib cannot use
        raise CliError(f"squall: --url {args.url!r} is not a usable address ({exc})") from None
    try:
        return json.loads(raw or b"null")
    except ValueError:
        raise CliError(
            f"squall: {base} answered {method} {path} with something that is not JSON: is it "
            f"a Squall UI? (give --url)",
            EXIT_FAILED,
        ) from None


def _topology_path(name: str) -> str:
    return "/api/v1/topology/" + urllib.parse.quote(name, safe="")


def _summary(args: argparse.Namespace) -> list[dict[str, Any]]:
    answer = _request(args, "GET", "/api/v1/topology/summary")
    if not isinstance(answer, dict) or not isinstance(answer.get("topologies"), list):
        raise CliError(
            f"squall: {_base_url(args.url)} answered without a topology summary: is it a "
            f"Squall UI? (give --url)",
            EXIT_FAILED,
        )
    topologies: list[dict[str, Any]] = answer["topologies"]
    return topologies


# --- the commands --------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    topologies = _summary(args)
    if not topologies:
        print("no topologies running")
        return 0
    print(
        f"{'name':<24}{'status':<11}{'uptime':>12}{'executors':>11}{'tasks':>7}"
        f"{'emitted':>13}{'acked':>13}{'failed':>9}{'errors':>8}"
    )
    for t in topologies:
        print(
            f"{t['name']:<24}{t['status']:<11}{t['uptime']:>12}{t['executorsTotal']:>11}"
            f"{t['tasksTotal']:>7}{t['emitted']:>13,}{t['acked']:>13,}{t['failed']:>9,}"
            f"{t['errors']:>8,}"
        )
    return 0


def _cmd_simple(args: argparse.Namespace) -> int:
    res = _request(args, "POST", f"{_topology_path(args.name)}/{args.command}")
    print(f"squall: {args.command} {args.name!r}: {res['status']} (now {res['topologyStatus']})")
    return 0


def _cmd_kill(args: argparse.Namespace) -> int:
    path = f"{_topology_path(args.name)}/kill"
    if args.wait is not None:
        path += f"/{args.wait:g}"
    res = _request(args, "POST", path)
    wait = float(res.get("waitSeconds", args.wait or 0))
    print(f"squall: killing {args.name!r}: deactivated, stops within {wait:g} s", flush=True)
    deadline = time.monotonic() + wait + args.http_timeout
    while time.monotonic() < deadline:
        try:
            found = [t for t in _summary(args) if t["name"] == args.name]
        except CliError:  # the process serving the UI ended with its topology
            found = []
        if not found or found[0]["status"] in ("KILLED", "COMPLETED"):
            print(f"squall: {args.name!r} killed")
            return 0
        time.sleep(0.2)
    raise CliError(f"squall: {args.name!r} did not stop within {wait:g} s", EXIT_FAILED)


def _cmd_rebalance(args: argparse.Namespace) -> int:
    executors: dict[str, int] = {}
    for item in args.executors:
        cid, sep, raw = item.rpartition("=")
        if not sep or not cid or not raw.isdigit() or int(raw) <= 0:
            raise CliError(f"squall: -e takes COMPONENT=N with N a positive integer, got {item!r}")
        executors[cid] = int(raw)
    if args.num_workers is not None and args.num_workers != 1:
        raise CliError(
            f"squall: a topology runs in one process, so -n (workers) can only be 1, got "
            f"{args.num_workers}; spread a component's tasks with -e COMPONENT=N"
        )
    if not executors:
        raise CliError("squall: rebalance needs at least one -e COMPONENT=N")
    options: dict[str, Any] = {"executors": executors}
    if args.num_workers is not None:
        options["numWorkers"] = args.num_workers
    path = f"{_topology_path(args.name)}/rebalance"
    if args.wait is not None:
        path += f"/{args.wait:g}"
    res = _request(args, "POST", path, {"rebalanceOptions": options})
    spread = ", ".join(f"{c}={n}" for c, n in res["executors"].items())  # as applied
    print(f"squall: rebalanced {args.name!r}: {spread} executors (now {res['topologyStatus']})")
    for note in res.get("notes", []):
        print(f"squall: {note}")
    return 0


_COMMANDS = {
    "list": _cmd_list,
    "kill": _cmd_kill,
    "activate": _cmd_simple,
    "deactivate": _cmd_simple,
    "rebalance": _cmd_rebalance,
}


def run_client(args: argparse.Namespace) -> int:
    """Run the client command ``args.command``; what goes wrong is one line on stderr."""
    try:
        return _COMMANDS[args.command](args)
    except CliError as exc:
        print(exc, file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("\nsquall: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


# --- the parser ----------------------------------------------------------------------------


def _client_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--url",
        default=f"http://127.0.0.1:{DEFAULT_UI_PORT}",
        help="the UI of the process running the topology (default: %(default)s)",
    )
    p.add_argument("--token", default=None, help="the UI's token (or env SQUALL_UI_TOKEN)")
    p.add_argument(
        "--http-timeout", type=positive_float, default=60.0, help="seconds to wait for an answer"
    )


def add_client_commands(sub: Any) -> None:
    """Add the client commands to ``sub`` (an ``ArgumentParser``'s subparsers)."""
    p = sub.add_parser("list", help="list the topologies of a running process (its --ui)")
    _client_options(p)
    p = sub.add_parser("kill", help="deactivate, wait, then stop a running topology")
    p.add_argument("name")
    p.add_argument(
        "--wait",
        "-w",
        type=_non_negative_float,
        default=None,
        metavar="SECS",
        help="seconds between deactivation and shutdown (default: its message timeout)",
    )
    _client_options(p)
    for command, what in (
        ("activate", "let a topology's spouts emit again"),
        ("deactivate", "stop a topology's spouts from emitting (in-flight trees finish)"),
    ):
        p = sub.add_parser(command, help=what)
        p.add_argument("name")
        _client_options(p)
    p = sub.add_parser(
        "rebalance",
        help="spread a component's tasks over N executors",
        description="Storm's rebalance: the topology is deactivated and drained, the "
        "component's tasks are spread over N executors, and it is activated again.",
    )
    p.add_argument("name")
    p.add_argument(
        "-e",
        "--executors",
        action="append",
        default=[],
        metavar="COMPONENT=N",
        help="executors for a component (repeatable)",
    )
    p.add_argument(
        "-n",
        "--num-workers",
        type=int,
        default=None,
        metavar="N",
        help="Storm's worker count; one process here, so only 1 is accepted",
    )
    p.add_argument(
        "--wait",
        "-w",
        type=_non_negative_float,
        default=None,
        metavar="SECS",
        help="deactivated wait first",
    )
    _client_options(p)
