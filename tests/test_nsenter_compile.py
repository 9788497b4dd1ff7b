"""The podman_nsenter connection's compile cache (plugins/connection/podman_nsenter.py): a pipelined
AnsiballZ wrapper runs unchanged, its zipped Python compiled once per user, never through a cache
directory another user could write; tracebacks name the zip the code came from this run."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile

from plugins.connection import podman_nsenter as nsenter

# A stand-in wrapper, shaped as Ansible's (its shebang, a __future__ import first, the marker,
# then a zip of modules put first on sys.path and imported from it).
WRAPPER = """#!/usr/bin/python3
from __future__ import annotations
import sys
_ANSIBALLZ_WRAPPER = True
sys.path.insert(0, sys.argv[1])
import payload
print(payload.answer(), __name__)
"""


def _zip(path, body):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("payload.py", body)
    return path


def _run(tmp_path, zip_path, data):
    return subprocess.run([sys.executable, "-", str(zip_path)], input=data, capture_output=True,
                          env=dict(os.environ, TMPDIR=str(tmp_path)), timeout=60)


def _cache(tmp_path):
    return tmp_path / ("ansible-nsenter-pyc-%d" % os.getuid())


def test_the_wrapper_runs_as_it_would_and_compiles_once(tmp_path):
    data = nsenter._cached_compile(WRAPPER.encode())
    assert data.startswith(b"#!/usr/bin/python3\n") and data != WRAPPER.encode()
    first = _run(tmp_path, _zip(tmp_path / "a.zip", "def answer():\n    return 42\n"), data)
    assert first.returncode == 0, first.stderr
    assert first.stdout.decode().split() == ["42", "__main__"]
    cache = _cache(tmp_path)
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    (entry,) = cache.iterdir()
    # the same source from another zip (every task writes its own): served from the cache, and a
    # traceback names the zip of this run, not the one that filled the cache
    body = "def answer():\n    raise ValueError('from the zip')\n"
    stamps = []
    for name in ("b.zip", "c.zip"):
        p = _run(tmp_path, _zip(tmp_path / name, body), data)
        assert p.returncode == 1 and b"ValueError: from the zip" in p.stderr
        assert str(tmp_path / name / "payload.py").encode() in p.stderr, p.stderr
        stamps.append(sorted((e.name, e.stat().st_mtime_ns) for e in cache.iterdir()))
    assert len(stamps[0]) == 2 and entry.exists()
    assert stamps[1] == stamps[0]  # read, not written again


def test_a_cache_directory_others_can_write_is_not_used(tmp_path):
    cache = _cache(tmp_path)
    cache.mkdir()
    cache.chmod(0o777)
    p = _run(tmp_path, _zip(tmp_path / "a.zip", "def answer():\n    return 7\n"),
             nsenter._cached_compile(WRAPPER.encode()))
    assert p.returncode == 0 and p.stdout.split()[0] == b"7", p.stderr
    assert list(cache.iterdir()) == []


def test_a_broken_cache_entry_is_compiled_again(tmp_path):
    data = nsenter._cached_compile(WRAPPER.encode())
    zip_path = _zip(tmp_path / "a.zip", "def answer():\n    return 5\n")
    assert _run(tmp_path, zip_path, data).returncode == 0
    (entry,) = _cache(tmp_path).iterdir()
    for junk in (b"not marshalled code", b"i\x07\x00\x00\x00"):  # garbage; an int, not code
        entry.write_bytes(junk)
        p = _run(tmp_path, zip_path, data)
        assert p.returncode == 0 and p.stdout.split()[0] == b"5", p.stderr


def test_other_input_passes_unchanged():
    for data in (None, b"", b"#!/bin/sh\necho hi\n", b"plain file content"):
        assert nsenter._cached_compile(data) == data
