"""House rules of the tree, read from the source (no process runs):

- one way to import: no file under bench/, emulator/, plugins/, scripts/ or tests/ changes sys.path
  or loads a Python file by its path (the engine is the installed package sglang_perf; the rest is
  imported by its path from the root, tests/conftest.py says how). tests/contract/*.py are scripts
  run by the contract venvs' own Pythons and keep their own mechanism;
- every plugin is used: each filter in roles/, playbooks/, molecule/ or inventories/, each module
  as a task there, each callback enabled, each connection plugin some host's connection;
- a filter file says what it holds: a file of one filter is named after it (the filter's name
  starts with the file's); a file of several is named after the concern they share, and its
  DOCUMENTATION (what ansible-doc shows for the file) names every filter it holds and none that
  another file holds;
- a named constant is defined once: no UPPER_CASE name (module-private ones too) is assigned at
  module level in two files under plugins/ and bench/. emulator/ is left out: the emulator
  is independent of the engine by design, with its own copy of the engine's behaviour;
- the emulator stands alone: nothing under emulator/ imports bench, sglang_perf or plugins (nor
  anything but the standard library, its own package and its wheels' dependencies, aiohttp and
  PyYAML), so `make dist` can release it by itself.
"""
from __future__ import annotations

import ast
import configparser
import importlib
import re
from collections import defaultdict

import pytest

from conftest import ROOT

# Files that may use one of those calls, and why.
PATH_CALLS_ALLOWED = {
    "bench/sglang_stubs.py": "loads SGLang's own sglang/_platform_stubs.py in the contract venv without "
                             "importing the sglang package (that imports triton): not a file of this "
                             "repository",
}
# Ansible reads these from every plugin file: one per plugin by its design.
PER_PLUGIN_NAMES = ("DOCUMENTATION", "EXAMPLES", "RETURN")
CONSTANT = re.compile(r"^_?[A-Z][A-Z0-9_]*$")
USES = ("roles", "playbooks", "molecule", "inventories")


def rel(path):
    return path.relative_to(ROOT).as_posix()


def python_files(*dirs, skip=()):
    for d in dirs:
        for path in sorted((ROOT / d).rglob("*.py")):
            if not any(rel(path).startswith(s) for s in skip):
                yield path


def text_files(dirs, suffixes=(".yml", ".yaml", ".j2")):
    out = {}
    for d in dirs:
        for path in sorted((ROOT / d).rglob("*")):
            if path.is_file() and path.suffix in suffixes:
                out[rel(path)] = path.read_text()
    return out


def _is_sys_path(node):
    return isinstance(node, ast.Attribute) and node.attr == "path" and \
        isinstance(node.value, ast.Name) and node.value.id == "sys"


