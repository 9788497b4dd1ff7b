"""Drift (the sglang_drift filter against a hand-started emulator's /server_info), the gate's
regression check against the history, and the roofline in the module's result."""
from __future__ import annotations

import json
import re
import urllib.request

import pytest

from bench.profiles import HAND_LAUNCH_ARGS
from conftest import role_defaults
from test_module import FAST, call, gate, patched  # noqa: F401  (patched: autouse fixture)
from sglang_perf import engines
from sglang_perf.record import history

DEFAULTS = role_defaults()
PROFILES = DEFAULTS["sglang_profiles"]
HARDWARE = {"gpu_count": 2, "gpu_bandwidth_gbs": 768, "gpu_memory_gib": 48}
# The original hand launch, as it was typed (no memory settings, no parsers).
HAND_1STEP = HAND_LAUNCH_ARGS


def server_info(emu):
    with urllib.request.urlopen(emu.url + "/server_info", timeout=10) as r:
        return json.load(r)


def test_drift_names_what_the_original_notes_found_by_hand(emulator):
    emu = emulator(HAND_1STEP)
    d = engines.get("sglang").drift(server_info(emu), PROFILES["nextn_3step"], "0.5.23",
                       {"served_model_name": "Qwen3.6-27B"})
    got = {x["setting"]: (x["intended"], x["running"]) for x in d["differences"]}
    assert got == {
        "speculative_num_steps": (3, 1),
        "speculative_num_draft_tokens": (4, 2),
        "mem_fraction_static": (0.88, server_info(emu)["mem_fraction_static"]),
        "context_length": (131072, 262144),
        "max_running_requests": (16, 48),
        "mamba_full_memory_ratio": (0.5, 0.9),
        "reasoning_parser": ("qwen3", None),
        # SGLang's auto picks extra_buffer; the profile runs lazy (sgl-project/sglang#36537)
        "mamba_cache_strategy": ("extra_buffer_lazy", "extra_buffer"),
        "tool_call_parser": ("qwen3_coder", None),
    }
    assert "speculative_num_steps: intended 3, running 1" in d["lines"]
    # NEXTN runs as EAGLE: normalised, not a difference
    assert "speculative_algorithm" not in got and server_info(emu)["speculative_algorithm"] == "EAGLE"


def test_no_drift_when_the_server_runs_the_profile(emulator):
    emu = emulator("nextn_3step")
    d = engines.get("sglang").drift(server_info(emu), PROFILES["nextn_3step"], "0.5.23",
                       {"served_model_name": "Qwen3.6-27B", "port": emu.port})
    assert d["differences"] == [] and d["checked"] == 14


def test_drift_applies_sglangs_defaults_for_unset_settings(emulator):
    emu = emulator(["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2",
                    "--speculative-eagle-topk", "1"])
    profile = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 2,
               "speculative_eagle_topk": 1, "tp_size": 2}
    d = engines.get("sglang").drift(server_info(emu), profile, "0.5.23")
    assert d["differences"] == []  # draft tokens = steps + 1 = 3, max running requests = 48
    chosen = {c["setting"]: c["running"] for c in d["chosen_by_sglang"]}
    assert chosen["context_length"] == 262144 and "mem_fraction_static" in chosen


def test_drift_when_speculation_is_intended_but_off(emulator):
    emu = emulator("no_spec")
    d = engines.get("sglang").drift(server_info(emu), PROFILES["nextn_3step"], "0.5.23")
    assert d["differences"][0]["setting"] == "speculative_algorithm"
    assert d["lines"][0] == "speculative_algorithm: intended EAGLE, running none " \
                            "(NEXTN is reported as EAGLE)"


def record(profile, passed, median, al, time):
    return json.dumps({"profile": profile, "passed": passed, "time": time, "accept_len": al,
                       "decode_tok_s": {"median": median}})


