"""The gate plan (plugins/module_utils/sglang_perf/plan/gate.py) without a server: validation naming the
variable, calibrated thresholds, the capacity check, each case judged on its own."""
from __future__ import annotations

import copy

import pytest
import yaml

from conftest import role_defaults
from sglang_perf.judge import calibration, verdict
from sglang_perf.plan import gate as plan

DEFAULTS = role_defaults("sglang_gate")  # thresholds flat, as the deploy plan resolves them
PLAN, THRESHOLDS = DEFAULTS["sglang_gate_plan"], DEFAULTS["sglang_gate_thresholds"]


def test_the_role_defaults_are_a_valid_plan_for_every_profile():
    for profile in THRESHOLDS:
        assert plan.problems(PLAN, THRESHOLDS, profile) == [], profile
    cases = plan.resolve(PLAN, THRESHOLDS, "nextn_3step")
    assert [c["case"] for c in cases] == ["coding", "long_context", "concurrent", "prose", "thinking",
                                          "answers", "tool_calls", "reasoning", "agreement", "pressure"]
    # what the server says: every profile inherits the quality bars of no_spec
    assert [(c["options"]["check"], c["thresholds"]) for c in cases[5:]] == [
        ("answers", {"min_accuracy": 0.8}), ("tool_calls", {}), ("reasoning", {}),
        ("agreement", {"min_agreement": 0.75}), ("pressure", {"min_accuracy": 0.8})]
    assert cases[9]["options"]["kv_usage"] == 0.6 and cases[9]["options"]["when"] == "changed"
    assert cases[1]["options"]["prompts"] == "long_context" and cases[1]["options"]["prompt_tokens"] == 32768
    assert cases[2]["options"]["concurrency"] == 4
    # the prose case is reported, not judged: no profile gives it thresholds
    assert cases[3]["report_only"] is True and cases[3]["thresholds"] == {}
    assert [c["report_only"] for c in cases[:3]] == [False, False, False]
    assert "prose (C=1, 6 x 96 tokens, prose prompts): reported only" in plan.describe(cases, 0.95, "fail")


def _broken(mutate):
    p, t = copy.deepcopy(PLAN), copy.deepcopy(THRESHOLDS)
    mutate(p, t)
    return " | ".join(plan.problems(p, t, "nextn_3step"))


@pytest.mark.parametrize("mutate,message", [
    (lambda p, t: p.__setitem__("Bad-Name", {"concurrency": 1, "requests": 1, "max_tokens": 8}),
     "case name 'Bad-Name'"),
    (lambda p, t: p["coding"].__setitem__("concurency", 2),
     "sglang_gate_plan.coding has unknown key(s) concurency"),
    (lambda p, t: p["coding"].__setitem__("prompts", "poetry"),
     "sglang_gate_plan.coding.prompts must be one of"),
    (lambda p, t: p["long_context"].pop("prompt_tokens"),
     "sglang_gate_plan.long_context.prompt_tokens must be an integer >= 1024, got None"),
    (lambda p, t: p["long_context"].__setitem__("prompt_tokens", 10 ** 7),
     "sglang_gate_plan.long_context.prompt_tokens = 10000000 is more than the long-context corpus holds"),
    (lambda p, t: p["coding"].__setitem__("prompt_tokens", 4096),
     "sglang_gate_plan.coding.prompt_tokens is only for prompts: long_context (this case sends the "
     "coding prompts)"),
    (lambda p, t: p["prose"].__setitem__("prompt_tokens", 4096),
     "(this case sends the prose prompts)"),
    (lambda p, t: p["prose"].__setitem__("report_only", "yes"),
     "sglang_gate_plan.prose.report_only must be true or false, got 'yes'"),
    (lambda p, t: t["nextn_3step"].__setitem__("prose", {"min_tok_s": 40}),
     "sglang_gate_thresholds.nextn_3step.prose = {'min_tok_s': 40}: case prose of sglang_gate_plan is "
     "report_only, so thresholds would not be judged; remove them, or set "
     "sglang_gate_plan.prose.report_only: false"),
    (lambda p, t: p["prose"].__setitem__("report_only", False),
     "sglang_gate_thresholds.nextn_3step has no entry for case prose of sglang_gate_plan"),
    (lambda p, t: p["concurrent"].__setitem__("concurrency", 0),
     "sglang_gate_plan.concurrent.concurrency must be an integer >= 1, got 0"),
    (lambda p, t: p["coding"].pop("requests"), "sglang_gate_plan.coding.requests is required"),
    (lambda p, t: p["coding"].__setitem__("max_tokens", 1),
     "sglang_gate_plan.coding.max_tokens must be an integer >= 2"),
    (lambda p, t: t.pop("nextn_3step"), "sglang_gate_thresholds has no entry for profile nextn_3step"),
    (lambda p, t: t.__setitem__("nextn_3step", {"min_tok_s": 45, "min_accept_len": 2.8}),
     "sglang_gate_thresholds.nextn_3step = {'min_tok_s': 45, 'min_accept_len': 2.8} has the one-case form"),
    (lambda p, t: t["nextn_3step"].pop("long_context"),
     "sglang_gate_thresholds.nextn_3step has no entry for case long_context of sglang_gate_plan"),
    (lambda p, t: t["nextn_3step"]["coding"].__setitem__("min_tok", 4),
     "sglang_gate_thresholds.nextn_3step.coding has unknown threshold(s) min_tok"),
    (lambda p, t: t["nextn_3step"]["coding"].__setitem__("min_tok_s", "fast"),
     "sglang_gate_thresholds.nextn_3step.coding.min_tok_s must be a number >= 0, got 'fast'"),
    (lambda p, t: t["nextn_3step"]["coding"].__setitem__("min_accept_len", 0.5),
     "sglang_gate_thresholds.nextn_3step.coding.min_accept_len = 0.5: an accept length counts the bonus"),
])
def test_each_problem_names_the_variable(mutate, message):
    assert message in _broken(mutate)


