"""Shared fixtures: real emulator processes on loopback, the repo's paths on sys.path."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULE_UTILS = ROOT / "plugins" / "module_utils"
for p in (str(ROOT), str(MODULE_UTILS)):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench.profiles import MODEL_ARGS, PROFILE_ARGS  # noqa: E402,F401  (re-exported)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    """One `python -m bench.emulator` process on 127.0.0.1 with its exact counters."""

    def __init__(self, args, env=None, wait=True):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        full_env = dict(os.environ)
        full_env.update({k: str(v) for k, v in (env or {}).items()})
        full_env["PYTHONPATH"] = str(ROOT)
        # A file, not a pipe: a chatty emulator must never block on a full pipe.
        self.logfile = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.emulator", *args, "--host", "127.0.0.1",
             "--port", str(self.port)],
            cwd=str(ROOT), env=full_env, stdout=self.logfile, stderr=subprocess.STDOUT,
        )
        self.api_key = None
        if "--api-key" in args:
            self.api_key = args[args.index("--api-key") + 1]
        if wait:
            self.wait_healthy()

    def wait_healthy(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("emulator exited %s: %s" % (self.proc.returncode, self.output()))
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("emulator not healthy after %ss" % timeout)

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
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
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
