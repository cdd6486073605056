"""``main``: the client commands here, every other command in ``engine._command.cli``."""

from __future__ import annotations

import argparse
import importlib
import sys

from ._client import CLIENT_COMMANDS, add_client_commands, run_client

__all__ = ["main"]

#: Where ``run``, ``visualize``, ``submit`` and the full help live; loaded by name, when
#: needed: it imports the engine.
ENGINE_CLI = "engine._command.cli"


def main(argv: list[str] | None = None) -> int:
    """The ``squall`` command."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] and argv[0] in CLIENT_COMMANDS:
        parser = argparse.ArgumentParser(prog="squall")
        sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        add_client_commands(sub)
        return run_client(parser.parse_args(argv))
    code: int = importlib.import_module(ENGINE_CLI).main(argv)
    return code