def test_calibrated_thresholds_win_key_by_key_and_unused_ones_are_reported():
    cal = {"nextn_3step": {"coding": {"min_tok_s": 51.5}}}
    one = {"coding": PLAN["coding"]}
    cases = plan.resolve(one, THRESHOLDS, "nextn_3step", cal)
    assert cases[0]["thresholds"] == {"min_tok_s": 51.5, "min_accept_len": 2.8}
    assert cases[0]["source"] == {"min_tok_s": "calibrated", "min_accept_len": "thresholds"}
    assert plan.unused_thresholds(one, THRESHOLDS, "nextn_3step") == [
        "agreement", "answers", "concurrent", "long_context", "pressure", "reasoning", "tool_calls"]
    assert "sglang_gate_calibrated.nextn_3step.coding.min_tok_s must be a number" in " ".join(
        plan.problems(one, THRESHOLDS, "nextn_3step", {"nextn_3step": {"coding": {"min_tok_s": -1}}}))


# ------------------------------------------------------------------------------ capacity -----
CASES = plan.resolve(PLAN, THRESHOLDS, "nextn_3step")
PROMISE = {"context_length": 131072, "max_running_requests": 16}


def test_capacity_of_the_tuned_profile_passes():
    server = {"context_length": 131072, "max_total_num_tokens": 140000, "max_running_requests": 16,
              "effective_max_running_requests": 16}
    cap = plan.check_capacity(server, CASES, PROMISE)
    assert cap["passed"] and cap["figures"]["effective_context"] == 131072


def test_capacity_of_the_hand_launch_names_both_figures():
    # the original hand launch: 19K-token window and one running request
    server = {"context_length": 262144, "max_total_num_tokens": 19456, "max_running_requests": 48,
              "effective_max_running_requests": 1}
    cap = plan.check_capacity(server, CASES, PROMISE)
    assert not cap["passed"]
    (f,) = cap["failures"]
    assert f["measured"] == {"effective_context": 19456, "max_running_requests": 1}
    assert f["required"] == {"context": 131072, "running": 4}  # the promise, the concurrent case
    assert [(n["what"], n.get("tokens", n.get("requests"))) for n in cap["needs"]] == [
        ("context", 131072), ("context", 32768 + 128), ("running requests", 4)]
    # the message states each figure, the server's and what needs more
    assert all(figure in f["message"] for figure in ("19,456", "262,144", "131,072", "32,896", "at most 1 "))
    assert cap["notes"] == ["the profile asks for 16 running requests; the server runs at most 1 at once "
                            "(its memory pools hold no more)"]


def test_running_fewer_than_the_profile_asks_is_reported_not_failed():
    # SGLang 0.5.23 on 2x A6000: the mamba pool of the tuned profile holds 24 slots, 5 per request
    server = {"context_length": 131072, "max_total_num_tokens": 222050, "max_running_requests": 16,
              "effective_max_running_requests": 4, "max_mamba_cache_size": 24}
    cap = plan.check_capacity(server, CASES, PROMISE)
    assert cap["passed"]
    assert cap["notes"] == ["the profile asks for 16 running requests; the server runs at most 4 at once "
                            "(its memory pools hold no more: 24 mamba state slots)"]


def test_capacity_without_server_info_is_not_checked():
    cap = plan.check_capacity({"kind": "unknown"}, CASES, PROMISE)
    assert cap["passed"] and "not checked" in cap["notes"][0]


