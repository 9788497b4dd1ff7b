"""Drafter profiles on both engines (issue 33, first slice): DFLASH and EAGLE3 name a drafter by
path, SGLang's adaptive speculation is a setting, and what SGLang 0.5.23 would override with a
warning (speculative_hook.py _handle_dflash, _maybe_disable_adaptive) is refused by name."""
from __future__ import annotations

import json

import pytest

from sglang_perf import profile as flt

DRAFTER = "/srv/models/Qwen3.6-27B-DFlash"
# a stand-in drafter's size (the memory preflight's figures; not the published drafter's)
SIZE = {"params_b": 1.7, "kv_bytes_per_token": 10240}
SERVER = {"model_path": "/srv/models/Qwen3.6-27B", "served_model_name": "Qwen3.6-27B", "port": 30000}
BASE = {"tp_size": 2, "mem_fraction_static": 0.88, "context_length": 131072, "max_running_requests": 16}
DFLASH = dict(BASE, speculative_algorithm="DFLASH", speculative_num_draft_tokens=16,
              speculative_draft_model_path=DRAFTER, draft_model_size=SIZE)
EAGLE3 = dict(BASE, speculative_algorithm="EAGLE3", speculative_num_steps=3, speculative_eagle_topk=1,
              speculative_num_draft_tokens=4, speculative_draft_model_path="/srv/models/eagle3",
              draft_model_size=SIZE)
ADAPTIVE = dict(BASE, speculative_algorithm="NEXTN", speculative_num_steps=3, speculative_eagle_topk=1,
                speculative_num_draft_tokens=4, speculative_adaptive=True)


def errors(p, **kw):
    return flt.sglang_profile_errors({"p": p}, "p", **kw)


def pairs(argv):
    return {argv[i]: argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else True
            for i in range(len(argv)) if argv[i].startswith("--")}


def test_a_dflash_profile_renders_its_block_and_drafter_on_sglang():
    assert errors(DFLASH, version="0.5.23", gpu_count=2) == []
    flags = pairs(flt.sglang_argv(DFLASH, "0.5.23", dict(SERVER)))
    assert flags["--speculative-algorithm"] == "DFLASH"
    assert flags["--speculative-num-draft-tokens"] == "16"
    assert flags["--speculative-draft-model-path"] == DRAFTER
    assert "--speculative-num-steps" not in flags and "--speculative-eagle-topk" not in flags


@pytest.mark.parametrize("block", [2, 6, 16, 256])
def test_the_dflash_ceiling_is_its_block(block):
    p = dict(DFLASH, speculative_num_draft_tokens=block)
    assert errors(p, min_accept_len=block) == []
    assert "the accept length is at most %d" % block in errors(p, min_accept_len=block + 0.5)[0]


def test_a_block_of_one_drafts_nothing_and_is_refused():
    assert errors(dict(DFLASH, speculative_num_draft_tokens=1)) == [
        "sglang_profiles.p.speculative_num_draft_tokens must be an integer >= 2, got 1"]


def test_dflash_refuses_the_block_over_the_mamba_track_interval():
    p = dict(DFLASH, speculative_num_draft_tokens=257, mamba_cache_strategy="extra_buffer")
    assert errors(p) == ["sglang_profiles.p.speculative_num_draft_tokens (257) must not exceed the mamba "
                         "track interval (256) with mamba_cache_strategy extra_buffer"]


@pytest.mark.parametrize("key", ["speculative_num_steps", "speculative_eagle_topk"])
def test_dflash_refuses_what_sglang_would_override_to_one(key):
    assert errors(dict(DFLASH, **{key: 1})) == []
    assert errors(dict(DFLASH, **{key: 2})) == [
        "sglang_profiles.p.%s must be 1 (or unset) with DFLASH, got 2 (SGLang overrides it to 1 with "
        "a warning)" % key]


