#!/usr/bin/python
# -*- coding: utf-8 -*-
"""The host's side of the deploy lock (the sglang_deploy_lock action plugin calls it)."""
from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_lock_file
short_description: Read, take or give back a deploy lock file on the host, atomically
description:
  - The host's half of the deploy lock; the C(sglang_deploy_lock) action plugin calls it and decides
    (C(plugins/module_utils/sglang_perf/host/lock.py)). Every operation holds an exclusive C(flock) on
    C(PATH.guard) while it reads and writes, so two deploys never both take the lock.
  - C(read) returns the lock's content. C(acquire) writes O(holder) only when the lock is absent or
    still holds the token O(expect) (a compare-and-swap), atomically (a temporary file renamed).
    C(phase) records the run's phase in the lock this run holds (O(token)) - the lock is also
    the deploy's journal - and fails, naming the holder, when the lock is not this run's any more
    (taken over - the run stops before its next step). C(release) removes the lock only when it
    holds O(token); a lock another run holds is left alone.
options:
  path:
    description: The lock file (its directory is created, mode 0755, when missing).
    type: path
    required: true
  op:
    description: What to do.
    type: str
    choices: [read, acquire, phase, release]
    default: read
  holder:
    description: With C(acquire), the holder record to write (it carries its C(token)).
    type: dict
  expect:
    description: With C(acquire), the token of the lock being replaced (unset - only when there is
      none; an empty string - a lock without a token, e.g. not JSON).
    type: str
  token:
    description: With C(phase) and C(release), the token of the lock this run holds.
    type: str
  phase:
    description: With C(phase), the phase the run is in (C(unit written), C(gating), C(decided), ...).
    type: str
attributes:
  check_mode:
    support: partial
    details: In check mode only C(read) runs; C(acquire) and C(release) change nothing.
notes:
  - The lock file is JSON, mode 0644, owned by root.
author: sglang-deploy
"""

RETURN = r"""
held:
  description: >-
    The lock's content after the operation; null when there is no lock; a file that is not JSON
    as the mapping C(unreadable) -> its text.
  returned: always
  type: dict
lost:
  description: With C(phase), whether the lock is another run's (or gone); the task then fails.
  returned: always
  type: bool
acquired:
  description: With C(acquire), whether this run holds the lock now.
  returned: always
  type: bool
released:
  description: With C(release), whether the lock was removed.
  returned: always
  type: bool
"""

import fcntl
import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_perf.host import lock


def read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    try:
        held = json.loads(text)
    except ValueError:
        return {"unreadable": text[:200]}
    return held if isinstance(held, dict) else {"unreadable": text[:200]}


def token_of(held):
    """The token a held lock is swapped by ('' for a lock without one: unreadable, hand-made)."""
    return str(held.get("token") or "")


def write(path, holder):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(holder, fh, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def main():
    module = AnsibleModule(argument_spec=dict(
        path=dict(type="path", required=True),
        op=dict(type="str", default="read", choices=["read", "acquire", "phase", "release"]),
        holder=dict(type="dict"), expect=dict(type="str"), token=dict(type="str"), phase=dict(type="str")),
        required_if=[("op", "acquire", ("holder",)), ("op", "release", ("token",)),
                     ("op", "phase", ("token", "phase"))],
        supports_check_mode=True)
    p = module.params
    path = p["path"]
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        if module.check_mode:
            module.exit_json(changed=False, held=None, acquired=False, released=False)
        os.makedirs(directory, 0o755)
    acquired = released = False
    changed = False
    try:
        with open(path + ".guard", "a") as guard:
            fcntl.flock(guard.fileno(), fcntl.LOCK_EX)
            held = read(path)
            if module.check_mode or p["op"] == "read":
                pass
            elif p["op"] == "acquire":
                if (held is None and p["expect"] is None) or (
                        held is not None and p["expect"] is not None and token_of(held) == p["expect"]):
                    write(path, p["holder"])
                    held, acquired, changed = dict(p["holder"]), True, True
            elif p["op"] == "phase":
                gone = lock.lost(held, p["token"], time.time())
                if gone:  # taken over: this run's next step is another run's to take
                    module.fail_json(msg=gone, held=held, lost=True, acquired=False, released=False)
                held = dict(held, phase=p["phase"], phase_at=time.time())
                write(path, held)
                changed = True
            elif isinstance(held, dict) and held.get("token") == p["token"]:
                os.unlink(path)
                held, released, changed = None, True, True
    except OSError as e:
        module.fail_json(msg="deploy lock %s: %s" % (path, e))
    module.exit_json(changed=changed, held=held, acquired=acquired, released=released, lost=False)


if __name__ == "__main__":
    main()
