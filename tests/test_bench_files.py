"""bench/common.py replace_text: what the bench commands write for others to read (a tuning's
tune.json, which an interrupted run resumes from; the reports a play reads back) is written whole
or not at all."""
from __future__ import annotations

import os

import pytest

from bench import common


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "tune.json"
    common.replace_text(path, '{"complete": false, "launches": [1, 2]}\n')

    def full(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError, match="No space left"):
        common.replace_text(path, '{"complete": false, "launches": [1, 2, 3]}\n')
    assert path.read_text() == '{"complete": false, "launches": [1, 2]}\n'
    assert os.listdir(tmp_path) == ["tune.json"]


@pytest.mark.parametrize("n", [0, 1, 6, 1024, 100000])
def test_the_text_is_written_whole_and_nothing_beside_it(tmp_path, n):
    text = "é\n" * n
    path = common.replace_text(tmp_path / "compare.md", text)
    assert path.read_text(encoding="utf-8") == text and os.listdir(tmp_path) == ["compare.md"]
    common.replace_text(path, "shorter")  # replaced, not written over in place
    assert path.read_text() == "shorter"
