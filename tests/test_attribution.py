"""Why a figure moved (sglang_perf/judge/attribution.py): decode tok/s = accept length / verify-step
time, so a change against a baseline splits into its acceptance part and its step-time part, and
the cause is named. Pure cases at their edges, then the engine against emulators whose acceptance
dropped (the demo's 1-step deploy after a 3-step baseline), whose step time rose (a slower GPU
clock), or neither."""
from __future__ import annotations

import json
import math
import random
import time

import pytest
import yaml

from bench import history as history_table
from bench import verdict_rates
from emulator.cli import offline_scheduler
from benchrun import bench
from conftest import MODEL_ARGS, PROFILE_ARGS, Emulator
from sglang_perf.judge import attribution, decision, verdict
from sglang_perf.measure import config, engine, stats
from sglang_perf.record import history

def run(tok_s, accept_len, tok_pct=3.0, al_pct=2.0, step_pct=2.0, level=0.95):
    """A run's figures with intervals +-pct around each, as engine._intervals gives them and a
    history record keeps them."""
    def iv(est, pct):
        return {"estimate": est, "lower": est * (1 - pct / 100.0), "upper": est * (1 + pct / 100.0)}
    return {"tok_s": tok_s, "accept_len": accept_len,
            "intervals": {"level": level, "decode_tok_s": iv(tok_s, tok_pct),
                          "accept_len": iv(accept_len, al_pct),
                          "step_time_s": iv(accept_len / tok_s, step_pct)}}


BEFORE = run(56.0, 3.4)


def test_the_parts_multiply_back_to_the_change():
    a = attribution.split({"tok_s": 40.0, "accept_len": 2.4}, {"tok_s": 56.0, "accept_len": 3.4})
    tok, al, step = (1 + a[k] / 100 for k in ("tok_s_pct", "accept_len_pct", "step_time_pct"))
    assert tok == pytest.approx(al / step)
    assert a["step_time_s"] == pytest.approx(2.4 / 40.0)
    assert a["step_time_s_before"] == pytest.approx(3.4 / 56.0)


@pytest.mark.parametrize("now, cause", [
    (run(40.0, 2.4), "acceptance"),  # accept length down, step unchanged: the drafts
    (run(46.0, 3.4), "system"),      # the same accept length, a longer step: clocks, power, PCIe, release
    (run(33.0, 2.4), "both"),
    (run(55.0, 3.38), "none"),       # within both runs' noise
    (run(70.0, 3.4), "system"),      # a faster server: named by what made it faster
])
def test_the_cause_is_the_part_that_moved_the_speed(now, cause):
    assert attribution.split(now, BEFORE)["cause"] == cause


@pytest.mark.parametrize("tok_s", [56.0, 55.9])
def test_an_unchanged_decode_names_no_cause_however_its_parts_moved(tok_s):
    """The held-out server of issue 31: decode unchanged, accept length +6% and step time +6%
    (each outside both runs' noise, compensating). The speed did not move: no cause (the fixed-5%
    rule named acceptance at 0.0% and system at -0.2%)."""
    a = attribution.split(run(tok_s, 3.4 * 1.06), BEFORE)
    assert a["cause"] == "none", a["text"]
    assert a["accept_len_pct"] == pytest.approx(6.0) and a["step_time_pct"] > 5.9
    assert a["accept_len_pct_interval"][0] > 0 and a["step_time_pct_interval"][0] > 0
    assert not a["moved"]
    assert a["text"].endswith(": cause none (decode within both runs' noise)")


def test_each_change_has_the_interval_of_both_runs():
    """MOVER on the log scale: each side's distance from estimate to bound, added in quadrature."""
    a = attribution.split(run(40.0, 2.4, tok_pct=4.0), run(56.0, 3.4, tok_pct=3.0))
    c = math.log(40.0 / 56.0)
    lo = c - math.hypot(math.log(1 / 0.96), math.log(1.03))
    hi = c + math.hypot(math.log(1.04), math.log(1 / 0.97))
    assert a["tok_s_pct_interval"] == pytest.approx([100 * math.expm1(lo), 100 * math.expm1(hi)])
    assert a["text"] == ("decode -28.6% [-32.1, -24.9] = accept length -29.4% [-31.4, -27.4] and "
                         "step time -1.2% [-3.9, +1.7]: cause acceptance")
    # the baseline's interval at another level is brought to this run's
    wide = attribution.split(run(40.0, 2.4, tok_pct=4.0), run(56.0, 3.4, tok_pct=3.0, level=0.8))
    assert wide["tok_s_pct_interval"][0] < a["tok_s_pct_interval"][0]