def test_history_baseline_is_the_newest_passing_run_of_the_profile(tmp_path):
    path = tmp_path / "gate-history.jsonl"
    path.write_text("\n".join([
        record("nextn_3step", True, 70.0, 3.3, "t1"),
        record("nextn_3step", True, 56.0, 3.1, "t2"),
        "{not json",
        record("nextn_3step", False, 40.0, 1.7, "t3"),
        record("nextn_1step", True, 38.0, 1.75, "t4"),
    ]) + "\n")
    warnings = []
    recs = history.read(str(path), warn=lambda n, why: warnings.append((n, why)))
    assert len(recs) == 4 and warnings[0][0] == 3
    assert history.baseline(history.last_passing(recs, "nextn_3step")) == {
        "time": "t2", "profile": "nextn_3step", "for_profile": None, "decode_tok_s": 56.0, "accept_len": 3.1,
        "intervals": None}
    assert history.last_passing(recs, "no_spec") is None
    assert history.change_pct(42.0, 56.0) == pytest.approx(-25.0)


def test_module_reports_the_change_and_the_roofline(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    path = tmp_path / "h.jsonl"
    path.write_text(record("nextn_3step", True, 100.0, 3.0, "2026-11-01T00:00:00Z") + "\n")
    kind, r = call(gate(emu.url, history_path=str(path), model_size=DEFAULTS["sglang_model_size"],
                        hardware=HARDWARE))
    assert kind == "exit", r["msg"]
    g = r["regression"]
    assert g["baseline"]["decode_tok_s"] == 100.0 and g["max_regression_pct"] is None
    assert g["decode_tok_s_pct"] == pytest.approx(r["decode_tok_s"]["median"] - 100.0)
    assert g["accept_len_pct"] == pytest.approx((r["accept_len"] - 3.0) / 3.0 * 100)
    ro = r["roofline"]
    assert ro["spec_steps"] == 3 and ro["accept_len"] == r["accept_len"]
    assert ro["share_pct"] == pytest.approx(100 * r["decode_tok_s"]["median"] / ro["ceiling_tok_s"])
    assert "roofline %.1f tok/s" % ro["ceiling_tok_s"] in r["msg"]
    assert "vs last-known-good (2026-11-01T00:00:00Z): decode " in r["msg"]


def test_module_fails_on_a_regression_beyond_the_limit(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    # The emulator at speed scale 4 decodes ~220 tok/s: against 1000 that is a 78% drop.
    kind, r = call(gate(emu.url, max_regression_pct=5,
                        baseline={"profile": "nextn_3step", "decode_tok_s": 1000.0,
                                            "accept_len": 3.1, "time": "t0"}))
    assert kind == "fail"
    assert [x["threshold"] for x in r["failures"]] == ["max_regression_pct"]
    assert re.search(r"decode tok/s \d+\.\d \[\d+\.\d, \d+\.\d\] dropped \d+\.\d% from the "
                     r"last-known-good 1000\.00 \(t0\) \(allowed 5%: at least 950\.0\)", r["msg"]), r["msg"]
    kind, r = call(gate(emu.url, max_regression_pct=50,
                        baseline={"profile": "nextn_3step", "decode_tok_s": 300.0, "accept_len": 3.1}))
    assert kind == "exit" and r["regression"]["decode_tok_s_pct"] < 0


def test_module_without_history_file_has_no_baseline(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    kind, r = call(gate(emu.url, history_path=str(tmp_path / "absent.jsonl"), max_regression_pct=5))
    assert kind == "exit" and r.get("regression") is None, r.get("regression")


@pytest.mark.parametrize("args, needle", [
    ({"baseline": {"decode_tok_s": "fast"}}, "invalid option baseline: decode_tok_s must be a number"),
    ({"max_regression_pct": -1}, "invalid option max_regression_pct: must be 0.0 or more"),
    ({"hardware": {"gpu_count": 2}, "model_size": {"params_b": 27.78, "dtype_bytes": 2}},
     "invalid option hardware: hardware.gpu_bandwidth_gbs is required"),
])
def test_bad_regression_and_size_options_are_named(args, needle):
    kind, r = call(gate("http://127.0.0.1:9", **args))
    assert kind == "fail" and needle in r["msg"], r["msg"]
