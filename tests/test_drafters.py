"""Drafter profiles on both engines (issue 33): DFLASH and EAGLE3 name a drafter as an artifact
(draft_model: repository, revision, size; its path derived by sglang_perf.plan.drafter), SGLang's
adaptive speculation is a setting, and what SGLang 0.5.23 would refuse at start-up or override
with a warning (speculative_hook.py _handle_dflash, _maybe_disable_adaptive) is refused by name.
Profiles given to sglang_profile_errors here are placed (drafter.place ran: the path is set).
The emulator's own drafters and adaptive steps: tests/test_emulator_drafters.py."""
from __future__ import annotations

import json

import pytest

from sglang_perf.plan import profile as flt

DRAFTER = "/srv/models/Qwen3.6-27B-DFlash"
# a drafter as a profile names it (the size: the memory preflight's figures)
SIZE = {"repo": "z-lab/Qwen3.6-27B-DFlash", "revision": "main", "params_b": 1.7,
        "kv_bytes_per_token": 10240}
SERVER = {"model_path": "/srv/models/Qwen3.6-27B", "served_model_name": "Qwen3.6-27B", "port": 30000}
BASE = {"tp_size": 2, "mem_fraction_static": 0.88, "context_length": 131072, "max_running_requests": 16}
DFLASH = dict(BASE, speculative_algorithm="DFLASH", speculative_num_draft_tokens=16,
              speculative_draft_model_path=DRAFTER, draft_model=SIZE)
EAGLE3 = dict(BASE, speculative_algorithm="EAGLE3", speculative_num_steps=3, speculative_eagle_topk=1,
              speculative_num_draft_tokens=4, speculative_draft_model_path="/srv/models/eagle3",
              draft_model=SIZE)
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
    assert "speculative_algorithm EAGLE3 needs sglang_profiles.p.draft_model {repo, revision, " \
        "params_b, kv_bytes_per_token}" in errors(no_drafter)[0]
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
             speculative_draft_model_path=DRAFTER, draft_model=SIZE)
    assert errors(p, version="0.33.0") == []
    argv = flt.sglang_argv(p, "0.33.0", dict(SERVER))
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": method, "num_speculative_tokens": tokens, "model": DRAFTER}
    read = flt.sglang_command_profile({"engine": "vllm", "argv": argv, "args_from": 0}, "0.33.0")
    assert read["unknown"] == []
    assert flt.sglang_profile_diff(read["profile"], p) == []


def test_vllm_refuses_a_drafter_without_an_algorithm():
    p = dict(BASE, engine="vllm", speculative_draft_model_path=DRAFTER, draft_model=SIZE)
    assert errors(p) == ["sglang_profiles.p names a drafter (draft_model) without speculative_algorithm: "
                         "set speculative_algorithm: DFLASH or EAGLE3, or remove it"]


# --- the memory preflight counts the drafter --------------------------------------------------


@pytest.mark.parametrize("change, words", [
    ({"params_b": 0}, "draft_model.params_b must be its weights in billions of parameters (> 0), got 0"),
    ({"params_b": "2B"}, "draft_model.params_b must be its weights"),
    ({"kv_bytes_per_token": -1}, "draft_model.kv_bytes_per_token must be its cache per target token"),
    ({"kv_bytes_per_token": None}, "draft_model.kv_bytes_per_token must be"),
    ({"repo": "Qwen3.6-27B-DFlash"}, "draft_model.repo must be a Hugging Face repository ORG/NAME"),
    ({"revision": "my branch"}, "draft_model.revision must be a branch, a tag or a commit sha"),
    ({"path": "models/d"}, "draft_model.path must be an absolute directory on the host"),
    ({"size": 3}, "draft_model.size: unknown key (known: repo, revision, path, params_b, "
                  "kv_bytes_per_token)"),
])
def test_a_bad_draft_model_is_named_by_its_key(change, words):
    p = dict(DFLASH, draft_model=dict(SIZE, **change))
    assert any(words in e for e in errors(p)), errors(p)


def test_a_draft_model_that_is_no_mapping_is_named():
    assert errors(dict(DFLASH, draft_model="z-lab/Qwen3.6-27B-DFlash")) == [
        "sglang_profiles.p.draft_model must be a mapping of repo, revision, path, params_b, "
        "kv_bytes_per_token, got 'z-lab/Qwen3.6-27B-DFlash'"]