def path_calls(tree):
    """(line, what) for each change of sys.path and each use of spec_from_file_location."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                _is_sys_path(node.func.value) and node.func.attr in ("insert", "append", "extend"):
            found.append((node.lineno, "sys.path.%s" % node.func.attr))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if _is_sys_path(t) or (isinstance(t, ast.Subscript) and _is_sys_path(t.value)):
                    found.append((node.lineno, "assignment to sys.path"))
        elif isinstance(node, ast.Attribute) and node.attr == "spec_from_file_location":
            found.append((node.lineno, "spec_from_file_location"))
        elif isinstance(node, ast.ImportFrom) and \
                any(a.name == "spec_from_file_location" for a in node.names):
            found.append((node.lineno, "spec_from_file_location"))
    return found


def test_no_file_changes_the_import_path_or_loads_a_file_by_its_path():
    bad = []
    for path in python_files("bench", "emulator", "plugins", "scripts", "tests",
                             skip=("tests/contract/",)):
        if rel(path) in PATH_CALLS_ALLOWED:
            continue
        calls = path_calls(ast.parse(path.read_text()))
        bad += ["%s:%d %s" % (rel(path), line, what) for line, what in calls]
    assert bad == [], "import the package (sglang_perf) or the file by its path from the root instead: " + \
        ", ".join(bad)


def test_the_path_rule_sees_what_it_forbids():
    tree = ast.parse("import sys\nimport importlib.util as u\nsys.path.insert(0, 'x')\nsys.path.append('y')\n"
                     "sys.path[:0] = ['z']\nu.spec_from_file_location('m', 'm.py')\n"
                     "from importlib.util import spec_from_file_location\nprint(sys.path)\n")
    assert sorted(line for line, _ in path_calls(tree)) == [3, 4, 5, 6, 7]


def filter_files():
    """{file stem: set of the filters it defines} (plugins.filter.<stem>.FilterModule)."""
    out = {}
    for path in sorted((ROOT / "plugins" / "filter").glob("*.py")):
        module = importlib.import_module("plugins.filter." + path.stem)
        out[path.stem] = set(module.FilterModule().filters())
    return out


def used(name, texts):
    """Where a filter is applied: ``| name``, ``name(...)`` or passed by name (``map('name')``)."""
    pattern = re.compile(r"\|\s*%s\b|\b%s\(|\(\s*['\"]%s['\"]" % ((re.escape(name),) * 3))
    return [f for f, text in texts.items() if pattern.search(text)]


def test_every_filter_is_used_by_a_role_playbook_scenario_or_inventory():
    texts = text_files(USES)
    unused = sorted(name for names in filter_files().values() for name in names if not used(name, texts))
    assert unused == [], "filters nothing uses (remove them, or use them): %s" % ", ".join(unused)


def test_each_filter_file_says_what_it_holds():
    files = filter_files()
    owner = {name: stem for stem, names in files.items() for name in names}
    problems = []
    for stem, names in files.items():
        module = importlib.import_module("plugins.filter." + stem)
        doc = module.DOCUMENTATION
        if len(names) == 1:
            (name,) = names
            if not name.startswith(stem):
                problems.append("%s.py holds one filter, %s: name the file after it" % (stem, name))
        for name in sorted(names):
            if not re.search(r"\b%s\b" % name, doc):
                problems.append("%s.py: its DOCUMENTATION does not name its filter %s" % (stem, name))
        for name, other in sorted(owner.items()):
            if other != stem and re.search(r"\b%s\b" % name, doc):
                problems.append("%s.py: its DOCUMENTATION names %s, which %s.py holds" % (stem, name, other))
    assert problems == []


def test_every_plugins_documentation_is_what_ansible_doc_reads():
    """DOCUMENTATION, EXAMPLES and RETURN of every plugin file parse as Ansible's own reader
    (ansible-doc's) parses them: a plain YAML scalar that holds ": " breaks a plugin's whole page."""
    from ansible.errors import AnsibleError
    from ansible.parsing.plugin_docs import read_docstring

    problems = {}
    for path in python_files("plugins", skip=("plugins/module_utils",)):
        if path.name == "__init__.py":
            continue
        try:
            docs = read_docstring(str(path), verbose=False, ignore_errors=False)
        except AnsibleError as e:
            problems[rel(path)] = str(e).splitlines()[0]
            continue
        if path.parent.name != "action" and not (docs["doc"] or {}).get("short_description"):
            problems[rel(path)] = "no DOCUMENTATION with a short_description"
    assert problems == {}


def test_every_module_runs_as_a_task():
    """... or an action plugin runs it (sglang_deploy_lock runs sglang_lock_file on the host)."""
    texts = text_files(USES)
    actions = [p.read_text() for p in (ROOT / "plugins" / "action").glob("*.py")]
    unused = []
    for path in sorted((ROOT / "plugins" / "modules").glob("*.py")):
        task = re.compile(r"^\s*(-\s+)?%s:\s*$" % re.escape(path.stem), re.M)
        called = re.compile(r"""module_name=["']%s["']""" % re.escape(path.stem))
        if not any(task.search(t) for t in texts.values()) and not any(called.search(a) for a in actions):
            unused.append(path.stem)
    assert unused == [], "modules no task runs: %s" % ", ".join(unused)


def test_every_callback_is_enabled_and_every_connection_plugin_connects_a_host():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "ansible.cfg")
    enabled = set(re.split(r"[,\s]+", cfg.get("defaults", "callbacks_enabled", fallback="")))
    enabled.add(cfg.get("defaults", "stdout_callback", fallback=""))
    callbacks = [p.stem for p in (ROOT / "plugins" / "callback").glob("*.py")]
    assert callbacks and [c for c in callbacks if c not in enabled] == []
    texts = text_files(USES + (".config",))
    for path in (ROOT / "plugins" / "connection").glob("*.py"):
        pattern = re.compile(r"\b(ansible_)?connection:\s*['\"]?%s\b" % re.escape(path.stem))
        assert any(pattern.search(t) for t in texts.values()), "no host connects with %s" % path.stem


def module_constants(tree):
    """The UPPER_CASE names a module assigns at its top level (in if/try blocks there too)."""
    names = set()

    def visit(body):
        for node in body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    names.update(n.id for n in ast.walk(target)
                                 if isinstance(n, ast.Name) and CONSTANT.match(n.id))
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
    visit(tree.body)
    return names


def test_each_named_constant_is_defined_in_one_file():
    where = defaultdict(list)
    for path in python_files("plugins", "bench"):
        for name in module_constants(ast.parse(path.read_text())):
            where[name].append(rel(path))
    twice = {name: files for name, files in sorted(where.items())
             if len(files) > 1 and name not in PER_PLUGIN_NAMES}
    assert twice == {}, "define each once and import it (or name the different things differently)"


@pytest.mark.parametrize("source, names", [
    ("A = 1\n_B, c = 2, 3\nif x:\n    D = 4\nelse:\n    E = 5\ndef f():\n    F = 6\nclass K:\n    G = 7\n",
     {"A", "_B", "D", "E"}),
    ("try:\n    import yaml\nexcept ImportError:\n    YAML = None\nH: int = 1\n", {"YAML", "H"}),
])
def test_the_constant_rule_reads_module_level_names_only(source, names):
    assert module_constants(ast.parse(source)) == names


def _package_imports(base, package):
    """{module: modules of ``package`` it imports, at any level of its code (a function's
    import included)} of every module under ``base``, by dotted name relative to it."""
    from pathlib import Path
    graph = {}
    for path in base.rglob("*.py"):
        rel = path.relative_to(base).with_suffix("")
        name = ".".join(p for p in rel.parts if p != "__init__")
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                parent = here[:len(here) - node.level + 1] if node.level > 1 else here
                mod = ".".join(parent + ([node.module] if node.module else []))
                for alias in node.names:
                    sub = (mod + "." + alias.name).strip(".")
                    found.add(sub if (base / Path(*sub.split("."))).with_suffix(".py").exists()
                              or (base / Path(*sub.split("."))).is_dir() else mod)
            elif isinstance(node, ast.ImportFrom) and node.module == package:  # from bench import gate
                found.update(a.name for a in node.names
                             if (base / a.name).with_suffix(".py").exists() or (base / a.name).is_dir())
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package + "."):
                found.add(node.module[len(package) + 1:])
            elif isinstance(node, ast.Import):
                found.update(a.name[len(package) + 1:] for a in node.names
                             if a.name.startswith(package + "."))
        graph[name] = {m for m in found if m and m != name}
    return graph