def test_eagle3_needs_its_drafter_and_nextns_chain_rules():
    assert errors(EAGLE3, version="0.5.23") == []
    no_drafter = dict(EAGLE3)
    del no_drafter["speculative_draft_model_path"]
    assert "speculative_algorithm EAGLE3 needs sglang_profiles.p.speculative_draft_model_path" in \
        errors(no_drafter)[0]
    assert "must be speculative_num_steps + 1 = 4" in errors(dict(EAGLE3, speculative_num_draft_tokens=6))[0]


def test_adaptive_speculation_renders_as_a_bare_flag_and_false_as_none():
    assert errors(ADAPTIVE, version="0.5.23") == []
    assert pairs(flt.sglang_argv(ADAPTIVE, "0.5.23", dict(SERVER)))["--speculative-adaptive"] is True
    assert "--speculative-adaptive" not in flt.sglang_argv(dict(ADAPTIVE, speculative_adaptive=False),
                                                           "0.5.23", dict(SERVER))
    assert errors(dict(ADAPTIVE, speculative_adaptive="yes")) == [
        "sglang_profiles.p.speculative_adaptive must be true or false, got 'yes'"]


def test_adaptive_speculation_without_speculation_is_refused():
    assert errors(dict(BASE, speculative_adaptive=True)) == [
        "sglang_profiles.p sets speculative_adaptive without speculative_algorithm: SGLang ignores "
        "them; set speculative_algorithm: NEXTN or remove them"]


def test_a_setting_newer_than_the_release_names_the_release_it_needs():
    assert "sglang_profiles.p.speculative_adaptive needs SGLang >= 0.5.13 (sglang_version is 0.5.10)" in \
        errors(ADAPTIVE, version="0.5.10")


@pytest.mark.parametrize("path", ["", "models/d", "~/d", "/srv/my models/d", 7])
def test_the_drafter_must_be_an_absolute_path(path):
    assert any("speculative_draft_model_path must be an absolute path on the host" in e
               for e in errors(dict(EAGLE3, speculative_draft_model_path=path)))


@pytest.mark.parametrize("algo, method, tokens", [("DFLASH", "dflash", 15), ("EAGLE3", "eagle3", 3)])
def test_vllm_takes_the_drafter_in_its_speculative_config_and_takeover_reads_it_back(algo, method, tokens):
    p = dict(BASE, engine="vllm", speculative_algorithm=algo, speculative_num_steps=tokens,
             speculative_draft_model_path=DRAFTER, draft_model_size=SIZE)
    assert errors(p, version="0.33.0") == []
    argv = flt.sglang_argv(p, "0.33.0", dict(SERVER))
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": method, "num_speculative_tokens": tokens, "model": DRAFTER}
    read = flt.sglang_command_profile({"engine": "vllm", "argv": argv, "args_from": 0}, "0.33.0")
    assert read["unknown"] == []
    assert flt.sglang_profile_diff(read["profile"], p) == []


def test_vllm_refuses_a_drafter_without_an_algorithm():
    p = dict(BASE, engine="vllm", speculative_draft_model_path=DRAFTER, draft_model_size=SIZE)
    assert errors(p) == ["sglang_profiles.p sets speculative_draft_model_path without speculative_algorithm: "
                         "set speculative_algorithm: DFLASH or EAGLE3, or remove it"]


def emulate(argv):
    from bench.emulator import args as emu
    ns = emu.build_parser().parse_args(["--model-path", "/nonexistent/m", "--tp-size", "2"] + argv)
    return emu.resolve(ns, "Qwen3_5ForConditionalGeneration")


