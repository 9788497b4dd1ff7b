"""The engine registry (sglang_perf/engines): one module per engine, one record per setting, and
what derives from them - argv, the preflight, drift, takeover and the emulators' accepted flags
(the emulators stay independent of the measuring code: their parsers are held against the records
here, never import them)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from emulator import args as sglang_emu
from emulator.vllm import args as vllm_emu
from conftest import ROOT, role_defaults
from plugins.filter import sglang_watch_program
from sglang_perf import engines
from sglang_perf.measure import metrics
from sglang_perf.plan import profile
from sglang_perf.engines import common, settings

# What an engine module answers (the registry's engine object): code outside the package asks
# these, never an engine's name.
INTERFACE = ("name", "label", "docs", "version_var", "oldest", "release_prefix",
             "launch_modules", "scripts", "script_args_after", "ready_paths", "drift_paths",
             "drift_answers_secret", "multinode", "native_api", "drafts_one_per_step", "accept_ceiling",
             "flags", "server_flags", "model_flag", "aliases", "implied", "choices", "counters",
             "gauges",
             "other_gauges", "inter_token_latency", "itl_observes", "time_per_output_token",
             "request_prompt_tokens", "per_position", "info_gauges", "window_accept_len_convention",
             "counts_verify_steps", "spec_chunk", "spec_fields", "capacity_labels", "capacity_figures",
             "request_fields", "capacity_label", "no_spec_metrics_note", "metrics_note", "normalised",
             "same_algorithm", "spec_errors", "release_errors", "hardware_errors", "lossy",
             "reasoning_field", "kv_usage_gauges", "render",
             "read_positional", "read_special", "drift",
             "drift_from")
# The release each emulator stands in for.
EMULATED = {"sglang": sglang_emu.SGLANG_VERSION, "vllm": vllm_emu.VLLM_VERSION}
# A valid value per setting (a new record needs one here: test_every_record_has_a_sample).
SAMPLES = {"speculative_algorithm": {"sglang": "NEXTN", "vllm": "MTP"}, "speculative_num_steps": 3,
           "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "tp_size": 1,
           "mem_fraction_static": 0.8, "context_length": 4096, "max_running_requests": 8,
           "mamba_full_memory_ratio": 0.5, "mamba_cache_strategy": "extra_buffer",
           "reasoning_parser": "qwen3", "tool_call_parser": "qwen3_coder",
           "enable_prefix_caching": True, "language_model_only": True,
           "speculative_draft_model_path": "/srv/models/Qwen3.6-27B-DFlash", "speculative_adaptive": True,
           "speculative_draft_window_size": 2048, "speculative_draft_attention_backend": "flashinfer",
           "speculative_adaptive_config": "/etc/sglang/adaptive.json", "pp_size": 1,
           "speculative_accept_threshold_single": 1.0, "speculative_accept_threshold_acc": 1.0,
           "rejection_sample_method": "standard"}
SERVER = {"model_path": "/models/m", "served_model_name": "m", "host": "127.0.0.1", "port": 30000,
          "trust_remote_code": True, "enable_metrics": True}


def sample(engine, setting):
    value = SAMPLES[setting]
    return value[engine] if isinstance(value, dict) else value


def full_profile(engine):
    """Every setting ``engine`` has a flag for, set."""
    return {s.name: sample(engine, s.name) for s in settings.of(engine)}


def accepts(engine, argv):
    """Whether ``engine``'s emulator parses ``argv`` (argparse exits 2 on what it refuses)."""
    try:
        if engine == "vllm":
            vllm_emu.parse(argv)
        else:
            sglang_emu.build_parser().parse_args(argv)
    except SystemExit as e:
        return e.code == 0
    return True


def test_the_registry_names_each_engine_once_the_default_first():
    assert engines.names() == ("sglang", "vllm") and engines.DEFAULT == "sglang"
    assert [e.name for e in engines.every()] == list(engines.names())
    assert all(engines.get(n).name == n for n in engines.names())
    assert engines.find("tgi") is None and engines.find("tgi", engines.get("sglang")).name == "sglang"
    with pytest.raises(settings.ProfileError, match="engine 'tgi' is not one of sglang, vllm"):
        engines.get("tgi")


@pytest.mark.parametrize("name", ["sglang", "vllm"])
def test_each_engine_module_answers_the_whole_interface(name):
    eng = engines.get(name)
    missing = [a for a in INTERFACE if not hasattr(eng, a)]
    assert not missing, missing
    assert eng.version_var in ("sglang_version", "sglang_vllm_version") and eng.label and eng.docs
    assert set(eng.flags) == {s.name for s in settings.of(name)}
    # compare's engine sweep runs profiles of the role's defaults that this engine serves
    defaults, table = role_defaults(), role_defaults("sglang_gate")["sglang_gate_compare_profiles"]
    assert table[name]
    for p in table[name]:
        assert profile.profile_engine(defaults["sglang_profiles"][p], defaults["sglang_engine"]) == name, p


