"""bench.compare_answer.answer on hand-made rows: the best setting per case and by how much, whether
one more MTP step pays (per engine, against the spread), the cycle-share arithmetic, the winner rule
and its tie-break by the long_context case."""
from __future__ import annotations

import pytest

from bench import compare_answer as ca

CASES = {"coding": 1, "long_context": 1, "concurrent": 4}


def row(profile, case, decode, aggregate=None, spread=0.0, al=None, pos=None, steps=0,
        engine="sglang", error=None):
    """A plan row; ``spread`` = (max - min) / median of per-request decode in %."""
    half = decode * spread / 200.0
    return {"profile": profile, "engine": engine, "spec_steps": steps, "case": case,
            "concurrency": CASES[case], "decode_tok_s_median": decode, "decode_tok_s_min": decode - half,
            "decode_tok_s_max": decode + half, "aggregate_tok_s": aggregate if aggregate is not None
            else decode, "accept_len": al, "accept_by_position": pos, "error": error, "roofline": None}


def test_per_case_best_runner_up_noise_and_current():
    rows = [row("a", "coding", 60.0, spread=2.0), row("b", "coding", 50.0, spread=4.0),
            row("c", "coding", 59.0, spread=1.0),
            # the concurrent case is judged on the aggregate, not on per-request decode
            row("a", "concurrent", 50.0, aggregate=180.0, spread=5.0),
            row("b", "concurrent", 40.0, aggregate=200.0, spread=5.0)]
    cases = {a["case"]: a for a in ca.case_answers(rows, current="b")}
    c = cases["coding"]
    assert (c["best"], c["runner_up"], c["metric"]) == ("a", "c", "decode")
    assert c["margin_pct"] == pytest.approx(100.0 / 59.0)        # 60 / 59 - 1 = 1.69 %
    assert c["noise_pct"] == pytest.approx(2.0) and c["beyond_noise"] is False
    assert c["within_noise"] == ["a", "c"]                          # b is 20 % behind: out
    assert c["vs_current_pct"] == pytest.approx(20.0)               # 60 / 50
    assert "the current profile b is behind: +20.0% over it (50.0 tok/s)" in c["sentence"]
    k = cases["concurrent"]
    assert (k["best"], k["metric"], k["value"]) == ("b", "aggregate", 200.0)
    assert k["margin_pct"] == pytest.approx(100.0 / 9.0) and k["beyond_noise"] is True
    assert "the current profile b is the best" in k["sentence"]


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


def test_one_more_step_pays_only_beyond_the_spread_per_engine():
    rows = [
        row("nextn_3step", "coding", 59.5, spread=3.0, al=3.39, pos=[0.83, 0.80, 0.76], steps=3),
        row("nextn_4step", "coding", 60.5, spread=3.0, al=3.67, pos=[0.83, 0.80, 0.76, 0.28], steps=4),
        row("nextn_5step", "coding", 56.4, spread=2.0, al=3.77, pos=[0.83, 0.80, 0.76, 0.28, 0.10],
            steps=5),
        row("vllm_mtp_1", "coding", 38.6, spread=1.0, al=1.80, pos=[0.80], steps=1, engine="vllm"),
        row("vllm_mtp_2", "coding", 44.7, spread=1.0, al=2.32, pos=[0.80, 0.52], steps=2, engine="vllm"),
    ]
    pairs = {(p["engine"], p["from_steps"], p["to_steps"]): p for p in ca.depth_answers(rows)}
    assert set(pairs) == {("sglang", 3, 4), ("sglang", 4, 5), ("vllm", 1, 2)}  # never across engines
    p34 = pairs[("sglang", 3, 4)]
    assert p34["change_tok_s"] == pytest.approx(1.0)
    assert p34["change_pct"] == pytest.approx(100.0 / 59.5)       # +1.7 %, under the 3 % spread
    assert p34["pays"] is False and p34["marginal_positions"] == [0.28]
    p45 = pairs[("sglang", 4, 5)]
    assert p45["pays"] is False and p45["change_pct"] < 0 and p45["marginal_accept"] == pytest.approx(0.10)
    assert p45["break_even_accept"] > p45["marginal_accept"]       # the step costs more than it brings
    p12 = pairs[("vllm", 1, 2)]
    assert p12["pays"] is True and p12["change_pct"] == pytest.approx(100.0 * (44.7 / 38.6 - 1))
    assert p12["break_even_accept"] < 0.52
    assert "vLLM 1 -> 2 steps, coding (per-request decode): +6.1 tok/s (+15.8%, spread 1.0%): pays; " \
           "P(2) = 0.52 against a break-even of" in p12["sentence"]
    verdicts = {(v["engine"], v["to_steps"]): v["verdict"] for v in ca.depth_verdicts(ca.depth_answers(rows))}
    assert verdicts == {("sglang", 4): "does not pay", ("sglang", 5): "does not pay", ("vllm", 2): "pays"}
    # the same +1.0 tok/s with spreads of 1 % pays
    tight = [dict(r, decode_tok_s_min=r["decode_tok_s_median"] - 0.1,
                  decode_tok_s_max=r["decode_tok_s_median"] + 0.1) for r in rows]
    assert {(p["engine"], p["to_steps"]): p["pays"] for p in ca.depth_answers(tight)}[("sglang", 4)] is True


