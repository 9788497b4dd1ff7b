"""The one way the tests run the bench CLI: ``python -m bench ARGS`` with this venv's Python (or
another: a bare Python 3.9), from the repository root, without the user's SGLANG_API_KEY (a
test's key is its own, given in ``env``), matplotlib drawing off-screen. The timeout is a hang
guard, not a speed bound."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT


def bench(*args, env=None, python=sys.executable, timeout=300):
    """``python -m bench ARGS`` (each argument str()'d); the CompletedProcess, text captured."""
    e = dict(os.environ, MPLBACKEND="Agg")
    e.pop("SGLANG_API_KEY", None)
    e.update(env or {})
    return subprocess.run([python, "-m", "bench", *map(str, args)], cwd=str(ROOT), env=e,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
