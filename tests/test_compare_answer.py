"""bench.compare_answer.answer on hand-made rows: the winner decided like the gate (the cases it
judges, its intervals and thresholds), context depths and report-only cases informing only, whether
one more MTP step pays on the intervals, the cycle-share arithmetic; and bench.compare_plan's rows
carrying what the gate judges."""
from __future__ import annotations

import json

import pytest

from bench import compare_answer as ca
from bench import compare_plan
from benchrun import bench
from sglang_perf.measure import stats

LEVEL = 0.95
CASES = {"coding": 1, "long_context": 1, "concurrent": 4, "prose": 1, "thinking": 1,
         "context_1k": 1, "context_8k": 1, "context_32k": 1}
TOKENS = {"context_1k": 1024, "context_8k": 8192, "context_32k": 32768, "long_context": 32768}
JUDGED = ("coding", "long_context", "concurrent")   # the gate plan's cases that are not report_only


def spread(center, n, width=0.02):
    """n per-request figures evenly over center x (1 -/+ width)."""
    if n == 1:
        return [float(center)]
    return [center * (1 - width + 2 * width * i / (n - 1)) for i in range(n)]


def row(profile, case, decode, steps=3, engine="sglang", n=6, width=0.02, values=None, aggregate=None,
        al=None, pos=None, thresholds=None, error=None, drafter=None):
    """A plan row as compare_plan builds it, with the gate's intervals (stats.py) over ``n``
    requests (or the per-request decode ``values``): a judged case carries the profile's
    thresholds ({} by default), a context depth or prose none."""
    values = values or spread(decode, n, width)
    n = len(values)
    c = CASES[case]
    iv = {"level": LEVEL, "decode_tok_s": stats.median_interval(values, LEVEL)}
    agg = aggregate if aggregate is not None else decode * c
    if c > 1:  # per-request throughput x C (busy / wall): the engine's aggregate interval
        iv["aggregate_tok_s"] = stats.ratio_interval([(v, 1.0) for v in spread(agg / c, n, width)], LEVEL,
                                                     scale=c)
    if al is not None:  # completion tokens / verify steps per request
        iv["accept_len"] = stats.ratio_interval([(al * 100 * f, 100.0) for f in spread(1.0, n, 0.03)], LEVEL)
    judged = case in JUDGED
    return {"profile": profile, "engine": engine, "spec_steps": steps, "case": case, "concurrency": c,
            "requests": n, "decode_tok_s_median": stats.percentile(values, 50),
            "decode_tok_s_min": min(values), "decode_tok_s_max": max(values), "aggregate_tok_s": agg,
            "accept_len": al, "accept_by_position": pos, "errors": 0, "error": error, "roofline": None,
            "prompt_tokens": TOKENS.get(case), "context_tokens": TOKENS.get(case),
            "report_only": case in ("prose", "thinking"), "judged": judged,
            "thinking": case == "thinking", "drafter": drafter,
            "thresholds": (thresholds or {}) if judged else None, "gate_problem": None,
            "intervals": iv, "setting": [engine, "block" if drafter else "chain" if steps else "none",
                                         steps + 1 if drafter else steps, False, 0.88]}


def setting(profile, steps, figures, engine="sglang", **kw):
    """Rows of one setting: {case: per-request decode (or (decode, aggregate) at C>1)}."""
    out = []
    for case, f in figures.items():
        decode, agg = f if isinstance(f, tuple) else (f, None)
        out.append(row(profile, case, decode, steps=steps, engine=engine, aggregate=agg, **kw))
    return out


# ------------------------------------------------------------------------------ the winner ----
def test_the_judged_cases_decide_not_the_context_depths_and_prose():
    """vllm_mtp_3 wins the three context depths and prose and ties at C=4, but is clearly behind
    at coding, the case the gate judges: a vote over every case picked it (5 of 6); the judged
    cases pick nextn_3step."""
    rows = setting("nextn_3step", 3, {"coding": 58.0, "context_1k": 40.0, "context_8k": 36.0,
                                      "context_32k": 30.0, "concurrent": (50.0, 220.0), "prose": 30.0}) \
        + setting("vllm_mtp_3", 3, {"coding": 47.0, "context_1k": 46.0, "context_8k": 42.0,
                                    "context_32k": 36.0, "concurrent": (50.0, 222.0), "prose": 36.0},
                  engine="vllm")
    s = ca.answer(rows)
    w = s["winner"]
    assert (w["profile"], w["engine"], w["decided_by"]) == ("nextn_3step", "sglang", "coding")
    assert w["voted"] == ["coding", "concurrent"]
    assert w["informed"] == ["context_1k", "context_8k", "context_32k", "prose"]
    assert "ahead of vllm_mtp_3 in coding (58.0 [56.8, 59.2] against 47.0 [46.1, 47.9] tok/s)" in w["reason"]
    assert s["lines"][0].startswith("**Deploy nextn_3step (SGLang)**")
    assert s["lines"][1] == (
        "Voted (the cases the gate judges): coding, concurrent. Informed only, no vote: context_1k, "
        "context_8k, context_32k (context depths), prose (report only).")
    cases = {a["case"]: a for a in s["cases"]}
    assert cases["context_1k"]["best"] == "vllm_mtp_3"
    assert "; informs only)" in cases["context_1k"]["sentence"]
    assert cases["concurrent"]["tied"] == ["vllm_mtp_3", "nextn_3step"]
    assert "; judged: votes)" in cases["coding"]["sentence"]


