#!/usr/bin/env python3
"""The whole test suite, `make test` (and so .ci/run): set-up, pytest, Molecule, with each phase's
wall time printed at the end.

    python3 scripts/suite.py        (make test; PYTEST_JOBS, MOLECULE_JOBS override the job counts)

Phases:
  set-up     make venv podman chromium promtool prometheus local-host dist, and the contract venvs
             (scripts/contract-venv.sh, scripts/contract-venv-vllm.sh): everything the tiers
             need, installed by the repo's own scripts (cached when present)
  pytest     every tier with --no-skips (a skipped test fails the run), in PYTEST_JOBS xdist
             workers; each container of the container tier serves its files on one worker; every
             test's time in out/pytest/junit.xml (a container's files add up to its worker's time)
  molecule   every scenario, MOLECULE_JOBS at a time (scripts/molecule_run.py)

pytest and Molecule run one after the other: side by side (they use disjoint containers) they
drove the 2-core machine to a load of 15 and both slowed down. Molecule runs even when pytest
failed, so one run shows every failure; the exit status is 1 when any phase failed. Standard
library only: it runs before the venv exists.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")
# Picked by measurement on the 2-core CI machine kind (docs/testing.md, "Times").
PYTEST_JOBS = 5


def say(msg):
    print("[suite] %s" % msg, flush=True)


def setup():
    for cmd in (["make", "--no-print-directory", "venv", "podman", "chromium", "promtool", "prometheus",
                 "local-host", "dist"],
                ["bash", "scripts/contract-venv.sh"], ["bash", "scripts/contract-venv-vllm.sh"]):
        # a contract venv script's stdout is its KEY=value answer; its progress goes to stderr
        quiet = subprocess.DEVNULL if cmd[0] == "bash" else None
        rc = subprocess.call(cmd, cwd=str(ROOT), stdout=quiet)
        if rc != 0:
            return rc
    return 0


def main():
    results = []
    t_all = time.monotonic()
    say("===== set-up")
    t0 = time.monotonic()
    rc = setup()
    results.append(("set-up", rc, time.monotonic() - t0))
    if rc == 0:
        jobs = os.environ.get("PYTEST_JOBS") or str(PYTEST_JOBS)
        for name, cmd in (("pytest", [PY, "-m", "pytest", "-p", "no:cacheprovider", "-n", jobs, "--no-skips",
                                      "--durations=25", "--junitxml=out/pytest/junit.xml", "tests"]),
                          ("molecule", [PY, "scripts/molecule_run.py"])):
            say("===== %s: %s" % (name, " ".join(cmd)))
            t0 = time.monotonic()
            rc = subprocess.call(cmd, cwd=str(ROOT), stdin=subprocess.DEVNULL)
            results.append((name, rc, time.monotonic() - t0))
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
