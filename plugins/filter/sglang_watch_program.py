# -*- coding: utf-8 -*-
"""The filter of roles/sglang_watch: the program the host runs - watch.py and the modules it
imports, as one file (its settings are the deploy plan's: sglang_perf/plan/deploy.py). Python
sources only: the long-context corpus's data (measure/corpus.json) stays out, its loader
(measure/corpus.py) comes along with prompts.py and is never called (the probe sends short
prompts only: host/watch.py's PROBE_PROMPTS)."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_watch_program
short_description: The watch's program, one file
description:
  - C(sglang_watch_program) is the program's text for the host's Python (the input, a path) -
    sglang_perf/host/watch.py and exactly the package modules it imports, read from the controller's
    copy, with the few lines that import them from the file itself; the same sources give the
    same text (the copy task is idempotent).
"""

import ast
from pathlib import Path

import sglang_perf

from ansible.errors import AnsibleFilterError

PACKAGE_DIR = Path(sglang_perf.__file__).resolve().parent
ENTRY = "host.watch"

PROGRAM_HEAD = '''#!%(python)s -I
# sglang-watch: the watch on the running server (roles/sglang_watch). Usage: sglang-watch SETTINGS.json
# One file, written by the role (plugins/filter/sglang_watch_program.py): SOURCES holds
# plugins/module_utils/sglang_perf/host/watch.py and the package modules it imports (%(modules)s),
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
        tail = "/__init__.py" if self.is_package(fullname) else ".py"
        return "%%s/%%s" %% (__file__, fullname.replace(".", "/") + tail)

    def is_package(self, fullname):
        return fullname == PACKAGE or fullname in PACKAGES

    def get_source(self, fullname):
        return SOURCES[fullname]

    def get_code(self, fullname):
        return compile(SOURCES[fullname], self.filename(fullname), "exec", dont_inherit=True)


'''

PROGRAM_TAIL = '''

sys.meta_path.insert(0, Bundled())
from sglang_perf.host.watch import main  # noqa: E402

sys.exit(main())
'''


def _path(name, package_dir=PACKAGE_DIR):
    """The file of package module ``name`` (dotted, below sglang_perf): a module or a subpackage."""
    base = package_dir.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _exists(name, package_dir):
    return bool(name) and _path(name, package_dir).is_file()


def package_imports(name, package_dir=PACKAGE_DIR):
    """The package modules ``name`` imports (``from . import x``, ``from .x import y``, ``from ..x
    import y`` in a subpackage), directly; dotted names below sglang_perf."""
    path = _path(name, package_dir)
    parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = parts[:len(parts) - (node.level - 1)]
        target = ".".join(base + (node.module.split(".") if node.module else []))
        for i in range(len(base) + 1, len(target.split(".")) + 1):  # a subpackage's parents run too
            parent = ".".join(target.split(".")[:i])
            if _exists(parent, package_dir):
                found.add(parent)
        for alias in node.names:
            sub = ".".join(filter(None, (target, alias.name)))
            if _exists(sub, package_dir):
                found.add(sub)
    return found


def closure(entry=ENTRY, package_dir=PACKAGE_DIR):
    """``entry`` (and the subpackages it is in) and every package module it imports, directly or
    not, sorted."""
    parts = entry.split(".")
    seen, todo = set(), [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
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
        sources["sglang_perf." + m] = _path(m, package_dir).read_text(encoding="utf-8")
    packages = sorted("sglang_perf." + m for m in modules if _path(m, package_dir).name == "__init__.py")
    body = "SOURCES = {\n%s}\nPACKAGES = %r\n" % (
        "".join("    %r: %r,\n" % (k, v) for k, v in sorted(sources.items())), packages)
    return PROGRAM_HEAD % {"python": python, "modules": ", ".join(modules)} + body + PROGRAM_TAIL


class FilterModule(object):
    def filters(self):
        return {"sglang_watch_program": sglang_watch_program}