@pytest.mark.parametrize("folder, package, seen", [
    ("plugins/module_utils/sglang_perf", "sglang_perf", {"measure.metrics": "engines.common",
                                                         "judge.tune": "judge.setting"}),
    ("emulator", "emulator", {"server": "sinks", "vllm.server": "server"}),
    ("bench", "bench", {"tune": "compare_plan", "compare_plan": "gate"}),
])
def test_a_package_has_no_import_cycle(folder, package, seen):
    """No module imports a module back that imports it - a function-level import or one for type
    checking included: a cycle a local import hides is still one."""
    base = ROOT / folder
    graph = _package_imports(base, package)
    for importer, imported in seen.items():  # it reads the package's imports, each kind
        assert imported in graph[importer], (importer, imported)
    cycles, state = [], {}  # state: 1 on the path, 2 done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_bench_imports_nothing_from_the_ansible_plugins_and_the_action_plans_through_it():
    """One planner (bench/planner.py): the CLI depends on no Ansible plugin; the action that sets
    the deploy plan is a shim over the planner."""
    found = []
    for path in sorted((ROOT / "bench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += ["%s: %s" % (path.relative_to(ROOT), n) for n in names if n.startswith("plugins")]
    assert found == []
    action = ast.parse((ROOT / "plugins" / "action" / "sglang_deploy_plan.py").read_text())
    imported = {n.module for n in ast.walk(action) if isinstance(n, ast.ImportFrom)}
    assert "bench.planner" in imported
    assert not [n for n in ast.walk(action) if isinstance(n, ast.FunctionDef) and n.name != "run"]


# What the emulator may import: the standard library, itself and its wheels' dependencies
# (emulator/pyproject.toml); never the repository's other code.
EMULATOR_THIRD_PARTY = {"aiohttp", "yaml"}
NOT_FOR_THE_EMULATOR = {"bench", "sglang_perf", "plugins", "ansible"}


def foreign_imports(tree, depth):
    """(line, name) for each import of a module that is not the standard library, ``emulator``
    itself or EMULATOR_THIRD_PARTY, at any level of the code, and each relative import that climbs
    out of the package (``depth``: the file's folders below emulator/)."""
    import sys
    allowed = set(sys.stdlib_module_names) | {"__future__", "emulator"} | EMULATOR_THIRD_PARTY
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            if node.level > depth + 1:
                found.append((node.lineno, "." * node.level + (node.module or "")))
            continue
        elif isinstance(node, ast.ImportFrom):
            names = [node.module]
        else:
            continue
        found += [(node.lineno, n) for n in names
                  if n.split(".")[0] not in allowed or n.split(".")[0] in NOT_FOR_THE_EMULATOR]
    return found


def test_the_emulator_imports_neither_bench_nor_the_engine_nor_the_plugins():
    """The emulator is its own package (python -m emulator, the sglang-emulator and vllm-emulator
    wheels): it shares no code with bench, sglang_perf or the plugins, so the wheel holds it alone."""
    base = ROOT / "emulator"
    files = list(python_files("emulator"))
    assert {"emulator/cli.py", "emulator/vllm/cli.py"} <= {rel(p) for p in files}  # it sees the package
    bad = []
    for path in files:
        depth = len(path.relative_to(base).parts) - 1
        bad += ["%s:%d %s" % (rel(path), line, name)
                for line, name in foreign_imports(ast.parse(path.read_text(encoding="utf-8")), depth)]
    assert bad == []


def test_the_emulator_rule_sees_what_it_forbids():
    tree = ast.parse("import os, json\nimport aiohttp\nfrom . import args\nfrom ..knobs import Knobs\n"
                     "import bench.paths\nfrom sglang_perf.measure import metrics\n"
                     "def f():\n    from plugins.filter import x\n    import ansible\n    import numpy\n"
                     "from emulator.vllm import cli\n")
    assert sorted(foreign_imports(tree, 0)) == [(4, "..knobs"), (5, "bench.paths"),
                                               (6, "sglang_perf.measure"), (8, "plugins.filter"),
                                               (9, "ansible"), (10, "numpy")]
    assert foreign_imports(ast.parse("from ..knobs import Knobs\n"), 1) == []


# the package's folders by the flow (docs/layout.md): what each may import besides itself and the
# engine modules (engines/, what every layer asks about an engine)
LAYERS = {"measure": {"plan"}, "plan": {"measure", "judge", "record", "host"},
          "judge": {"measure", "plan", "record"}, "record": {"measure", "judge", "host"},
          "host": {"measure", "judge", "record"}}


def test_the_package_is_laid_out_by_the_flow_and_measuring_never_judges_or_records():
    """plan/ decides before anything runs, measure/ counts, judge/ decides from figures, record/
    keeps, host/ runs beside the server: measure imports neither judge nor record."""
    base = ROOT / "plugins" / "module_utils" / "sglang_perf"
    folders = sorted(p.name for p in base.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(set(LAYERS) | {"engines"})
    assert sorted(p.name for p in base.glob("*.py")) == ["__init__.py"]  # every module in a folder
    crossing = []
    for name, imports in sorted(_package_imports(base, "sglang_perf").items()):
        layer = name.split(".")[0]
        if layer not in LAYERS:
            continue
        for target in sorted(imports):
            other = target.split(".")[0]
            if other not in (layer, "engines") and other not in LAYERS[layer]:
                crossing.append("%s -> %s" % (name, target))
    assert crossing == []
    assert not [t for n, ts in _package_imports(base, "sglang_perf").items() if n.startswith("measure.")
                for t in ts if t.split(".")[0] in ("judge", "record")]


# The longest a Python file of the repository may be: past it a module holds two jobs (split it by
# the flow) or data (a file beside it, as measure/corpus.json).
MAX_LINES = 800


def test_no_python_file_is_longer_than_the_house_allows():
    long = {rel(p): n for p in python_files("bench", "emulator", "plugins", "scripts", "tests")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
