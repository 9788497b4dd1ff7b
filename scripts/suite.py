#!/usr/bin/env python3
"""The whole test suite, `make test` (and so .ci/run): set-up, then pytest and Molecule side by
side, with each phase's wall time printed at the end.

    python3 scripts/suite.py        (make test; PYTEST_JOBS, MOLECULE_JOBS override the job counts)

Phases:
  set-up     make venv podman local-host dist, and the contract venv (scripts/contract-venv.sh):
             everything the tiers need, installed by the repo's own scripts (cached when present)
  pytest     every tier with --no-skips (a skipped test fails the run), in PYTEST_JOBS xdist
             workers; each container of the container tier serves its files on one worker
  molecule   every scenario, MOLECULE_JOBS at a time (scripts/molecule_run.py)

pytest and Molecule use disjoint containers (sglang-local*, sglang-molecule-*), so they run at
the same time: both are mostly Ansible waiting on containers and emulated decode, and together
they keep the two cores busy that either alone leaves half idle. Their output goes to
out/pytest.log and out/molecule/ (one log per scenario); the terminal gets Molecule's start/end
lines, then pytest's summary (failures, the ten slowest tests) and Molecule's table. Both run to
the end even when the other failed, so one run shows every failure; the exit status is 1 when any
phase failed. Standard library only: it runs before the venv exists.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")
OUT = ROOT / "out"
PYTEST_LOG = OUT / "pytest.log"
# Picked by measurement on the 2-core CI machine kind (README, "Test suite").
PYTEST_JOBS = 5


def say(msg):
    print("[suite] %s" % msg, flush=True)


def setup():
    for cmd in (["make", "--no-print-directory", "venv", "podman", "local-host", "dist"],
                ["bash", "scripts/contract-venv.sh"]):
        # contract-venv.sh's stdout is its KEY=value answer; its progress goes to stderr
        quiet = subprocess.DEVNULL if cmd[-1].endswith("contract-venv.sh") else None
        rc = subprocess.call(cmd, cwd=str(ROOT), stdout=quiet)
        if rc != 0:
            return rc
    return 0


def pytest_summary(path):
    """pytest's closing part: failures, slowest durations, the short summary."""
    lines = path.read_text(errors="replace").splitlines()
    for marker in ("= FAILURES =", "= ERRORS =", "slowest 10 durations", "short test summary"):
        start = [i for i, ln in enumerate(lines) if marker in ln]
        if start:
            return lines[max(0, start[0] - 1):]
    return lines[-40:]


def main():
    results = []
    t_all = time.monotonic()
    say("===== set-up")
    t0 = time.monotonic()
    rc = setup()
    results.append(("set-up", rc, time.monotonic() - t0))
    if rc == 0:
        OUT.mkdir(exist_ok=True)
        jobs = os.environ.get("PYTEST_JOBS") or str(PYTEST_JOBS)
        pytest_cmd = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-n", jobs, "--no-skips",
                      "--durations=10", "tests"]
        say("===== pytest (%s; output: out/pytest.log) and molecule, side by side" % " ".join(pytest_cmd))
        t0 = time.monotonic()
        with open(PYTEST_LOG, "wb") as log:
            pytest = subprocess.Popen(pytest_cmd, cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL)
            molecule_rc = subprocess.call([PY, "scripts/molecule_run.py"], cwd=str(ROOT))
            molecule_took = time.monotonic() - t0
            pytest_rc = pytest.wait()
        pytest_took = time.monotonic() - t0
        print("\n[suite] ===== pytest summary (whole output: out/pytest.log)")
        print("\n".join(pytest_summary(PYTEST_LOG)))
        results += [("pytest", pytest_rc, pytest_took), ("molecule", molecule_rc, molecule_took)]
    total = time.monotonic() - t_all
    print("\n[suite] phase times (pytest and molecule ran side by side)")
    print("  %-10s %-16s %9s" % ("phase", "result", "time (s)"))
    for name, rc, took in results:
        print("  %-10s %-16s %9.0f" % (name, "passed" if rc == 0 else "FAILED (exit %d)" % rc, took))
    failed = [r for r in results if r[1] != 0]
    print("  %-10s %-16s %9.0f  (%.1f min)" % ("total", "FAILED" if failed else "passed", total,
                                                total / 60))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
