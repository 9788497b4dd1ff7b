"""The SGLang emulator's drafters and adaptive steps (emulator/args.py, adaptive.py,
knobs.py, scheduler.py): what SGLang 0.5.23's resolution refuses or overrides at start, the
gauges of the active speculative config, and the calibration of DFLASH (a table per block size)
and EAGLE-3 to the published figures. The profiles' drafter checks are in tests/test_drafters.py."""
from __future__ import annotations

import json
import urllib.request

import pytest

from emulator.adaptive import AdaptiveSlot, AdaptiveSteps
from emulator.knobs import KnobError, Knobs, dflash_block_probs, parse_block_table
from test_emulator import FAST, gen_body, post, real_requests, run_cli

pytestmark = pytest.mark.timeout(60)


def emulate(argv):
    from emulator import args as emu
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
    from emulator.args import drafter_load_error
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
    from emulator.cli import offline_scheduler
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
    assert 5.3 < s.expected_accept_length(128) < 5.584  # a coding prompt's context already counts
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
    a = AdaptiveSteps(3)
    seen = []
    for _ in range(200):
        a.on_verify([min(accepted, a.steps_for(batch))] * batch, batch)
        seen.append(a.steps_for(batch))
    assert set(seen[-40:]) == expect, seen[-40:]


def test_an_adaptive_ceiling_caps_a_step_down_never_a_step_up(tmp_path):
    """adaptive_spec_params.py _recompute_params: ceil(EMA x ceiling_coeff) caps a target at or
    below the current steps."""
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
    f = tmp_path / "adaptive.json"
    f.write_text(json.dumps({"ema_alpha": 0.5, "1": {"candidate_steps": [2, 4]}}))
    a = AdaptiveSteps(3, str(f))
    assert a.candidates() == {1: [2, 4]} and a.steps_for(1) == 4 and a.max_steps == 4
    f.write_text(json.dumps({"x": {}}))
    with pytest.raises(ValueError, match="at least one integer-string BS key"):
        AdaptiveSteps(3, str(f))




# --- adaptive steps at start: speculative_hook.py _init_adaptive_speculative_params -------------

ADAPTIVE = ["--speculative-algorithm", "NEXTN", "--speculative-adaptive"]
REFUSED_2 = ("--speculative-num-steps=2 is not in the adaptive config candidate_steps "
             "[0, 1, 3, 5, 7]. Pass one of those values.")


def spec_of(cfg):
    return tuple(cfg[k] for k in ("speculative_num_steps", "speculative_eagle_topk",
                                  "speculative_num_draft_tokens"))


def test_adaptive_steps_outside_the_candidates_are_refused_with_sglangs_message():
    """The union of the default slots' candidates is [0, 1, 3, 5, 7]: 2 steps is no candidate."""
    with pytest.raises(ValueError) as e:
        emulate(ADAPTIVE + ["--speculative-num-steps", "2"])
    assert str(e.value) == REFUSED_2
    with pytest.raises(ValueError, match=r"--speculative-num-steps=2 is not in"):  # EAGLE3 too
        emulate(["--speculative-algorithm", "EAGLE3", "--speculative-adaptive",
                 "--speculative-num-steps", "2"])


def test_the_refusal_ends_the_start_before_the_port_is_bound():
    from conftest import MODEL_ARGS
    proc, port = run_cli(list(MODEL_ARGS) + ADAPTIVE + ["--speculative-num-steps", "2"])
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == "ValueError: " + REFUSED_2


def test_adaptive_takes_a_candidate_and_its_middle_one_when_unset(caplog):
    # what SGLang 0.5.23 resolved for each (tests/contract/sglang_resolve.py): steps, topk, draft
    assert spec_of(emulate(ADAPTIVE + ["--speculative-num-steps", "3"])) == (3, 1, 4)
    assert spec_of(emulate(ADAPTIVE)) == (3, 1, 4)  # the middle of [0, 1, 3, 5, 7]
    assert spec_of(emulate(ADAPTIVE + ["--speculative-num-steps", "0"])) == (0, 1, 1)
    # the draft tokens follow the steps silently (set before _handle_eagle_family's warning)
    assert spec_of(emulate(ADAPTIVE + ["--speculative-num-steps", "3",
                                       "--speculative-num-draft-tokens", "6"])) == (3, 1, 4)
    assert spec_of(emulate(ADAPTIVE + ["--speculative-num-draft-tokens", "4"])) == (3, 1, 4)
    assert "adjusted" not in caplog.text


