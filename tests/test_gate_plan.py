"""The production gate plan against the emulator's failure modes (real HTTP on 127.0.0.1): each
fails the gate naming the right case, the healthy 3-step server passes; `python -m bench gate`
and `python -m bench calibrate` run the same plan. The plan's cases and thresholds are the role's
(roles/sglang_gate/defaults/main.yml); only request counts and token budgets are smaller, and
the emulators prefill 32K tokens in 1.6 s instead of 11 (PREFILL, no threshold here depends on
it), so a test takes one to two minutes (the whole plan at its own sizes runs in
tests/test_deploy.py)."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from bench.profiles import HAND_LAUNCH_ARGS
from benchrun import bench
from conftest import ROOT, role_defaults
from sglang_perf.plan import gate as plan
from sglang_perf.judge import verdict

pytestmark = pytest.mark.timeout(400)

GATE = role_defaults("sglang_gate")
PROFILES = role_defaults()["sglang_profiles"]
# (requests, max_requests, max_tokens): 6 is the fewest that bound a median at 95%
SIZES = {"coding": (6, 12, 128), "long_context": (6, 6, 64), "concurrent": (8, 16, 256),
         "prose": (6, 6, 64), "thinking": (6, 6, 64),
         # the quality checks: the emulator's replies are short, so only thinking needs room
         "answers": (24, 72, 64), "tool_calls": (4, 4, 128), "reasoning": (2, 2, 128),
         "agreement": (8, 8, 16)}
PREFILL = {"SGLEMU_PREFILL_TOK_S": "20000"}


# where the server runs one request at a time, the concurrent case needs no second wave to fail
CAPPED = dict(SIZES, concurrent=(4, 4, 256))


def production_plan(sizes, checks=True):
    """The role's plan at ``sizes``; its pressure check never (it fills the KV cache of a server
    with --enable-metrics: tests/test_gate_quality.py); without ``checks``, no quality check (a
    test of the speed cases: the checks' own failure modes are tests/test_gate_quality.py's)."""
    p = copy.deepcopy(GATE["sglang_gate_plan"])
    p["pressure"]["when"] = "never"
    assert list(p) == list(sizes) + ["pressure"]
    if not checks:
        p = {name: c for name, c in p.items() if not c.get("check")}
        sizes = {name: n for name, n in sizes.items() if name in p}
    for name, (requests, most, max_tokens) in sizes.items():
        p[name].update(requests=requests, max_requests=most, max_tokens=max_tokens)
    return p


def run_plan(emu, profile="nextn_3step", sizes=SIZES, checks=False):
    return plan.run({"url": emu.url, "warmup": 2}, production_plan(sizes, checks),
                    GATE["sglang_gate_thresholds"],
                    profile, promise={"context_length": PROFILES[profile].get("context_length"),
                                      "max_running_requests": PROFILES[profile].get("max_running_requests")})


def case(result, name):
    return next(c for c in result["cases"] if c["case"] == name)


def test_the_healthy_3step_server_passes_every_case(emulator):
    emu = emulator("nextn_3step", env=PREFILL)
    r = run_plan(emu, checks=True)
    assert r["passed"], verdict.table(r)
    assert r["failed_cases"] == [] and r["capacity"]["passed"]
    # thinking on: reported, never judged, and drafts are accepted less inside reasoning
    assert case(r, "thinking")["report_only"] is True
    assert case(r, "thinking")["accept_len"] < case(r, "coding")["accept_len"]
    assert r["capacity"]["figures"]["effective_context"] >= 131072
    # SGLang 0.5.23's sizing on 2x A6000: the mamba pool holds 21 slots, 4 per running request
    # (extra_buffer_lazy: one tracking slot, not extra_buffer's two)
    assert r["capacity"]["figures"]["max_running_requests"] == 5
    assert "the profile asks for 16 running requests; the server runs at most 5" in r["notes"][0]
    long_case = case(r, "long_context")
    # the facts planted at 10, 50 and 90% of each long prompt: every reply states all three
    assert long_case["facts"]["stated"] == [3] * long_case["requests"]
    assert long_case["facts"]["missed"] is None
    # the server's own count, near the target: the warmup learned its characters per token
    assert abs(long_case["prompt_tokens"]["median"] - 32768) < 0.02 * 32768
    assert long_case["accept_len"] < case(r, "coding")["accept_len"]
    assert len(case(r, "coding")["accept_by_position"]) == 3
    # the emulator's truth: every measured long prompt was counted as the engine reports
    truth = [q for q in emu.stats()["requests"] if not q["health"] and q["prompt_tokens"] > 20000]
    counted = sorted(q["prompt_tokens"] for q in truth)
    assert len(counted) == long_case["requests"] == 6
    assert (long_case["prompt_tokens"]["min"], long_case["prompt_tokens"]["max"]) == (counted[0], counted[-1])
    # each case's figures carry their 95% intervals, the verdict decided on them
    for c in r["cases"]:
        assert c["verdict"] == "pass", c["case"]
        assert c.get("check") or c["intervals"]["level"] == 0.95, c["case"]
    # what the server says: every check passed (the pressure check is not asked here)
    assert [(c["case"], c["verdict"]) for c in r["cases"] if c.get("check")] == [
        ("answers", "pass"), ("tool_calls", "pass"), ("reasoning", "pass"), ("agreement", "pass"),
        ("pressure", "pass")] and case(r, "pressure")["skipped"] is True
    iv = case(r, "coding")["intervals"]["decode_tok_s"]
    assert 45 <= iv["lower"] <= iv["estimate"] <= iv["upper"]


def test_a_long_context_collapse_fails_the_long_case_alone(emulator):
    emu = emulator("nextn_3step", env=dict(PREFILL, SGLEMU_LONGCTX_COLLAPSE_TOKENS="16384"))
    r = run_plan(emu)
    assert not r["passed"]
    assert r["failed_cases"] == ["long_context"], verdict.table(r)
    msg = verdict.failure_message(r)
    assert msg.startswith("gate failed (long_context): long_context: ")
    assert "accept length 1." in msg and "< required 2.00" in msg
    assert case(r, "coding")["passed"] and case(r, "concurrent")["passed"]


def test_the_hand_launch_memory_settings_fail_on_capacity_naming_both_figures(emulator):
    # The original hand launch (1-step NEXTN, default memory settings) came up with a 19K-token
    # window and one running request. SGLang 0.5.23's pool sizing gives one running request on
    # 2x A6000 only with about 7 GB per GPU held before the pools are sized (the original logs record a
    # second launch while the first was loading); SGLEMU_PRE_POOL_RESERVE_MIB reproduces that
    # state: a 28,363-token pool (the smallest before SGLang refuses to start is about 25K).
    emu = emulator(HAND_LAUNCH_ARGS, env=dict(PREFILL, SGLEMU_PRE_POOL_RESERVE_MIB="7000"))
    info = emu.get("/server_info")
    r = run_plan(emu, "nextn_1step", CAPPED)
    assert not r["passed"]
    assert r["failed_cases"][0] == "capacity" and "long_context" in r["failed_cases"]
    cap = next(f["message"] for f in r["failures"] if f["case"] == "capacity")
    eff = r["capacity"]["figures"]["effective_context"]
    assert eff == info["max_total_num_tokens"] < 33024, cap
    assert "it holds a %s-token context (context_length 262,144, KV pool max_total_num_tokens %s)" % (
        "{:,}".format(eff), "{:,}".format(eff)) in cap
    assert "the profile promises 131,072" in cap and "case long_context needs" in cap
    assert "it runs at most 1 request at once (effective max_running_requests), case concurrent runs 4" in cap
    assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 1
    # the long prompt does not fit: the server refuses it, an error of that case
    assert case(r, "long_context")["errors"] >= 1


def test_a_concurrency_cap_fails_the_concurrent_case_and_the_capacity(emulator):
    emu = emulator("nextn_3step", env=PREFILL, extra=["--max-running-requests", "1"])
    r = run_plan(emu, sizes=CAPPED)
    assert not r["passed"]
    assert r["failed_cases"] == ["capacity", "concurrent"], verdict.table(r)
    assert "concurrent: aggregate tok/s at C=4" in verdict.failure_message(r)
    cap = next(f["message"] for f in r["failures"] if f["case"] == "capacity")
    assert cap == "capacity: it runs at most 1 request at once (effective max_running_requests), " \
                  "case concurrent runs 4"


# ------------------------------------------------------------------------ the bench CLI ------
SMALL = {"sglang_gate_plan": {
    "coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 64},
    "concurrent": {"prompts": "coding", "concurrency": 2, "requests": 6, "max_tokens": 64}},
    "sglang_gate_warmup": 1, "sglang_profile": "nextn_3step"}


def test_bench_gate_runs_the_roles_plan_with_exit_codes(emulator, tmp_path):
    emu = emulator("nextn_3step", env={"SGLEMU_SPEED_SCALE": "4"})
    small = tmp_path / "small.yml"
    small.write_text(yaml.safe_dump(SMALL))
    out = tmp_path / "r.json"
    p = bench("gate", "--url", emu.url, "--vars", str(small), "--json", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].split() == ["case", "C", "requests", "x", "tok", "prompt", "tok"] + \
        "decode tok/s accept by position aggregate TTFT p50 verdict in".split()
    assert "gate PASSED in " in p.stdout
    assert "thresholds for agreement, answers, long_context, pressure, reasoning, tool_calls are not used" \
        in p.stdout
    result = json.loads(out.read_text())
    assert [c["case"] for c in result["cases"]] == ["coding", "concurrent"]
    # the role's thresholds apply: too slow for the profile's 45 tok/s -> exit 1, naming the case
    slow = tmp_path / "slow.yml"
    slow.write_text(yaml.safe_dump(dict(SMALL, sglang_gate_thresholds={
        "nextn_3step": {"coding": {"min_tok_s": 100000}, "concurrent": {}}})))
    p = bench("gate", "--url", emu.url, "--vars", str(small), "--vars", str(slow), "--quiet")
    assert p.returncode == 1, p.stderr
    assert "bench gate: gate failed (coding): coding: decode tok/s (per-request median)" in p.stderr
    # not measurable: exit 2 with the reason
    p = bench("gate", "--url", "http://127.0.0.1:9", "--vars", str(small), "--quiet")
    assert p.returncode == 2 and "could not measure http://127.0.0.1:9" in p.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text(yaml.safe_dump({"sglang_gate_plan": {"coding": {"concurrency": 0}}}))
    p = bench("gate", "--url", emu.url, "--vars", str(bad), "--quiet")
    assert p.returncode == 2 and "sglang_gate_plan.coding.concurrency must be an integer >= 1" in p.stderr
    templated = tmp_path / "t.yml"
    templated.write_text(yaml.safe_dump({"sglang_gate_warmup": "{{ x }}"}))
    p = bench("gate", "--url", emu.url, "--vars", str(templated), "--quiet")
    assert p.returncode == 2
    assert "bench gate: host localhost: sglang_gate_warmup: 'x' is undefined" in p.stderr


def test_bench_gate_defaults_to_the_production_inventorys_variables():
    """Without -i: a host of no inventory, the role defaults under the production group_vars,
    which restate none of the plan: the cases, the thresholds and the profile come from the roles."""
    import argparse

    from bench import gate
    assert gate.DEFAULT_VARS == (ROOT / "inventories" / "production" / "group_vars" / "sglang_servers",)
    given = argparse.Namespace(inventory=None, host=None, vars=None, vault_password_file=None, profile=None)
    p = gate.plan_of(given)
    assert p["profile"] == "nextn_3step" and p["server"]["exposure"]["host"] == "0.0.0.0"  # production's bind
    roles = yaml.safe_load((ROOT / "roles" / "sglang_gate" / "defaults" / "main.yml").read_text())
    assert [c["case"] for c in p["gate"]["cases"]] == list(roles["sglang_gate_plan"])


def test_bench_calibrate_writes_thresholds_a_margin_below_and_shows_the_diff(emulator, tmp_path):
    emu = emulator("nextn_3step", env={"SGLEMU_SPEED_SCALE": "4"})
    small = tmp_path / "small.yml"
    small.write_text(yaml.safe_dump(SMALL))
    target = tmp_path / "host_vars" / "ct-test" / "gate_calibration.yml"
    target.parent.mkdir(parents=True)
    target.write_text("---\nsglang_gate_calibrated:\n  no_spec:\n    coding: {min_tok_s: 20.0}\n")
    p = bench("calibrate", "--url", emu.url, "--vars", str(small), "--runs", "2", "--margin", "0.1",
              "--host", "ct-test", "--write", str(target), "--quiet")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("--- %s (before)\n+++ %s\n" % (target, target)), p.stdout
    data = yaml.safe_load(target.read_text())["sglang_gate_calibrated"]
    assert data["no_spec"] == {"coding": {"min_tok_s": 20.0}}
    mine = data["nextn_3step"]
    # 4x speed: about 4 x 55 tok/s measured, the proposal 10% below the lowest run
    assert 100 < mine["coding"]["min_tok_s"] < 230 and 2.4 < mine["coding"]["min_accept_len"] < 3.2
    assert mine["concurrent"]["min_aggregate_tok_s"] > mine["coding"]["min_tok_s"]
    assert "the gate plan ran 2 times on ct-test" in target.read_text()
    assert plan.problems(SMALL["sglang_gate_plan"], GATE["sglang_gate_thresholds"], "nextn_3step",
                         {"nextn_3step": mine}) == []
