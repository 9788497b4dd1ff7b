"""Shared fixtures: real emulator processes on loopback, the repo's paths on sys.path."""
from __future__ import annotations

import json
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