def test_an_adaptive_config_file_gives_the_candidates_the_steps_are_held_to(tmp_path):
    f = tmp_path / "adaptive.json"
    f.write_text(json.dumps({"1": {"candidate_steps": [2, 4]}}))
    conf = ["--speculative-adaptive-config", str(f)]
    assert spec_of(emulate(ADAPTIVE + conf + ["--speculative-num-steps", "2"])) == (2, 1, 3)
    assert spec_of(emulate(ADAPTIVE + conf)) == (4, 1, 5)  # [2, 4][2 // 2]
    with pytest.raises(ValueError, match=r"^--speculative-num-steps=3 is not in the adaptive config "
                                         r"candidate_steps \[2, 4\]\. Pass one of those values\.$"):
        emulate(ADAPTIVE + conf + ["--speculative-num-steps", "3"])


@pytest.mark.parametrize("content, error", [
    ({"1": {"candidate_steps": [1, -2]}},
     "BS 1: candidate_steps must be a list of non-negative ints, got [1, -2]"),
    ({"ema_alpha": 0.5}, "speculative_adaptive_config must contain at least one integer-string BS "
                         "key, e.g. {\"1\": {\"candidate_steps\": [1,3,7]}}. Got keys: ['ema_alpha']"),
])
def test_a_bad_adaptive_config_is_refused_at_start_as_sglang_words_it(tmp_path, content, error):
    f = tmp_path / "adaptive.json"
    f.write_text(json.dumps(content))
    with pytest.raises(ValueError) as e:
        emulate(ADAPTIVE + ["--speculative-adaptive-config", str(f)])
    assert str(e.value) == error
    with pytest.raises(FileNotFoundError):  # read by the resolution, not at the first batch
        emulate(ADAPTIVE + ["--speculative-adaptive-config", str(tmp_path / "missing.json")])


