"""Start `python -m emulator` on a free loopback port and wait until it answers: one
launcher for the demo, the self-check and the tests."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

from bench.paths import ROOT


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmulatorProcess(object):
    """An emulator subprocess; ``log`` is a file object (never a pipe: a chatty server must not
    block on a full pipe)."""

    def __init__(self, args, log, env=None, port=None, module="emulator"):
        self.port = port or free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        full_env = dict(os.environ)
        full_env.update({k: str(v) for k, v in (env or {}).items()})
        full_env["PYTHONPATH"] = str(ROOT)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args, "--host", "127.0.0.1",
             "--port", str(self.port)],
            cwd=str(ROOT), env=full_env, stdout=log, stderr=subprocess.STDOUT)

    def wait_ready(self, path="/health", timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("emulator exited with status %s" % self.proc.returncode)
            try:
                with urllib.request.urlopen(self.url + path, timeout=5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("emulator not ready (%s) after %ss" % (path, timeout))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
