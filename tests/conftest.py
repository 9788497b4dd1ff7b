"""Shared fixtures: real emulator processes on loopback, the repo's paths on sys.path; the test
tiers (markers in pyproject.toml) and the --no-skips guard `make test` runs with."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULE_UTILS = ROOT / "plugins" / "module_utils"
for p in (str(ROOT), str(MODULE_UTILS)):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench.launch import EmulatorProcess, free_port  # noqa: E402,F401  (re-exported)
from bench.profiles import MODEL_ARGS, PROFILE_ARGS  # noqa: E402,F401  (re-exported)


def pytest_addoption(parser):
    parser.addoption("--no-skips", action="store_true",
                     help="fail the run when any test was skipped (make test: every tier must run)")


_local_host = {}


def local_host_problem():
    """Why the local container cannot serve a `container` test, or None (asked once per process)."""
    if "problem" not in _local_host:
        name = os.environ.get("LOCAL_HOST_NAME", "sglang-local")
        p = subprocess.run([str(ROOT / "scripts" / "local-host.sh"), "status"], cwd=str(ROOT),
                           capture_output=True, text=True)
        _local_host["problem"] = None if p.returncode == 0 else (
            "this test needs the local container %s, which is not running (%s): run `make local-host` "
            "(make test starts it), or leave the container tier out: pytest -m 'not container'"
            % (name, (p.stdout + p.stderr).strip().splitlines()[0] if (p.stdout + p.stderr).strip()
               else "exit %d" % p.returncode))
    return _local_host["problem"]


def pytest_collection_modifyitems(items):
    """Under xdist (--dist loadgroup) each tier that shares one resource stays on one worker, in
    file order: the container tier (one local container, tests that build on each other's
    deploys) and the contract tier (one venv build)."""
    for item in items:
        for tier in ("container", "contract"):
            if item.get_closest_marker(tier):
                item.add_marker(pytest.mark.xdist_group(tier))
                break


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("container")
    if marker is not None and not marker.kwargs.get("starts_it"):
        problem = local_host_problem()
        if problem:
            pytest.fail(problem, pytrace=False)


_skipped = []


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append("%s: %s" % (report.nodeid, report.longrepr[2] if isinstance(report.longrepr, tuple)
                                    else report.longrepr))


def pytest_sessionfinish(session, exitstatus):
    controller = not hasattr(session.config, "workerinput")  # xdist workers report to it
    if controller and session.config.getoption("--no-skips") and _skipped and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line("--no-skips: %d test(s) skipped, which make test does not allow:" % len(_skipped),
                          red=True)
            for line in _skipped:
                tr.write_line("  " + line, red=True)


class Emulator(EmulatorProcess):
    """An emulator on 127.0.0.1 with its log and its exact counters."""

    def __init__(self, args, env=None, wait=True):
        self.logfile = tempfile.TemporaryFile()
        # Tests are reproducible: a fixed seed unless the test sets one (the emulator's own
        # default is a new seed per start).
        env = dict({"SGLEMU_SEED": "0"}, **(env or {}))
        EmulatorProcess.__init__(self, args, self.logfile, env=env)
        self.api_key = args[args.index("--api-key") + 1] if "--api-key" in args else None
        if wait:
            self.wait_healthy()

    def wait_healthy(self, timeout=30.0):
        try:
            self.wait_ready("/health", timeout)
        except RuntimeError as e:
            raise RuntimeError("%s: %s" % (e, self.output()))

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def post(self, path, body=None):
        req = urllib.request.Request(self.url + path, data=json.dumps(body or {}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")

    def stats(self):
        return self.get("/_emulator/stats")

    def output(self):
        """Everything the emulator printed so far (its log, like the unit's journal)."""
        self.logfile.seek(0)
        return self.logfile.read().decode(errors="replace")

    def stop(self):
        EmulatorProcess.stop(self)
        self.logfile.close()


@pytest.fixture
def emulator():
    """Factory: emulator(profile_or_args, env=None, extra=[]) -> running Emulator."""
    started = []

    def start(profile="nextn_3step", env=None, extra=(), wait=True):
        args = list(MODEL_ARGS) + (list(PROFILE_ARGS[profile]) if isinstance(profile, str)
                                   else list(profile)) + list(extra)
        emu = Emulator(args, env=env, wait=wait)
        started.append(emu)
        return emu

    yield start
    for emu in started:
        emu.stop()