@pytest.mark.parametrize("argv", [
    ["--speculative-algorithm", "DFLASH", "--speculative-num-draft-tokens", "16",
     "--speculative-draft-model-path", DRAFTER],
    ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
     "--speculative-num-draft-tokens", "4", "--speculative-draft-model-path", "/srv/models/eagle3"],
    ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
     "--speculative-num-draft-tokens", "4", "--speculative-adaptive"],
])
def test_the_emulator_refuses_to_start_what_it_cannot_emulate(argv):
    """A drafter or adaptive steps answered with the MTP head's figures would be a belief, not an
    emulation: the emulator stops at start-up instead."""
    with pytest.raises(NotImplementedError, match="not emulated"):
        emulate(argv)


def test_the_emulator_switches_adaptive_off_where_sglang_does(caplog):
    with pytest.raises(NotImplementedError, match="DFLASH is a valid SGLang 0.5.23 algorithm"):
        emulate(["--speculative-algorithm", "DFLASH", "--speculative-num-draft-tokens", "16",
                 "--speculative-adaptive"])
    assert "speculative_adaptive disabled: speculative_algorithm=DFLASH (only EAGLE/EAGLE3 are supported)" \
        in caplog.text


# --- the memory preflight counts the drafter --------------------------------------------------


def test_a_drafter_without_its_size_is_refused_and_a_size_without_a_drafter_too():
    assert errors({k: v for k, v in DFLASH.items() if k != "draft_model_size"}) == [
        "sglang_profiles.p: speculative_draft_model_path needs sglang_profiles.p.draft_model_size "
        "{params_b, kv_bytes_per_token}: the drafter's weights and its cache per token, which the memory "
        "preflight counts"]
    assert errors(dict(ADAPTIVE, draft_model_size=SIZE)) == [
        "sglang_profiles.p.draft_model_size is set without speculative_draft_model_path: remove it"]


@pytest.mark.parametrize("size, words", [
    ({"params_b": 0, "kv_bytes_per_token": 1}, "draft_model_size.params_b must be the drafter's parameters"),
    ({"params_b": 1.7, "kv_bytes_per_token": -1}, "draft_model_size.kv_bytes_per_token must be the bytes"),
    ({"params_b": "2B", "kv_bytes_per_token": 0}, "params_b must be the drafter's parameters in billions"),
    ({"params": 1.7}, "draft_model_size must be a mapping of params_b and kv_bytes_per_token"),
    ([1.7], "draft_model_size must be a mapping"),
])
def test_bad_drafter_sizes_are_named(size, words):
    assert any(words in e for e in errors(dict(DFLASH, draft_model_size=size))), errors(
        dict(DFLASH, draft_model_size=size))


def test_the_drafters_weights_replace_the_mtp_modules_and_its_cache_shares_each_token():
    from conftest import role_defaults
    from sglang_perf import capacity
    model = role_defaults()["sglang_model_size"]
    hardware = {"gpu_count": 2, "gpu_memory_gib": 48}
    p = dict(DFLASH, mamba_full_memory_ratio=0.5)
    assert errors(p) == []
    with_drafter = capacity.profile_memory_budget(p, model, hardware)
    gib = 1024 ** 3
    assert with_drafter["mtp_gib"] == pytest.approx(1.7e9 * 2 / 2 / gib)
    assert "drafter weights %.2f GiB = 1.7 B params x 2 bytes / tp 2" % with_drafter["mtp_gib"] in \
        with_drafter["lines"]
    # the KV share over target + drafter bytes per token: (65536 + 10240) / 2 per GPU
    assert with_drafter["kv_tokens"] == int(with_drafter["kv_share_gib"] * gib // ((65536 + 10240) / 2))
    # the same drafter with no cache of its own holds more tokens; a larger one fewer
    lean = capacity.profile_memory_budget(dict(p, draft_model_size=dict(SIZE, kv_bytes_per_token=0)),
                                          model, hardware)
    assert lean["kv_tokens"] > with_drafter["kv_tokens"]
    huge = capacity.profile_memory_budget(dict(p, draft_model_size=dict(SIZE, params_b=20)), model, hardware)
    assert not huge["fits"] and "incl. 18.63 GiB drafter" in huge["problems"][0]