def test_the_drafter_is_placed_beside_the_target_or_loaded_in_place():
    from sglang_perf.plan import drafter
    raw = {k: v for k, v in DFLASH.items() if k != "speculative_draft_model_path"}
    placed, problems = drafter.place({"d": raw, "e": dict(raw, draft_model=dict(SIZE, path="/data/dflash"))},
                                     "/srv/models/")
    assert problems == []
    assert placed["d"]["speculative_draft_model_path"] == "/srv/models/Qwen3.6-27B-DFlash"
    assert placed["e"]["speculative_draft_model_path"] == "/data/dflash"
    assert "speculative_draft_model_path" not in raw  # the input is not changed
    # beside the target: the role downloads it there; in place: loaded as it is, never downloaded into
    assert drafter.artifact(placed["d"], 16) == {"repo": "z-lab/Qwen3.6-27B-DFlash", "revision": "main",
                                                 "path": "/srv/models/Qwen3.6-27B-DFlash", "download": True,
                                                 "block": 16}
    # the block is a DFLASH drafter's: an EAGLE-3 drafter's config says none
    eagle = dict(placed["d"], speculative_algorithm="EAGLE3")
    assert drafter.artifact(eagle, 4)["block"] is None
    assert drafter.artifact(placed["e"])["path"] == "/data/dflash"
    assert drafter.artifact(placed["e"])["download"] is False
    assert drafter.artifact(ADAPTIVE) is None and drafter.artifact(raw) is None  # none, or not placed


def test_a_drafter_path_set_by_hand_is_refused_naming_draft_model():
    from sglang_perf.plan import drafter
    _, problems = drafter.place({"d": DFLASH}, "/srv/models")
    assert problems == ["sglang_profiles.d.speculative_draft_model_path is derived from draft_model (its "
                        "path, else beside the target): remove it, and name the drafter with draft_model "
                        "{repo, revision, params_b, kv_bytes_per_token} (path: a directory loaded in place)"]


def test_the_drafters_weights_replace_the_mtp_modules_and_its_cache_shares_each_token():
    from conftest import role_defaults
    from sglang_perf.plan import capacity
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
    lean = capacity.profile_memory_budget(dict(p, draft_model=dict(SIZE, kv_bytes_per_token=0)),
                                          model, hardware)
    assert lean["kv_tokens"] > with_drafter["kv_tokens"]
    huge = capacity.profile_memory_budget(dict(p, draft_model=dict(SIZE, params_b=20)), model, hardware)
    assert not huge["fits"] and "incl. 18.63 GiB drafter" in huge["problems"][0]


# --- what SGLang 0.5.23 refuses at start-up or overrides, refused by name ------------------------


def test_dflash_refuses_pipeline_parallelism():
    assert errors(dict(DFLASH, pp_size=1)) == []
    assert errors(dict(DFLASH, pp_size=2)) == [
        "sglang_profiles.p.pp_size must be 1 with DFLASH, got 2 (SGLang: 'Currently DFLASH speculative "
        "decoding only supports pp_size == 1')"]
    assert errors(dict(ADAPTIVE, pp_size=2)) == []  # NEXTN takes it


@pytest.mark.parametrize("window, ok", [(15, False), (16, True), (2048, True)])
def test_a_draft_window_must_hold_a_block(window, ok):
    found = errors(dict(DFLASH, speculative_draft_window_size=window))
    assert found == ([] if ok else [
        "sglang_profiles.p.speculative_draft_window_size (15) must hold a whole block: at least "
        "speculative_num_draft_tokens (16) (SGLang refuses a smaller window at start-up)"])


@pytest.mark.parametrize("backend, cc, ok", [
    ("flashinfer", 8.6, True), ("triton", 8.6, True), ("fa3", 8.6, True), ("fa3", 9.0, True),
    ("fa3", 10.0, False), ("fa4", 8.6, False), ("fa4", 9.0, True), ("trtllm_mha", 8.6, False),
    ("trtllm_mha", 10.0, True), ("ascend", 8.6, False), ("intel_xpu", 9.0, False),
])
def test_a_draft_attention_backend_the_gpus_cannot_run_is_refused(backend, cc, ok):
    p = dict(DFLASH, speculative_draft_attention_backend=backend)
    found = errors(p, version="0.5.23", hardware={"gpu_count": 2, "compute_capability": cc})
    assert (found == []) is ok, found
    if not ok:
        assert found[0].startswith("sglang_profiles.p.speculative_draft_attention_backend %s " % backend)
        assert "sglang_hardware.compute_capability" in found[0]
    # without the host's compute capability the backend is judged by name only
    assert errors(p, version="0.5.23") == []


