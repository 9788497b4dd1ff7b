# -*- coding: utf-8 -*-
"""A host's deploy lock: held for the whole rollout of the host (unit, restart, gate, decision,
record), so that two deploys, a deploy and a rollback, or a deploy and a takeover of one host never
run at once. The lock is a JSON file on the host naming its holder (controller host, user, pid and
its start, playbook, start time, a token); the sglang_deploy_lock action plugin reads it, judges
it here, and takes it with a compare-and-swap on the host (the sglang_lock_file module).

Standard library only, Python 3.9+."""
from __future__ import annotations

import datetime
import os

ACQUIRE, RECLAIM, BREAK, REFUSE = "acquire", "reclaim", "break", "refuse"
# What the holder record keeps, in the order a message names it.
HOLDER_KEYS = ("controller", "user", "pid", "pid_start", "playbook", "started", "token", "phase",
               "phase_at", "intent")


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


def journal_text(held):
    """Where the lock's run had got to: 'it stopped at gating (2026-12-03T14:26:10Z), deploying
    profile nextn_1step, release 0.5.23-ab12: this run deploys from the start, and its gate
    decides (a failing server is restored to the last-known-good)'; '' without a phase."""
    if not isinstance(held, dict) or not held.get("phase"):
        return ""
    intent = held.get("intent") if isinstance(held.get("intent"), dict) else {}
    what = ", ".join("%s %s" % (k, intent[k]) for k in ("profile", "release") if intent.get(k))
    return "it stopped at %s%s%s: this run deploys from the start, and its gate decides (a failing " \
           "server is restored to the last-known-good)" % (
               held["phase"], " (%s)" % when(held["phase_at"]) if held.get("phase_at") else "",
               ", deploying " + what if what else "")


def judge(held, me, now, max_age_s, break_lock=False, holder_alive=None):
    """What to do with the lock file's content ``held`` (None: no lock) for the deploy ``me``:
    {"action": acquire | reclaim | break | refuse, "expect": the token the swap expects (None: no
    lock there), "message"}. ``holder_alive``: whether the holder's process still runs, when the
    holder is on this controller (None: another controller, not known). A lock is stale when its
    holder is gone or it is older than ``max_age_s``; a stale one is reclaimed with a warning,
    ``break_lock`` takes any lock over."""
    if held is None:
        return {"action": ACQUIRE, "expect": None, "message": ""}
    # the token the swap expects: '' for a lock without one (unreadable, hand-made)
    token = str(held.get("token") or "") if isinstance(held, dict) else ""
    text = holder_text(held, now)
    if isinstance(held, dict) and token and token == me.get("token"):
        return {"action": ACQUIRE, "expect": token, "message": ""}  # this run's own lock
    if break_lock:
        stopped = journal_text(held)
        return {"action": BREAK, "expect": token, "message": "sglang_break_lock: took over the deploy lock "
                "held by %s%s" % (text, "; " + stopped if stopped else "")}
    if not isinstance(held, dict) or not held.get("started") or not token:
        return {"action": RECLAIM, "expect": token, "message": "reclaimed %s" % text}
    age = now - float(held["started"])
    stopped = journal_text(held)
    if holder_alive is False:
        return {"action": RECLAIM, "expect": token, "message": "reclaimed a stale deploy lock: %s; its "
                "process is gone%s" % (text, "; " + stopped if stopped else "")}
    if age > max_age_s:
        return {"action": RECLAIM, "expect": token, "message": "reclaimed a stale deploy lock: %s, older "
                "than sglang_deploy_lock_max_age (%s)%s" % (text, age_text(max_age_s),
                                                            "; " + stopped if stopped else "")}
    return {"action": REFUSE, "expect": token, "message": (
        "another deploy holds this host's lock: %s. A deploy, rollback or takeover of the host waits "
        "until it ends (the lock goes when it does); if that run is gone from another machine, "
        "-e sglang_break_lock=true takes the lock over" % text)}