def test_winner_is_best_or_within_noise_in_most_cases():
    rows = [row("nextn_3step", "coding", 59.0, spread=2.0, steps=3),
            row("vllm_mtp_3", "coding", 46.8, spread=2.0, steps=3, engine="vllm"),
            row("nextn_3step", "long_context", 41.0, spread=2.0, steps=3),
            row("vllm_mtp_3", "long_context", 40.5, spread=2.0, steps=3, engine="vllm"),
            row("nextn_3step", "concurrent", 50.0, aggregate=220.0, spread=3.0, steps=3),
            row("vllm_mtp_3", "concurrent", 45.0, aggregate=190.0, spread=3.0, steps=3, engine="vllm")]
    s = ca.answer(rows)
    w = s["winner"]
    assert (w["profile"], w["engine"]) == ("nextn_3step", "sglang")
    # long_context is a tie within noise; coding (+26 %) is the larger of the two clear wins
    assert w["decided_by"] == "coding"
    assert "3 of 3 cases, the runner-up vllm_mtp_3 in 1" in w["reason"]
    assert s["lines"][0].startswith("**Deploy nextn_3step (SGLang)**")


def test_tie_is_broken_by_the_long_context_case():
    rows = [row("a", "coding", 60.0, spread=1.0), row("b", "coding", 50.0, spread=1.0),
            row("a", "long_context", 30.0, spread=1.0), row("b", "long_context", 40.0, spread=1.0)]
    w = ca.answer(rows)["winner"]
    assert (w["profile"], w["decided_by"]) == ("b", "long_context")
    assert "tied with a" in w["reason"] and "40.0 tok/s against a 30.0" in w["reason"]
    # without a long_context case the first case of the plan breaks it
    rows = [row("a", "coding", 60.0), row("b", "coding", 50.0),
            row("a", "concurrent", 30.0, aggregate=100.0), row("b", "concurrent", 30.0, aggregate=120.0)]
    assert ca.answer(rows)["winner"]["profile"] == "a"
    assert ca.answer(rows)["winner"]["decided_by"] == "coding"


def test_error_rows_are_left_out_and_nothing_measured_has_no_winner():
    rows = [row("a", "coding", 60.0), row("b", "coding", 99.0, error="connection refused")]
    s = ca.answer(rows)
    assert s["cases"][0]["best"] == "a" and s["cases"][0]["runner_up"] is None
    assert s["winner"]["profile"] == "a" and "only setting measured" in s["winner"]["reason"]
    assert ca.answer([row("b", "coding", 99.0, error="x")])["winner"]["profile"] is None


def test_roofline_shares_are_the_c1_cases():
    rows = [dict(row("a", "coding", 50.0), roofline={"share_pct": 60.0}),
            dict(row("a", "concurrent", 40.0, aggregate=150.0), roofline={"share_pct": 48.0})]
    assert ca.roofline_shares(rows) == [{"profile": "a", "engine": "sglang", "shares": {"coding": 60.0}}]


