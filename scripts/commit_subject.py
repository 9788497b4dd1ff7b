"""Refuse a commit subject longer than 72 characters (git's own one-line logs and most review tools
cut there); the body carries the detail.

    python scripts/commit_subject.py MSGFILE          (pre-commit's commit-msg stage)
    python scripts/commit_subject.py --range A..B     (every commit of a range, e.g. in CI)
"""
from __future__ import annotations

import argparse
import subprocess
import sys

LIMIT = 72


def subject(message):
    """The first line of a commit message that is neither blank nor a git comment."""
    for line in message.splitlines():
        if line.strip() and not line.startswith("#"):
            return line.rstrip()
    return ""


def problem(message, where="the commit"):
    """None, or why the message's subject is refused."""
    first = subject(message)
    if not first:
        return "%s has no subject" % where
    if len(first) > LIMIT:
        return "%s's subject is %d characters, at most %d: %r" % (where, len(first), LIMIT, first)
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("msgfile", nargs="?", help="the commit message file (commit-msg hook)")
    p.add_argument("--range", help="check every commit of this git revision range")
    args = p.parse_args(argv)
    if bool(args.msgfile) == bool(args.range):
        p.error("give a message file or --range, not both")
    if args.msgfile:
        with open(args.msgfile, encoding="utf-8") as f:
            problems = [problem(f.read())]
    else:
        out = subprocess.run(["git", "log", "--format=%H%x00%B%x01", args.range], check=True,
                             capture_output=True, text=True).stdout
        problems = [problem(body, sha[:10]) for sha, _, body in
                    (entry.strip("\n").partition("\x00") for entry in out.split("\x01") if entry.strip())]
    problems = [x for x in problems if x]
    for x in problems:
        print(x, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
