#!/usr/bin/env python3
"""Write the lock file of an engine release: every distribution pip installs for the given
requirements on the target platform, pinned ``name==version``, one per line.

    python scripts/lock_release.py sglang==0.5.23 > roles/sglang/files/locks/sglang-0.5.23.txt
    python scripts/lock_release.py --check roles/sglang/files/locks/sglang-0.5.23.txt

The role installs each release into a venv of its own with ``pip install -c <lock>`` (a pip
constraints file), so a release is the same set of packages on every host and every re-install.
The lock is resolved by pip itself (``pip install --dry-run --report``, wheels only) for the
target, not for this machine: CPython 3.11 on x86_64 Linux with glibc up to 2.36 (Debian 12).
The first lines name the requirements; --check resolves them again and exits 1 when the
committed pins differ (a yanked or re-published dependency shows up there).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

PYTHON_VERSION = "3.11"
GLIBC_MAX = 36  # Debian 12 (bookworm)
PLATFORMS = (["manylinux_2_%d_x86_64" % n for n in range(GLIBC_MAX, 16, -1)]
             + ["manylinux2014_x86_64", "linux_x86_64"])
HEADER = "# requirements:"


def resolve(requirements):
    """{name: version} of everything pip would install for ``requirements`` on the target."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                "--report", report, "--target", os.path.join(tmp, "t"), "--only-binary=:all:",
                "--implementation", "cp", "--python-version", PYTHON_VERSION]
        for p in PLATFORMS:
            argv += ["--platform", p]
        p = subprocess.run(argv + list(requirements), capture_output=True, text=True)
        if p.returncode != 0:
            errors = [ln for ln in p.stderr.splitlines() if ln.startswith("ERROR")]
            raise SystemExit("lock_release: pip could not resolve %s:\n%s"
                             % (" ".join(requirements), "\n".join(errors[-5:]) or p.stderr[-2000:]))
        with open(report, encoding="utf-8") as fh:
            installs = json.load(fh)["install"]
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installs}


def render(requirements, pins):
    lines = ["# Lock file of an engine release (scripts/lock_release.py): CPython %s, x86_64 Linux,"
             % PYTHON_VERSION,
             "# glibc <= 2.%d. The role installs the release with pip install -c <this file>." % GLIBC_MAX,
             "%s %s" % (HEADER, " ".join(requirements))]
    return "\n".join(lines + ["%s==%s" % kv for kv in sorted(pins.items())]) + "\n"


def read(path):
    """(requirements, pins) of a lock file."""
    requirements, pins = None, {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line.startswith(HEADER):
                requirements = line[len(HEADER):].split()
            elif line and not line.startswith("#"):
                name, _, version = line.partition("==")
                pins[name.lower()] = version
    if not requirements:
        raise SystemExit("lock_release: %s has no '%s' line" % (path, HEADER))
    return requirements, pins


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("requirements", nargs="*", help="requirements to lock, e.g. sglang==0.5.23")
    ap.add_argument("--check", metavar="LOCK", help="resolve LOCK's requirements again and compare")
    a = ap.parse_args(argv)
    if a.check:
        requirements, pins = read(a.check)
        now = resolve(requirements)
        if now != pins:
            changed = sorted(set(now.items()) ^ set(pins.items()))
            print("%s is stale: %s" % (a.check, ", ".join("%s==%s" % kv for kv in changed)))
            return 1
        print("%s: %d pins, current" % (a.check, len(pins)))
        return 0
    if not a.requirements:
        ap.error("name the requirements to lock (or --check LOCK)")
    sys.stdout.write(render(a.requirements, resolve(a.requirements)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
