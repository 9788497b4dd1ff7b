#!/usr/bin/env python3
"""Run Molecule scenarios, several at a time, each `molecule test -s NAME` in a process of its own.

    scripts/molecule_run.py [--jobs N] [SCENARIO ...]      (default: every molecule/*/ scenario)

Each scenario's containers carry the scenario's name (.config/molecule/config.yml, and the
platforms of the multi-host scenarios), so scenarios never share a container, and none publishes a
port: they run side by side. Each scenario's whole output goes to out/molecule/<name>.log; the
terminal gets one line when a scenario starts and one when it ends, then a summary table with
each scenario's result and time, the wall time and the serial sum. A failed scenario's log tail
is printed after the summary. Exit 1 when any scenario failed (all are run regardless), 2 on
bad arguments or missing set-up.

--jobs (default: MOLECULE_JOBS, else DEFAULT_JOBS) was picked by measurement on the 2-core CI
machine kind; see docs/testing.md, "Times", for the figures.

Needs what `make molecule` (or `make test`) prepares first: the venv (.venv, with Molecule), the
Debian 12 systemd image (scripts/podman-setup.sh) and the emulator wheel (make dist).
"""
from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = ROOT / "out" / "molecule"
TIMES = LOG_DIR / "times.json"  # the last run's time per scenario, for the order of the next
# Before any run here (a fresh clone): each scenario's time in a fresh clone on the CI machine kind
# (docs/testing.md, "Times"); a scenario in neither counts as the longest.
FIRST_RUN_TIMES = {"sglang": 335, "brownfield": 329, "deploy_rollback": 303, "engine_switch": 284,
                   "fleet_canary": 284, "multinode": 258, "nvidia_gpu": 226}
# Up to this many scenarios every order is tried; above it, the slowest first.
EXACT_ORDER_MAX = 8
DEFAULT_JOBS = 3
TAIL_LINES = 60


def say(msg):
    print("[molecule] %s" % msg, flush=True)


def scenario_names():
    return sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))


def setup_problems(env):
    bin_dir = ROOT / ".venv" / "bin"
    problems = []
    if not (bin_dir / "molecule").exists():
        problems.append("no molecule in %s: run make venv" % bin_dir)
    if not Path(env["CONTAINERS_CONF"]).is_file():
        problems.append("no %s: run scripts/podman-setup.sh (make podman)" % env["CONTAINERS_CONF"])
    if not list((ROOT / "dist").glob("sglang_emulator-*.whl")):
        problems.append("no emulator wheel in dist/: run make dist")
    return problems


def last_times():
    """The last run's time per scenario ({} before the first run)."""
    try:
        return json.loads(TIMES.read_text())
    except (OSError, ValueError):
        return {}


def wall_time(times, jobs):
    """The wall time of running scenarios taking ``times`` in this order, ``jobs`` at a time, each
    started when a job is free (as run() does)."""
    free = [0.0] * jobs
    for t in times:
        heapq.heappush(free, heapq.heappop(free) + t)
    return max(free)


def order(names, jobs, known=None):
    """The start order with the shortest expected wall time at ``jobs`` at a time, by the last run's
    times (``known``: default times.json over FIRST_RUN_TIMES): every order for up to
    EXACT_ORDER_MAX scenarios, else the slowest first. The slowest first alone can end on a long
    pair: 7 scenarios of 335-226 s at 2 jobs take 1116 s so, 1052 s in the best order."""
    known = dict(FIRST_RUN_TIMES, **last_times()) if known is None else known
    longest = max([float(t) for t in known.values()] + [1.0]) * 2
    est = {n: float(known.get(n, longest)) for n in names}
    slowest_first = sorted(names, key=lambda n: -est[n])
    if len(names) > EXACT_ORDER_MAX:
        return slowest_first
    return list(min(itertools.permutations(slowest_first),
                    key=lambda o: wall_time([est[n] for n in o], jobs)))


