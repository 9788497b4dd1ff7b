# -*- coding: utf-8 -*-
"""Filter: ``argv | systemd_exec_args`` - an argv as the one line of a systemd ``ExecStart=`` (the
unit template joins what sglang_argv renders with it)."""
from __future__ import annotations

DOCUMENTATION = r"""
name: systemd_exec_args
short_description: Quote an argv for a systemd ExecStart= line
description:
  - C(systemd_exec_args) joins an argv for C(ExecStart=) - safe words bare, every other word
    double-quoted with systemd's escapes (backslash, double quote, dollar, percent, newline).
"""

import re

_SAFE = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def systemd_exec_args(argv):
    """Join argv for ExecStart=: safe words bare, others double-quoted with systemd's escapes."""
    out = []
    for arg in argv:
        arg = str(arg)
        if _SAFE.match(arg):
            out.append(arg)
        else:
            escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$") \
                .replace("%", "%%").replace("\n", "\\n")
            out.append('"%s"' % escaped)
    return " ".join(out)


class FilterModule(object):
    def filters(self):
        return {"systemd_exec_args": systemd_exec_args}