def test_overlapping_intervals_are_a_tie_and_the_cheaper_setting_wins_it():
    rows = setting("nextn_1step", 1, {"coding": 40.0, "concurrent": (40.0, 160.0)}) \
        + setting("nextn_4step", 4, {"coding": 59.0, "concurrent": (50.0, 224.0)}) \
        + setting("nextn_3step", 3, {"coding": 58.0, "concurrent": (50.0, 220.0)})
    w = ca.answer(rows)["winner"]
    assert (w["profile"], w["decided_by"]) == ("nextn_3step", "tie: fewer draft tokens")
    assert "tied with nextn_4step (4 steps) in every judged case" in w["reason"]
    assert "ahead of nextn_1step in coding, concurrent" in w["reason"]
    # the same steps on both engines: the tie goes to the host's profile (no change), else the first
    rows = setting("nextn_3step", 3, {"coding": 58.0}) \
        + setting("vllm_mtp_3", 3, {"coding": 58.5}, engine="vllm")
    assert ca.answer(rows)["winner"]["profile"] == "nextn_3step"
    w = ca.answer(rows, current="vllm_mtp_3")["winner"]
    assert (w["profile"], w["decided_by"]) == ("vllm_mtp_3", "tie: the current profile")


def test_a_tie_goes_by_the_tuners_cost_order_to_adaptive_off_then_the_lower_fraction():
    def at(rows, adaptive=False, mem=0.88):
        for r in rows:  # the profile as profile_facts reads it
            r["setting"] = ["sglang", "chain", 3, adaptive, mem]
        return rows
    rows = at(setting("nextn_3step_adaptive", 3, {"coding": 58.3}), adaptive=True) \
        + at(setting("nextn_3step", 3, {"coding": 58.0}))
    w = ca.answer(rows)["winner"]
    assert (w["profile"], w["decided_by"]) == ("nextn_3step", "tie: adaptive off")
    rows = at(setting("nextn_3step_m92", 3, {"coding": 58.3}), mem=0.92) \
        + at(setting("nextn_3step_m84", 3, {"coding": 58.0}), mem=0.84)
    w = ca.answer(rows)["winner"]
    assert (w["profile"], w["decided_by"]) == ("nextn_3step_m84", "tie: the lower memory fraction")
    # the same setting twice: the first measured
    rows = at(setting("a", 3, {"coding": 58.3})) + at(setting("b", 3, {"coding": 58.0}))
    assert (ca.answer(rows)["winner"]["profile"], ca.answer(rows)["winner"]["decided_by"]) == (
        "a", "tie: the first measured")


