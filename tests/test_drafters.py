"""Drafter profiles on both engines (issue 33): DFLASH and EAGLE3 name a drafter as an artifact
(draft_model: repository, revision, size; its path derived by sglang_perf.drafter), SGLang's
adaptive speculation is a setting, and what SGLang 0.5.23 would refuse at start-up or override
with a warning (speculative_hook.py _handle_dflash, _maybe_disable_adaptive) is refused by name.
Profiles given to sglang_profile_errors here are placed (drafter.place ran: the path is set)."""
from __future__ import annotations

import json

import pytest

from sglang_perf import profile as flt

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


def emulate(argv):
    from bench.emulator import args as emu
    ns = emu.build_parser().parse_args(["--model-path", "/nonexistent/m", "--tp-size", "2"] + argv)
    return emu.resolve(ns, "Qwen3_5ForConditionalGeneration")


@pytest.fixture
def drafter_dir(tmp_path):
    """A stand-in drafter directory: its config.json as z-lab's DFlash drafters carry it."""
    d = tmp_path / "Qwen3.6-27B-DFlash"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["DFlashDraftModel"],
                                               "dflash_config": {"block_size": 16}}))
    return str(d)


def test_the_emulator_resolves_dflash_as_sglang_does(drafter_dir, caplog):
    cfg = emulate(["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", drafter_dir,
                   "--speculative-num-steps", "3"])
    assert cfg["speculative_num_draft_tokens"] == 16  # the draft's config.json block_size
    assert (cfg["speculative_num_steps"], cfg["speculative_eagle_topk"]) == (1, 1)
    assert cfg["max_running_requests"] == 48
    assert "DFLASH only supports speculative_num_steps == 1; overriding speculative_num_steps=3 to 1." \
        in caplog.text


@pytest.mark.parametrize("extra, error", [
    (["--pp-size", "2"], "Currently DFLASH speculative decoding only supports pp_size == 1."),
    (["--speculative-draft-window-size", "8"], "--speculative-draft-window-size must be >= "),
])
def test_the_emulator_refuses_at_start_what_sglang_refuses(drafter_dir, extra, error):
    with pytest.raises(ValueError, match=error):
        emulate(["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", drafter_dir] + extra)


def test_a_drafter_without_its_config_fails_the_load_not_the_arguments(tmp_path, drafter_dir):
    """SGLang 0.5.23's resolution takes both; its draft worker's load fails."""
    from bench.emulator.args import drafter_load_error
    eagle3 = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
              "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    cfg = emulate(eagle3 + ["--speculative-draft-model-path", str(tmp_path)])
    assert "no config.json there" in drafter_load_error(cfg)
    assert drafter_load_error(dict(cfg, speculative_draft_model_path=drafter_dir)) is None
    assert "--speculative-draft-model-path is unset" in drafter_load_error(emulate(eagle3))


