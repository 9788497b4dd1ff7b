# -*- coding: utf-8 -*-
"""The host's deploy lock, taken and given back from the controller: the holder is this
ansible-playbook run (this machine, user, pid and its start, the playbook, the time, a token); the
lock file on the host is read and swapped by the sglang_lock_file module, and what to do with a
lock someone else holds is sglang_perf/lock.py's (refuse, reclaim a stale one with a warning, or
take it over with break_lock)."""
from __future__ import annotations

import getpass
import os
import socket
import time
import uuid

from ansible.plugins.action import ActionBase

from sglang_perf import lock

DOCUMENTATION = r"""
name: sglang_deploy_lock
short_description: Take or give back a host's deploy lock for this ansible-playbook run
description:
  - O(state=present) takes the lock at O(path) on the host for this run - a lock another live run
    holds refuses (the task fails, naming the holder and since when, before anything changes); a
    stale one (its ansible-playbook process on this controller is gone, or it is older than
    O(max_age) seconds) is reclaimed with a warning naming it; O(break_lock) takes any lock over.
  - O(state=absent) gives back the lock this run holds (O(token), from the result of
    O(state=present)); a lock another run holds is left alone.
  - O(state=phase) records the deploy's O(phase) in this run's lock, which is the deploy's journal -
    a later run that reclaims the lock of a run that died says where that run stopped.
  - Check mode takes no lock; it reads the lock and warns when a run holds it.
options:
  path:
    description: The lock file on the host.
    type: path
    required: true
  state:
    description: Take (present) or give back (absent).
    type: str
    choices: [present, absent, phase]
    default: present
  max_age:
    description: Seconds after which a lock is stale whoever holds it.
    type: int
    default: 21600
  break_lock:
    description: Take the lock over whoever holds it (with a warning naming the holder).
    type: bool
    default: false
  token:
    description: With O(state=absent) and O(state=phase), the token O(state=present) returned.
    type: str
  phase:
    description: With O(state=phase), where the deploy is (C(unit written, restarting), C(gating),
      C(decided)).
    type: str
  intent:
    description: With O(state=present), what this run deploys (profile, release), kept in the journal.
    type: dict
"""

RETURN = r"""
acquired:
  description: Whether this run holds the lock now.
  type: bool
token:
  description: The token of this run's lock (give it to O(state=absent)).
  type: str
holder:
  description: The holder record written (this run), or the one that refused it.
  type: dict
"""


def controller_process():
    """(pid, start) of the ansible-playbook process this task belongs to: the worker's parent
    (Ansible forks a worker per task from the main process)."""
    pid = os.getppid()
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as fh:
            return pid, lock.process_start(fh.read())
    except (OSError, ValueError):
        return pid, None


def playbook_of(pid, task_vars):
    """The playbook ansible-playbook ``pid`` runs (its first .yml argument), else the play's name."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            argv = fh.read().decode("utf-8", "replace").split("\0")
    except OSError:
        argv = []
    named = [a for a in argv[1:] if a.endswith((".yml", ".yaml")) and not a.startswith("@")]
    return os.path.basename(named[0]) if named else str((task_vars or {}).get("ansible_play_name") or "?")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "state", "max_age", "break_lock", "token", "phase", "intent"))

    def _file(self, task_vars, **args):
        return self._execute_module(module_name="sglang_lock_file", module_args=args,
                                    task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        path, state = args.get("path"), args.get("state", "present")
        if not path or state not in ("present", "absent", "phase"):
            result.update(failed=True, msg="sglang_deploy_lock: path is required and state is present, "
                                           "absent or phase, got path=%r state=%r" % (path, state))
            return result
        if state == "phase":
            if self._task.check_mode or not args.get("token"):
                result.update(changed=False, msg="no lock of this run to journal in")
                return result
            done = self._file(task_vars, path=path, op="phase", token=args["token"],
                              phase=str(args.get("phase") or "?"))
            if done.get("failed"):
                return dict(result, **done)
            result.update(changed=False, msg="journal: %s" % args.get("phase"))
            return result
        if state == "absent":
            if self._task.check_mode or not args.get("token"):
                result.update(changed=False, acquired=False, msg="no lock of this run to give back")
                return result
            done = self._file(task_vars, path=path, op="release", token=args["token"])
            if done.get("failed"):
                return dict(result, **done)
            result.update(changed=bool(done.get("released")), acquired=False,
                          msg="deploy lock given back" if done.get("released") else
                          "the deploy lock is not this run's any more: left alone")
            return result
        seen = self._file(task_vars, path=path, op="read")
        if seen.get("failed"):
            return dict(result, **seen)
        held, now = seen.get("held"), time.time()
        if self._task.check_mode:
            result.update(changed=False, acquired=False, msg="check mode takes no lock")
            if held:
                result["warnings"] = ["check mode: " + lock.holder_text(held, now) + " holds the deploy lock"]
            return result
        pid, pid_start = controller_process()
        me = {"controller": socket.gethostname(), "user": getpass.getuser(), "pid": pid,
              "pid_start": pid_start, "playbook": playbook_of(pid, task_vars),
              "started": now, "token": uuid.uuid4().hex, "phase": "installing (GPU stack, release, model)",
              "intent": dict(args.get("intent") or {})}
        alive = None
        if isinstance(held, dict) and held.get("controller") == me["controller"] and held.get("pid"):
            alive = lock.process_alive(held["pid"], held.get("pid_start"))
        verdict = lock.judge(held, me, now, int(args.get("max_age", 21600)), bool(args.get("break_lock")),
                             alive)
        if verdict["action"] == lock.REFUSE:
            result.update(failed=True, changed=False, acquired=False, holder=held, msg=verdict["message"])
            return result
        done = self._file(task_vars, path=path, op="acquire", holder=me, expect=verdict["expect"])
        if done.get("failed"):
            return dict(result, **done)
        if not done.get("acquired"):  # another run took it between the read and the swap
            held = done.get("held")
            result.update(failed=True, changed=False, acquired=False, holder=held,
                          msg=lock.judge(held, me, time.time(), int(args.get("max_age", 21600)))["message"])
            return result
        result.update(changed=True, acquired=True, token=me["token"], holder=me,
                      msg="deploy lock taken: %s" % lock.holder_text(me, time.time()))
        if verdict["message"]:
            result["warnings"] = [verdict["message"]]
        return result