# ---------------------------------------------------------------------------------- judge ----
def _case(name, passed, failures=()):
    return {"case": name, "passed": passed, "concurrency": 1, "requests": 2, "max_tokens": 8,
            "errors": 0, "prompt_tokens": {"target": None, "median": 120},
            "decode_tok_s": {"median": 50.0}, "accept_len": 3.0, "accept_by_position": [0.8, 0.7, 0.6],
            "aggregate_tok_s": 49.0, "ttft_s": {"p50": 0.2},
            "failures": [{"threshold": "min_accept_len", "message": m} for m in failures]}


def test_a_collapse_in_one_case_fails_the_gate_naming_it():
    cap = plan.check_capacity({}, CASES, {})
    out = verdict.judge_plan([_case("coding", True),
                      _case("long_context", False, ["accept length 1.52 < required 2.00"]),
                      _case("concurrent", True)], cap, {}, "nextn_3step", "m", "u", 12.0)
    assert out["passed"] is False and out["failed_cases"] == ["long_context"]
    assert verdict.failure_message(out) == \
        "gate failed (long_context): long_context: accept length 1.52 < required 2.00"
    assert out["decode_tok_s"] == {"median": 50.0}  # the headline is the first case
    table = verdict.table(out)
    assert "long_context" in table and "80/70/60%" in table and "FAILED long_context: accept length" in table
    assert table.splitlines()[-1] == "gate FAILED in 12.0s"


def test_a_report_only_case_never_fails_the_gate_and_is_shown_as_reported():
    cap = plan.check_capacity({}, CASES, {})
    prose = dict(_case("prose", False, ["could not be measured: every request failed"]), report_only=True)
    out = verdict.judge_plan([_case("coding", True), prose], cap, {}, "nextn_3step", "m", "u", 5.0)
    assert out["passed"] is True and out["verdict"] == "pass" and out["failed_cases"] == []
    assert out["failures"] == [] and [c["case"] for c in out["cases"]] == ["coding", "prose"]
    assert verdict.summary(out).endswith(" reported")
    assert [row[9] for row in verdict.table_rows(out)] == ["passed", "reported"]


def test_an_empty_thresholds_entry_for_a_report_only_case_is_accepted():
    t = copy.deepcopy(THRESHOLDS)
    t["nextn_3step"]["prose"] = {}
    assert plan.problems(PLAN, t, "nextn_3step") == []
    t["nextn_3step"]["prose"] = {"min_tok_s": None}
    assert plan.problems(PLAN, t, "nextn_3step") == []


def test_every_case_passing_passes_with_each_case_in_the_summary():
    cap = plan.check_capacity({}, CASES, {})
    out = verdict.judge_plan([_case("coding", True), _case("concurrent", True)], cap, {}, "p", "m", "u", 3.0)
    assert out["passed"] and out["failed_cases"] == []
    assert verdict.summary(out).startswith("passed in 3s: coding (C=1, 2 x 8 tok): decode 50.0 tok/s median, "
                                        "accept length 3.00 (by position 80/70/60%)")


# ------------------------------------------------------------------------------ calibrate ----
def _run(decode, al, agg, ttft):
    return {"cases": [
        {"case": "coding", "prompts": "coding", "concurrency": 1, "decode_tok_s": {"median": decode},
         "accept_len": al, "aggregate_tok_s": decode, "ttft_s": {"p50": 0.1}},
        {"case": "long_context", "prompts": "long_context", "concurrency": 1,
         "decode_tok_s": {"median": decode - 15}, "accept_len": al - 0.8, "ttft_s": {"p50": ttft}},
        {"case": "concurrent", "prompts": "coding", "concurrency": 4, "decode_tok_s": {"median": decode},
         "accept_len": al, "aggregate_tok_s": agg, "ttft_s": {"p50": 0.2}},
        {"case": "gone", "unmeasured": "all requests failed"}]}


def test_propose_leaves_a_report_only_case_out():
    run = {"cases": [{"case": "coding", "prompts": "coding", "concurrency": 1,
                      "decode_tok_s": {"median": 55.0}, "accept_len": 3.1},
                     {"case": "prose", "prompts": "prose", "concurrency": 1, "report_only": True,
                      "decode_tok_s": {"median": 41.0}, "accept_len": 2.4}]}
    assert list(calibration.propose([run, run], 0.1)) == ["coding"]


def test_propose_is_a_margin_below_the_lowest_run():
    p = calibration.propose([_run(55.0, 3.10, 234.0, 10.0), _run(52.0, 3.04, 226.0, 11.0)], 0.1)
    assert list(p) == ["coding", "long_context", "concurrent"]  # the unmeasured case is left out
    assert p["coding"]["thresholds"] == {"min_tok_s": 46.8, "min_accept_len": 2.73}
    assert p["long_context"]["thresholds"] == {"min_tok_s": 33.3, "min_accept_len": 2.01, "max_ttft_s": 12.1}
    assert p["concurrent"]["thresholds"]["min_aggregate_tok_s"] == 203.4
    assert p["coding"]["measured"]["decode_tok_s"] == [55.0, 52.0]
    with pytest.raises(plan.ConfigError, match="margin"):
        calibration.propose([_run(55.0, 3.1, 234.0, 10.0)], 1.5)