def test_a_setting_that_fails_a_judged_threshold_never_wins():
    bar = {"min_tok_s": 45, "min_accept_len": 2.8}
    rows = setting("nextn_5step", 5, {"coding": 60.0, "concurrent": (52.0, 240.0)}, al=2.5, thresholds=bar) \
        + setting("nextn_2step", 2, {"coding": 50.0, "concurrent": (45.0, 200.0)}, al=2.6,
                  thresholds={"min_tok_s": 45, "min_accept_len": 2.2})
    s = ca.answer(rows)
    w = s["winner"]
    assert (w["profile"], w["decided_by"]) == ("nextn_2step", "coding")
    assert w["excluded"] == {"nextn_5step": "fails the gate in coding: accept length 2.50 [2.46, 2.54] < "
                                            "required 2.80; concurrent: accept length 2.50 [2.46, 2.54] "
                                            "< required 2.80"}
    assert "the only setting that clears the gate" in w["reason"]
    # a bar straddled at this sample is not a failure: the setting may win, and it is named
    rows = setting("nextn_3step", 3, {"coding": 46.0}, thresholds={"min_tok_s": 45.5})
    w = ca.answer(rows)["winner"]
    assert w["profile"] == "nextn_3step"
    assert "straddles the minimum 45.5 bar" in w["reason"] and "its own gate" in w["reason"]
    # a profile the gate has no thresholds for cannot be deployed: it cannot win
    rows = [dict(r, thresholds=None, gate_problem="sglang_gate_thresholds has no entry for profile x")
            for r in setting("x", 3, {"coding": 70.0})] + setting("nextn_1step", 1, {"coding": 40.0})
    w = ca.answer(rows)["winner"]
    assert w["profile"] == "nextn_1step" and "no entry for profile x" in w["excluded"]["x"]
    # every setting fails: no winner, and the answer says so
    s = ca.answer(setting("no_spec", 0, {"coding": 27.0}, thresholds={"min_tok_s": 45}))
    assert s["winner"]["profile"] is None and s["lines"][0].startswith("**No winner**: ")
    assert "decode tok/s (per-request median) 27.0 [26.5, 27.5] < required 45.0" in s["lines"][0]


def test_a_trade_off_between_judged_cases_names_no_winner():
    rows = setting("nextn_3step", 3, {"coding": 58.0, "concurrent": (50.0, 200.0)}) \
        + setting("vllm_mtp_3", 3, {"coding": 47.0, "concurrent": (50.0, 260.0)}, engine="vllm")
    w = ca.answer(rows)["winner"]
    assert w["profile"] is None and w["decided_by"] is None
    assert "nextn_3step is behind vllm_mtp_3 in concurrent" in w["reason"]
    assert "vllm_mtp_3 is behind nextn_3step in coding" in w["reason"]


@pytest.mark.parametrize("n", [1, 6, 1024, 100000])
def test_the_decision_needs_an_interval(n):
    """One request per case bounds no median: nothing is decided on it ("not enough requests");
    from 6 (the fewest at 95%) the intervals decide, to 100,000 requests."""
    rows = setting("nextn_1step", 1, {"coding": 40.0}, n=n) + setting("nextn_3step", 3, {"coding": 60.0}, n=n)
    s = ca.answer(rows)
    (pair,) = s["depth"]
    if n == 1:
        assert s["winner"]["profile"] is None
        assert "not enough requests in coding (1; a 95% interval takes at least 6)" in s["winner"]["reason"]
        assert pair["outcome"] == "not enough requests" and pair["pays"] is False
        assert "no interval" in s["cases"][0]["sentence"]
    else:
        assert (s["winner"]["profile"], s["winner"]["decided_by"]) == ("nextn_3step", "coding")
        assert pair["outcome"] == "pays"
        lo, hi = (r["intervals"]["decode_tok_s"] for r in rows)
        assert lo["upper"] < hi["lower"] and hi["n"] == n


def test_nothing_judged_or_nothing_measured_has_no_winner():
    s = ca.answer(setting("a", 3, {"context_1k": 40.0, "prose": 30.0}))
    assert s["winner"]["profile"] is None
    assert "no case the gate judges was measured" in s["winner"]["reason"]
    assert ca.answer([row("b", "coding", 99.0, error="x")])["winner"]["profile"] is None
    rows = [row("a", "coding", 60.0), row("b", "coding", 99.0, error="connection refused")]
    s = ca.answer(rows)
    assert s["cases"][0]["best"] == "a" and s["cases"][0]["runner_up"] is None
    assert s["winner"]["profile"] == "a" and s["winner"]["excluded"] == {
        "b": "not measured in coding: connection refused"}
    # the gate's case the comparison replaced by its depths is named, not voted
    s = ca.answer(rows, not_run=["long_context"])
    assert "long_context (the gate's, replaced by the context depths) was not run: no vote." in s["lines"][1]


