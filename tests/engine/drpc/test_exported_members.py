"""engine.drpc's public surface is what it claims; aiohttp is imported only on demand."""

import os
import subprocess
import sys
from pathlib import Path

import engine.drpc
from engine.drpc import _errors

from ..coordination.surface import check_error_tree, check_package

SRC = Path(__file__).resolve().parents[3] / "src"


def test_public_surface() -> None:
    check_package(
        engine.drpc,
        lazy=frozenset({"DRPCHttpServer", "make_drpc_app"}),
        internal=frozenset(
            {
                "ARGS_STREAM",
                "DEFAULT_MAX_BODY_BYTES",
                "DRPC_SPOUT_IDLE_WAIT_SECS",
                "JOIN_EXPIRY_TICK_SECS",
                "lookup",
                "note_bolt_error",
            }
        ),
    )
    check_error_tree(_errors)
    assert set(_errors.__all__) <= set(engine.drpc.__all__)


def test_the_http_library_is_imported_only_when_asked_for() -> None:
    script = (
        "import sys\n"
        "import engine.drpc\n"
        "from engine.drpc import LocalDRPC, LinearDRPCTopologyBuilder\n"
        "assert 'aiohttp' not in sys.modules\n"
        "sys.modules['aiohttp'] = None  # as if it were not installed\n"
        "try:\n"
        "    engine.drpc.DRPCHttpServer\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "engine.drpc.DRPCHttpServer needs aiohttp; install it with the 'drpc' extra "
        "(pip install 'squall[drpc]')\n"
    )
