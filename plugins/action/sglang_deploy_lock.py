# -*- coding: utf-8 -*-
"""The host's deploy lock, taken, checked and given back from the controller: the holder is this
ansible-playbook run (this machine and its identity, user, pid and its start, the playbook, the
time, a token); the lock file on the host is read and swapped by the sglang_lock_file module, and
what to do with a lock someone else holds, or with this run's lock taken over, is
sglang_perf/host/lock.py's (refuse, reclaim a stale one with a warning, take it over with break_lock;
stop a run whose lock is another's)."""
from __future__ import annotations

import getpass
import os
import socket
import time
import uuid

from ansible.plugins.action import ActionBase

from sglang_perf.host import lock

DOCUMENTATION = r"""
name: sglang_deploy_lock
short_description: Take, check or give back a host's deploy lock for this ansible-playbook run
description:
  - The lock every run that changes or measures the server holds (deploy, rollback, takeover,
    compare, calibrate, bench; playbooks/tasks/locked.yml takes it for them).
  - O(state=present) takes the lock at O(path) on the host for this run - a lock another live run
    holds refuses (the task fails, naming the holder and since when, before anything changes); a
    stale one (its ansible-playbook process on this very controller is gone, or it is older than
    O(max_age) seconds) is reclaimed with a warning naming it; O(break_lock) takes any lock over.
    This controller is its host name and its identity (the kernel's boot id and the pid
    namespace); a holder's process is asked only on the controller that wrote it; a lock of
    another controller with the same host name (two containers, two CI images) is judged by age.
  - O(state=check) fails, naming who holds the lock now, when this run's lock was taken over
    (O(break_lock), a reclaim) or is gone; a run checks before each step that changes the server
    and after each measurement, so it stops there and changes nothing more.
  - O(state=phase) records the run's O(phase) in its lock, which is the deploy's journal - a later
    run that reclaims the lock of a run that died says where that run stopped. It fails like
    O(state=check) when the lock is not this run's any more.
  - O(state=absent) gives back the lock this run holds; a lock another run holds is left alone
    (said in the result's message).
  - O(lock) (the registered result of O(state=present)) names the lock and this run's token for
    the other states; without a lock of this run (none taken, check mode) they do nothing.
  - Check mode takes no lock; it reads the lock and warns when a run holds it.
options:
  path:
    description: The lock file on the host (O(state=present); the others read it from O(lock)).
    type: path
  state:
    description: Take (present), check, journal (phase) or give back (absent).
    type: str
    choices: [present, check, phase, absent]
    default: present
  lock:
    description: With O(state=check), O(state=phase) and O(state=absent), the registered result of
      O(state=present) (its path, token and whether it was acquired).
    type: dict
  max_age:
    description: Seconds after which a lock is stale whoever holds it.
    type: int
    default: 21600
  break_lock:
    description: Take the lock over whoever holds it (with a warning naming the holder).
    type: bool
    default: false
  phase:
    description: Where the run is - with O(state=present) its first phase (default C(installing
      (GPU stack, release, model)), a deploy's), with O(state=phase) the next (C(unit written,
      restarting), C(gating), C(decided)).
    type: str
  intent:
    description: With O(state=present), what a deploy installs (profile, release), kept in the journal.
    type: dict
"""

EXAMPLES = r"""
- name: Take this host's deploy lock
  sglang_deploy_lock:
    path: /var/lib/sglang/deploy.lock
    phase: comparing profiles
  register: __sglang_deploy_lock

- name: Stop here when another run took the lock over
  sglang_deploy_lock:
    state: check
    lock: "{{ __sglang_deploy_lock | default(none) }}"
"""

RETURN = r"""
acquired:
  description: Whether this run holds the lock now (O(state=present)).
  type: bool
path:
  description: The lock file (O(state=present)).
  type: str
token:
  description: The token of this run's lock (O(state=present)).
  type: str
holder:
  description: The holder record written (this run), or the one that refused it.
  type: dict
lost:
  description: With O(state=check), O(state=phase) and O(state=absent), whether the lock is another
    run's or gone.
  type: bool
held:
  description: With O(state=check), O(state=phase) and O(state=absent), the lock's content as read.
  type: dict
"""

