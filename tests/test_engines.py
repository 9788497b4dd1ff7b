"""One profile schema, two engines: the vLLM flag table (plugins/filter/sglang_profile.py), its
refusals by name, and the role's per-engine variables. The contract tier checks the same argv
against vLLM 0.33's own parser (tests/test_contract_vllm.py)."""
from __future__ import annotations

import json

import pytest

from conftest import role_defaults
from sglang_perf import engines
from sglang_perf.plan import profile as flt

DEFAULTS = role_defaults()
PROFILES = DEFAULTS["sglang_profiles"]
VLLM = DEFAULTS["sglang_vllm_version"]
SERVER = {"model_path": "/srv/models/Qwen3.6-27B", "served_model_name": "Qwen3.6-27B", "host": "127.0.0.1",
          "port": 30000, "trust_remote_code": True, "enable_metrics": True, "config": None,
          "nnodes": None, "node_rank": None, "dist_init_addr": None}


def test_the_vllm_profile_renders_the_recipes_command_line():
    assert flt.sglang_argv(PROFILES["vllm_mtp_3"], VLLM, SERVER) == [
        "serve", "/srv/models/Qwen3.6-27B", "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.9",
        "--max-model-len", "131072", "--max-num-seqs", "8",
        "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}',
        "--enable-prefix-caching", "--reasoning-parser", "qwen3", "--enable-auto-tool-choice",
        "--tool-call-parser", "qwen3_coder", "--language-model-only", "--served-model-name", "Qwen3.6-27B",
        "--host", "127.0.0.1", "--port", "30000", "--trust-remote-code",
        "--per-request-spec-decode-metrics", "summary"]


@pytest.mark.parametrize("steps", [1, 2, 3, 4, 5])
def test_each_mtp_depth_is_one_speculative_config(steps):
    argv = flt.sglang_argv(PROFILES["vllm_mtp_%d" % steps], VLLM, SERVER)
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "mtp", "num_speculative_tokens": steps}
    name = "vllm_mtp_%d" % steps
    assert flt.sglang_profile_errors(PROFILES, name, gpu_count=2, min_accept_len=steps + 1) == []
    # the accept length counts the step's own token: at most steps + 1
    assert "is at most %d (speculative_num_steps + 1)" % (steps + 1) in flt.sglang_profile_errors(
        PROFILES, "vllm_mtp_%d" % steps, min_accept_len=steps + 1.5)[0]


def test_no_speculation_on_vllm_asks_for_no_per_request_acceptance():
    """vLLM 0.33 refuses --per-request-spec-decode-metrics without --speculative-config."""
    argv = flt.sglang_argv(PROFILES["vllm_no_spec"], VLLM, SERVER)
    assert "--speculative-config" not in argv and "--per-request-spec-decode-metrics" not in argv
    assert flt.sglang_profile_errors(PROFILES, "vllm_no_spec") == []


@pytest.mark.parametrize("steps", [2, 4, 5])
def test_deeper_nextn_profiles_keep_draft_tokens_at_steps_plus_one(steps):
    p = PROFILES["nextn_%dstep" % steps]
    assert (p["speculative_num_steps"], p["speculative_num_draft_tokens"], p["speculative_eagle_topk"]) == (
        steps, steps + 1, 1)
    assert {k: v for k, v in p.items() if not k.startswith("speculative_num")} == {
        k: v for k, v in PROFILES["nextn_3step"].items() if not k.startswith("speculative_num")}
    assert flt.sglang_profile_errors(PROFILES, "nextn_%dstep" % steps, gpu_count=2) == []


@pytest.mark.parametrize("setting, value, why", [
    ("speculative_eagle_topk", 1, "vLLM's MTP drafts one chain"),
    ("speculative_num_draft_tokens", 4, "num_speculative_tokens"),
    ("mamba_full_memory_ratio", 0.5, "per running sequence"),
    ("mamba_cache_strategy", "extra_buffer", "deprecated no-op"),
])
def test_an_sglang_only_setting_on_vllm_is_refused_by_name(setting, value, why):
    profiles = {"p": dict(PROFILES["vllm_mtp_3"], **{setting: value})}
    errors = flt.sglang_profile_errors(profiles, "p")
    assert len(errors) == 1 and errors[0].startswith(
        "sglang_profiles.p.%s has no counterpart in vLLM: " % setting) and why in errors[0]
    with pytest.raises(flt.ProfileError, match="%s are unknown to vLLM" % setting):
        flt.sglang_argv(profiles["p"], VLLM, SERVER)


@pytest.mark.parametrize("setting", ["enable_prefix_caching", "language_model_only"])
def test_a_vllm_only_setting_on_sglang_is_refused_by_name(setting):
    profiles = {"p": dict(PROFILES["nextn_3step"], **{setting: True})}
    errors = flt.sglang_profile_errors(profiles, "p")
    assert len(errors) == 1
    assert errors[0].startswith("sglang_profiles.p.%s has no counterpart in SGLang" % setting)


def test_the_host_engine_applies_to_profiles_without_their_own():
    common = {k: v for k, v in PROFILES["vllm_mtp_3"].items() if k != "engine"}
    assert flt.sglang_profile_errors({"p": common}, "p", engine="vllm") == []
    assert "has no counterpart in SGLang" in flt.sglang_profile_errors({"p": common}, "p")[0]
    assert flt.sglang_argv(common, VLLM, SERVER, engine="vllm")[:2] == ["serve", SERVER["model_path"]]
    # a profile's own engine wins over the host's
    assert flt.sglang_argv(dict(PROFILES["nextn_3step"], engine="sglang"), "0.5.23",
                           engine="vllm")[0] == "--speculative-algorithm"
    assert flt.profile_engine({}, None) == "sglang" and flt.profile_engine({"engine": "vllm"}) == "vllm"