def test_the_baseline_noise_counts():
    """A drop this run's interval alone calls real is noise against a noisy baseline; a baseline
    that kept no interval (given by hand, an old record) is taken to be as noisy as this run."""
    now = run(51.5, 3.4)  # -8%
    assert attribution.split(now, run(56.0, 3.4, tok_pct=12.0, step_pct=12.0))["cause"] == "none"
    plain = attribution.split(now, {"tok_s": 56.0, "accept_len": 3.4})
    assert plain["cause"] == "system" and plain["baseline_noise"] == "assumed"
    assert plain["text"].endswith("cause system (the baseline's noise taken as this run's)")
    assert attribution.split(now, BEFORE)["baseline_noise"] == "recorded"


def test_without_an_interval_of_this_run_no_cause_is_named():
    """Fewer requests than an interval takes (6 at 95%): the change cannot be told from noise,
    however large; the gate always has its intervals."""
    for now in ({"tok_s": 39.0, "accept_len": 1.84},
                {"tok_s": 39.0, "accept_len": 1.84,
                 "intervals": {"decode_tok_s": {"estimate": 39.0, "lower": None, "upper": None}}}):
        a = attribution.split(now, BEFORE)
        assert a["cause"] == "none" and a["tok_s_pct_interval"] is None
        assert a["text"] == ("decode -30.4% = accept length -45.9% and step time -22.3%: cause none "
                             "(no bounded interval of the decode change: too few requests)")


def test_a_baseline_given_by_hand_with_malformed_intervals_is_taken_as_without():
    for junk in ([1, 2], {"decode_tok_s": "wide", "level": "95%"}, {"decode_tok_s": {"lower": True}}):
        a = attribution.split(run(40.0, 2.4), {"tok_s": 56.0, "accept_len": 3.4, "intervals": junk})
        assert a["baseline_noise"] == "assumed" and a["cause"] == "acceptance"


def test_an_interval_with_a_lower_bound_at_zero_is_unbounded():
    now = run(40.0, 2.4)
    now["intervals"]["decode_tok_s"]["lower"] = 0.0
    assert attribution.split(now, BEFORE)["cause"] == "none"
    base = run(56.0, 3.4)
    base["intervals"]["decode_tok_s"]["lower"] = -1.0
    assert attribution.split(run(40.0, 2.4), base)["tok_s_pct_interval"] is None


def test_a_part_that_moved_against_the_change_is_not_its_cause():
    """The 1-step profile after a 3-step baseline: accept length -46%, a verify step 22% shorter."""
    a = attribution.split(run(39.0, 1.84), BEFORE)
    assert a["cause"] == "acceptance" and a["step_time_pct"] < -15 and a["step_time_pct_interval"][1] < 0
    assert a["text"] == ("decode -30.4% [-33.3, -27.3] = accept length -45.9% [-47.4, -44.3] and step time "
                         "-22.3% [-24.5, -20.1]: cause acceptance")


@pytest.mark.parametrize("now, before", [({"tok_s": None}, {"tok_s": 56.0}), ({"tok_s": 40.0}, {"tok_s": 0}),
                                         ({"tok_s": 40.0}, {})])
def test_nothing_to_split_without_both_speeds(now, before):
    assert attribution.split(now, before) is None


def test_without_speculation_the_step_is_one_token():
    a = attribution.split(run(20.0, 1.0), run(27.0, 1.0))
    assert a["accept_len_pct"] == 0 and a["cause"] == "system"
    assert stats.step_time_s(25.0, None) == pytest.approx(0.04)


