"""The ``squall`` command's front door, on the standard library only.

``squall list``, ``kill``, ``activate``, ``deactivate`` and ``rebalance`` talk to the REST
API of a running process: they need ``urllib`` and ``json``, not the engine, so they are
answered here and start in a fraction of a second (importing the engine loads Numba and
numpy, which takes seconds). ``run``, ``visualize``, ``submit`` and the full ``--help`` go
to ``engine._command.cli``, loaded by name when one of them is asked for; it builds its parser with
the client commands defined here, so each command is declared once.
"""

from ._client import (
    CLIENT_COMMANDS,
    DEFAULT_UI_PORT,
    add_client_commands,
    positive_float,
    run_client,
)
from ._errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    CliError,
)
from ._main import main

__all__ = [
    "CLIENT_COMMANDS",
    "DEFAULT_UI_PORT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "CliError",
    "add_client_commands",
    "main",
    "positive_float",
    "run_client",
]