@pytest.mark.parametrize("change, message", [
    ({"engine": "tgi"}, "sglang_profiles.p.engine (or sglang_engine) must be one of sglang, vllm, got 'tgi'"),
    ({"speculative_algorithm": "NGRAM"},
     "speculative_algorithm must be one of MTP, NEXTN, DFLASH, EAGLE3 for vLLM"),
    ({"speculative_num_steps": None},
     "speculative_algorithm MTP needs sglang_profiles.p.speculative_num_steps"),
    ({"speculative_algorithm": None}, "sets speculative_num_steps without speculative_algorithm"),
    ({"enable_prefix_caching": "yes"},
     "sglang_profiles.p.enable_prefix_caching must be true or false, got 'yes'"),
    ({"mem_fraction_static": 1.2}, "mem_fraction_static must be a fraction strictly between 0 and 1"),
    ({"max_running_requests": 0}, "max_running_requests must be an integer >= 1"),
])
def test_bad_vllm_profiles_are_refused_with_the_rule(change, message):
    p = {k: v for k, v in dict(PROFILES["vllm_mtp_3"], **change).items() if v is not None}
    errors = flt.sglang_profile_errors({"p": p}, "p")
    assert any(message in e for e in errors), errors


def test_multi_node_is_refused_for_vllm():
    errors = flt.sglang_profile_errors(PROFILES, "vllm_mtp_3", nnodes=2, group="pair")
    assert errors == ["sglang_profiles.vllm_mtp_3 runs on vLLM: multi-node deployment pair (2 nodes) is "
                      "rendered for SGLang only (--nnodes/--node-rank/--dist-init-addr); unset "
                      "sglang_multinode_group or run SGLang"]
    with pytest.raises(flt.ProfileError, match="multi-node"):
        flt.sglang_argv(PROFILES["vllm_mtp_3"], VLLM, dict(SERVER, nnodes=2, node_rank=1))


def test_vllm_versions_older_than_the_table_are_refused_naming_the_variable():
    with pytest.raises(flt.ProfileError, match="sglang_vllm_version: 0.29.0 is older than 0.33.0"):
        flt.sglang_argv(PROFILES["vllm_mtp_3"], "0.29.0", SERVER)
    with pytest.raises(flt.ProfileError, match="model_path"):
        flt.sglang_argv(PROFILES["vllm_mtp_3"], VLLM, {"port": 1})


def test_the_api_key_reaches_vllm_through_its_config_file_only():
    secrets = "/etc/sglang/sglang-secrets.yaml"
    argv = flt.sglang_argv(PROFILES["vllm_mtp_3"], VLLM, dict(SERVER, config=secrets))
    assert argv[argv.index("--config") + 1] == "/etc/sglang/sglang-secrets.yaml"
    assert "--api-key" not in argv


def test_vllm_drift_reads_what_vllm_exposes_and_names_what_it_does_not():
    models = {"object": "list", "data": [{"id": "Qwen3.6-27B", "max_model_len": 65536}]}
    metrics = ('# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n'
               'vllm:cache_config_info{block_size="800",enable_prefix_caching="True",engine="0",'
               'gpu_memory_utilization="0.85",num_gpu_blocks="587"} 1.0\n')
    name = {"served_model_name": "Qwen3.6-27B"}
    d = engines.get("vllm").drift(models, metrics, PROFILES["vllm_mtp_3"], "0.33.0", name)
    assert d["lines"] == ["context_length: intended 131072, running 65536",
                          "mem_fraction_static: intended 0.9, running 0.85"]
    assert d["checked"] == 4 and "tp_size" in d["not_exposed"] and "speculative_num_steps" in d["not_exposed"]
    same = engines.get("vllm").drift({"data": [{"id": "Qwen3.6-27B", "max_model_len": 131072}]},
                          metrics.replace("0.85", "0.9"), PROFILES["vllm_mtp_3"], "0.33.0",
                          {"served_model_name": "Qwen3.6-27B"})
    assert same["differences"] == []
    gone = engines.get("vllm").drift(models, "", PROFILES["vllm_mtp_3"], "0.33.0")
    assert "mem_fraction_static: intended 0.9, running none (not reported by the server)" in gone["lines"]
    with pytest.raises(flt.ProfileError, match="did not return a model list"):
        engines.get("vllm").drift({"error": "x"}, metrics, PROFILES["vllm_mtp_3"], "0.33.0")


def test_vllm_parser_names_are_checked_against_vllms_registries():
    profiles = {"p": dict(PROFILES["vllm_mtp_3"], reasoning_parser="qwen_3")}
    errors = flt.sglang_profile_errors(profiles, "p")
    assert len(errors) == 1 and "reasoning_parser must be one of" in errors[0]
    assert "(vLLM 0.33.0), got 'qwen_3'; did you mean qwen3?" in errors[0]
    # SGLang's spelling of the coder parser is vLLM's too; its 'qwen25' is not
    bad = {"p": dict(PROFILES["vllm_mtp_3"], tool_call_parser="qwen25")}
    assert "tool_call_parser must be one of" in flt.sglang_profile_errors(bad, "p")[0]
