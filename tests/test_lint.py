"""Static checks of the repository's Python: ruff (pyflakes, pycodestyle, bugbear, pyupgrade to
3.9 - the engine runs on the target host's Python 3.9+)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_ruff_clean():
    ruff = Path(sys.executable).parent / "ruff"
    p = subprocess.run([str(ruff), "check", "--output-format", "concise", "."], cwd=str(ROOT),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_engine_is_python39_and_stdlib_only():
    """No import outside the standard library in the code shipped to the target host."""
    stdlib = set(sys.stdlib_module_names)
    for path in (ROOT / "plugins" / "module_utils" / "sglang_perf").rglob("*.py"):
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("import", "from") and not words[1].startswith("."):
                assert words[1].split(".")[0] in stdlib | {"__future__"}, "%s: %s" % (path, line)