# ----------------------------------------------------------------------- one more step ----
def test_one_more_step_pays_on_the_intervals_not_on_the_spread():
    # 6 requests each: the 95% interval of a median is [min, max]. 1 -> 2: +8.2% is inside 2
    # steps' own 8.9% spread (the spread rule: does not pay), but the intervals are apart: pays.
    k1 = row("k1", "coding", 0, steps=1, values=[36.0, 36.2, 36.4, 36.6, 36.8, 37.0])
    k2 = row("k2", "coding", 0, steps=2, values=[37.5, 38.0, 39.0, 40.0, 40.0, 41.0])
    # 2 -> 3: +13.9%, beyond both spreads (the spread rule: pays), but the intervals overlap
    k3 = row("k3", "coding", 0, steps=3, values=[40.9, 45.0, 45.0, 45.0, 45.0, 45.0])
    # 3 -> 4: 4 steps' interval is below 3 steps': costs
    k4 = row("k4", "coding", 0, steps=4, values=[38.0, 38.5, 39.0, 39.5, 40.0, 40.5])
    pairs = {p["to_steps"]: p for p in ca.depth_answers([k1, k2, k3, k4])}
    assert [pairs[k]["outcome"] for k in (2, 3, 4)] == ["pays", "no difference shown", "costs"]
    assert pairs[2]["pays"] is True and pairs[3]["pays"] is False
    assert pairs[2]["sentence"].startswith(
        "SGLang 1 -> 2 steps, coding (per-request decode; judged): 36.5 [36.0, 37.0] -> 39.5 [37.5, 41.0] "
        "tok/s (+8.2%): pays at 95%")
    (v,) = [x for x in ca.depth_verdicts(ca.depth_answers([k2, k3])) if x["to_steps"] == 3]
    assert v["verdict"] == "no difference shown"
    assert v["sentence"] == \
        "SGLang 2 -> 3 steps (judged cases): one more step: no difference shown (in coding)"


def test_cycle_share_formula():
    # 1 step: AL 1.75 at 37.5 tok/s -> t = 46.67 ms; 2 steps: AL 2.47 at 47.7 tok/s -> 51.78 ms.
    lo = row("k1", "coding", 37.5, al=1.75, steps=1)
    hi = row("k2", "coding", 47.7, al=2.47, steps=2)
    s, p = ca.cycle_share(lo, hi)
    t1, t2 = 1.75 / 37.5, 2.47 / 47.7
    assert s == pytest.approx((t2 - t1) / t2)
    assert p == pytest.approx(1.75 * s / (1 - s))
    # break-even is exactly where the speed does not change: L' = L / (1 - s) <=> v' = v
    same = row("k2", "coding", 37.5, al=2.2, steps=2)
    s, p = ca.cycle_share(lo, same)
    assert 1.75 + p == pytest.approx(2.2)
    # no speculation counts as accept length 1
    s, _ = ca.cycle_share(row("none", "coding", 26.7), lo)
    assert s == pytest.approx(1 - (1.0 * 37.5) / (1.75 * 26.7))


def test_depths_are_compared_per_engine_with_the_added_positions():
    rows = [row("nextn_3step", "coding", 59.5, al=3.39, pos=[0.83, 0.80, 0.76], steps=3),
            row("nextn_4step", "coding", 60.5, al=3.67, pos=[0.83, 0.80, 0.76, 0.28], steps=4),
            row("nextn_5step", "coding", 52.0, al=3.77, pos=[0.83, 0.80, 0.76, 0.28, 0.10], steps=5),
            row("vllm_mtp_1", "coding", 38.6, al=1.80, pos=[0.80], steps=1, engine="vllm"),
            row("vllm_mtp_2", "coding", 44.7, al=2.32, pos=[0.80, 0.52], steps=2, engine="vllm")]
    pairs = {(p["engine"], p["from_steps"], p["to_steps"]): p for p in ca.depth_answers(rows)}
    assert set(pairs) == {("sglang", 3, 4), ("sglang", 4, 5), ("vllm", 1, 2)}  # never across engines
    assert pairs[("sglang", 3, 4)]["outcome"] == "no difference shown"
    assert pairs[("sglang", 3, 4)]["marginal_positions"] == [0.28]
    p45 = pairs[("sglang", 4, 5)]
    assert p45["outcome"] == "costs" and p45["marginal_accept"] == pytest.approx(0.10)
    assert p45["break_even_accept"] > p45["marginal_accept"]       # the step costs more than it brings
    p12 = pairs[("vllm", 1, 2)]
    assert p12["pays"] is True and p12["change_pct"] == pytest.approx(100.0 * (44.7 / 38.6 - 1))
    assert "; P(2) = 0.52 against a break-even of" in p12["sentence"]


