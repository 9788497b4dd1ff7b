"""The documentation: README.md is the entry page (short, the two main commands first), every
relative Markdown link and anchor resolves, and no file uses the origin-document jargon (the
team's original notes, logs and hand launch are called that)."""
from __future__ import annotations

import re
import subprocess

import pytest

from conftest import ROOT

README = ROOT / "README.md"
MAX_README_LINES = 150
LINKED_DOCS = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("roles/*/README.md"))]

# The jargon: the word, singular or plural, any case.
JARGON = re.compile(r"\bseeds?\b", re.IGNORECASE)
# A line plainly about random numbers keeps the word: it says random or RNG, names a seed variable,
# option or key (seed=, seed:, --seed, .seed, (seed, seed), "seed", seed %s), or says a fixed / new /
# same / own seed, for a seed, seed by seed.
RANDOM_SENSE = re.compile(
    r"\brng\b|--seed\b|\bseed\s*[=:%]|[.(\"']seed\b|\bseed[\")]|\bseed by seed\b"
    r"|\b(fixed|new|same|own|for a) seed\b|random", re.IGNORECASE)

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def repo_files():
    """Tracked files plus new ones not ignored: what a commit would hold."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=str(ROOT), capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.splitlines() if (ROOT / p).is_file()]


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def slug(heading):
    """GitHub's anchor for a heading: link syntax reduced to its text, lowercase, every character
    but letters, digits, spaces, '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path):
    """Every heading's anchor in a Markdown file, repeats numbered as GitHub numbers them."""
    seen, out = {}, set()
    for _, line in prose_lines(path.read_text()):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.add(base if k == 0 else "%s-%d" % (base, k))
    return out


def test_readme_is_an_entry_page_with_the_main_commands_first():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES, "README.md has %d lines, at most %d" % (
        len(text.splitlines()), MAX_README_LINES)
    block = re.search(r"^```[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert block, "README.md has no code block"
    assert text[:block.start()].count("\n") <= 2, "the first code block is not at the top"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert "make demo" in commands and "make test" in commands, block.group(1)


def test_no_file_uses_the_origin_jargon():
    hits = []
    for path in repo_files():
        data = path.read_bytes()
        if b"\0" in data:
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if JARGON.search(line) and not RANDOM_SENSE.search(line):
                hits.append("%s:%d: %s" % (path.relative_to(ROOT), n, line.strip()))
    assert not hits, ("say what is meant (the original hand launch, the recorded profile, the "
                      "team's original notes or logs):\n" + "\n".join(hits))


# "~" keeps the jargon out of this file; it is dropped before the check.
@pytest.mark.parametrize("line, jargon", [
    ("# The se~eds' hand launch", True),
    ("| profile | se~eds |", True),
    ("SE~EDS: draft tokens", True),
    ("the se~ed's log", True),
    ("    rng = random.Random(seed)", False),
    ("def ratio_interval(pairs, level, seed=0):", False),
    ('"--ready-check-timeout-sec", "10", "--seed", "42"]', False),
    ("# Tests are reproducible: a fixed seed unless the test sets one", False),
    ("225.7-228.9 over five random seeds", False),
    ("SGLEMU_SEED=3", False),
])
def test_the_jargon_rule(line, jargon):
    line = line.replace("~", "")
    assert bool(JARGON.search(line) and not RANDOM_SENSE.search(line)) is jargon


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for doc in LINKED_DOCS:
        lines = doc.read_text().splitlines()
        kept = dict(prose_lines("\n".join(lines)))
        prose = "\n".join(kept.get(n, "") for n in range(1, len(lines) + 1))  # a link text may wrap
        for m in LINK.finditer(prose):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            where = "%s:%d: %s" % (doc.relative_to(ROOT), prose.count("\n", 0, m.start()) + 1, target)
            if not dest.exists():
                broken.append(where + " (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(where + " (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_links_every_docs_page():
    text = README.read_text()
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if "(docs/%s" % p.name not in text]
    assert not missing, missing


def test_the_slug_rule():
    assert slug("Capacity (`memory.py`: SGLang 0.5.23's pool sizing, per GPU)") == \
        "capacity-memorypy-sglang-0523s-pool-sizing-per-gpu"
    assert slug('Drift ("is it the config?")') == "drift-is-it-the-config"
    assert slug("Role `sglang_gate`") == "role-sglang_gate"


def test_every_module_of_the_engine_is_named_in_the_layout():
    """docs/layout.md names each module under plugins/module_utils (the package's one map)."""
    text = (ROOT / "docs" / "layout.md").read_text()
    base = ROOT / "plugins" / "module_utils" / "sglang_perf"
    missing = [str(p.relative_to(base)) for p in sorted(base.rglob("*.py"))
               if p.name != "__init__.py" and "`%s`" % p.name not in text]
    assert missing == []


def test_the_engines_map_in_the_layout_is_generated_from_the_docstrings():
    """docs/layout.md's map of sglang_perf is scripts/layout_doc.py's (the folders' and modules'
    docstrings): a module added or moved without the map regenerated fails here."""
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "scripts/layout_doc.py", "--check"], cwd=str(ROOT),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
