# -*- coding: utf-8 -*-
"""Filter: ``unit_text | systemd_run_properties`` - the ``-p KEY=VALUE`` words that give a
``systemd-run`` transient service the [Service] settings of an installed unit (its user, groups,
environment file, limits and hardening), so a candidate of playbooks/tune.yml runs as the
service would."""
from __future__ import annotations

DOCUMENTATION = r"""
name: systemd_run_properties
short_description: A unit's [Service] settings as systemd-run -p arguments
description:
  - C(systemd_run_properties) reads a unit file's text and returns the argv words
    (C(-p), C(KEY=VALUE), ...) that give a C(systemd-run) transient service the same [Service]
    settings - every one but how the service is started and restarted (C(Type), C(ExecStart*),
    C(ExecStop*), C(ExecReload), C(Restart), C(RestartSec)), which the transient run sets itself.
  - Continuation lines (a trailing backslash) are joined; comments and other sections are skipped.
"""

# What the transient run decides itself: how it starts, stops and (never) restarts.
SKIPPED = ("Type", "ExecStart", "ExecStartPre", "ExecStartPost", "ExecStop", "ExecStopPost", "ExecReload",
           "Restart", "RestartSec")


def _logical_lines(text):
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield (pending + line).strip()
        pending = ""
    if pending:
        yield pending.strip()


def systemd_run_properties(unit_text):
    """["-p", "KEY=VALUE", ...] of the unit's [Service] section, in its order (a key given twice,
    as DeviceAllow, twice)."""
    out, section = [], None
    for line in _logical_lines(unit_text or ""):
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Service" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if key.strip() in SKIPPED:
            continue
        out += ["-p", "%s=%s" % (key.strip(), value.strip())]
    return out


class FilterModule(object):
    def filters(self):
        return {"systemd_run_properties": systemd_run_properties}