# ---------------------------------------------------------------------- context depths ----
def test_the_answer_names_where_one_more_step_stops_paying_at_each_context():
    """Each step pays at 1K and 8K (intervals apart); at 32K the 3rd step's interval overlaps the
    2nd's: no difference shown. The depths inform: they cast no vote."""
    speeds = {"context_1k": (40.0, 50.0, 58.0), "context_8k": (38.0, 46.0, 52.0),
              "context_32k": (34.0, 38.0, 38.2)}
    rows = [row("k%d" % steps, case, v, steps=steps) for case, vs in speeds.items()
            for steps, v in zip((1, 2, 3), vs)]
    s = ca.answer(rows)
    (vctx,) = s["context"]
    assert [(d["case"], d["pays_up_to"]) for d in vctx["depths"]] == [
        ("context_1k", 3), ("context_8k", 3), ("context_32k", 2)]
    assert vctx["sentence"] == (
        "SGLang by context: one more MTP step at 1K pays up to 3 steps, the deepest measured; at 8K "
        "pays up to 3 steps, the deepest measured; at 32K stops paying after 2 steps (2 -> 3: no "
        "difference shown, 38.2 [37.4, 39.0] against 38.0 [37.2, 38.8] tok/s); it stops paying sooner "
        "as the context grows (95% intervals; the depths inform, they do not vote)")
    assert vctx["sentence"] in s["lines"]
    assert s["winner"]["profile"] is None  # no judged case


@pytest.mark.parametrize("n", [1, 4, 6])
def test_a_depth_measured_with_too_few_requests_says_so(n):
    rows = [row("k%d" % steps, case, 40.0 + 10 * steps, steps=steps, n=n)
            for case in ("context_1k", "context_8k") for steps in (1, 2)]
    (vctx,) = ca.context_answers(ca.depth_answers(rows), rows)
    if n < 6:
        assert vctx["sentence"] == (
            "SGLang by context: one more MTP step at 1K is not shown either way (1 -> 2: not enough "
            "requests, %d; a 95%% interval takes at least 6); at 8K is not shown either way (1 -> 2: "
            "not enough requests, %d; a 95%% interval takes at least 6) (95%% intervals; the depths "
            "inform, they do not vote)" % (n, n))
    else:
        assert [d["pays_up_to"] for d in vctx["depths"]] == [2, 2]
    # one depth measured: nothing to say by context
    assert ca.context_answers(ca.depth_answers(rows[:2]), rows[:2]) == []


# --------------------------------------------------------------------- rows of the plan ----
GATE_PLAN = {"coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 192},
             "long_context": {"prompts": "long_context", "prompt_tokens": 32768, "concurrency": 1,
                              "requests": 6, "max_tokens": 128},
             "concurrent": {"prompts": "coding", "concurrency": 4, "requests": 8, "max_tokens": 256},
             "prose": {"prompts": "prose", "concurrency": 1, "requests": 6, "max_tokens": 96,
                       "report_only": True}}
PROFILES = {"nextn_3step": {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3},
            "nextn_9step": {"speculative_algorithm": "NEXTN", "speculative_num_steps": 9}}


def test_plan_rows_carry_what_the_gate_judges(tmp_path):
    """compare.yml's vars.json: the gate plan, the plan it measured (the depths in place of
    long_context) and the thresholds; each row says whether the gate judges its case and with
    which thresholds (calibrated over the defaults, as plan.resolve resolves them)."""
    measured = compare_plan.with_contexts(GATE_PLAN, "1024,8192")
    v = {"sglang_profiles": PROFILES, "sglang_gate_plan": GATE_PLAN, "compare_plan": measured,
         "sglang_gate_thresholds": {"nextn_3step": {"coding": {"min_tok_s": 45, "min_accept_len": 2.8},
                                                    "long_context": {"min_tok_s": 33},
                                                    "concurrent": {"min_aggregate_tok_s": 200}}},
         "sglang_gate_calibrated": {"nextn_3step": {"coding": {"min_tok_s": 50}}}}
    results = [{"profile": p, "url": "http://h:30000", "error": None, "result": {"cases": [
        {"case": c, "decode_tok_s": {"median": 50.0, "min": 49.0, "max": 51.0}, "errors": 0,
         "aggregate_tok_s": 210.0,
         "intervals": {"level": LEVEL, "decode_tok_s": {"estimate": 50.0, "lower": 49.0, "upper": 51.0},
                       "accept_len": {"estimate": 3.0, "lower": 2.9, "upper": 3.1},
                       "aggregate_tok_s": {"estimate": 210.0, "lower": 205.0, "upper": 215.0}}}
        for c in measured]}} for p in PROFILES]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    rows = compare_plan.rows_from_results(path, v)
    by = {(r["profile"], r["case"]): r for r in rows}
    assert [r["case"] for r in rows[:5]] == ["coding", "context_1k", "context_8k", "concurrent", "prose"]
    assert [c for c in measured if by[("nextn_3step", c)]["judged"]] == ["coding", "concurrent"]
    assert by[("nextn_3step", "coding")]["thresholds"] == {"min_tok_s": 50, "min_accept_len": 2.8}
    assert by[("nextn_3step", "context_1k")]["thresholds"] is None
    assert by[("nextn_3step", "coding")]["intervals"]["decode_tok_s"]["lower"] == 49.0
    assert by[("nextn_9step", "coding")]["thresholds"] is None
    assert "has no entry for profile nextn_9step" in by[("nextn_9step", "coding")]["gate_problem"]
    assert compare_plan.not_run(v) == ["long_context"]
    s = ca.answer(rows, not_run=compare_plan.not_run(v))
    # 50.0 [49.0, 51.0] straddles the calibrated 50; nextn_9step has no thresholds
    assert s["winner"]["profile"] == "nextn_3step" and "nextn_9step" in s["winner"]["excluded"]


