"""One candidate server of ``python -m bench tune``: its command from ``--launch`` (``{args}``,
``{args_remote}``, ``{port}``, and ``{python}``/``{module}`` of its own release), its process
group, its readiness wait, what its log says of a failed start, and its stop (SIGTERM, then
SIGKILL; the processes left)."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from sglang_perf import engines
from sglang_perf.judge import tune_launch

from bench.paths import ROOT

TAIL = 2000  # characters of a launch's log kept when it did not start
CUT = "cut by the budget"  # how a launch the budget ended is named


class LaunchError(ValueError):
    """A --launch that cannot start a candidate; the message names the engine."""


def launch_commands(given, engine_names):
    """{engine: command template} from --launch (COMMAND for every engine, ENGINE=COMMAND for one)."""
    out, default = {}, None
    for text in given or ():
        head, sep, rest = text.partition("=")
        if sep and head in engines.names():
            out[head] = rest
        else:
            default = text
    for e in engine_names:
        out.setdefault(e, default)
        if not out[e]:
            raise LaunchError("no --launch command for %s (give --launch 'COMMAND' or --launch %s='COMMAND')"
                              % (e, e))
        if "{args}" not in out[e] and "{args_remote}" not in out[e]:
            raise LaunchError("--launch for %s has no {args} (or {args_remote}): %r" % (e, out[e]))
    return out


def fill(template, argv, port, release=None):
    """The command of one launch: ``{args}`` the arguments quoted for the shell that runs the
    command, ``{args_remote}`` quoted twice (for a command that passes them through a second
    shell, as ssh does), ``{port}`` the port; ``{python}`` and ``{module}`` the interpreter of the
    candidate's own release (``release``: its deploy plan's part, venv and launch_module) and the
    module that starts its server - one command for candidates of several engines, each from its
    release."""
    once = " ".join(shlex.quote(a) for a in argv)
    twice = " ".join(shlex.quote(shlex.quote(a)) for a in argv)
    out = template
    if release:
        out = out.replace("{python}", "%s/bin/python" % release["venv"]) \
            .replace("{module}", release.get("launch_module") or "")
    return out.replace("{args_remote}", twice).replace("{args}", once).replace("{port}", str(port))


class Launch(object):
    """One candidate server, in a process group of its own; its output to ``log``."""

    def __init__(self, command, log):
        self.log = log
        self.fh = open(str(log), "wb")
        self.proc = subprocess.Popen(command, shell=True, stdout=self.fh, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(ROOT))

    def wait_ready(self, url, paths, timeout, ends_at=None):
        """None once every path answers 200, else why not (it exited, the ready timeout passed, or
        the budget ended at ``ends_at``, seconds since the epoch: then it starts with CUT)."""
        t0 = time.time()
        cut = ends_at is not None and ends_at < t0 + timeout
        end = ends_at if cut else t0 + timeout
        pending = list(paths)
        while pending:
            if self.proc.poll() is not None:
                return "exited with status %s before it was ready: %s" % (self.proc.returncode, self.tail())
            if time.time() > end:
                if cut:
                    return "%s: not ready %.0f s after its launch (readiness %s)" % (
                        CUT, time.time() - t0, ", ".join(paths))
                return "not ready after %.0f s (readiness %s)" % (timeout, ", ".join(paths))
            try:
                with urllib.request.urlopen(url + pending[0], timeout=5) as r:
                    if r.status == 200:
                        pending.pop(0)
                        continue
            except OSError:
                pass
            time.sleep(0.2)
        return None

    def tail(self):
        self.fh.flush()
        text = Path(self.log).read_bytes()[-TAIL:].decode("utf-8", "replace").strip()
        return text.splitlines()[-1] if text else "no output"

    def failure(self):
        """{"failure": its kind (tune_launch.failure_kind, from the log's end and whether the process
        exited), "memory": "under"/"over"/None (what the log says of the fraction)}."""
        self.fh.flush()
        text = Path(self.log).read_bytes()[-4 * TAIL:].decode("utf-8", "replace").lower()
        return {"failure": tune_launch.failure_kind(text, self.proc.poll() is not None),
                "memory": tune_launch.memory_signal(text)}

    def stop(self, grace=tune_launch.STOP_GRACE):
        """SIGTERM to the group, SIGKILL after ``grace``; the processes left (none expected)."""
        pgid = self.proc.pid
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, tune_launch.KILL_WAIT)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            end = time.monotonic() + wait
            while time.monotonic() < end:
                self.proc.poll()
                if not _group_alive(pgid):
                    break
                time.sleep(0.1)
            if not _group_alive(pgid):
                break
        self.proc.poll()
        self.fh.close()
        return _group_members(pgid)


def _group_members(pgid):
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(d.name))
    return out


def _group_alive(pgid):
    return bool(_group_members(pgid))
