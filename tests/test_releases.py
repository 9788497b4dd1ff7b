"""The release pruning of plugins/modules/sglang_releases.py (which releases a passing gate keeps),
and the lock files the role installs releases with (scripts/lock_release.py)."""
from __future__ import annotations

import pytest
from conftest import ROOT
from plugins.modules import sglang_releases as releases
from scripts import lock_release
from sglang_perf import engines


@pytest.mark.parametrize("entries, keep, protect, kept, removed", [
    # the newest complete releases, newest first
    ([("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 4.0)], 3, set(), ["d", "c", "b"], ["a"]),
    # the protected (just recorded) release counts towards keep and is never removed
    ([("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 4.0)], 2, {"a"}, ["d", "a"], ["b", "c"]),
    # an install that never completed is removed unless protected
    ([("a", 1.0), ("half", None), ("b", 2.0)], 3, set(), ["b", "a"], ["half"]),
    ([("a", 1.0), ("half", None)], 1, {"half"}, ["half"], ["a"]),
    # keep 1: only the deployed one
    ([("a", 1.0), ("b", 2.0)], 1, {"b"}, ["b"], ["a"]),
    ([], 3, {"x"}, [], []),
])
def test_prune_plan(entries, keep, protect, kept, removed):
    assert releases.plan(entries, keep, protect) == (kept, removed)


@pytest.mark.parametrize("path", ["roles/sglang/files/locks/sglang-0.5.23.txt",
                                  "roles/sglang/files/locks/vllm-0.33.0.txt",
                                  "emulator/release.lock"])
def test_lock_files_pin_every_requirement(path):
    requirements, pins = lock_release.read(ROOT / path)
    assert pins and all(v and v[0].isdigit() for v in pins.values()), pins
    for req in requirements:
        name, _, version = req.partition("==")
        assert pins[name.lower()] == version, req


@pytest.mark.parametrize("engine, version, torch", [("sglang", "0.5.23", "2.14.1"),
                                                   ("vllm", "0.33.0", "2.14.0")])
def test_each_engine_lock_pins_the_torch_the_cuda_check_reads(engine, version, torch):
    # the engine modules' cuda_runtime: both run on CUDA 13.0 (their torch)
    _, pins = lock_release.read(ROOT / ("roles/sglang/files/locks/%s-%s.txt" % (engine, version)))
    assert pins[engine] == version and pins["torch"] == torch
    assert pins["cuda-toolkit"].startswith("13.0.")
    assert len(pins) > 150
    assert engines.get(engine).cuda_runtime[version] == "13.0"


def test_a_lock_file_without_its_requirements_line_is_refused(tmp_path):
    bad = tmp_path / "x.txt"
    bad.write_text("torch==2.14.1\n")
    with pytest.raises(SystemExit, match="has no '# requirements:' line"):
        lock_release.read(bad)
