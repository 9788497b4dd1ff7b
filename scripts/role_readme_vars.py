#!/usr/bin/env python3
"""Print (or check) the variables table of a role's README from its meta/argument_specs.yml.

    python scripts/role_readme_vars.py roles/sglang          # print the table
    python scripts/role_readme_vars.py --check roles/*       # exit 1 when a README is stale
    python scripts/role_readme_vars.py --write roles/*       # regenerate the tables in place

Without a role directory: every role of the repository (roles/*/meta/argument_specs.yml).

The table sits between the markers <!-- vars --> and <!-- /vars --> in roles/<role>/README.md, under
the heading "Role variables" (tests/test_role_readmes.py checks every README's sections). One row a
option of the entry point `main`, in the spec's order: name, type (`list of str` with `elements`),
default, description (a list of paragraphs joined; Ansible's markup C(), I(), B(), U(), L() as
Markdown; `choices` appended). Defaults are shown as YAML: scalars and mappings in flow style, a
list as its items; a mapping or list longer than DEFAULT_WIDTH is left to defaults/main.yml (a
mapping's keys named, up to DEFAULT_KEYS of them). Every cell is one line, its `|` escaped, so no
value breaks the table.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

START, END = "<!-- vars -->", "<!-- /vars -->"
HEADER = ["variable", "type", "default", "description"]
DEFAULT_WIDTH = 60
DEFAULT_KEYS = 6
# Ansible's documentation markup (ansible-doc): code-like, italic, bold, links.
MARKUP = re.compile(r"\b([CVOEPMIBUL])\(([^()]*)\)")


def code(text):
    """``text`` as one Markdown code span (fenced with more backticks than it holds)."""
    text = " ".join(str(text).split()) or '""'
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return fence + pad + text + pad + fence


def flow(value):
    """A value as YAML in flow style, on one line (`null`, `true`, `[a, b]`, `{k: v}`)."""
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True, width=float("inf"), sort_keys=False,
                          allow_unicode=True).strip().removesuffix("\n...").removesuffix("...").strip()


def default_cell(opt):
    if opt.get("required"):
        return "required"
    value = opt.get("default")
    if isinstance(value, list) and value and len(flow(value)) <= DEFAULT_WIDTH:
        return ", ".join(code(flow(v)) for v in value)
    if isinstance(value, (list, dict)) and len(flow(value)) > DEFAULT_WIDTH:
        if isinstance(value, list) or len(value) > DEFAULT_KEYS:
            return "see `defaults/main.yml` (%d %s)" % (len(value), "items" if isinstance(value, list)
                                                         else "keys")
        return "see `defaults/main.yml`: " + ", ".join(code(k) for k in value)
    return code(flow(value))


def prose(text):
    """Description text for a table cell: Ansible markup as Markdown, `<` escaped outside it."""
    out, last = [], 0
    for m in MARKUP.finditer(text):
        out.append(text[last:m.start()].replace("<", "&lt;"))
        kind, arg = m.groups()
        if kind in "CVOEPM":
            out.append(code(arg))
        elif kind == "I":
            out.append("*%s*" % arg)
        elif kind == "B":
            out.append("**%s**" % arg)
        elif kind == "U":
            out.append("<%s>" % arg)
        else:  # L(text,url)
            label, _, url = arg.partition(",")
            out.append("[%s](%s)" % (label.strip(), url.strip()))
        last = m.end()
    out.append(text[last:].replace("<", "&lt;"))
    return "".join(out)


def description_cell(opt):
    paragraphs = opt.get("description") or []
    if isinstance(paragraphs, str):
        paragraphs = [paragraphs]
    text = " ".join(prose(" ".join(str(p).split())) for p in paragraphs)
    if opt.get("choices"):
        text += " Choices: %s." % ", ".join(code(flow(c)) for c in opt["choices"])
    return text.strip()


def type_cell(opt):
    kind = opt.get("type", "str")
    return "%s of %s" % (kind, opt["elements"]) if opt.get("elements") else kind


def row(cells):
    """One table row; newlines flattened, `|` escaped (GFM splits cells on it even in code)."""
    return "| %s |" % " | ".join(" ".join(c.split()).replace("|", r"\|") for c in cells)


def table(role_dir):
    spec = yaml.safe_load((Path(role_dir) / "meta" / "argument_specs.yml").read_text())
    rows = [row(HEADER), "|" + "---|" * len(HEADER)]
    for name, opt in spec["argument_specs"]["main"]["options"].items():
        shown = default_cell(opt) + (" (secret, no_log)" if opt.get("no_log") else "")
        rows.append(row([code(name), type_cell(opt), shown, description_cell(opt)]))
    return "\n".join(rows)


def current(role_dir):
    text = (Path(role_dir) / "README.md").read_text()
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def write(role_dir):
    path = Path(role_dir) / "README.md"
    text = path.read_text()
    head, rest = text.split(START, 1)
    path.write_text(head + START + "\n" + table(role_dir) + "\n" + END + rest.split(END, 1)[1])


def roles():
    """Every role of the repository that has an argument spec, in name order."""
    root = Path(__file__).resolve().parent.parent
    return sorted(str(p.parent.parent) for p in (root / "roles").glob("*/meta/argument_specs.yml"))


def main(argv):
    check = "--check" in argv
    stale = []
    for role_dir in [a for a in argv if not a.startswith("--")] or roles():
        if "--write" in argv:
            write(role_dir)
        elif check:
            if current(role_dir) != table(role_dir):
                stale.append(role_dir)
        else:
            print(table(role_dir))
    for role_dir in stale:
        print("%s/README.md: variables table is stale; regenerate it with %s --write %s"
              % (role_dir, sys.argv[0], role_dir))
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
