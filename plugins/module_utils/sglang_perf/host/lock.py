# -*- coding: utf-8 -*-
"""A host's deploy lock: held by every run that changes or measures the server (a deploy for the
host's whole rollout, a rollback, a takeover, compare, calibrate, bench), so that no two of them
run on one host at once. The lock is a JSON file on the host naming its holder (controller host and
identity, user, pid and its start, playbook, start time, a token); the sglang_deploy_lock action
plugin reads it, judges it here, and takes it with a compare-and-swap on the host (the
sglang_lock_file module). A run checks it still holds the lock before each step that changes the
server: one whose lock was taken over stops there.

Standard library only, Python 3.9+."""
from __future__ import annotations

import datetime
import os

ACQUIRE, RECLAIM, BREAK, REFUSE = "acquire", "reclaim", "break", "refuse"
# What the holder record keeps, in the order a message names it.
HOLDER_KEYS = ("controller", "controller_id", "user", "pid", "pid_start", "playbook", "started", "token",
               "phase", "phase_at", "intent")


def when(epoch):
    """An epoch second as the messages show it: 2026-12-03T14:20:01Z."""
    return datetime.datetime.utcfromtimestamp(float(epoch)).replace(microsecond=0).isoformat() + "Z"


def age_text(seconds):
    seconds = max(0, int(seconds))
    if seconds < 120:
        return "%d s" % seconds
    if seconds < 7200:
        return "%d min" % (seconds // 60)
    return "%.1f h" % (seconds / 3600.0)


def holder_text(held, now):
    """'root@laptop (pid 4242, playbook deploy.yml) since 2026-12-03T14:20:01Z, 5 min ago'."""
    if not isinstance(held, dict) or not held.get("started"):
        return "an unreadable lock (%r)" % (held,)
    return "%s@%s (pid %s, playbook %s) since %s, %s ago" % (
        held.get("user") or "?", held.get("controller") or "?", held.get("pid") or "?",
        held.get("playbook") or "?", when(held["started"]), age_text(now - float(held["started"])))


def process_alive(pid, pid_start=None, proc="/proc"):
    """Whether process ``pid`` of this machine runs and is the one that started at ``pid_start``
    (its start in clock ticks after boot, /proc/PID/stat field 22: a reused pid is another
    process); None when this machine cannot tell (no /proc)."""
    if not os.path.isdir(proc):
        return None
    try:
        with open(os.path.join(proc, str(int(pid)), "stat"), encoding="utf-8") as fh:
            stat = fh.read()
    except (OSError, ValueError):
        return False
    if pid_start is None:
        return True
    return process_start(stat) == int(pid_start)


def process_start(stat_text):
    """The start time (field 22) of a /proc/PID/stat line; the command may hold spaces and ')'."""
    fields = stat_text[stat_text.rindex(")") + 2:].split()
    return int(fields[19])  # field 22 counted from field 3, the first after the command


def controller_identity(proc="/proc"):
    """What tells this controller from another one with the same host name, 'BOOT_ID/PIDNS': the
    kernel's boot id (another machine, or this one rebooted) and the inode of this process's pid
    namespace (another container on the same kernel); '' when /proc cannot tell. A holder's pid
    means something here only when both match."""
    try:
        with open(os.path.join(proc, "sys", "kernel", "random", "boot_id"), encoding="utf-8") as fh:
            boot = fh.read().strip()
        pidns = os.stat(os.path.join(proc, "self", "ns", "pid")).st_ino
    except OSError:
        return ""
    return "%s/%d" % (boot, pidns) if boot else ""


def holder_alive(held, me, proc="/proc"):
    """Whether the holder's process still runs (process_alive), asked only when the holder ran on
    this very controller: the same host name and the same controller_identity. None for any other
    holder - another machine, a container with the same host name, this machine before a reboot,
    a lock written without controller_id - which is judged by its age."""
    if not isinstance(held, dict) or not held.get("pid") or not me.get("controller_id"):
        return None
    if (held.get("controller"), held.get("controller_id")) != (me.get("controller"), me["controller_id"]):
        return None
    return process_alive(held["pid"], held.get("pid_start"), proc)


def lost(held, token, now):
    """'' while the lock ``held`` is still this run's (``token``); otherwise why this run stops
    before its next step, naming who holds the host now."""
    if isinstance(held, dict) and token and str(held.get("token") or "") == token:
        return ""
    stop = "the host is not this run's any more, so it stops here and changes nothing more"
    if held is None:
        return "this run's deploy lock is gone (taken over and given back, or removed by hand): " + stop
    phase = held.get("phase") if isinstance(held, dict) else None
    return "this run's deploy lock was taken over by %s%s: %s" % (
        holder_text(held, now), ", now at '%s'" % phase if phase else "", stop)


def journal_text(held, deploying=True):
    """Where the lock's run had got to: 'it stopped at gating (2026-12-03T14:26:10Z), deploying
    profile nextn_1step, release 0.5.23-ab12: this run deploys from the start, and its gate
    decides (a failing server is restored to the last-known-good)'; '' without a phase. A run that
    does not deploy (``deploying`` false: rollback, compare, calibrate, bench) does not finish it."""
    if not isinstance(held, dict) or not held.get("phase"):
        return ""
    intent = held.get("intent") if isinstance(held.get("intent"), dict) else {}
    what = ", ".join("%s %s" % (k, intent[k]) for k in ("profile", "release") if intent.get(k))
    then = "this run deploys from the start, and its gate decides (a failing server is restored to the " \
           "last-known-good)" if deploying else "this run does not finish it (playbooks/drift.yml " \
           "tells whether what runs is the intended server)"
    return "it stopped at %s%s%s: %s" % (
        held["phase"], " (%s)" % when(held["phase_at"]) if held.get("phase_at") else "",
        ", deploying " + what if what else "", then)


def judge(held, me, now, max_age_s, break_lock=False, holder_alive=None):
    """What to do with the lock file's content ``held`` (None: no lock) for the run ``me``:
    {"action": acquire | reclaim | break | refuse, "expect": the token the swap expects (None: no
    lock there), "message"}. ``holder_alive``: whether the holder's process still runs, when the
    holder is on this controller (holder_alive(); None: another controller, not known). A lock is
    stale when its holder is gone or it is older than ``max_age_s``; a stale one is reclaimed with
    a warning, ``break_lock`` takes any lock over."""
    if held is None:
        return {"action": ACQUIRE, "expect": None, "message": ""}
    deploying = bool((me.get("intent") or {}).get("release"))  # a deploy names what it installs
    # the token the swap expects: '' for a lock without one (unreadable, hand-made)
    token = str(held.get("token") or "") if isinstance(held, dict) else ""
    text = holder_text(held, now)
    if isinstance(held, dict) and token and token == me.get("token"):
        return {"action": ACQUIRE, "expect": token, "message": ""}  # this run's own lock
    if break_lock:
        stopped = journal_text(held, deploying)
        return {"action": BREAK, "expect": token, "message": "sglang_break_lock: took over the deploy lock "
                "held by %s%s" % (text, "; " + stopped if stopped else "")}
    if not isinstance(held, dict) or not held.get("started") or not token:
        return {"action": RECLAIM, "expect": token, "message": "reclaimed %s" % text}
    age = now - float(held["started"])
    stopped = journal_text(held, deploying)
    if holder_alive is False:
        return {"action": RECLAIM, "expect": token, "message": "reclaimed a stale deploy lock: %s; its "
                "process is gone%s" % (text, "; " + stopped if stopped else "")}
    if age > max_age_s:
        return {"action": RECLAIM, "expect": token, "message": "reclaimed a stale deploy lock: %s, older "
                "than sglang_deploy_lock_max_age (%s)%s" % (text, age_text(max_age_s),
                                                            "; " + stopped if stopped else "")}
    return {"action": REFUSE, "expect": token, "message": (
        "another run holds this host's deploy lock: %s. A deploy, rollback, compare, calibrate or "
        "bench run of the host waits until it ends (the lock goes when it does); if that run is "
        "gone (from another controller, or before this one rebooted), -e sglang_break_lock=true "
        "takes the lock over" % text)}