@pytest.mark.parametrize("baseline, said", [
    ({"profile": "nextn_3step", "time": "2026-12-03T14:20:00Z", "for_profile": "nextn_3step"},
     "against nextn_3step's last pass, 2026-12-03T14:20:00Z"),
    ({"profile": "nextn_3step", "time": "2026-12-03T14:20:00Z", "for_profile": "nextn_1step"},
     "against the host's last-known-good, nextn_3step's last pass, 2026-12-03T14:20:00Z (nextn_1step has "
     "no passing run)"),
    ({"profile": "nextn_3step", "time": "t"}, "against nextn_3step's last pass, t"),
    ({"decode_tok_s": 50}, "against the baseline"),
])
def test_the_baseline_is_named_for_what_it_is(baseline, said):
    assert attribution.against(baseline) == said


# ------------------------------------------------- runs with the noise of real requests ------
def requests(n, draw, accept_len=3.2, step_s=0.05, tokens=192, sd_pct=3.6):
    """n finished requests as the engine records them: accept length per request drawn around
    ``accept_len`` (prompt to prompt), each verify step ``step_s`` x exp(clock jitter)."""
    rng = random.Random(draw)
    out = []
    for i in range(n):
        verify = max(1, round(tokens / max(1.0, rng.gauss(accept_len, 0.04 * accept_len))))
        step = step_s * math.exp(rng.gauss(0, sd_pct / 100.0))
        out.append(verdict_rates.record(i, verify * step, tokens, verify, start=4.0 * i))
    return out


def figures(recs):
    """A run's figures as the engine gives them: the median decode, accept length and intervals."""
    cfg = config.validate({"url": verdict_rates.URL, "requests": len(recs)})
    iv = engine._intervals(cfg, recs, recs, 4.0 * len(recs))
    return {"tok_s": iv["decode_tok_s"]["estimate"], "accept_len": iv["accept_len"]["estimate"],
            "intervals": iv}


def test_the_same_server_twice_with_real_noise_names_no_cause():
    """The demo's third gate (the same server, nothing changed): its long-context case decode -3.5%,
    accept length +1.9%, step time +5.5% (each request's decode 4% apart from the next, a
    standard deviation, the step tight). The fixed-5% rule said system."""
    def case(verify, steps):
        return figures([verdict_rates.record(i, v * s, 128, v, start=4.0 * i)
                        for i, (v, s) in enumerate(zip(verify, steps))])
    before = case([58, 57, 55, 54, 53, 52], [0.0496, 0.0503, 0.0500, 0.0498, 0.0502, 0.0501])
    now = case([57, 56, 54, 53, 52, 51], [0.0526, 0.0530, 0.0528, 0.0525, 0.0529, 0.0531])
    a = attribution.split(now, before)
    assert (round(a["tok_s_pct"], 1), round(a["accept_len_pct"], 1), round(a["step_time_pct"], 1)) == \
        (-3.5, 1.9, 5.5)
    assert a["cause"] == "none", a["text"]
    assert a["text"] == ("decode -3.5% [-10.5, +3.4] = accept length +1.9% [-2.5, +6.4] and step time +5.5% "
                         "[+4.6, +6.6]: cause none (decode within both runs' noise)")


def emulated_pairs(profile_now, prompt_tokens, max_tokens, pairs, n=6, scale=1.0):
    """(now, before) figures of ``pairs`` seeded runs of the emulator's own model (the 3-step
    profile before; its per-step acceptance and GPU clock jitter, in virtual time)."""
    def one(profile, draw, speed):
        sched = offline_scheduler(list(MODEL_ARGS) + list(PROFILE_ARGS[profile]),
                                  {"SGLEMU_SEED": str(draw), "SGLEMU_SPEED_SCALE": repr(speed)})
        recs = []
        for i in range(n):
            d = sched.simulate_decode(prompt_tokens, max_tokens)
            recs.append(verdict_rates.record(i, d["decode_s"], d["completion_tokens"], d["verify_ct"],
                                             start=4.0 * i))
        return figures(recs)
    return [(one(profile_now, 11 + 2 * k, scale), one("nextn_3step", 10 + 2 * k, 1.0)) for k in range(pairs)]


