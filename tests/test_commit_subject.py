"""The commit-msg hook (scripts/commit_subject.py): subjects at most 72 characters."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "commit_subject.py"


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=str(cwd), capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("message, ok", [
    ("x" * 72 + "\n\nbody " + "y" * 300, True),
    ("x" * 73, False),
    ("# a git comment longer than seventy-two characters, which git strips from the message\nshort", True),
    ("\n\n  \n", False),
    ("a", True),
])
def test_the_hook_judges_the_first_line(tmp_path, message, ok):
    msg = tmp_path / "COMMIT_EDITMSG"
    msg.write_text(message)
    p = run(str(msg))
    assert (p.returncode == 0) is ok, p.stderr
    if not ok:
        assert "subject" in p.stderr


def test_a_range_names_each_long_subject(tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=str(tmp_path),
                       check=True, capture_output=True)
    git("init", "-q")
    for i, subject in enumerate(["first", "s" * 80, "third"]):
        (tmp_path / "f").write_text(str(i))
        git("add", "f")
        git("commit", "-q", "-m", subject)
    p = run("--range", "HEAD~2..HEAD", cwd=tmp_path)
    assert p.returncode == 1 and "80 characters" in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert run("--range", "HEAD~1..HEAD", cwd=tmp_path).returncode == 0


def test_the_hook_is_installed_for_commit_messages():
    text = (ROOT / ".pre-commit-config.yaml").read_text()
    assert "scripts/commit_subject.py" in text and "stages: [commit-msg]" in text
    assert "--hook-type commit-msg" in text


def test_every_subject_of_main_since_the_base_is_short():
    """CI holds the submissions' subjects: every commit after .ci/subjects-from (the newest commit
    whose subject is too long; history is not rewritten) has a subject of at most 72 characters."""
    base = (ROOT / ".ci" / "subjects-from").read_text().strip()
    known = subprocess.run(["git", "cat-file", "-e", base + "^{commit}"], cwd=str(ROOT), capture_output=True)
    if known.returncode == 0:
        p = run("--range", "%s..HEAD" % base)
        assert p.returncode == 0, p.stderr
    else:  # a shallow clone without the base: the commits it has
        subjects = subprocess.run(["git", "log", "--format=%s"], cwd=str(ROOT), capture_output=True,
                                  text=True, check=True).stdout.splitlines()
        assert subjects and all(len(s) <= 72 for s in subjects), subjects
