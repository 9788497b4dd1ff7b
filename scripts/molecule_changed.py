#!/usr/bin/env python3
"""Which Molecule scenarios a change exercises, from the one mapping in molecule/scenarios.yml.

    scripts/molecule_changed.py [--base REF | --all] [--json] [FILE ...]

The changed files are those that differ between REF (default HEAD) and the working tree: commits
since REF, staged and unstaged edits, deletions and untracked files; or the FILEs given. Prints the
selected scenarios one per line on stdout (--json: a JSON list, for a CI matrix) and, on stderr,
which file selected each. `make molecule-changed [BASE=REF]` runs what it prints. Exit 2 on a bad
mapping or a ref git does not know.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
MAPPING = ROOT / "molecule" / "scenarios.yml"


class MappingError(Exception):
    pass


def pattern_regex(pattern):
    """A path pattern as a regex: `**` any number of segments, `*` and `?` within one segment."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(pattern, path):
    return pattern_regex(pattern).match(path) is not None


def load(path=MAPPING, scenario_dirs=None):
    """{scenario: [patterns]} with groups expanded and molecule/<name>/** added, and the
    not_exercised list [{path, why}]. Refuses what a typo would make silently wrong."""
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), dict):
        raise MappingError("%s: needs a 'scenarios' mapping" % path)
    unknown = set(data) - {"groups", "scenarios", "not_exercised"}
    if unknown:
        raise MappingError("%s: unknown top-level keys %s" % (path, ", ".join(sorted(unknown))))
    groups = data.get("groups") or {}
    scenarios = {}
    for name, spec in data["scenarios"].items():
        spec = spec or {}
        bad = set(spec) - {"use", "paths"}
        if bad:
            raise MappingError("%s: scenario %s: unknown keys %s (use, paths)"
                               % (path, name, ", ".join(sorted(bad))))
        patterns = []
        for group in spec.get("use") or []:
            if group not in groups:
                raise MappingError("%s: scenario %s uses group %r, which is not defined (defined: %s)"
                                   % (path, name, group, ", ".join(sorted(groups))))
            patterns += groups[group]
        patterns += spec.get("paths") or []
        patterns.append("molecule/%s/**" % name)
        scenarios[name] = list(dict.fromkeys(patterns))
    not_exercised = data.get("not_exercised") or []
    for entry in not_exercised:
        if not isinstance(entry, dict) or not entry.get("path") or not entry.get("why"):
            raise MappingError("%s: every not_exercised entry needs a path and a why: %r" % (path, entry))
    if scenario_dirs is not None:
        missing = sorted(set(scenario_dirs) - set(scenarios))
        extra = sorted(set(scenarios) - set(scenario_dirs))
        if missing or extra:
            raise MappingError("%s does not match molecule/*/molecule.yml: not mapped: %s; no such "
                               "scenario: %s" % (path, ", ".join(missing) or "-", ", ".join(extra) or "-"))
    return scenarios, not_exercised


def scenario_dirs(root=ROOT):
    return sorted(p.parent.name for p in (root / "molecule").glob("*/molecule.yml"))


def select(scenarios, files):
    """{scenario: [the changed files that select it]}, in the mapping's order."""
    chosen = {}
    for name, patterns in scenarios.items():
        hits = [f for f in files if any(matches(p, f) for p in patterns)]
        if hits:
            chosen[name] = hits
    return chosen


def git(*args, cwd=ROOT):
    p = subprocess.run(["git", *args], cwd=str(cwd), capture_output=True, text=True)
    if p.returncode != 0:
        raise MappingError("git %s: %s" % (" ".join(args), p.stderr.strip()))
    return [ln for ln in p.stdout.splitlines() if ln]


def changed_files(base, cwd=ROOT):
    """Files that differ between ``base`` and the working tree, untracked ones included."""
    try:
        git("rev-parse", "--verify", "--quiet", base + "^{commit}", cwd=cwd)
    except MappingError:
        raise MappingError("%r is not a commit git knows here (BASE=<branch, tag or sha>)" % base)
    return sorted(set(git("diff", "--name-only", base, cwd=cwd))
                  | set(git("ls-files", "--others", "--exclude-standard", cwd=cwd)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="HEAD", help="git ref to compare the working tree with (default HEAD)")
    ap.add_argument("--json", action="store_true", help="print the scenarios as one JSON list")
    ap.add_argument("--all", action="store_true",
                    help="every scenario (a CI run with no base to compare with)")
    ap.add_argument("files", nargs="*", help="changed files (default: ask git)")
    args = ap.parse_args(argv)
    try:
        scenarios, _ = load(scenario_dirs=scenario_dirs())
        files = args.files or ([] if args.all else changed_files(args.base))
    except MappingError as e:
        print("molecule_changed: %s" % e, file=sys.stderr)
        return 2
    chosen = {name: ["--all"] for name in scenarios} if args.all else select(scenarios, files)
    what = "%d changed file(s) since %s" % (len(files), args.base) if not args.files else \
        "%d file(s)" % len(files)
    if not chosen:
        print("molecule_changed: %s; no Molecule scenario exercises them" % what, file=sys.stderr)
    for name, hits in chosen.items():
        print("molecule_changed: %s <- %s%s" % (name, ", ".join(hits[:3]),
                                                " (+%d more)" % (len(hits) - 3) if len(hits) > 3 else ""),
              file=sys.stderr)
    if args.json:
        print(json.dumps(list(chosen)))
    else:
        for name in chosen:
            print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
