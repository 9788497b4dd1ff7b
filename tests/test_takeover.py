"""The brownfield takeover's pieces without a host: reading unit files (plugins/modules/
sglang_units.py), recognising engines (module_utils launchers.py), reading a command line back into
a profile and the diff the preflight prints (plugins/filter/sglang_profile.py), and importing an
adopted unit as the first last-known-good (the module through `ansible localhost -m`). The whole
takeover on systemd: Molecule `brownfield`."""
from __future__ import annotations

import json
import shlex

import pytest

from ansiblerun import module_result
from conftest import role_defaults
from sglang_perf.plan import profile as flt
from plugins.modules import sglang_units as units
from sglang_perf.host.launchers import engine_of

PROFILES = role_defaults()["sglang_profiles"]
HAND_UNIT = """[Unit]
Description=Qwen on SGLang (by hand)

[Service]
# the original launch
ExecStart=/opt/hand/venv/bin/python -m sglang.launch_server --model-path /srv/models/Qwen3.6-27B \\
    --tp-size 2 --speculative-algorithm NEXTN --speculative-num-steps 1 --speculative-eagle-topk 1 \\
    --speculative-num-draft-tokens 2 --mamba-radix-cache-strategy extra_buffer --host 0.0.0.0 --port 30000
Restart=always
"""


def test_exec_start_joins_continuations_and_reads_drop_ins():
    argv = units.exec_start([HAND_UNIT])
    assert argv[:3] == ["/opt/hand/venv/bin/python", "-m", "sglang.launch_server"]
    assert argv[-4:] == ["--host", "0.0.0.0", "--port", "30000"]
    # a drop-in resets ExecStart= and sets its own; prefixes and quotes as systemd reads them
    dropin = "[Service]\nExecStart=\nExecStart=-/usr/bin/env 'vllm' serve /m --port 8000\n"
    assert units.exec_start([HAND_UNIT, dropin]) == ["/usr/bin/env", "vllm", "serve", "/m", "--port", "8000"]
    assert units.exec_start(["[Unit]\nDescription=x\n"]) is None
    # ExecStart outside [Service] does not count
    assert units.exec_start(["[Unit]\nExecStart=/bin/true\n"]) is None


@pytest.mark.parametrize("cmd, launch_module, engine, first", [
    ("/v/bin/python -m sglang.launch_server --port 1", None, "sglang", "--port"),
    ("/v/bin/sglang serve --model-path /m", None, "sglang", "--model-path"),
    ("vllm serve /m --speculative-config {}", None, "vllm", "/m"),
    ("python3 -m vllm.entrypoints.openai.api_server --model /m", None, "vllm", "--model"),
    ("/v/bin/python -m emulator --tp-size 2", {"emulator": "sglang"}, "sglang", "--tp-size"),
    ("/v/bin/python -m emulator --tp-size 2", None, None, None),
    ("/usr/bin/python3 -m http.server 8000", {"sglang.launch_server": "sglang"}, None, None),
    ("/v/bin/python -m vllm.entrypoints.cli.main serve /m -tp 2", None, "vllm", "/m"),
    ("/v/bin/python -m emulator.vllm serve /m -tp 2",
     {"emulator": "sglang", "emulator.vllm": "vllm"}, "vllm", "/m"),
    ("/v/bin/python -m emulator --tp-size 2",
     {"emulator": "sglang", "emulator.vllm": "vllm"}, "sglang", "--tp-size"),
])
def test_engines_are_recognised_by_their_launchers(cmd, launch_module, engine, first):
    argv = shlex.split(cmd)
    found, start = engine_of(argv, launch_module)
    assert found == engine
    assert (argv[start] if start is not None else None) == first


def read(cmd, version="0.5.23"):
    argv = shlex.split(cmd)
    engine, start = engine_of(argv)
    return flt.sglang_command_profile({"engine": engine, "argv": argv, "args_from": start}, version)


def test_the_hand_units_command_line_read_with_the_flag_table():
    r = read(" ".join(units.exec_start([HAND_UNIT])))
    assert r["engine"] == "sglang" and r["unknown"] == []
    assert r["profile"] == {"tp_size": 2, "speculative_algorithm": "NEXTN", "speculative_num_steps": 1,
                            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2,
                            "mamba_cache_strategy": "extra_buffer"}
    assert r["server"] == {"model_path": "/srv/models/Qwen3.6-27B", "host": "0.0.0.0", "port": "30000"}