# A deploy's first phase: the one a deploy that dies before its unit leaves.
FIRST_PHASE = "installing (GPU stack, release, model)"


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
    _VALID_ARGS = frozenset(("path", "state", "lock", "max_age", "break_lock", "phase", "intent"))

    def _file(self, task_vars, **args):
        return self._execute_module(module_name="sglang_lock_file", module_args=args,
                                    task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        state = args.get("state", "present")
        if state not in ("present", "check", "phase", "absent"):
            result.update(failed=True, msg="sglang_deploy_lock: state is present, check, phase or absent, "
                                           "got %r" % (state,))
            return result
        if state == "present":
            return self._take(result, args, task_vars)
        mine = args.get("lock") if isinstance(args.get("lock"), dict) else {}
        if self._task.check_mode or not mine.get("acquired") or not mine.get("token") or not mine.get("path"):
            result.update(changed=False, lost=False, msg="no deploy lock of this run")
            return result
        path, token = mine["path"], mine["token"]
        if state == "phase":  # the module fails, naming the holder, when the lock is not ours
            phase = str(args.get("phase") or "?")
            done = self._file(task_vars, path=path, op="phase", token=token, phase=phase)
            if done.get("failed"):
                return dict(result, **done)
            result.update(changed=False, lost=False, held=done.get("held"), msg="journal: %s" % phase)
            return result
        if state == "check":
            seen = self._file(task_vars, path=path, op="read")
            if seen.get("failed"):
                return dict(result, **seen)
            gone = lock.lost(seen.get("held"), token, time.time())
            result.update(changed=False, failed=bool(gone), lost=bool(gone), held=seen.get("held"),
                          msg=gone or "the deploy lock is still this run's")
            return result
        done = self._file(task_vars, path=path, op="release", token=token)
        if done.get("failed"):
            return dict(result, **done)
        released = bool(done.get("released"))
        result.update(changed=released, acquired=False, lost=not released, held=done.get("held"),
                      msg="deploy lock given back" if released else
                      "the deploy lock is not this run's any more: left alone (%s)"
                      % lock.lost(done.get("held"), token, time.time()))
        return result

    def _take(self, result, args, task_vars):
        path = args.get("path")
        if not path:
            result.update(failed=True, msg="sglang_deploy_lock: state=present needs path")
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
        me = {"controller": socket.gethostname(), "controller_id": lock.controller_identity(),
              "user": getpass.getuser(), "pid": pid, "pid_start": pid_start,
              "playbook": playbook_of(pid, task_vars), "started": now, "token": uuid.uuid4().hex,
              "phase": str(args.get("phase") or FIRST_PHASE), "intent": dict(args.get("intent") or {})}
        max_age = int(args.get("max_age", 21600))
        alive = lock.holder_alive(held, me)  # asked on the controller that wrote the lock only
        verdict = lock.judge(held, me, now, max_age, bool(args.get("break_lock")), alive)
        if verdict["action"] == lock.REFUSE:
            result.update(failed=True, changed=False, acquired=False, holder=held, msg=verdict["message"])
            return result
        done = self._file(task_vars, path=path, op="acquire", holder=me, expect=verdict["expect"])
        if done.get("failed"):
            return dict(result, **done)
        if not done.get("acquired"):  # another run took it between the read and the swap
            held = done.get("held")
            result.update(failed=True, changed=False, acquired=False, holder=held,
                          msg=lock.judge(held, me, time.time(), max_age)["message"])
            return result
        result.update(changed=True, acquired=True, path=path, token=me["token"], holder=me,
                      msg="deploy lock taken: %s" % lock.holder_text(me, time.time()))
        if verdict["message"]:
            result["warnings"] = [verdict["message"]]
        return result
