"""The roofline and memory-budget arithmetic (plugins/module_utils/sglang_perf/plan/capacity.py and its
filter) against figures computed by hand, the team's original measured figures, and the refusals."""
from __future__ import annotations

import pytest
import yaml

from conftest import ROOT, role_defaults
from sglang_perf.plan import capacity as filt
from sglang_perf.plan import capacity

DEFAULTS = role_defaults()
MODEL = DEFAULTS["sglang_model_size"]
PROFILES = DEFAULTS["sglang_profiles"]
A6000x2 = yaml.safe_load((ROOT / "inventories/production/group_vars/sglang_servers/main.yml")
                         .read_text())["sglang_hardware"]
GIB = 2 ** 30


def test_the_inventories_carry_the_a6000_and_qwen_figures():
    assert A6000x2 == {"gpu_count": 2, "gpu_bandwidth_gbs": 768, "gpu_memory_gib": 48,
                       "compute_capability": 8.6}
    assert MODEL["params_b"] == 27.78 and MODEL["dtype_bytes"] == 2
    local = yaml.safe_load((ROOT / "inventories/local/group_vars/sglang_servers.yml").read_text())
    assert local["sglang_hardware"] == A6000x2


def test_roofline_without_speculation_is_bandwidth_over_weight_bytes():
    r = capacity.roofline(MODEL, A6000x2, 0, None, 26.7)
    # by hand: 27.78e9 params x 2 bytes = 55.56 GB; 2 x 768 GB/s = 1536 GB/s; 1536 / 55.56
    assert r["bytes_per_cycle_gb"] == pytest.approx(55.56)
    assert r["ceiling_tok_s"] == pytest.approx(27.646, abs=1e-3)
    assert r["share_pct"] == pytest.approx(26.7 / 27.646 * 100, abs=0.01)  # the original logs' 26.7: 96.6%
    assert r["accept_len"] == 1.0


def test_roofline_of_the_3_step_profile_matches_the_original_notes_70_to_77():
    # by hand: per draft step (0.425 + 1.2714) B params x 2 bytes = 3.3928 GB; 3 steps = 10.1784;
    # cycle 65.7384 GB; 1536 / 65.7384 = 23.3653 cycles/s
    lo = capacity.roofline(MODEL, A6000x2, 3, 3.0, 55.0)
    hi = capacity.roofline(MODEL, A6000x2, 3, 3.3)
    assert lo["per_draft_step_gb"] == pytest.approx(3.3928)
    assert lo["bytes_per_cycle_gb"] == pytest.approx(65.7384)  # the original notes: "~66 GB"
    assert lo["cycles_per_s"] == pytest.approx(23.3653, abs=1e-4)
    assert lo["ceiling_tok_s"] == pytest.approx(70.096, abs=1e-3)  # the original notes: 70-77 tok/s
    assert hi["ceiling_tok_s"] == pytest.approx(77.105, abs=1e-3)
    assert lo["share_pct"] == pytest.approx(55.0 / 70.096 * 100, abs=0.01)
    assert hi["share_pct"] is None
    assert "2 GPUs x 768 GB/s / 65.74 GB per verify cycle x accept length 3.00 = 70.1 tok/s" \
        == lo["formula"]


def test_roofline_without_a_measured_accept_length_uses_the_maximum_and_says_so():
    r = capacity.roofline(MODEL, A6000x2, 3, None)
    assert r["accept_len"] == 4.0 and "steps + 1 = 4" in r["note"]


@pytest.mark.parametrize("model, hardware, needle", [
    (dict(MODEL, params_b=0), A6000x2, "model.params_b must be > 0"),
    (dict(MODEL, params_b="27B"), A6000x2, "model.params_b must be a number >= 0"),
    (MODEL, dict(A6000x2, gpu_bandwidth_gbs=None), "hardware.gpu_bandwidth_gbs is required"),
    (MODEL, dict(A6000x2, gpus=2), "hardware: unknown key gpus"),
    ({k: v for k, v in MODEL.items() if k != "lm_head_params_b" and k != "mtp_layer_params_b"},
     A6000x2, "needed for the speculative roofline"),
])
def test_bad_size_figures_are_named(model, hardware, needle):
    with pytest.raises(capacity.CapacityError) as e:
        capacity.roofline(model, hardware, 3, 3.0)
    assert needle in str(e.value)


def budget(profile, **kw):
    return filt.profile_memory_budget(profile, MODEL, A6000x2, **kw)