def test_roofline_shares_are_the_c1_cases():
    rows = [dict(row("a", "coding", 50.0), roofline={"share_pct": 60.0}),
            dict(row("a", "concurrent", 40.0, aggregate=150.0), roofline={"share_pct": 48.0})]
    assert ca.roofline_shares(rows) == [{"profile": "a", "engine": "sglang", "shares": {"coding": 60.0}}]


def test_compare_report_plan_builds_the_answer_from_a_playbooks_plan_results(tmp_path):
    """playbooks/compare.yml hands `bench compare-report --plan` one sglang_bench plan result per
    profile and the run's variables: the report opens with the answer and names the winner."""

    def case(name, tok_s, accept, positions, aggregate=None):
        return {"case": name, "decode_tok_s": {"median": tok_s, "min": tok_s * 0.98, "max": tok_s * 1.02},
                "accept_len": accept, "accept_by_position": positions, "errors": 0,
                "aggregate_tok_s": aggregate or tok_s, "ttft_s": {"p50": 0.05},
                "intervals": {"level": LEVEL,
                              "decode_tok_s": stats.median_interval(spread(tok_s, 6), LEVEL),
                              "accept_len": stats.ratio_interval([(accept * 100, 100)] * 6, LEVEL),
                              "aggregate_tok_s": stats.ratio_interval(
                                  [(v, 1.0) for v in spread((aggregate or tok_s) / 4, 8)], LEVEL, scale=4)}}

    plan = {"coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 192},
            "concurrent": {"prompts": "coding", "concurrency": 4, "requests": 8, "max_tokens": 256}}
    # the role defaults' bases: thresholds a profile does not state are its base's
    profiles = {"no_spec": {},
                "nextn_1step": {"base": "nextn_3step", "speculative_num_steps": 1},
                "nextn_3step": {"base": "no_spec", "speculative_algorithm": "NEXTN",
                                "speculative_num_steps": 3},
                "vllm_mtp_3": {"engine": "vllm", "speculative_algorithm": "MTP", "speculative_num_steps": 3}}
    results = [
        {"profile": "nextn_1step", "url": "http://127.0.0.1:30000", "error": None, "result": {"cases": [
            case("coding", 37.5, 1.75, [0.75]), case("concurrent", 37.0, 1.75, [0.75], 140.0)]}},
        {"profile": "nextn_3step", "url": "http://127.0.0.1:30000", "error": None, "result": {"cases": [
            case("coding", 55.0, 3.2, [0.75, 0.72, 0.69]),
            case("concurrent", 56.0, 3.2, [0.75, 0.72, 0.69], 224.0)]}},
        {"profile": "vllm_mtp_3", "url": "http://127.0.0.1:30000", "error": "the server never answered",
         "result": None}]
    (tmp_path / "results.json").write_text(json.dumps(results))
    # the role defaults' thresholds apply (the planner's role defaults): 1 step fails coding's 45 tok/s.
    # What compare.yml writes: the play's checked inputs (the action's, as the planner has them) and
    # the plan it measured; the report reads no inventory
    from bench import planner
    checked = planner.host_for(None, "ct129", {"sglang_profiles": profiles, "sglang_gate_plan": plan,
                                               "sglang_gate_confidence": LEVEL}).values()
    (tmp_path / "inputs.json").write_text(json.dumps(dict(planner.shareable(checked), compare_plan=plan)))
    report = ["compare-report", "--plan", tmp_path / "results.json", "--inputs", tmp_path / "inputs.json"]
    p = bench(*report, "--current", "nextn_1step", "--no-roofline", "--out", tmp_path / "out", timeout=120)
    assert p.returncode == 0, p.stderr
    summary = json.loads((tmp_path / "out" / "compare.json").read_text())["summary"]
    assert (summary["winner"]["profile"], summary["winner"]["engine"]) == ("nextn_3step", "sglang")
    assert "nextn_1step" in summary["winner"]["excluded"]
    assert p.stdout.startswith("- **Deploy nextn_3step (SGLang)**")
    assert "- Voted (the cases the gate judges): coding, concurrent." in p.stdout
    assert "vllm_mtp_3 in coding not measured: the server never answered" in summary["statements"]
    md = (tmp_path / "out" / "compare.md").read_text()
    assert md.index("## The answer") < md.index("| profile | engine |")
    bad = bench(*report, "--current", "no_spec", "--out", tmp_path, timeout=120)
    assert bad.returncode == 2 and "--current no_spec is not one of the compared profiles" in bad.stderr