def test_against_the_emulators_noise_a_cause_is_rare_between_runs_of_one_server():
    """60 seeded pairs of long-context runs (32K prompt, 6 x 128 tokens) of the same 3-step server:
    at most 3 named a cause (1.5% of 200 when measured; the fixed-5% rule 24.5%); the 1-step server
    against the 3-step baseline at coding: acceptance every time."""
    same = [attribution.split(*pair)["cause"] for pair in emulated_pairs("nextn_3step", 32768, 128, 60)]
    assert sum(c != "none" for c in same) <= 3, same
    drop = [attribution.split(*pair)["cause"] for pair in emulated_pairs("nextn_1step", 150, 192, 10)]
    assert drop == ["acceptance"] * 10


@pytest.mark.parametrize("n", [1, 6, 1024, 100000])
def test_at_every_size(n):
    """n = 1: no interval, no cause. From 6 the 1-step drop is acceptance; the same server again is
    no cause; a 3% longer step shows once the intervals are that narrow (1,024 requests). The split
    takes the same time at any n (the intervals' own cost: stats.py)."""
    before = figures(requests(n, 1))
    same = figures(requests(n, 2))
    started = time.perf_counter()
    a = attribution.split(same, before)
    assert time.perf_counter() - started < 0.01
    assert a["cause"] == "none", a["text"]
    slower = attribution.split(figures(requests(n, 3, step_s=0.0515)), before)
    assert slower["cause"] == ("system" if n >= 1024 else "none"), slower["text"]
    if n == 1:
        assert "too few requests" in slower["text"]
    if n <= 1024:
        drop = attribution.split(figures(requests(n, 4, accept_len=1.84, step_s=0.039)), before)
        assert drop["cause"] == ("none" if n == 1 else "acceptance"), drop["text"]


# ------------------------------------------------------- the engine against the emulator ------
FAST = {"SGLEMU_SPEED_SCALE": "4"}


def measured(emulator, profile, env, baseline=None):
    emu = emulator(profile, env=env)
    return engine.run({"url": emu.url, "requests": 6, "warmup": 2, "max_tokens": 96, "baseline": baseline},
                      judge=verdict.judge_case)


@pytest.fixture(scope="module")
def baseline():
    """A 3-step run's figures, as a history record keeps them (history.baseline)."""
    emu = Emulator(list(MODEL_ARGS) + list(PROFILE_ARGS["nextn_3step"]), env=FAST, wait=True)
    try:
        r = engine.run({"url": emu.url, "requests": 6, "warmup": 2, "max_tokens": 96})
    finally:
        emu.stop()
    return {"time": "t", "profile": "nextn_3step", "decode_tok_s": r["decode_tok_s"]["median"],
            "accept_len": r["accept_len"], "intervals": r["intervals"]}


# The same server again (no cause) is held above against the emulator's model, seeded: live, 2-3%
# of pairs name one (test_against_the_emulators_noise_...), a test that would fail that often.
@pytest.mark.parametrize("profile, env, causes", [
    ("nextn_1step", FAST, ("acceptance",)),            # the demo's rolled-back 1-step deploy
    # each verify step a third longer (accept length, noisy at 6 requests, may move with it)
    ("nextn_3step", {"SGLEMU_SPEED_SCALE": "3"}, ("system", "both")),
])
def test_the_engine_names_the_cause_against_a_baseline(emulator, baseline, profile, env, causes):
    r = measured(emulator, profile, env, baseline)
    a = r["attribution"]
    assert a["cause"] in causes and a["baseline_noise"] == "recorded", a["text"]
    assert set(a) >= {"tok_s_pct", "accept_len_pct", "step_time_pct", "cause"}
    step = r["intervals"]["step_time_s"]
    assert step["lower"] <= a["step_time_s"] <= step["upper"]


def test_no_baseline_no_attribution(emulator):
    assert "attribution" not in measured(emulator, "nextn_3step", FAST)


