"""The command's exit statuses and its one-line error."""

from __future__ import annotations

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "CliError",
]

#: Tuple trees failed or errors were reported (``squall run --fail-on``), or a request failed.
EXIT_FAILED = 1
#: Bad usage: a bad option or value, a target that cannot be loaded, a port in use.
EXIT_USAGE = 2
#: ``--timeout`` reached (as coreutils' ``timeout``).
EXIT_TIMEOUT = 124
#: Ctrl-C (SIGINT): 128 + 2, as a shell reports a process a SIGINT ended.
EXIT_INTERRUPTED = 130
#: SIGTERM: 128 + 15.
EXIT_TERMINATED = 143


class CliError(Exception):
    """A one-line error for the user; ``main`` prints it and exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code