def test_propose_measures_the_hosts_accuracy_and_nothing_of_the_other_checks():
    def run(right):
        return {"cases": [
            {"case": "answers", "check": "answers", "accuracy": {"estimate": right / 24, "lower": 0.7,
                                                                "upper": 1.0}},
            {"case": "tool_calls", "check": "tool_calls", "right": 8, "requests": 8},
            {"case": "agreement", "check": "agreement", "agreement": 1.0}]}
    p = calibration.propose([run(24), run(22)], 0.1)
    assert list(p) == ["answers"]  # tool calls and agreement have no figure to calibrate
    assert p["answers"]["thresholds"] == {"min_accuracy": 0.82} and p["answers"]["measured"] == {
        "accuracy": [1.0, 22 / 24]}
    text = calibration.text(p, "nextn_3step", 0.1, 2, "ct129", "t")
    assert "#   answers: accuracy 0.92-1.00" in text and "answers: {min_accuracy: 0.82}" in text
    calibrated = {"nextn_3step": {"answers": {"min_accuracy": 0.82}}}
    assert plan.problems(PLAN, THRESHOLDS, "nextn_3step", calibrated) == []


def test_the_calibration_file_keeps_other_profiles_and_says_how_it_was_measured():
    p = calibration.propose([_run(55.0, 3.10, 234.0, 10.0), _run(52.0, 3.04, 226.0, 11.0)], 0.1)
    text = calibration.text(p, "nextn_3step", 0.1, 2, "ct129", "2026-12-01T16:00:00Z",
                            existing={"no_spec": {"coding": {"min_tok_s": 24.0}},
                                      "nextn_3step": {"old_case": {"min_tok_s": 1}}})
    data = yaml.safe_load(text)["sglang_gate_calibrated"]
    assert data["no_spec"] == {"coding": {"min_tok_s": 24.0}}
    assert data["nextn_3step"]["coding"] == {"min_tok_s": 46.8, "min_accept_len": 2.73}
    assert "old_case" not in data["nextn_3step"]  # the profile's calibration is replaced whole
    assert "the gate plan ran 2 times on ct129" in text and "10% below the lowest" in text
    assert "#   coding: decode tok/s 52.00-55.00, accept length 3.04-3.10" in text
    # the file is valid for the role: the proposals pass its validation
    assert plan.problems(PLAN, THRESHOLDS, "nextn_3step", {"nextn_3step": data["nextn_3step"]}) == []


# ------------------------------------------------------------------ the comparison's plan ----
def test_the_comparison_replaces_the_long_context_case_by_its_depths():
    p = plan.context_plan(PLAN)
    assert list(p) == ["coding", "context_1k", "context_8k", "context_32k", "concurrent", "prose",
                       "thinking", "answers", "tool_calls", "reasoning", "agreement", "pressure"]
    assert [p[c]["prompt_tokens"] for c in ("context_1k", "context_8k", "context_32k")] == [1024, 8192, 32768]
    # 6 requests: the fewest whose median has a 95% interval (the answer decides on it)
    assert all(p[c]["requests"] == 6 and p[c]["concurrency"] == 1 and p[c]["max_tokens"] == 128
               for c in ("context_1k", "context_8k", "context_32k"))
    assert p["coding"] == PLAN["coding"] and "long_context" not in p
    # a valid plan measured without thresholds, as compare.yml runs it
    assert plan.problems(p, {"nextn_3step": {c: {} for c in p}}, "nextn_3step") == []
    assert plan.context_plan(PLAN, []) == PLAN
    assert list(plan.context_plan({"coding": PLAN["coding"]}, [2000, 1024], 6)) == \
        ["coding", "context_1k", "context_2000"]


@pytest.mark.parametrize("tokens, requests, words", [
    ([512], None, "compare_context_tokens: must be a list of different token counts, each an integer "
                  ">= 1024"),
    ([1024, 1024], None, "compare_context_tokens: must be a list of different"),
    ("8192", None, "compare_context_tokens: must be a list"),
    ([1024.5], None, "compare_context_tokens: must be a list"),
    (None, 0, "compare_context_requests: must be an integer >= 1, got 0"),
])
def test_bad_context_depths_are_named(tokens, requests, words):
    with pytest.raises(plan.ConfigError) as e:
        plan.context_plan(PLAN, tokens, requests)
    assert words in str(e.value)