def test_bench_gate_writes_the_roles_history_and_names_the_cause_against_it(emulator, tmp_path):
    """The CLI contract: `bench gate --url URL --history FILE` appends the run in the role's history
    format (bench history reads it); `--baseline-history FILE` compares with it, and the --json
    result holds per case its attribution (tok_s_pct, accept_len_pct, step_time_pct, cause)."""

    small = tmp_path / "small.yml"
    small.write_text(yaml.safe_dump({"sglang_gate_plan": {
        "coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_requests": 6,
                   "max_tokens": 96}},
        "sglang_gate_thresholds": {p: {"coding": {}} for p in ("nextn_3step", "nextn_1step")}}))
    hist = tmp_path / "history" / "ct129.jsonl"

    def gate(url, *extra, rc=0):
        out = tmp_path / "r.json"
        p = bench("gate", "--url", url, "--vars", small, "--quiet", "--json", out, *extra)
        assert p.returncode == rc, p.stderr
        return json.loads(out.read_text())

    base = emulator("nextn_3step", env=FAST)
    gate(base.url, "--profile", "nextn_3step", "--history", str(hist), "--host", "ct129")
    rec = history.read(str(hist))[-1]
    assert (rec["host"], rec["profile"], rec["verdict"], rec["action"]) == \
        ("ct129", "nextn_3step", "pass", "nothing")
    assert history.last_passing(history.read(str(hist)), "nextn_3step") == rec
    # the 1-step server also fails the capacity check (its KV pool holds less than the 3-step
    # profile's promised context): exit 1, the figures written all the same
    for profile, env, causes, rc in (("nextn_1step", FAST, ("acceptance",), 1),
                                     ("nextn_3step", {"SGLEMU_SPEED_SCALE": "3"}, ("system", "both"), 0)):
        emu = emulator(profile, env=env)
        r = gate(emu.url, "--profile", "nextn_3step", "--baseline-history", str(hist), rc=rc)
        a = r["cases"][0]["attribution"]
        assert set(a) >= {"tok_s_pct", "accept_len_pct", "step_time_pct", "cause"} and a["cause"] in causes, a
        assert a["baseline_noise"] == "recorded", a  # the history record's intervals


def test_the_history_table_shows_each_cases_split_against_the_last_known_good():
    split = attribution.split(run(39.0, 1.84), BEFORE)
    line = history_table.case_line({"case": "coding", "concurrency": 1, "decode_tok_s": {"median": 39.0},
                            "accept_len": 1.84, "passed": False, "attribution": split})
    assert line.endswith("FAILED  vs last-known-good: " + split["text"]) and "cause acceptance" in line
    plain = history_table.case_line({"case": "coding", "concurrency": 1, "passed": True})
    assert "last-known-good" not in plain


# ------------------------------------------------------------ the gate's failure message ------
UNIT, ENV = "u" * 64, "e" * 64
PASSED_AT = "2026-12-03T14:20:00Z"


def gate_case(profile, draw, thresholds, baseline=None, scale=1.0, max_regression_pct=None):
    """The coding case (6 x 192 tokens) of ``profile`` drawn from the emulator's model, judged as
    engine.measure has it judged: its figures, then verdict.judge_case (the comparison with
    ``baseline``, evaluate())."""
    sched = offline_scheduler(list(MODEL_ARGS) + list(PROFILE_ARGS[profile]),
                              {"SGLEMU_SEED": str(draw), "SGLEMU_SPEED_SCALE": repr(scale)})
    recs = []
    for i in range(6):
        d = sched.simulate_decode(verdict_rates.PROMPT_TOKENS, 192)
        recs.append(verdict_rates.record(i, d["decode_s"], d["completion_tokens"], d["verify_ct"],
                                         start=4.0 * i))
    cfg = config.validate(dict(thresholds, url=verdict_rates.URL, requests=6, baseline=baseline,
                               max_regression_pct=max_regression_pct))
    result = {"case": "coding", "concurrency": 1, "requests": 6, "max_tokens": 192, "errors": 0,
              "error_kinds": {}, "metrics": None, "prompt_tokens": {"target": None},
              "engine_accept_len": None,
              "decode_tok_s": engine.summarize([r.decode_tok_s() for r in recs]),
              "accept_len": sum(r.completion_tokens for r in recs) / sum(r.verify_ct for r in recs),
              "intervals": engine._intervals(cfg, recs, recs, 4.0 * len(recs))}
    verdict.judge_case(result, cfg)
    return result