def test_the_diff_against_the_profile_names_intended_vs_found():
    r = read(" ".join(units.exec_start([HAND_UNIT])))
    assert flt.sglang_profile_diff(r["profile"], PROFILES["nextn_3step"]) == [
        "speculative_num_steps 3 vs 1", "speculative_num_draft_tokens 4 vs 2",
        "mem_fraction_static 0.88 vs unset", "context_length 131072 vs unset",
        "max_running_requests 16 vs unset", "mamba_full_memory_ratio 0.5 vs unset",
        "mamba_cache_strategy extra_buffer_lazy vs extra_buffer",
        "reasoning_parser qwen3 vs unset", "tool_call_parser qwen3_coder vs unset"]
    # the same settings: no difference; SGLang upper-cases the algorithm, so case does not count
    argv = flt.sglang_argv(PROFILES["nextn_3step"], "0.5.23")
    same = read("python -m sglang.launch_server " + " ".join(argv).replace("NEXTN", "nextn"))
    assert flt.sglang_profile_diff(same["profile"], PROFILES["nextn_3step"]) == []
    assert flt.sglang_profile_diff({}, PROFILES["no_spec"])[0] == "tp_size 2 vs unset"


def test_other_spellings_old_flags_aliases_and_unknown_flags():
    r = read("python -m sglang.launch_server --model=/m --tensor-parallel-size 4 --mem-fraction-static=0.8 "
             "--mamba-scheduler-strategy no_buffer --enable-metrics --chunked-prefill-size 8192 --enable-foo")
    assert r["profile"] == {"tp_size": 4, "mem_fraction_static": 0.8, "mamba_cache_strategy": "no_buffer"}
    assert r["server"] == {"model_path": "/m", "enable_metrics": True}
    assert r["unknown"] == ["--chunked-prefill-size 8192", "--enable-foo"]


def test_a_vllm_command_line_is_read_with_the_vllm_table():
    r = read("vllm serve /m -tp 2 --max-model-len 65536 --gpu-memory-utilization=0.9 "
             "--speculative-config '{\"method\": \"qwen3_5_mtp\", \"num_speculative_tokens\": 3}' "
             "--no-enable-prefix-caching --enable-auto-tool-choice --tool-call-parser qwen3_coder "
             "--mamba-cache-mode align --port 8000 --trust-remote-code", "0.33.0")
    assert r["engine"] == "vllm" and r["unknown"] == ["--mamba-cache-mode align"]
    assert r["profile"] == {"tp_size": 2, "context_length": 65536, "mem_fraction_static": 0.9,
                            "speculative_algorithm": "MTP", "speculative_num_steps": 3,
                            "enable_prefix_caching": False, "tool_call_parser": "qwen3_coder"}
    assert r["server"] == {"model_path": "/m", "port": "8000", "trust_remote_code": True}
    # what the role renders reads back as the profile it came from, NEXTN and MTP alike
    for name, algo in (("vllm_mtp_3", "MTP"), ("vllm_mtp_1", "NEXTN")):
        profile = dict(PROFILES[name], speculative_algorithm=algo)
        argv = flt.sglang_argv(profile, "0.33.0", {"model_path": "/m", "port": 30000})
        back = read("/v/bin/python -m vllm.entrypoints.cli.main " + shlex.join(argv), "0.33.0")
        assert back["server"] == {"model_path": "/m", "port": "30000"} and back["unknown"] == []
        assert flt.sglang_profile_diff(back["profile"], profile) == [], name
    assert flt.sglang_profile_diff(r["profile"], PROFILES["vllm_mtp_3"]) == [
        "context_length 131072 vs 65536", "max_running_requests 8 vs unset",
        "reasoning_parser qwen3 vs unset",
        "enable_prefix_caching true vs false", "language_model_only true vs unset"]


def module(args):
    return module_result("sglang_units", json.dumps(args), timeout=120)[1]


def test_an_adopted_unit_is_imported_as_the_first_last_known_good_once(tmp_path):
    backups, lkg = tmp_path / "adopted", tmp_path / "lkg"
    (backups / "20261201T100000Z").mkdir(parents=True)
    (backups / "20261201T100000Z" / "sglang-qwen.service").write_text(HAND_UNIT)
    (backups / "20261201T100000Z" / "manifest.json").write_text(json.dumps({
        "time": "2026-12-01T10:00:00Z", "units": [{"name": "sglang-qwen.service", "argv": ["x"],
                                                   "engine": "sglang", "enabled": True, "active": True}]}))
    args = {"state": "imported", "service": "sglang", "backup_dir": str(backups),
            "import_unit": "sglang-qwen", "lkg_dir": str(lkg)}
    r = module(args)
    assert r["changed"] and r["imported"], r
    assert (lkg / "sglang.service").read_text() == HAND_UNIT
    rec = json.loads((lkg / "sglang.json").read_text())
    assert (rec["profile"], rec["adopted"], rec["time"]) == (
        "sglang-qwen.service (adopted)", "sglang-qwen.service", "2026-12-01T10:00:00Z")
    assert (lkg / "sglang.env").is_file()
    # a last-known-good exists now: never overwritten
    r = module(args)
    assert not r["changed"] and not r["imported"]
    # a unit that was never adopted is refused by name
    r = module(dict(args, import_unit="other", lkg_dir=str(tmp_path / "lkg2")))
    assert r["failed"] and r["msg"] == ("sglang_gate_lkg_import: other.service is in no adoption backup "
                                        "under %s (adopted: sglang-qwen.service)" % backups)
