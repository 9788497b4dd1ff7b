"""One candidate server of ``python -m bench tune``: its command from ``--launch`` (``{args}``,
``{args_remote}``, ``{port}``, and ``{python}``/``{module}`` of its own release), its process
group, its readiness wait, what its log says of a failed start, and its stop (SIGTERM, then
SIGKILL; the processes left); ``run_one``: one launch, from the port's check to the stop, its
measurement the caller's (the tuner's objective first, or every case of a comparison)."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from sglang_perf import engines
from sglang_perf.judge import setting, tune_launch
from sglang_perf.plan import profile
from sglang_perf.record import fingerprint
from sglang_perf.measure.client import Endpoint, MeasureError, RequestError

from bench import gate
from bench.launch import free_port
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


def port_taken(url):
    """Why the URL's port is taken on the host the candidates run on (something accepts a
    connection there before the launch), else None."""
    parts = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port or 80), timeout=3):
            return "port %s on %s answers before the launch: another server holds it there" % (
                parts.port, parts.hostname)
    except OSError:
        return None


def server_mismatch(planned, engine_name, url, port, api_key):
    """What the server ready at ``url`` reports that differs from the deploy plan ``planned`` of
    the setting launched (the engine's drift paths, SGLang /server_info, read as the role's drift
    check reads them; '; '-joined), or None: the server ready on the port must be the candidate,
    not one left behind."""
    ep = Endpoint(url, api_key)
    answers = []
    for path in engines.get(engine_name).drift_paths:
        try:
            status, raw = ep.get(path)
        except RequestError as e:
            return "%s did not answer: %s" % (path, e)
        if status != 200:
            return "%s answered HTTP %s" % (path, status)
        body = raw.decode("utf-8", "replace")
        try:
            answers.append({"json": json.loads(body), "content": body, "status": status})
        except ValueError:
            answers.append({"content": body, "status": status})
    try:
        drift = profile.engine_drift(answers, engine_name, planned.get("settings") or {},
                                     (planned.get("release") or {}).get("version"), {"port": port})
    except (ValueError, KeyError, TypeError) as e:
        return "its report could not be read: %s" % e
    return "; ".join(drift.get("lines") or []) or None


def past(ends_at):
    """True when the budget's end ``ends_at`` (seconds since the epoch; None: none) has come."""
    return ends_at is not None and time.time() >= ends_at - 0.5


# what a launch's record keeps of each plan result its measure returned (keep=None: all of it)
RESULT_KEYS = ("passed", "verdict", "failed_cases", "cases", "capacity")


def run_one(host, args, key, template, ready_timeout, ends_at, log, measure, keep=RESULT_KEYS):
    """Launch, wait, measure, stop one setting: its record (argv, outcome, seconds, results).
    ``measure(gate_part, url, name)`` -> (outcome, plan results) measures the ready candidate
    (``gate_part``: its deploy plan's gate part); ``keep``: the keys of each result the record
    keeps."""
    port = args.port or free_port()
    argv, problems, planned = host.render(key, port)
    name = host.setting(key)[0]
    record = {"key": list(key), "name": name, "label": setting.key_label(key), "argv": argv, "port": port}
    if problems:
        record["outcome"] = {"started": False, "error": "; ".join(problems)}
        return record
    url = (args.url or "http://%s:%d" % (args.address, port)).rstrip("/")
    record["url"] = url
    taken = port_taken(url)
    if taken:  # on the host the candidates run on (the URL's), before anything is launched
        record["outcome"] = {"started": False, "failure": "port", "memory": None, "error": taken}
        return record
    command = fill(template, argv, port, planned.get("release"))
    record["command"] = command
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    launch = Launch(command, log)
    try:
        why = launch.wait_ready(url, engines.get(key.engine).ready_paths, ready_timeout, ends_at)
        record["ready_s"] = round(time.monotonic() - t0, 1)
        mismatch = None if why else server_mismatch(planned, key.engine, url, port, args.api_key)
        if why and why.startswith(CUT):
            record["outcome"] = {"started": False, "cut": "budget", "error": why}
        elif why:
            record["outcome"] = dict(launch.failure(), started=False, error=why)
        elif mismatch:
            record["outcome"] = {"started": False, "failure": "mismatch", "memory": None,
                                 "error": "ready, but not this setting: %s" % mismatch}
        else:
            # the GPUs' clocks watched from the first request to the last (the counters at both
            # ends, or the active reasons sampled): a slowdown that held them is named
            where = argparse.Namespace(url=url, nvidia_smi=args.nvidia_smi)
            run, smi, record["clocks_why"] = gate.host_nvidia_smi(where)
            watch = fingerprint.watch(run, smi)
            try:
                outcome, results = measure(planned["gate"], url, name)
                record["outcome"] = outcome
                record["results"] = [r if keep is None else {k: r.get(k) for k in keep} for r in results]
            except MeasureError as e:
                record["outcome"] = {"started": True, "cut": "budget", "error": "%s: %s" % (CUT, e)} \
                    if past(ends_at) else {"started": True, "passed": False, "failed_cases": ["unmeasured"],
                                            "failure": str(e)}
            finally:
                record["clocks"] = watch.stop()  # its sampler ends with the launch, whatever ended it
            record["slowdowns"] = fingerprint.held_text(record["clocks"])
            if launch.proc.poll() is not None and not record["outcome"].get("cut"):
                # it died while measured: its log says why (out of memory in the 32K case: lower)
                died = launch.failure()
                record["outcome"].update(passed=False, memory=died["memory"], failure=died["failure"],
                                         error="exited with status %s during the cases: %s"
                                         % (launch.proc.returncode, launch.tail()))
    finally:
        stray = launch.stop()
        if stray:
            record["stray"] = stray
        if args.stop:  # what stops the candidate where the launch command cannot (a remote host)
            done = subprocess.run(fill(args.stop, argv, port, planned.get("release")), shell=True,
                                  cwd=str(ROOT), capture_output=True, text=True,
                                  timeout=tune_launch.STOP_COMMAND_SECONDS)
            if done.returncode != 0:
                record["stray"] = "--stop exited %d: %s" % (done.returncode,
                                                            (done.stdout + done.stderr).strip()[-300:])
    record["seconds"] = round(time.monotonic() - t0, 1)
    return record