def test_the_comparison_measures_and_judges_at_the_gates_confidence(tmp_path):
    """sglang_gate_confidence from the vars reaches the plan's measurement (bench compare --plan
    runs gate.run_plan on measure_only's cases) and the thresholds' resolution (gate_view)."""
    import argparse

    from bench import gate
    f = tmp_path / "v.yml"
    f.write_text("sglang_gate_confidence: 0.9\n")
    given = argparse.Namespace(inventory=None, host=None, vars=[str(f)], vault_password_file=None,
                               profile=None)
    assert gate.common_options(gate.plan_of(given)["gate"], "http://h", None, None)["confidence"] == 0.9
    v = gate.vars_of(given)
    # at 90% five requests bound a median: a judged case of five is no problem for the gate
    five = {"coding": dict(GATE_PLAN["coding"], requests=5)}
    v = dict(v, sglang_gate_plan=five, sglang_gate_thresholds={"nextn_3step": {"coding": {"min_tok_s": 45}}})
    measured = compare_plan.measure_only(v)
    assert [(c["case"], c["thresholds"]) for c in measured] == [("coding", {})]
    assert compare_plan.gate_view(v, "nextn_3step") == ({"coding": {"min_tok_s": 45}}, None)
    assert "cannot bound a median at 95%" in compare_plan.gate_view(
        dict(v, sglang_gate_confidence=0.95), "nextn_3step")[1]


# ------------------------------------------------------------------------- the drafters ----
def test_a_drafter_is_set_beside_the_best_mtp_depth_per_context_and_with_thinking():
    """DFLASH (a block of 16: 15 drafts a verify) against the best MTP depth in each case: ahead in
    coding and at 1K, a tie at 32K, behind with thinking on (the emulator's shape, fitted to the
    public figures); the drafter is no MTP depth (no 3 -> 15 step pair), and it wins the judged
    case it is ahead in."""
    rows = setting("nextn_2step", 2, {"coding": 55.0, "context_1k": 46.0, "context_32k": 40.0,
                                      "thinking": 45.0}) \
        + setting("nextn_3step", 3, {"coding": 58.8, "context_1k": 47.0, "context_32k": 40.7,
                                     "thinking": 44.0}) \
        + setting("dflash", 15, {"coding": 90.0, "context_1k": 70.0, "context_32k": 39.8, "thinking": 38.0},
                  drafter="DFLASH")
    s = ca.answer(rows)
    (d,) = s["drafters"]
    assert (d["profile"], d["engine"], d["drafter"]) == ("dflash", "sglang", "DFLASH")
    got = [(c["case"], c["mtp"], c["outcome"], round(c["margin_pct"], 1)) for c in d["cases"]]
    assert got == [("coding", "nextn_3step", "beats", 53.1), ("context_1k", "nextn_3step", "beats", 48.9),
                   ("context_32k", "nextn_3step", "tie", -2.2), ("thinking", "nextn_2step", "behind", -15.6)]
    assert d["sentence"].startswith("SGLang DFLASH (dflash) against the best MTP depth of each case: "
                                    "in coding +53.1% against nextn_3step (90.0 [")
    assert "at 32K -2.2% against nextn_3step (39.8 [" in d["sentence"] and "a tie, the intervals overlap" \
        in d["sentence"]
    assert "with thinking on (thinking) -15.6% against nextn_2step (38.0 [" in d["sentence"]
    assert "behind MTP, apart at 95%" in d["sentence"]
    assert d["sentence"] in s["lines"]
    # depth pairs are MTP's alone
    assert {(p["from_steps"], p["to_steps"]) for p in s["depth"]} == {(2, 3)}
    assert s["winner"]["profile"] == "dflash"