def test_every_record_has_a_type_a_check_and_each_engine_a_flag_or_a_reason():
    for s in settings.SETTINGS:
        assert s.type in ("int", "float", "bool", "str") and s.check in profile.CHECK_ORDER + (None,), s
        assert (s.check == "int") == (s.minimum is not None), s
        for name in engines.names():
            assert (name in s.flags) != (name in s.absent), (s, name)  # a flag, or why not
            for since, flag in s.flags.get(name, ()):
                assert flag.startswith("--") and engines.get(name).oldest <= since, (s, flag)


def test_every_record_has_a_sample():
    assert set(SAMPLES) == set(settings.BY_NAME)


def test_the_vllm_render_order_holds_exactly_its_records():
    assert sorted(engines.get("vllm").RENDER_ORDER) == sorted(engines.get("vllm").flags)


@pytest.mark.parametrize("name", ["sglang", "vllm"])
def test_each_engine_renders_every_record_it_has_and_the_preflight_passes_it(name):
    # the drafter's size: a profile key the memory preflight reads, no engine setting
    p = dict(full_profile(name), engine=name,
             draft_model={"repo": "z-lab/Qwen3.6-27B-DFlash", "params_b": 1.7, "kv_bytes_per_token": 0})
    assert profile.sglang_profile_errors({"p": p}, "p", version=EMULATED[name]) == []
    argv = profile.sglang_argv(p, EMULATED[name], SERVER)
    for s in settings.of(name):
        assert profile.flag_for(s.name, EMULATED[name], name) in argv, s


@pytest.mark.parametrize("name", ["sglang", "vllm"])
def test_the_emulator_accepts_every_flag_the_records_render(name):
    """The derivation check: each engine's emulator parses what the records render for the release
    it stands in for - every setting at once, each alone, and booleans both ways."""
    version, model = EMULATED[name], SERVER
    full = full_profile(name)
    argvs = [profile.sglang_argv(dict(full, engine=name), version, model)]
    for s in settings.of(name):
        alone = {s.name: full[s.name]}
        if s.name == "speculative_algorithm" or (s.name.startswith("speculative_") and name == "vllm"):
            alone = {k: full[k] for k in full if k.startswith("speculative_")}
        argvs.append(profile.sglang_argv(dict(alone, engine=name), version, model))
        if s.type == "bool":
            argvs.append(profile.sglang_argv({s.name: False, "engine": name}, version, model))
    refused = [a for a in argvs if not accepts(name, a)]
    assert not refused, refused


@pytest.mark.parametrize("name", ["sglang", "vllm"])
def test_the_emulator_refuses_the_flags_the_records_say_it_lacks(name):
    """A setting a record calls absent on ``name`` (no counterpart): the other engine's spelling
    of it is no flag of ``name``'s emulator either."""
    base = profile.sglang_argv({"engine": name}, EMULATED[name], {"model_path": "/models/m"})
    lacking = [(s.name, flag) for s in settings.SETTINGS if name in s.absent
               for other, rows in s.flags.items() for _, flag in rows[-1:]]
    assert lacking
    accepted = [(setting, flag) for setting, flag in lacking
                if accepts(name, base + [flag] + ([] if settings.BY_NAME[setting].type == "bool" else ["1"]))]
    assert not accepted, accepted


def test_a_setting_without_counterpart_is_refused_with_its_records_reason():
    for s in settings.SETTINGS:
        for name, why in s.absent.items():
            errors = profile.sglang_profile_errors({"p": {"engine": name, s.name: sample(name, s.name)}}, "p")
            assert "sglang_profiles.p.%s has no counterpart in %s: %s" % (
                s.name, engines.get(name).label, why) in errors


@pytest.mark.parametrize("name", ["sglang", "vllm"])
def test_takeover_reads_back_what_the_records_render(name):
    full = full_profile(name)
    argv = profile.sglang_argv(dict(full, engine=name), EMULATED[name], SERVER)
    read = profile.sglang_command_profile({"engine": name, "argv": argv, "args_from": 0}, EMULATED[name])
    assert read["unknown"] == []
    assert profile.sglang_profile_diff(read["profile"], dict(full, engine=name)) == []
    assert read["server"]["model_path"] == "/models/m" and read["server"]["port"] == "30000"


