"""The roles' READMEs: one shape for all (the same sections in the same order), the variables
table equal to what scripts/role_readme_vars.py generates from meta/argument_specs.yml now, and
the generator's Markdown (one cell a column whatever the values hold)."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from scripts import role_readme_vars as gen

ROLES = sorted(p.parent.parent.name for p in (ROOT / "roles").glob("*/meta/argument_specs.yml"))
SECTIONS = ["What it does", "Requirements", "Role variables", "Dependencies", "Example playbook",
            "Tested by", "Notes"]
SCENARIOS = {p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml")}


def outside_code(text):
    """The README's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def sections(text):
    """{level-2 heading: its text}, in order."""
    found, current = {}, None
    for line in outside_code(text):
        if line.startswith("## "):
            current = line[3:].strip()
            found[current] = ""
        elif current:
            found[current] += line + "\n"
    return found


def cells(row):
    """A table row's cells as GFM splits them: on every `|` not escaped with a backslash."""
    assert row.startswith("| ") and row.endswith(" |"), row
    return re.split(r"(?<!\\)\|", row[1:-1])


def test_every_role_has_a_readme():
    assert ROLES and all((ROOT / "roles" / r / "README.md").exists() for r in ROLES)


@pytest.mark.parametrize("role", ROLES)
def test_readme_has_the_common_shape(role):
    text = (ROOT / "roles" / role / "README.md").read_text()
    assert text.splitlines()[0] == "# Role `%s`" % role
    found = sections(text)
    assert list(found) == SECTIONS
    assert gen.START in found["Role variables"] and gen.END in found["Role variables"]
    assert "```yaml" in text.split("## Example playbook", 1)[1].split("\n## ", 1)[0]
    # Tested by: its Molecule scenarios first, each one that exists
    tested = found["Tested by"].strip()
    assert tested.startswith("- **Molecule `"), tested[:80]
    named = set(re.findall(r"\*\*Molecule ((?:`\w+`(?:, )?)+)", tested))
    assert named and {s for group in named for s in re.findall(r"`(\w+)`", group)} <= SCENARIOS


@pytest.mark.parametrize("role", ROLES)
def test_readme_numbered_steps_are_one_list(role):
    """`What it does` numbers its steps 1, 2, 3... in one list: between two steps only their
    indented continuation lines (a paragraph at the margin would end the list, and the steps after
    it would start another)."""
    body = sections((ROOT / "roles" / role / "README.md").read_text())["What it does"]
    lines = body.split("\n### ", 1)[0].splitlines()
    steps = [i for i, line in enumerate(lines) if re.match(r"\d+\. ", line)]
    assert [int(lines[i].split(".")[0]) for i in steps] == list(range(1, len(steps) + 1))
    for line in lines[steps[0]:steps[-1]] if steps else []:
        assert not line or line[0].isspace() or re.match(r"\d+\. ", line), line


def test_role_readmes_list_the_argument_specs():
    p = subprocess.run([sys.executable, "scripts/role_readme_vars.py", "--check",
                        *("roles/" + r for r in ROLES)], cwd=str(ROOT), capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout


@pytest.mark.parametrize("role", ROLES)
def test_generated_table_has_one_cell_a_column_and_no_python_repr(role):
    table = gen.table(ROOT / "roles" / role)
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    rows = table.splitlines()
    assert rows[:2] == ["| variable | type | default | description |", "|---|---|---|---|"]
    assert [cells(r)[0].strip() for r in rows[2:]] == [
        "`%s`" % n for n in spec["argument_specs"]["main"]["options"]]
    assert all(len(cells(r)) == 4 for r in rows[2:])
    assert not re.search(r"\['|\{'|\[\"|': ", table), "a Python repr in the table"
    assert gen.table(ROOT / "roles" / role) == table


def test_generator_renders_lists_dicts_choices_markup_and_escapes_the_table(tmp_path):
    (tmp_path / "meta").mkdir()
    options = {
        "a_list": {"type": "list", "elements": "str", "default": ["video", "render"],
                   "description": "Groups."},
        "a_dict": {"type": "dict", "default": {"sglang": "m", "vllm": "n"}, "description": "Modules."},
        "big": {"type": "dict", "default": {"k%d" % i: "v" * 20 for i in range(9)}, "description": "x"},
        "few": {"type": "dict", "default": {"a": "v" * 40, "b": "v" * 40}, "description": "x"},
        "kind": {"type": "str", "default": "auto", "choices": ["auto", "a|b"],
                 "description": ["First | paragraph\nwrapped.", "Second with C(code) and <dir>."]},
        "empty": {"type": "str", "default": "", "no_log": True, "description": "Secret."},
        "rank": {"type": "int", "required": False, "description": "Rank."},
        "must": {"type": "str", "required": True, "description": "Needed."},
    }
    (tmp_path / "meta" / "argument_specs.yml").write_text(
        yaml.safe_dump({"argument_specs": {"main": {"options": options}}}, sort_keys=False))
    rows = gen.table(tmp_path).splitlines()[2:]
    assert all(len(cells(r)) == 4 for r in rows)
    assert rows == [
        "| `a_list` | list of str | `video`, `render` | Groups. |",
        "| `a_dict` | dict | `{sglang: m, vllm: n}` | Modules. |",
        "| `big` | dict | see `defaults/main.yml` (9 keys) | x |",
        "| `few` | dict | see `defaults/main.yml`: `a`, `b` | x |",
        r"| `kind` | str | `auto` | First \| paragraph wrapped. Second with `code` and &lt;dir>. "
        r"Choices: `auto`, `a\|b`. |",
        '| `empty` | str | `""` (secret, no_log) | Secret. |',
        "| `rank` | int | `null` | Rank. |",
        "| `must` | str | required | Needed. |",
    ]
    (tmp_path / "README.md").write_text("# Role `x`\n\n<!-- vars -->\nold\n<!-- /vars -->\n\nrest\n")
    assert gen.main(["--check", str(tmp_path)]) == 1
    assert gen.main(["--write", str(tmp_path)]) == 0 and gen.main(["--check", str(tmp_path)]) == 0
    text = (tmp_path / "README.md").read_text()
    assert text.startswith("# Role `x`\n\n<!-- vars -->\n| variable |") and text.endswith("-->\n\nrest\n")
