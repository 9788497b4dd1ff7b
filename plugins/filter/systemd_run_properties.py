# -*- coding: utf-8 -*-
"""Filters: ``unit_text | systemd_run_properties`` - the ``-p KEY=VALUE`` words that give a
``systemd-run`` transient service the [Service] settings of an installed unit (its user, groups,
environment file, limits and hardening), so a candidate of playbooks/tune.yml or a profile of
playbooks/compare.yml runs as the service would; ``unit_text | systemd_unit_profile`` - the
profile the role's unit runs (its Description's "(profile NAME)"), which they start again."""
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
  - C(systemd_unit_profile) returns the profile the sglang role's unit runs, from its
    C(Description=) (C(... (profile NAME))), or none for a unit that names none.
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


def systemd_unit_profile(unit_text):
    """The profile the role's unit runs (roles/sglang/templates/sglang.service.j2: its [Unit]
    Description ends "(profile NAME)"), or None."""
    section = None
    for line in _logical_lines(unit_text or ""):
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Unit" and line.startswith("Description="):
            _, sep, name = line.split("=", 1)[1].strip().rpartition("(profile ")
            if sep and name.endswith(")"):
                return name[:-1].strip() or None
            return None
    return None


class FilterModule(object):
    def filters(self):
        return {"systemd_run_properties": systemd_run_properties,
                "systemd_unit_profile": systemd_unit_profile}