def test_engine_drift_lets_the_engine_read_its_own_answers():
    """drift.yml hands the answers to the engine's drift paths, in order, to one filter."""
    p = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 4, "context_length": 4096}
    info = {"version": "0.5.23", "speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "context_length": 2048,
            "max_running_requests": 48}
    got = profile.engine_drift([{"json": info}], "sglang", p, "0.5.23", {"port": 30000})
    assert got == engines.get("sglang").drift(info, p, "0.5.23", {"port": 30000})
    assert [d["setting"] for d in got["differences"]] == ["context_length", "port"]
    models = {"data": [{"id": "m", "max_model_len": 4096}]}
    text = 'vllm:cache_config_info{gpu_memory_utilization="0.8",enable_prefix_caching="True"} 1.0\n'
    vp = {"engine": "vllm", "speculative_algorithm": "MTP", "speculative_num_steps": 3,
          "context_length": 4096, "mem_fraction_static": 0.9}
    answers = [{"json": models}, {"content": text}, {"json": {"version": "0.33.0"}}]
    got = profile.engine_drift(answers, "vllm", vp, "0.33.0", {"served_model_name": "m", "port": 8000})
    assert got == engines.get("vllm").drift(models, text, vp, "0.33.0", {"served_model_name": "m"})
    assert got["lines"] == ["mem_fraction_static: intended 0.9, running 0.8"]
    assert profile.engine_drift(answers[:2] + [{}], "vllm", vp, "0.33.0")["running_version"] is None


@pytest.mark.parametrize("n", [1, 6, 1024, 100000])
def test_the_accept_length_ceiling_is_the_engines_own(n):
    """min_accept_len above the ceiling each engine names (SGLang: draft tokens; vLLM: steps + 1)."""
    sg = {"speculative_algorithm": "NEXTN", "speculative_num_steps": n, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": n + 1}
    vl = {"engine": "vllm", "speculative_algorithm": "MTP", "speculative_num_steps": n}
    for p, why in ((sg, "speculative_num_draft_tokens"), (vl, "speculative_num_steps + 1")):
        assert profile.sglang_profile_errors({"p": p}, "p", min_accept_len=n + 1) == []
        assert profile.sglang_profile_errors({"p": p}, "p", min_accept_len=n + 1.5) == [
            "sglang_gate_thresholds (%s) cannot be met by profile p: the accept length is at most %d (%s)"
            % (n + 1.5, n + 1, why)]


@pytest.mark.parametrize("start", [1, 3, 5, 7])
def test_an_adaptive_profiles_ceiling_is_its_largest_candidate(start, tmp_path):
    """SGLang's adaptive steps climb at run time to the largest candidate (default config 0.5.23:
    [0, 1, 3, 5, 7]; buffers for max + 1 draft tokens): a calibrated 4.2 passes a profile starting
    at any step, 8.5 does not; a config file of the host's, read at its path, moves the ceiling."""
    p = {"speculative_algorithm": "NEXTN", "speculative_num_steps": start, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": start + 1, "speculative_adaptive": True}
    assert profile.accept_ceiling(p, "sglang") == 8
    assert profile.sglang_profile_errors({"p": p}, "p", min_accept_len=4.2) == []
    assert profile.sglang_profile_errors({"p": p}, "p", min_accept_len=8.5) == [
        "sglang_gate_thresholds (8.5) cannot be met by profile p: the accept length is at most 8 "
        "(adaptive: the largest candidate steps + 1)"]
    cfg = tmp_path / "adaptive.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [start, 9]}, "8": {"candidate_steps": [0]}}))
    assert profile.accept_ceiling(dict(p, speculative_adaptive_config=str(cfg)), "sglang") == 10
    fixed = dict(p, speculative_adaptive=None)
    assert profile.accept_ceiling(fixed, "sglang") == start + 1


def test_the_parser_reads_every_engines_series():
    for e in engines.every():
        assert set(e.counters.values()) <= set(metrics.COUNTERS)
        assert set(e.gauges.values()) | set(e.other_gauges) <= set(metrics.GAUGES)
        assert e.inter_token_latency + "_count" in metrics.HISTOGRAM_TOTALS
        assert metrics.kind_of({e.counters["generation_tokens"]: 1.0}) == e.name
    assert common.newest_release(engines.get("sglang")) == "0.5.23"


def test_at_most_two_python_files_outside_the_emulator_name_an_engine_literally():
    """Engine knowledge in one place: only the engine records and the vLLM module spell 'vllm'."""
    literal = re.compile(r"[\"']vllm[\"']")
    files = [p for top in ("plugins", "bench") for p in (ROOT / top).rglob("*.py")]
    found = sorted(str(p.relative_to(ROOT)) for p in files if literal.search(p.read_text(encoding="utf-8")))
    assert found == ["plugins/module_utils/sglang_perf/engines/settings.py",
                     "plugins/module_utils/sglang_perf/engines/vllm.py"]


def test_the_watch_program_carries_the_engines_subpackage(tmp_path):
    """The one-file watch imports sglang_perf.engines (a subpackage) from itself: a fresh, isolated
    interpreter runs it to its usage line."""
    modules = set(sglang_watch_program.closure())
    assert {"engines", "engines.settings", "engines.sglang", "engines.vllm"} <= modules
    program = tmp_path / "sglang-watch"
    program.write_text(sglang_watch_program.sglang_watch_program(sys.executable))
    p = subprocess.run([sys.executable, "-I", str(program)], capture_output=True, text=True,
                       cwd=str(tmp_path), timeout=60)
    assert p.returncode == 2 and "usage: sglang-watch" in p.stdout + p.stderr, p.stderr