def test_budget_of_the_3_step_profile_by_hand():
    b = budget(PROFILES["nextn_3step"])
    # 48 GiB x 0.88; weights 27.78e9 x 2 / 2 bytes; MTP 2.968e9 x 2 / 2 bytes
    assert b["budget_gib"] == pytest.approx(42.24)
    assert b["weights_gib"] == pytest.approx(27.78e9 / GIB)        # 25.87 GiB
    assert b["mtp_gib"] == pytest.approx(2.968e9 / GIB)            # 2.76 GiB
    rest = 42.24 - (27.78e9 + 2.968e9) / GIB
    assert b["rest_gib"] == pytest.approx(rest)
    # mamba_full_memory_ratio 0.5: mamba gets rest x 0.5 / 1.5, KV the other two thirds
    assert b["mamba_share_gib"] == pytest.approx(rest / 3)
    # 144 MiB per GPU per request (state) x (1 + 4 draft intermediates)
    assert b["mamba_gib_per_request"] == pytest.approx(5 * 144 / 1024)
    assert b["mamba_requests"] == int((rest / 3) / (5 * 144 / 1024)) == 6
    # 65536 bytes per token / tp 2 = 32 KiB per GPU
    assert b["kv_tokens"] == int(rest * 2 / 3 * GIB // 32768)
    assert b["fits"] is True and b["problems"] == []
    assert b["effective_running_requests"] == 6  # the mamba share, not max_running_requests 16


def test_budget_compared_with_the_original_server_log():
    """The original server log: weights 25.64 GB, MTP 2.79-2.82 GB per GPU; with
    max_running_requests 4 and 4 draft tokens, mamba 3.52 GB SSM state (24 slots + 1) and 2.81 GB
    intermediate ((4 + 1) x 4 draft tokens)."""
    b = budget(dict(PROFILES["nextn_3step"], max_running_requests=4))
    assert b["weights_gib"] / 25.64 - 1 == pytest.approx(0.009, abs=0.001)   # +0.9%
    assert b["mtp_gib"] / 2.8 - 1 == pytest.approx(-0.013, abs=0.001)        # -1.3%
    state = MODEL["mamba_state_bytes_per_request"] / 2 / GIB
    assert 25 * state == pytest.approx(3.52, abs=0.005)          # SSM state of 25 slots
    assert (4 + 1) * 4 * state == pytest.approx(2.81, abs=0.005)  # SGLang's intermediate formula


def test_the_original_hand_launch_context_does_not_fit_and_the_message_shows_the_arithmetic():
    hand = {k: v for k, v in PROFILES["nextn_1step"].items() if k != "context_length"}
    b = budget(hand)
    assert b["fits"] is False and b["context_length"] == 262144
    assert "fewer than context_length 262144 x 1 request(s) = 262144" in b["problems"][0]
    assert any(line.startswith("budget 42.24 GiB = 48 GiB x mem fraction 0.88 (assumed)")
               for line in b["lines"])
    assert budget(PROFILES["nextn_1step"])["fits"] is True  # the shipped profile sets 131072


def test_weights_that_do_not_fit_are_refused():
    b = budget(dict(PROFILES["nextn_3step"], mem_fraction_static=0.5))
    assert b["fits"] is False
    assert b["problems"] == ["the weights (28.64 GiB incl. 2.76 GiB MTP) do not fit in 24.00 GiB "
                             "(48 GiB x mem fraction 0.50)"]


def test_a_mamba_share_that_holds_no_request_is_refused():
    b = budget(dict(PROFILES["nextn_3step"], mamba_full_memory_ratio=0.05))
    assert b["fits"] is False and "holds no request" in b["problems"][0]


def test_more_full_context_requests_than_the_kv_share_holds_are_refused():
    assert budget(PROFILES["nextn_3step"], full_context_requests=2)["fits"] is True
    b = budget(PROFILES["nextn_3step"], full_context_requests=3)
    assert b["fits"] is False and "x 3 request(s) = 393216" in b["problems"][0]


def test_a_decode_threshold_above_the_roofline_is_refused_by_name():
    from sglang_perf.plan.profile import accept_ceiling

    def sglang_gate_reach_errors(cases, p, name, model, hardware):
        return filt.reach_errors(cases, p, name, model, hardware, accept_ceiling(p))
    model, profiles = MODEL, PROFILES
    cases = [{"case": "coding", "thresholds": {"min_tok_s": 45},
              "source": {"min_tok_s": "thresholds"}},
             {"case": "long", "thresholds": {"min_tok_s": 100}, "source": {"min_tok_s": "calibrated"}}]
    assert sglang_gate_reach_errors(cases[:1], profiles["nextn_3step"], "nextn_3step", model, A6000x2) == []
    errors = sglang_gate_reach_errors(cases, profiles["nextn_3step"], "nextn_3step", model, A6000x2)
    assert errors == ["sglang_gate_calibrated.nextn_3step.long.min_tok_s (100) cannot be reached by "
                      "profile nextn_3step: its decode roofline is 93.5 tok/s (2 GPUs x 768 GB/s / "
                      "65.74 GB per verify cycle x accept length 4.00 = 93.5 tok/s; sglang_hardware, "
                      "sglang_model_size)"]
    # no speculation: 27.6 tok/s, so the production no_spec thresholds (45) can never pass
    assert "sglang_gate_thresholds.no_spec.coding.min_tok_s (45) cannot be reached by profile no_spec: " \
           "its decode roofline is 27.6 tok/s" in sglang_gate_reach_errors(
               cases[:1], profiles["no_spec"], "no_spec", model, A6000x2)[0]
    # a DFLASH block of 16 (SGLang: the draft tokens; vLLM: 15 steps + 1) reads the drafter once
    # per block: 16 x 1536 GB/s / (55.56 + 3.46) GB = 416.4 tok/s at best, so 45 is within reach
    for name in ("dflash", "vllm_dflash"):
        assert accept_ceiling(profiles[name]) == 16
        assert sglang_gate_reach_errors(cases, profiles[name], name, model, A6000x2) == []
        r = filt.roofline(model, A6000x2, 15, drafter_params_b=1.73)
        assert round(r["ceiling_tok_s"], 1) == 416.4 and r["per_draft_step_gb"] == 0.0
