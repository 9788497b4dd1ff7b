#!/usr/bin/env python3
"""The whole test suite, `make test` (and so .ci/run): set-up, pytest, Molecule, with each phase's
wall time printed at the end.

    python3 scripts/suite.py        (make test; PYTEST_JOBS, MOLECULE_JOBS override the job counts)

Phases:
  set-up     make venv podman local-host dist, and the contract venv (scripts/contract-venv.sh):
             everything the tiers need, installed by the repo's own scripts (cached when present)
  pytest     every tier with --no-skips (a skipped test fails the run), in PYTEST_JOBS xdist
             workers; the container tier stays on one worker (one local container, tests in order)
  molecule   every scenario, MOLECULE_JOBS at a time (scripts/molecule_run.py)

pytest and Molecule run even when the other failed, so one run shows every failure; the exit
status is 1 when any phase failed. Standard library only: it runs before the venv exists.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")
# Picked by measurement on the 2-core CI machine kind (README, "Test suite").
PYTEST_JOBS = 4


def phases():
    jobs = os.environ.get("PYTEST_JOBS") or str(PYTEST_JOBS)
    return [
        ("set-up", [["make", "--no-print-directory", "venv", "podman", "local-host", "dist"],
                    ["bash", "scripts/contract-venv.sh"]]),
        ("pytest", [[PY, "-m", "pytest", "-p", "no:cacheprovider", "-n", jobs, "--dist", "loadgroup",
                     "--no-skips", "--durations=10", "tests"]]),
        ("molecule", [[PY, "scripts/molecule_run.py"]]),
    ]


def main():
    results = []
    t_all = time.monotonic()
    for name, commands in phases():
        print("\n[suite] ===== %s: %s" % (name, " && ".join(" ".join(c) for c in commands)), flush=True)
        t0 = time.monotonic()
        rc = 0
        for cmd in commands:
            # contract-venv.sh's stdout is its KEY=value answer; its progress goes to stderr
            quiet = subprocess.DEVNULL if cmd[-1].endswith("contract-venv.sh") else None
            rc = subprocess.call(cmd, cwd=str(ROOT), stdout=quiet)
            if rc != 0:
                break
        took = time.monotonic() - t0
        results.append((name, rc, took))
        result = "passed" if rc == 0 else "FAILED (exit %d)" % rc
        print("[suite] ===== %s: %s in %.0f s" % (name, result, took), flush=True)
        if name == "set-up" and rc != 0:
            break  # nothing can run without it
    total = time.monotonic() - t_all
    print("\n[suite] phase times")
    print("  %-10s %-16s %9s" % ("phase", "result", "time (s)"))
    for name, rc, took in results:
        print("  %-10s %-16s %9.0f" % (name, "passed" if rc == 0 else "FAILED (exit %d)" % rc, took))
    failed = [r for r in results if r[1] != 0]
    print("  %-10s %-16s %9.0f  (%.1f min)" % ("total", "FAILED" if failed else "passed", total,
                                                total / 60))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