def gate_run(profile, case):
    """A plan result of one case (verdict.judge_plan) with its message, as the module returns it."""
    out = verdict.judge_plan([case], {"failures": [], "notes": []}, {}, profile, "m", verdict_rates.URL, 30.0)
    out["msg"] = verdict.summary(out) if out["passed"] else verdict.failure_message(out)
    return out


@pytest.fixture(scope="module")
def history_3step():
    """The host's history after the 3-step deploy passed, as the role writes it."""
    out = gate_run("nextn_3step", gate_case("nextn_3step", 10, {"min_tok_s": 45.0}))
    d = decision.decide(out, UNIT, ENV, None, host="ct129", profile="nextn_3step")
    assert d["verdict"] == "pass", out["msg"]
    return [history.record(out, d, {"time": PASSED_AT, "host": "ct129", "profile": "nextn_3step"})]


def test_the_1step_deploys_failure_names_acceptance_against_the_3step_pass(history_3step):
    """The demo's 1-step deploy after the 3-step one: no passing run of its own, so the host's
    last-known-good (the 3-step pass) is the baseline; sglang_gate_max_regression_pct is null (the
    default) and the message names the cause all the same, and that baseline for what it is."""
    rec = history.last_known_good(history_3step, "nextn_1step")
    base = history.baseline(rec, "coding", first=True, profile="nextn_1step")
    assert base["intervals"]["decode_tok_s"]["lower"] is not None  # the record keeps its noise
    out = gate_run("nextn_1step", gate_case("nextn_1step", 11, {"min_tok_s": 45.0}, base))
    d = decision.decide(out, UNIT, ENV, {"unit_sha256": "x" * 64, "env_sha256": ENV}, host="ct129",
                        profile="nextn_1step")
    msg = d["message"]
    assert msg.startswith("Gate failed on ct129 for profile nextn_1step: gate failed (coding): coding: "
                          "decode tok/s ") and "< required 45.0; " in msg, msg
    assert ("; against the host's last-known-good, nextn_3step's last pass, 2026-12-03T14:20:00Z "
            "(nextn_1step has no passing run): decode -") in msg, msg
    assert ": cause acceptance. Rolled back to the last-known-good unit" in msg, msg
    assert out["cases"][0]["attribution"]["cause"] == "acceptance"


@pytest.mark.parametrize("max_regression_pct, thresholds, failed", [
    (None, {"min_tok_s": 45.0}, ["min_tok_s"]),
    (5.0, {}, ["max_regression_pct"]),
    (5.0, {"min_tok_s": 45.0}, ["max_regression_pct", "min_tok_s"]),
])
def test_a_failed_case_names_its_cause_with_the_regression_check_on_or_off(history_3step, max_regression_pct,
                                                                            thresholds, failed):
    """The 3-step profile again, each verify step a third longer: against its own last pass, once
    per case (on the first failure a speed change explains), with the check on or off."""
    base = history.baseline(history.last_passing(history_3step, "nextn_3step"), "coding",
                            profile="nextn_3step")
    case = gate_case("nextn_3step", 13, thresholds, base, scale=0.75, max_regression_pct=max_regression_pct)
    assert [f["threshold"] for f in case["failures"]][0] in failed
    msg = gate_run("nextn_3step", case)["msg"]
    assert msg.count("against nextn_3step's last pass, 2026-12-03T14:20:00Z: decode -") == 1, msg
    assert ": cause system" in msg or ": cause both" in msg, msg


def test_a_passing_case_and_a_case_without_a_baseline_carry_no_cause(history_3step):
    base = history.baseline(history_3step[0], "coding", profile="nextn_3step")
    passed = gate_run("nextn_3step", gate_case("nextn_3step", 15, {"min_tok_s": 45.0}, base))
    assert passed["passed"] and "against" not in passed["msg"]
    failed = gate_run("nextn_1step", gate_case("nextn_1step", 11, {"min_tok_s": 45.0}))
    assert not failed["passed"] and "against" not in failed["msg"]