def test_a_drafter_without_mtp_beside_it_or_without_intervals_says_so():
    rows = setting("no_spec", 0, {"coding": 30.0}) + setting("dflash", 15, {"coding": 90.0}, drafter="DFLASH")
    assert ca.answer(rows)["drafters"] == []  # nothing with MTP to set it beside
    rows = setting("nextn_3step", 3, {"coding": 58.0}, n=4) + setting("dflash", 15, {"coding": 60.0}, n=1,
                                                                     drafter="DFLASH")
    (d,) = ca.answer(rows)["drafters"]
    assert d["cases"][0]["outcome"] == ca.TOO_FEW


def test_the_plan_rows_carry_the_drafter_and_its_drafts_per_verify():
    v = {"sglang_profiles": {"dflash": {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 16,
                                        "draft_model": {"repo": "z-lab/Qwen3.6-27B-DFlash"}},
                             "vllm_dflash": {"engine": "vllm", "speculative_algorithm": "DFLASH",
                                             "speculative_num_steps": 15, "draft_model": {"repo": "z-lab/x"}},
                             "nextn_3step": {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
                                             "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4},
                             "no_spec": {}}}
    facts = {name: compare_plan.profile_facts(v, name) for name in v["sglang_profiles"]}
    assert {n: f[:3] for n, f in facts.items()} == {
        "dflash": ("sglang", 15, "DFLASH"), "vllm_dflash": ("vllm", 15, "DFLASH"),
        "nextn_3step": ("sglang", 3, None), "no_spec": ("sglang", 0, None)}
    # each as the tuner's setting: a block of its accept ceiling, a chain of its steps, the
    # fraction the memory preflight assumes (none set here)
    assert {n: tuple(f.setting[1:3]) for n, f in facts.items()} == {
        "dflash": ("block", 16), "vllm_dflash": ("block", 16), "nextn_3step": ("chain", 3),
        "no_spec": ("none", 0)}
    case = {"case": "thinking", "prompts": "coding", "concurrency": 1, "requests": 6, "thinking": True,
            "report_only": True}
    (r,) = compare_plan.plan_rows("dflash", facts["dflash"], "http://127.0.0.1:1", [case], None, "down")
    assert (r["drafter"], r["spec_steps"], r["thinking"], r["report_only"]) == ("DFLASH", 15, True, True)
    assert r["setting"] == list(facts["dflash"].setting)


# ------------------------------------------------------------------ what the server says ----
def check_row(profile, case, check, failures=(), accuracy=None, min_accuracy=None):
    """A quality check's row as compare_plan builds it (measured without thresholds)."""
    return {"profile": profile, "engine": "sglang", "spec_steps": 3, "case": case, "concurrency": 8,
            "requests": 8, "errors": 0, "error": None, "judged": True, "report_only": False,
            "setting": ["sglang", "chain", 3, False, 0.88],
            "thresholds": {"min_accuracy": min_accuracy} if min_accuracy is not None else {},
            "check": check, "quality": "%s: 8 of 8" % case, "accuracy": accuracy,
            "quality_failures": list(failures), "intervals": None}


def test_a_faster_setting_that_fails_a_quality_check_cannot_win():
    rows = [row("nextn_3step", "coding", 55.0), row("nextn_4step", "coding", 75.0, steps=4),
            check_row("nextn_3step", "tool_calls", "tool_calls"),
            check_row("nextn_4step", "tool_calls", "tool_calls",
                      ["tool calls: 8 of 8 replies did not carry the expected call: 8 x the call left "
                       "as markup"]),
            check_row("nextn_3step", "answers", "answers",
                      accuracy={"estimate": 1.0, "lower": 0.86, "upper": 1.0},
                      min_accuracy=0.8),
            check_row("nextn_4step", "answers", "answers",
                      accuracy={"estimate": 0.6, "lower": 0.41, "upper": 0.77},
                      min_accuracy=0.8)]
    out = ca.answer(rows)
    assert out["winner"]["profile"] == "nextn_3step" and out["winner"]["voted"] == ["coding"]
    why = out["winner"]["excluded"]["nextn_4step"]
    assert why.startswith("fails the quality checks (what the server says): tool calls: 8 of 8")
    assert "answers: accuracy 0.60 [0.41, 0.77] < required 0.80" in why
    assert "Quality of nextn_3step: passed tool_calls, answers" in out["lines"]
    assert any(line.startswith("Quality of nextn_4step: FAILED tool_calls (") for line in out["lines"])
    assert "Quality checks (tool_calls, answers): a setting that fails one cannot win." in out["lines"][1]
    blank = {k: None for k in compare_plan.PLAN_ROW_KEYS}
    table = compare_plan.markdown_table([dict(blank, **r) for r in rows])
    assert "| FAILED: tool calls: 8 of 8" in table and "| passed: tool_calls: 8 of 8 |" in table
