#!/usr/bin/env python3
"""Print (or check) the variables table of a role's README from its meta/argument_specs.yml.

    python scripts/role_readme_vars.py roles/sglang          # print the table
    python scripts/role_readme_vars.py --check roles/*       # exit 1 when a README is stale
    python scripts/role_readme_vars.py --write roles/*       # regenerate the tables in place

The table sits between the markers <!-- vars --> and <!-- /vars --> in roles/<role>/README.md.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

START, END = "<!-- vars -->", "<!-- /vars -->"


def table(role_dir):
    spec = yaml.safe_load((Path(role_dir) / "meta" / "argument_specs.yml").read_text())
    rows = ["| variable | type | default | description |", "|---|---|---|---|"]
    for name, opt in spec["argument_specs"]["main"]["options"].items():
        default = opt.get("default")
        if isinstance(default, (dict, list)) and len(json.dumps(default)) > 60:
            shown = "see defaults/main.yml"
        else:
            shown = "`%s`" % json.dumps(default) if not isinstance(default, str) else "`%s`" % default
        if opt.get("no_log"):
            shown += " (secret, no_log)"
        rows.append("| `%s` | %s | %s | %s |" % (name, opt.get("type", "str"), shown,
                                                " ".join(str(opt.get("description")).split())))
    return "\n".join(rows)


def current(role_dir):
    text = (Path(role_dir) / "README.md").read_text()
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def write(role_dir):
    path = Path(role_dir) / "README.md"
    text = path.read_text()
    head, rest = text.split(START, 1)
    path.write_text(head + START + "\n" + table(role_dir) + "\n" + END + rest.split(END, 1)[1])


def main(argv):
    check = "--check" in argv
    stale = []
    for role_dir in [a for a in argv if not a.startswith("--")]:
        if "--write" in argv:
            write(role_dir)
        elif check:
            if current(role_dir) != table(role_dir):
                stale.append(role_dir)
        else:
            print(table(role_dir))
    for role_dir in stale:
        print("%s/README.md: variables table is stale; regenerate it with %s %s"
              % (role_dir, sys.argv[0], role_dir))
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