def test_adaptive_off_keeps_the_chain_rules():
    """Without adaptive (or switched off) the steps are the chain's own: 2 steps run."""
    assert spec_of(emulate(["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2",
                            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3"])) \
        == (2, 1, 3)


# --- buffers sized for every candidate: spec_info.py resolve_max_speculative_num_draft_tokens ----


def test_the_verify_state_is_allocated_for_the_largest_candidate_and_the_pools_are_not():
    """_handle_max_mamba_cache budgets the verify state at the resolved draft tokens (4); the
    pool allocates it for the largest width (7 steps + 1 = 8): the KV pool and the mamba slots are
    the static 3-step server's, the free memory less by the difference."""
    static, adapt = scheduler(NEXTN3).capacity, scheduler(NEXTN3 + ["--speculative-adaptive"]).capacity
    assert (adapt.max_total_num_tokens, adapt.max_mamba_cache_size, adapt.max_running_requests) == \
        (static.max_total_num_tokens, static.max_mamba_cache_size, static.max_running_requests)
    assert adapt.intermediate_ssm_gib == pytest.approx(static.intermediate_ssm_gib * 8 / 4)
    assert adapt.intermediate_conv_gib == pytest.approx(static.intermediate_conv_gib * (8 + 2) / (4 + 2))
    extra = adapt.intermediate_ssm_gib + adapt.intermediate_conv_gib \
        - static.intermediate_ssm_gib - static.intermediate_conv_gib
    assert adapt.available_gpu_mem_gib == pytest.approx(static.available_gpu_mem_gib - extra)
    assert extra > 1.0  # 5 slots x 4 more draft tokens x 72 MiB of SSM state, and the conv window


@pytest.mark.parametrize("argv, reserved", [
    (NEXTN3, 4), (NEXTN3 + ["--speculative-adaptive"], 8), ([], 0),
    (["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "5", "--speculative-eagle-topk", "1",
      "--speculative-num-draft-tokens", "6"], 6)])
def test_eagle_reserves_its_largest_draft_width_in_the_output_slots(argv, reserved):
    """managers/utils.py compute_num_reserved_tokens: max(topk x steps, the largest width)."""
    from emulator.server import EmulatorServer
    server = EmulatorServer.__new__(EmulatorServer)
    server.cfg = emulate(argv)
    assert server.num_reserved_tokens() == reserved


def test_dflash_reserves_no_output_slots(drafter_dir):
    from emulator.server import EmulatorServer
    server = EmulatorServer.__new__(EmulatorServer)
    server.cfg = emulate(dflash(drafter_dir, 16))
    assert server.num_reserved_tokens() == 0


# --- the active speculative config: sglang:spec_num_steps / spec_num_draft_tokens ---------------


def scrape(emu):
    """{metric name: (labels, value)} of the sample lines of /metrics."""
    out = {}
    for line in urllib.request.urlopen(emu.url + "/metrics", timeout=5).read().decode().splitlines():
        if line and not line.startswith("#"):
            name_labels, value = line.rsplit(" ", 1)
            name, _, labels = name_labels.partition("{")
            out.setdefault(name, ("{" + labels, float(value)))
    return out


def test_the_gauges_follow_the_adaptive_slot(emulator):
    """Drafts that fail move the batch-of-one slot from 3 steps to 1 after its 10 warmup and 5
    batches; the decode log line (every step here) reports the draft worker's active steps."""
    env = dict(FAST, SGLEMU_ACCEPT_PROBS="0.02")
    emu = emulator("nextn_3step", env=env, extra=["--enable-metrics", "--speculative-adaptive",
                                                  "--decode-log-interval", "1"])
    m = scrape(emu)
    assert m["sglang:spec_num_steps"][1] == 0 and m["sglang:spec_num_draft_tokens"][1] == 0
    post(emu.url + "/generate", gen_body(80))
    m = scrape(emu)
    assert m["sglang:spec_num_steps"] == (m["sglang:spec_accept_length"][0], 1.0)
    assert m["sglang:spec_num_draft_tokens"] == (m["sglang:num_running_reqs"][0], 2.0)
    assert m["sglang:spec_num_steps"][0] == ('{engine_type="unified",model_name="Qwen3.6-27B",'
                                             'moe_ep_rank="0",pp_rank="0",tp_rank="0"}')
    info = emu.get("/server_info")  # the scheduler's readback carries the runtime override
    assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (3, 4)
    state = info["internal_states"][0]
    assert (state["speculative_num_steps"], state["speculative_num_draft_tokens"]) == (1, 2)


def test_the_gauges_of_a_static_server_are_its_resolved_config(emulator, drafter_dir):
    emu = emulator("nextn_3step", env=FAST, extra=["--enable-metrics", "--decode-log-interval", "1"])
    post(emu.url + "/generate", gen_body(20))
    m = scrape(emu)
    assert (m["sglang:spec_num_steps"][1], m["sglang:spec_num_draft_tokens"][1]) == (3, 4)
    assert emu.get("/server_info")["internal_states"][0]["speculative_num_steps"] == 3
    # DFLASH's draft worker has no steps of its own: the resolved 1, and the block
    d = scheduler(dflash(drafter_dir, 16))
    assert d.active_spec_config() == (1, 16) and scheduler([]).active_spec_config() == (0, 0)


def test_a_slot_at_zero_steps_still_verifies_and_probes_upward(emulator, tmp_path):
    """At 0 steps SGLang still runs a (trivial) verify per decode step: the request's verify
    count and its histogram's 0 bucket grow, the slot counts the batch and, after its interval,
    probes the next candidate, where the drafts are accepted and it stays."""
    f = tmp_path / "adaptive.json"
    f.write_text(json.dumps({"warmup_batches": 0, "update_interval": 4,
                             "1": {"candidate_steps": [0, 3]}}))
    emu = emulator("nextn_3step", env=FAST, extra=[
        "--enable-metrics", "--decode-log-interval", "1", "--speculative-adaptive",
        "--speculative-adaptive-config", str(f), "--speculative-num-steps", "0"])
    assert emu.get("/server_info")["speculative_num_draft_tokens"] == 1
    post(emu.url + "/generate", gen_body(60))
    (r,) = real_requests(emu.stats())
    assert r["verify_ct"] >= 4 + 1  # 4 verifies at 0 steps, then 3-step ones
    assert r["correct_drafts_histogram"][0] >= 4 and r["correct_drafts"] > 0
    assert r["completion_tokens"] - 1 == r["verify_ct"] + r["correct_drafts"]
    m = scrape(emu)
    assert (m["sglang:spec_num_steps"][1], m["sglang:spec_num_draft_tokens"][1]) == (3, 4)


# --- DFLASH: each block size its own per-position acceptance ------------------------------------


BEFORE_16 = 1 + sum(0.83 ** i for i in range(1, 16))  # 5.584: every block at 0.83 per position


def test_a_block_of_8_is_no_prefix_of_a_block_of_16(drafter_dir):
    """The draft layers are non-causal over the block: a block of 8 drafts differently from the
    first 8 positions of a block of 16 (knobs.py DEFAULT_DFLASH_ACCEPT_BY_BLOCK)."""
    p8 = scheduler(dflash(drafter_dir, 8)).base_probs
    p16 = scheduler(dflash(drafter_dir, 16)).base_probs
    assert len(p8) == 7 and len(p16) == 15
    assert p8 != p16[:7]
    assert all(a < b for a, b in zip(p8, p16))  # the assumption: less accurate in a shorter block
    assert p8 == sorted(p8, reverse=True)  # the more so toward the block's end


def test_block_16_accepts_what_it_accepted_before(drafter_dir):
    """Block 16 keeps 0.83 per position: at an empty prompt its accept length is unchanged (5.58),
    at a coding prompt within 1 % (the context decline is refitted: 5.37 -> 5.40)."""
    s = scheduler(dflash(drafter_dir, 16))
    assert s.expected_accept_length(0) == pytest.approx(BEFORE_16, abs=0.005)
    assert s.expected_accept_length(128) == pytest.approx(5.371, rel=0.01)


def test_sampled_accept_length_of_block_16_is_its_expected_one(drafter_dir):
    s = scheduler(dflash(drafter_dir, 16), {"SGLEMU_SEED": "7"})
    runs = [s.simulate_decode(0, 1000) for _ in range(40)]
    al = sum(r["completion_tokens"] - 1 for r in runs) / float(sum(r["verify_ct"] for r in runs))
    assert al == pytest.approx(BEFORE_16, rel=0.03)


def test_a_block_between_listed_ones_interpolates_and_outside_takes_the_nearest():
    table = parse_block_table("4:0.8,0.7,0.6; 8:0.9")
    assert dflash_block_probs(table, 4) == [0.8, 0.7, 0.6]
    assert dflash_block_probs(table, 6) == pytest.approx([0.85, 0.8, 0.75, 0.75, 0.75])
    assert dflash_block_probs(table, 3) == [0.8, 0.7]  # below the smallest: its first positions
    assert dflash_block_probs(table, 10) == [0.9] * 9  # above the largest: its last repeats
    default = Knobs().dflash_accept_by_block
    assert sorted(default) == [2, 4, 8, 16]
    assert dflash_block_probs(default, 12) == pytest.approx(
        [(a + 0.83) / 2 for a in dflash_block_probs(default, 8) + [0.78] * 4])


def test_the_table_is_a_knob_and_the_old_single_probability_is_refused():
    k = Knobs.from_env({"SGLEMU_DFLASH_ACCEPT_BY_BLOCK": "16:0.9"})
    assert k.dflash_accept_by_block == {16: [0.9]}
    for bad, words in (("16:1.2", r"probabilities in \[0, 1\]"), ("4:0.8,0.8,0.8,0.8", "3 draft positions"),
                       ("x:0.8", "B:p1,p2"), ("1:0.5", "B:p1,p2"), ("4:0.8;4:0.7", "given twice")):
        with pytest.raises(KnobError, match=words):
            Knobs.from_env({"SGLEMU_DFLASH_ACCEPT_BY_BLOCK": bad})
    with pytest.raises(KnobError, match="replaced by SGLEMU_DFLASH_ACCEPT_BY_BLOCK"):
        Knobs.from_env({"SGLEMU_DFLASH_ACCEPT_PROB": "0.83"})
