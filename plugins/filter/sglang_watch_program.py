# -*- coding: utf-8 -*-
"""The filter of roles/sglang_watch: the program the host runs - watch.py and the modules it
imports, as one file (its settings are the deploy plan's: sglang_perf/deploy_plan.py)."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_watch_program
short_description: The watch's program, one file
description:
  - C(sglang_watch_program) is the program's text for the host's Python (the input, a path) -
    sglang_perf/watch.py and exactly the package modules it imports, read from the controller's
    copy, with the few lines that import them from the file itself; the same sources give the
    same text (the copy task is idempotent).
"""

import ast
from pathlib import Path

import sglang_perf

from ansible.errors import AnsibleFilterError

PACKAGE_DIR = Path(sglang_perf.__file__).resolve().parent
ENTRY = "watch"

PROGRAM_HEAD = '''#!%(python)s -I
# sglang-watch: the watch on the running server (roles/sglang_watch). Usage: sglang-watch SETTINGS.json
# One file, written by the role (plugins/filter/sglang_watch_program.py): SOURCES holds
# plugins/module_utils/sglang_perf/watch.py and the package modules it imports (%(modules)s),
# verbatim; the lines below import them from here. Do not edit: the next deploy replaces it.
import importlib.abc
import importlib.util
import sys

PACKAGE = "sglang_perf"


class Bundled(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """The package's modules from SOURCES, each compiled under its own file name (tracebacks show
    its lines)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in SOURCES:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=self.filename(fullname),
                                               is_package=self.is_package(fullname))

    def filename(self, fullname):
        return "%%s/%%s" %% (__file__, "sglang_perf/__init__.py" if fullname == PACKAGE
                           else fullname.replace(".", "/") + ".py")

    def is_package(self, fullname):
        return fullname == PACKAGE

    def get_source(self, fullname):
        return SOURCES[fullname]

    def get_code(self, fullname):
        return compile(SOURCES[fullname], self.filename(fullname), "exec", dont_inherit=True)


'''

PROGRAM_TAIL = '''

sys.meta_path.insert(0, Bundled())
from sglang_perf.watch import main  # noqa: E402

sys.exit(main())
'''


def package_imports(name, package_dir=PACKAGE_DIR):
    """The package modules ``name`` imports (``from . import x``, ``from .x import y``), directly."""
    tree = ast.parse((package_dir / (name + ".py")).read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found


def closure(entry=ENTRY, package_dir=PACKAGE_DIR):
    """``entry`` and every package module it imports, directly or not, sorted."""
    seen, todo = set(), [entry]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(package_imports(name, package_dir) - seen)
    return sorted(seen)


def sglang_watch_program(python, package_dir=PACKAGE_DIR):
    if not isinstance(python, str) or not python.startswith("/"):
        raise AnsibleFilterError("sglang_watch_program: the host's Python is an absolute path, got %r"
                                 % (python,))
    modules = closure(ENTRY, package_dir)
    sources = {"sglang_perf": (package_dir / "__init__.py").read_text(encoding="utf-8")}
    for m in modules:
        sources["sglang_perf." + m] = (package_dir / (m + ".py")).read_text(encoding="utf-8")
    body = "SOURCES = {\n%s}\n" % "".join("    %r: %r,\n" % (k, v) for k, v in sorted(sources.items()))
    return PROGRAM_HEAD % {"python": python, "modules": ", ".join(modules)} + body + PROGRAM_TAIL


class FilterModule(object):
    def filters(self):
        return {"sglang_watch_program": sglang_watch_program}
