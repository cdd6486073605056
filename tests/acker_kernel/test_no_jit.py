"""The kernel tests again with ``NUMBA_DISABLE_JIT=1``: the kernels run as plain Python, so
line coverage sees them and a Numba-only quirk cannot hide a logic error (or the reverse).

Numba reads the variable at import, hence a subprocess; the property tests run fewer
examples there (``ACKER_KERNEL_EXAMPLES``), the interpreted kernels being slow.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import acker_kernel

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MODULES = [
    "test_batch.py",
    "test_interleavings.py",
    "test_ledger.py",
    "test_properties.py",
    "test_state_machine.py",
]


def test_the_kernel_tests_pass_without_the_jit() -> None:
    src = str(Path(acker_kernel.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "NUMBA_DISABLE_JIT": "1",
        "ACKER_KERNEL_EXAMPLES": "20",
        "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
    }
    check = (
        "from acker_kernel import _batch, _kernel; "
        "assert type(_kernel._apply).__name__ == type(_batch._ack_ops).__name__ == 'function'"
    )
    command = [sys.executable, "-c", check]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr  # the kernels really are plain Python there
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"]
    command += [str(HERE / name) for name in MODULES]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