def test_a_draft_attention_backend_sglang_would_replace_is_refused():
    found = errors(dict(DFLASH, speculative_draft_attention_backend="flash_attn"), version="0.5.23")
    assert len(found) == 1
    assert "speculative_draft_attention_backend must be one of flashinfer, fa3" in found[0]


def test_an_adaptive_config_without_adaptive_is_refused():
    cfg = "/etc/sglang/adaptive.json"
    assert errors(dict(ADAPTIVE, speculative_adaptive_config=cfg), version="0.5.23") == []
    assert errors(dict(ADAPTIVE, speculative_adaptive=False, speculative_adaptive_config=cfg)) == [
        "sglang_profiles.p.speculative_adaptive_config is read only with speculative_adaptive: true "
        "(SGLang ignores it otherwise): set both or remove it"]
    assert pairs(flt.sglang_argv(dict(ADAPTIVE, speculative_adaptive_config=cfg), "0.5.23", dict(SERVER)))[
        "--speculative-adaptive-config"] == cfg


@pytest.mark.parametrize("key, value", [("speculative_draft_window_size", 2048),
                                        ("speculative_draft_attention_backend", "flashinfer"),
                                        ("speculative_adaptive_config", "/etc/a.json")])
def test_vllm_refuses_sglangs_drafter_settings_by_name(key, value):
    p = dict(BASE, engine="vllm", speculative_algorithm="DFLASH", speculative_num_steps=15,
             speculative_draft_model_path=DRAFTER, draft_model=SIZE, **{key: value})
    found = errors(p, version="0.33.0")
    assert len(found) == 1 and found[0].startswith("sglang_profiles.p.%s has no counterpart in vLLM" % key)


def test_pipeline_parallelism_renders_on_both_engines():
    assert pairs(flt.sglang_argv(dict(ADAPTIVE, pp_size=2), "0.5.23", dict(SERVER)))["--pp-size"] == "2"
    vllm = dict(BASE, engine="vllm", pp_size=2)
    assert pairs(flt.sglang_argv(vllm, "0.33.0", dict(SERVER)))["--pipeline-parallel-size"] == "2"


@pytest.mark.parametrize("version, refused", [
    ("0.5.23", (2, 4, 6)), ("0.5.19", (2, 4, 5, 6)),
])
def test_adaptive_speculation_starts_from_one_of_the_releases_candidate_steps(version, refused):
    """SGLang refuses at start-up an adaptive server whose steps are not among its default
    config's candidates (0.5.19: 0, 1, 3, 7; 0.5.23: 0, 1, 3, 5, 7; tests/test_contract.py holds
    both against SGLang's resolution); a config file of the operator's names its own."""
    for steps in range(1, 8):
        p = dict(ADAPTIVE, speculative_num_steps=steps, speculative_num_draft_tokens=steps + 1)
        said = [e for e in errors(p, version=version) if "with speculative_adaptive on SGLang" in e]
        if steps in refused:
            candidates = "0, 1, 3, 5, 7" if version == "0.5.23" else "0, 1, 3, 7"
            assert said == ["sglang_profiles.p.speculative_num_steps must be one of %s with "
                            "speculative_adaptive on SGLang %s, got %d (SGLang refuses it at start-up: "
                            "'not in the adaptive config candidate_steps'; or name the candidates in "
                            "speculative_adaptive_config)" % (candidates, version, steps)]
        else:
            assert said == [], (steps, said)
        # the candidates of an operator's config file are on the host: not second-guessed here
        with_config = dict(p, speculative_adaptive_config="/etc/sglang/adaptive.json")
        assert [e for e in errors(with_config, version=version) if "candidate" in e] == []
        # without adaptive speculation any depth goes
        plain = dict(p, speculative_adaptive=None)
        assert [e for e in errors(plain, version=version) if "candidate" in e] == []