def tail(path, n=TAIL_LINES):
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return ["(no log: %s)" % e]
    return lines[-n:]


def run(names, jobs, env):
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    queue = order(names, jobs)
    running = {}  # name -> (Popen, start time, log file)
    results = {}  # name -> (rc, seconds)
    t_all = time.monotonic()
    try:
        while queue or running:
            while queue and len(running) < jobs:
                name = queue.pop(0)
                log = open(LOG_DIR / ("%s.log" % name), "wb")
                # The base config named explicitly: Molecule only finds it itself in a git checkout.
                cmd = [str(ROOT / ".venv" / "bin" / "molecule"), "--base-config",
                       str(ROOT / ".config" / "molecule" / "config.yml"), "test", "-s", name]
                proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
                running[name] = (proc, time.monotonic(), log)
                say("%s: started (log: out/molecule/%s.log)" % (name, name))
            time.sleep(0.5)
            for name, (proc, t0, log) in list(running.items()):
                rc = proc.poll()
                if rc is None:
                    continue
                log.close()
                took = time.monotonic() - t0
                results[name] = (rc, took)
                del running[name]
                say("%s: %s in %.0f s" % (name, "passed" if rc == 0 else "FAILED (rc %d)" % rc, took))
    except KeyboardInterrupt:
        for name, (proc, _, _) in running.items():
            say("%s: interrupted; its containers may be left (molecule destroy -s %s)" % (name, name))
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        raise
    return results, time.monotonic() - t_all


def summary(names, results, wall, jobs):
    failed = [n for n in names if results[n][0] != 0]
    print("\n[molecule] summary (%d job%s)" % (jobs, "" if jobs == 1 else "s"))
    print("  %-20s %-16s %8s" % ("scenario", "result", "time (s)"))
    for n in names:
        rc, took = results[n]
        print("  %-20s %-16s %8.0f" % (n, "passed" if rc == 0 else "FAILED (rc %d)" % rc, took))
    passed = "%d/%d passed" % (len(names) - len(failed), len(names))
    print("  %-20s %-16s %8.0f" % ("wall time", passed, wall))
    print("  %-20s %-16s %8.0f" % ("serial sum", "", sum(t for _, t in results.values())))
    for n in failed:
        print("\n[molecule] ===== %s FAILED: last %d lines of out/molecule/%s.log =====" % (n, TAIL_LINES, n))
        print("\n".join(tail(LOG_DIR / ("%s.log" % n))))
    return failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", "-j", type=int, default=int(os.environ.get("MOLECULE_JOBS") or DEFAULT_JOBS),
                    help="scenarios at a time (default: MOLECULE_JOBS or %d)" % DEFAULT_JOBS)
    ap.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    args = ap.parse_args(argv)
    known = scenario_names()
    names = args.scenarios or known
    unknown = [n for n in names if n not in known]
    if unknown:
        say("ERROR: no scenario %s (molecule/<name>/molecule.yml); there are: %s"
            % (", ".join(unknown), ", ".join(known)))
        return 2
    if args.jobs < 1:
        say("ERROR: --jobs must be >= 1, got %d" % args.jobs)
        return 2
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (ROOT / ".venv" / "bin", env.get("PATH", ""))
    env.setdefault("CONTAINERS_CONF", str(ROOT / ".podman" / "containers.conf"))
    problems = setup_problems(env)
    if problems:
        for p in problems:
            say("ERROR: " + p)
        return 2
    names = list(dict.fromkeys(names))
    jobs = min(args.jobs, len(names))
    say("%d scenario(s), %d at a time: %s" % (len(names), jobs, " ".join(names)))
    results, wall = run(names, jobs, env)
    last = last_times()
    last.update({n: round(t) for n, (_, t) in results.items()})
    TIMES.write_text(json.dumps(last, indent=1, sort_keys=True) + "\n")
    return 1 if summary(names, results, wall, jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
