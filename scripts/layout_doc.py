#!/usr/bin/env python3
"""Print (or check, or write) docs/layout.md's map of the measurement engine from its docstrings.

    python scripts/layout_doc.py            # print the section
    python scripts/layout_doc.py --check    # exit 1 when docs/layout.md's section is stale
    python scripts/layout_doc.py --write    # regenerate it in place

The section sits between <!-- engine --> and <!-- /engine --> in docs/layout.md: one entry per
folder of plugins/module_utils/sglang_perf (its __init__.py docstring, whole), then one line per
module (the first sentence of its docstring). A module without a docstring is an error: the map
is the docstrings, so a new module says what it holds where it is written.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "plugins" / "module_utils" / "sglang_perf"
LAYOUT = ROOT / "docs" / "layout.md"
START, END = "<!-- engine -->", "<!-- /engine -->"
# the folders in the order of the flow
ORDER = ("plan", "measure", "judge", "record", "host", "engines")


def docstring(path):
    text = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not text:
        raise SystemExit("%s has no docstring: say what it holds" % path.relative_to(ROOT))
    return " ".join(text.split())


def first_sentence(text, width=220):
    """The docstring's first sentence (to its first full stop), cut at a word near ``width``."""
    m = re.match(r"(.+?\.)(\s|$)", text)
    said = m.group(1) if m else text
    if len(said) > width:
        said = said[:width].rsplit(" ", 1)[0] + " ..."
    return said


def markdown(text):
    return text.replace("``", "`")


def section():
    folders = sorted((p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()),
                     key=lambda p: (ORDER.index(p.name) if p.name in ORDER else len(ORDER), p.name))
    lines = [START, ""]
    for folder in folders:
        lines.append("- **`%s/`** %s" % (folder.name, markdown(docstring(folder / "__init__.py"))))
        for module in sorted(folder.glob("*.py")):
            if module.name != "__init__.py":
                lines.append("  - `%s`: %s" % (module.name, markdown(first_sentence(docstring(module)))))
    return "\n".join(lines + ["", END])


def current():
    text = LAYOUT.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit("docs/layout.md has no %s ... %s section" % (START, END))
    head, rest = text.split(START, 1)
    return head, START + rest.split(END, 1)[0] + END, rest.split(END, 1)[1]


def main(argv):
    made = section()
    if "--check" in argv:
        if current()[1] != made:
            sys.stderr.write("docs/layout.md: the engine's map is stale "
                             "(python scripts/layout_doc.py --write)\n")
            return 1
        return 0
    if "--write" in argv:
        head, _, tail = current()
        LAYOUT.write_text(head + made + tail, encoding="utf-8")
        return 0
    print(made)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