def test_compare_report_plan_builds_the_answer_from_a_playbooks_plan_results(tmp_path):
    """playbooks/compare.yml hands `bench compare-report --plan` one sglang_bench plan result per
    profile and the run's variables: the report opens with the answer and names the winner."""
    import json
    import subprocess
    import sys

    from conftest import ROOT

    def case(name, tok_s, accept, positions, aggregate=None):
        spread = {"median": tok_s, "min": tok_s * 0.98, "max": tok_s * 1.02}
        return {"case": name, "decode_tok_s": spread,
                "accept_len": accept, "accept_by_position": positions, "errors": 0,
                "aggregate_tok_s": aggregate or tok_s, "ttft_s": {"p50": 0.05}}

    plan = {"coding": {"prompts": "coding", "concurrency": 1, "requests": 3, "max_tokens": 192},
            "concurrent": {"prompts": "coding", "concurrency": 4, "requests": 8, "max_tokens": 256}}
    profiles = {"nextn_1step": {"speculative_algorithm": "NEXTN", "speculative_num_steps": 1},
                "nextn_3step": {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3},
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
    (tmp_path / "vars.json").write_text(json.dumps({"sglang_profiles": profiles, "sglang_gate_plan": plan}))
    report = [sys.executable, "-m", "bench", "compare-report", "--plan", str(tmp_path / "results.json"),
              "--vars", str(tmp_path / "vars.json")]
    p = subprocess.run(report + ["--current", "nextn_1step", "--no-roofline", "--out", str(tmp_path / "out")],
                       cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    summary = json.loads((tmp_path / "out" / "compare.json").read_text())["summary"]
    assert (summary["winner"]["profile"], summary["winner"]["engine"]) == ("nextn_3step", "sglang")
    assert p.stdout.startswith("- **Deploy nextn_3step (SGLang)**")
    assert "vllm_mtp_3 in coding not measured: the server never answered" in summary["statements"]
    md = (tmp_path / "out" / "compare.md").read_text()
    assert md.index("## The answer") < md.index("| profile | engine |")
    bad = subprocess.run(report + ["--current", "no_spec", "--out", str(tmp_path)],
                         cwd=str(ROOT), capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--current no_spec is not one of the compared profiles" in bad.stderr


# ------------------------------------------------------------------------- context depths ----
def ctx_row(profile, case, tokens, decode, steps, spread=2.0, engine="sglang"):
    r = row(profile, "long_context", decode, spread=spread, steps=steps, engine=engine)
    return dict(r, case=case, context_tokens=tokens)


def test_the_answer_names_where_one_more_step_stops_paying_at_each_context():
    """3 steps pay at 1K and 8K (each step beyond the 2% spread), at 32K the 3rd step no longer
    does (+0.5%): the answer names the depth and the pair at each context, and the trend."""
    speeds = {"context_1k": (40.0, 50.0, 58.0), "context_8k": (38.0, 46.0, 52.0),
              "context_32k": (34.0, 38.0, 38.2)}
    tokens = {"context_1k": 1024, "context_8k": 8192, "context_32k": 32768}
    rows = [ctx_row("k%d" % steps, case, tokens[case], v, steps)
            for case, vs in speeds.items() for steps, v in zip((1, 2, 3), vs)]
    s = ca.answer(rows)
    (vctx,) = s["context"]
    assert [(d["case"], d["pays_up_to"]) for d in vctx["depths"]] == [
        ("context_1k", 3), ("context_8k", 3), ("context_32k", 2)]
    assert vctx["sentence"] == (
        "SGLang by context: one more MTP step at 1K pays up to 3 steps, the deepest measured; at 8K "
        "pays up to 3 steps, the deepest measured; at 32K stops paying after 2 steps (2 -> 3: +0.5%, "
        "spread 2.0%); it stops paying sooner as the context grows")
    assert vctx["sentence"] in s["lines"]
    # the tie-break without a long_context case is the longest context
    assert ca._deepest_context(rows, {c: {} for c in speeds}) == "context_32k"


@pytest.mark.parametrize("n", [1, 2, 6])
def test_context_answers_need_two_contexts_with_a_pair_of_depths(n):
    rows = [ctx_row("k%d" % steps, "context_%d" % (1024 * (i + 1)), 1024 * (i + 1), 40.0 + steps, steps,
                    spread=0.0) for i in range(n) for steps in (1, 2)]
    out = ca.context_answers(ca.depth_answers(rows), rows)
    assert len(out) == (0 if n < 2 else 1)
    if out:
        assert [d["pays_up_to"] for d in out[0]["depths"]] == [2] * n
        assert "sooner" not in out[0]["sentence"]
    # one depth per engine measured: no pair, nothing to say
    assert ca.context_answers(ca.depth_answers(rows[::2]), rows[::2]) == []
