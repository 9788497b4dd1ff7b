#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_releases
short_description: Keep the newest engine releases and remove the older ones
description:
  - Each engine release is a directory under O(path) (a venv, its lock file, its wheels) with a
    C(release.json) written when its install completed. This module keeps the O(keep) newest
    complete releases (by the time of their C(release.json)) and every release in O(protect),
    and removes the rest, including directories whose install never completed.
  - The sglang_gate role calls it after a passing gate, protecting the release it just recorded
    as last-known-good, so a rollback always finds the release its unit names.
version_added: "1.2.0"
author: "sglang-deploy maintainers"
options:
  path:
    description: The releases directory.
    type: path
    required: true
  keep:
    description: How many of the newest complete releases to keep (protected ones count too).
    type: int
    default: 3
  protect:
    description: Release names (directory names) never removed.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    details: Reports what it would remove.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Keep the newest three releases and the deployed one
  sglang_releases:
    path: /opt/sglang/releases
    keep: 3
    protect: ["0.5.23-97fac2dd7c"]
"""

RETURN = r"""
kept:
  description: The releases kept, newest first.
  returned: always
  type: list
  elements: str
removed:
  description: The releases removed (or, in check mode, that would be).
  returned: always
  type: list
  elements: str
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule


def plan(entries, keep, protect):
    """(kept, removed) from ``entries``: [(name, completed_at or None)]. The protected releases
    are kept; the newest complete ones fill the rest of ``keep``; everything else goes."""
    complete = sorted((e for e in entries if e[1] is not None), key=lambda e: (e[1], e[0]), reverse=True)
    kept = [name for name, _ in entries if name in protect]
    for name, _ in complete:
        if len(kept) >= keep:
            break
        if name not in kept:
            kept.append(name)
    # newest first; a protected install that has not completed yet counts as the newest
    order = {name: i for i, (name, _) in enumerate(complete)}
    kept.sort(key=lambda n: order.get(n, -1))
    removed = sorted(name for name, _ in entries if name not in kept)
    return kept, removed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            keep=dict(type="int", default=3),
            protect=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["keep"] < 1:
        module.fail_json(msg="keep must be at least 1, got %d" % p["keep"])
    if not os.path.isdir(p["path"]):
        module.exit_json(changed=False, kept=[], removed=[])
    entries = []
    for name in sorted(os.listdir(p["path"])):
        full = os.path.join(p["path"], name)
        if not os.path.isdir(full) or os.path.islink(full):
            continue
        marker = os.path.join(full, "release.json")
        entries.append((name, os.path.getmtime(marker) if os.path.isfile(marker) else None))
    kept, removed = plan(entries, p["keep"], set(p["protect"]))
    if not module.check_mode:
        for name in removed:
            try:
                shutil.rmtree(os.path.join(p["path"], name))
            except OSError as e:
                module.fail_json(msg="cannot remove release %s: %s" % (os.path.join(p["path"], name), e),
                                 kept=kept, removed=removed)
    module.exit_json(changed=bool(removed), kept=kept, removed=removed)


if __name__ == "__main__":
    main()