def test_the_emulator_switches_adaptive_off_where_sglang_does(drafter_dir, caplog):
    cfg = emulate(["--speculative-algorithm", "DFLASH", "--speculative-num-draft-tokens", "16",
                   "--speculative-draft-model-path", drafter_dir, "--speculative-adaptive"])
    assert cfg["speculative_adaptive"] is False
    assert "speculative_adaptive disabled: speculative_algorithm=DFLASH (only EAGLE/EAGLE3 are supported)" \
        in caplog.text
    assert emulate(["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                    "--speculative-adaptive"])["speculative_adaptive"] is True


# --- the emulator's drafters: its calibration to the published figures (knobs.py) ---------------


def scheduler(argv, env=None):
    from bench.emulator.cli import offline_scheduler
    return offline_scheduler(["--model-path", "/nonexistent/m", "--tp-size", "2",
                              "--mem-fraction-static", "0.88", "--context-length", "131072",
                              "--max-running-requests", "16"] + argv, dict(env or {}))


NEXTN3 = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk",
          "1", "--speculative-num-draft-tokens", "4"]


def dflash(drafter_dir, block):
    return ["--speculative-algorithm", "DFLASH", "--speculative-num-draft-tokens", str(block),
            "--speculative-draft-model-path", drafter_dir]


def test_a_dflash_block_of_16_accepts_what_z_lab_reports(drafter_dir):
    s = scheduler(dflash(drafter_dir, 16))
    assert s.expected_accept_length(0) == pytest.approx(5.58, abs=0.01)  # dflash#170: ~5.5
    assert 5.3 < s.expected_accept_length(128) < 5.58  # a coding prompt's context already counts
    assert s.steps == 15 and len(s.base_probs) == 15
    # one drafter forward per block: the target's step, the overhead, 12.2 ms, 12 x 0.5 ms
    assert s.cycle_s == pytest.approx((37.45 + 4.0 + 12.2 + 6.0) / 1000)


@pytest.mark.parametrize("block, ahead", [(4, False), (6, True)])
def test_at_32k_dflash_needs_5_draft_tokens_to_beat_mtp(drafter_dir, block, ahead):
    """vllm-project/recipes PR #839: at long context 3 draft tokens lost to MTP, 5 beat it."""
    ratio = scheduler(dflash(drafter_dir, block)).decode_tok_s_at(32768) / \
        scheduler(NEXTN3).decode_tok_s_at(32768)
    assert (ratio > 1.0) is ahead and abs(ratio - 1.0) < 0.06, ratio


def test_at_32k_a_dflash_block_of_4_accepts_090_of_nextn_3_steps(drafter_dir):
    """vllm-project/recipes PR #839: at long context DFlash with 3 tokens 2.5-2.7, MTP 2.8-3.0."""
    ratio = scheduler(dflash(drafter_dir, 4)).expected_accept_length(32768) / \
        scheduler(NEXTN3).expected_accept_length(32768)
    assert ratio == pytest.approx(0.90, abs=0.01)


def test_thinking_cuts_dflash_drafts_to_25_of_60_and_mtp_less(drafter_dir):
    """z-lab/dflash#133: acceptance 60% with thinking off, 25% on: the drafts accepted per verify."""
    d = scheduler(dflash(drafter_dir, 16))
    drafts = (d.expected_accept_length(128, True) - 1) / (d.expected_accept_length(128) - 1)
    assert drafts == pytest.approx(25 / 60, abs=0.01)
    m = scheduler(NEXTN3)
    assert (m.expected_accept_length(128, True) - 1) / (m.expected_accept_length(128) - 1) > drafts + 0.2


def test_an_eagle3_chain_accepts_near_its_cards_figure(drafter_dir):
    s = scheduler(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                   "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                   "--speculative-draft-model-path", drafter_dir])
    assert s.expected_accept_length(0) == pytest.approx(1 + 0.62 + 0.62 ** 2 + 0.62 ** 3)


def test_the_drafters_weights_and_cache_come_off_the_pools(drafter_dir):
    mtp, draft = scheduler(NEXTN3).capacity, scheduler(dflash(drafter_dir, 16)).capacity
    assert draft.draft_weights_gib == pytest.approx(1.73e9 * 2 / 2 / 2 ** 30)
    assert mtp.draft_weights_gib == pytest.approx(2.805)
    # the drafter's own cache, 10,240 bytes per token over 2 GPUs, beside the target's per token
    assert draft.kv_bytes_per_token == draft.target_kv_bytes_per_token + 10240 // 2


@pytest.mark.parametrize("accepted, batch, expect", [
    (3, 1, {5}), (6, 1, {7}), (0, 1, {1}), (0, 8, {0, 1}), (3, 8, {3}), (1, 32, {1}), (3, 64, {0}),
    (2, 1000, {0}), (0, 32, {0, 1})])
def test_adaptive_steps_follow_acceptance_and_batch_size(accepted, batch, expect):
    """SGLang's slots (adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG): bs 1 [1, 3, 5, 7], bs 8
    [0, 1, 3], bs 32 [0, 1], bs 64 [0]; after 10 warmup batches the EMA moves a step every 5 (from
    0 steps a slot probes the next candidate, then falls back: it alternates)."""
    from bench.emulator.scheduler import AdaptiveSteps
    a = AdaptiveSteps(3)
    seen = []
    for _ in range(200):
        a.on_verify([min(accepted, a.steps_for(batch))] * batch, batch)
        seen.append(a.steps_for(batch))
    assert set(seen[-40:]) == expect, seen[-40:]


def test_an_adaptive_ceiling_caps_a_step_down_never_a_step_up(tmp_path):
    """adaptive_spec_params.py _recompute_params: ceil(EMA x ceiling_coeff) caps a target at or
    below the current steps."""
    from bench.emulator.scheduler import AdaptiveSlot
    cfg = {"candidate_steps": [1, 3, 5, 7], "down_hysteresis": -0.25, "warmup_batches": 0,
           "update_interval": 1}
    plain, capped = AdaptiveSlot(5, cfg), AdaptiveSlot(5, dict(cfg, ceiling_coeff=0.5))
    for slot in (plain, capped):
        slot.ema = 4.2  # kept near 4.2 accepted drafts: 5 steps stay
        slot.update([4] * 4)
    assert plain.steps == 5 and capped.steps == 3  # ceil(4.16 x 0.5) = 3
    capped = AdaptiveSlot(3, dict(cfg, ceiling_coeff=0.5))
    capped.ema = 6.0
    capped.update([6])
    assert capped.steps == 7  # a step up is not capped


def test_an_adaptive_server_runs_fewer_steps_when_drafts_fail():
    s = scheduler(NEXTN3 + ["--speculative-adaptive"], {"SGLEMU_ACCEPT_PROBS": "0.05"})
    assert s.adaptive is not None and s.steps_now(1) == 3
    for _ in range(60):
        s.adaptive.on_verify([0], 1)
    assert s.steps_now(1) == 1 and s.cycle_for(1) < s.cycle_for(3)


def test_an_adaptive_config_file_sets_the_candidates(tmp_path):
    from bench.emulator.scheduler import AdaptiveSteps
    f = tmp_path / "adaptive.json"
    f.write_text(json.dumps({"ema_alpha": 0.5, "1": {"candidate_steps": [2, 4]}}))
    a = AdaptiveSteps(3, str(f))
    assert a.candidates() == {1: [2, 4]} and a.steps_for(1) == 4 and a.max_steps == 4
    f.write_text(json.dumps({"x": {}}))
    with pytest.raises(ValueError, match="at least one integer-string BS key"):
        AdaptiveSteps(3, str(f))


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
    from sglang_perf import drafter
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
    from sglang_perf import drafter
    _, problems = drafter.place({"d": DFLASH}, "/srv/models")
    assert problems == ["sglang_profiles.d.speculative_draft_model_path is derived from draft_model (its "
                        "path, else beside the target): remove it, and name the drafter with draft_model "
                        "{repo, revision, params_b, kv_bytes_per_token} (path: a directory loaded in place)"]


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
