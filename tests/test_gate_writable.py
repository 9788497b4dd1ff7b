"""The gate's preflight look at where it writes (roles/sglang_gate/files/writable_dirs.py, run on
the host by the role's validate.yml): each reason, on this machine's own file systems."""
from __future__ import annotations

import pytest

from roles.sglang_gate.files import writable_dirs as w


def test_the_state_dir_the_role_creates_and_existing_directories_pass(tmp_path):
    state = tmp_path / "state"  # not there yet: the sglang role creates it before the gate runs
    assert w.problem(str(state / "gate-history.jsonl"), "file", str(state)) == ""
    assert w.problem(str(state / "last-known-good"), "dir", str(state)) == ""
    assert w.problem(str(tmp_path / "history.jsonl"), "file", str(state)) == ""


@pytest.mark.parametrize("path, kind, words", [
    ("history.jsonl", "file", "not an absolute path"),
    ("/proc/gate-history.jsonl", "file", "/proc is a kernel file system"),
    ("/sys/x/last-known-good", "dir", "/sys is a kernel file system"),
])
def test_paths_the_gate_cannot_write_are_named(path, kind, words):
    assert words in w.problem(path, kind, "/var/lib/sglang")


def test_a_directory_as_the_history_file_and_a_missing_directory(tmp_path):
    assert w.problem(str(tmp_path), "file", "/var/lib/sglang") == "a directory, not a file"
    assert "its directory %s does not exist" % (tmp_path / "nope") in w.problem(
        str(tmp_path / "nope" / "h.jsonl"), "file", "/var/lib/sglang")


def test_the_command_line_prints_one_line_per_problem(capsys):
    w.main(["/var/lib/sglang", "sglang_gate_history_path=/proc/h.jsonl=file",
            "sglang_gate_lkg_dir=/var/lib/sglang/last-known-good=dir"])
    assert capsys.readouterr().out == ("sglang_gate_history_path = /proc/h.jsonl: /proc is a kernel "
                                       "file system, not storage\n")
