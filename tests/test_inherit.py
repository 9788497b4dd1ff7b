"""Profiles and thresholds that inherit (sglang_perf/plan/inherit.py): every default profile resolves to
exactly the flat settings and thresholds the role had before bases (tests/data/flat_profiles.json,
taken from the flat defaults), the rules of `base` as Python calls, and the deploy plan reading the
resolved values (a new judged case costs its thresholds once)."""
from __future__ import annotations

import json

from conftest import ROOT, raw_role_defaults
from planutil import plan_for
from sglang_perf.plan.inherit import resolve

FLAT = json.loads((ROOT / "tests" / "data" / "flat_profiles.json").read_text())


def test_every_default_profile_and_its_thresholds_resolve_to_the_flat_ones():
    profiles = raw_role_defaults("sglang")["sglang_profiles"]
    thresholds = raw_role_defaults("sglang_gate")["sglang_gate_thresholds"]
    flat, flat_thresholds, problems = resolve(profiles, thresholds)
    assert problems == []
    assert flat == FLAT["sglang_profiles"]
    # the quality checks' bars came after bases: stated once in no_spec, every profile has them
    checks = {c: thresholds["no_spec"][c]
              for c in ("answers", "tool_calls", "reasoning", "agreement", "pressure")}
    assert flat_thresholds == {p: dict(cases, **checks)
                               for p, cases in FLAT["sglang_gate_thresholds"].items()}
    # the repetition is gone: every profile but the root names a base
    assert [n for n, p in profiles.items() if "base" not in p] == ["no_spec"]
    assert sum(len(cases) for cases in thresholds.values()) - len(checks) < 20 < sum(
        len(cases) for cases in FLAT["sglang_gate_thresholds"].values())


def test_a_profile_states_only_what_differs_and_null_removes_a_setting():
    flat, _, problems = resolve({"root": {"a": 1, "b": 2, "c": 3}, "mid": {"base": "root", "b": 20},
                                 "leaf": {"base": "mid", "c": None, "d": 4}})
    assert problems == []
    assert flat == {"root": {"a": 1, "b": 2, "c": 3}, "mid": {"a": 1, "b": 20, "c": 3},
                    "leaf": {"a": 1, "b": 20, "d": 4}}


def test_thresholds_inherit_case_by_case_and_calibrated_is_not_resolved_here():
    profiles = {"root": {"x": 1}, "child": {"base": "root"}, "grandchild": {"base": "child"}}
    thresholds = {"root": {"coding": {"min_tok_s": 45}, "concurrent": {"min_aggregate_tok_s": 200}},
                  "child": {"coding": {"min_accept_len": 2.8}}, "grandchild": {"concurrent": {}}}
    _, flat, _ = resolve(profiles, thresholds)
    # per case: child's coding replaces root's coding whole (no min_tok_s from root)
    assert flat["child"] == {"coding": {"min_accept_len": 2.8}, "concurrent": {"min_aggregate_tok_s": 200}}
    assert flat["grandchild"] == {"coding": {"min_accept_len": 2.8}, "concurrent": {}}
    assert thresholds["child"] == {"coding": {"min_accept_len": 2.8}}  # the input is not changed


def test_no_thresholds_anywhere_in_the_chain_stays_absent_and_odd_shapes_pass_through():
    profiles = {"root": {}, "child": {"base": "root"}, "odd": {"base": "root"}, "scalar": 5}
    _, flat, _ = resolve(profiles, {"odd": {"min_tok_s": 45}, "ghost": {"coding": {}}})
    assert "child" not in flat and flat["odd"] == {"min_tok_s": 45} and flat["ghost"] == {"coding": {}}
    assert resolve(profiles)[0]["scalar"] == 5
    assert resolve("not a mapping", {"x": 1}) == ("not a mapping", {"x": 1}, [])


def test_a_bad_base_is_refused_naming_the_profiles():
    profiles = {"a": {"base": "b", "x": 1}, "b": {"base": "c"}, "c": {"base": "a"}, "into": {"base": "a"},
                "own": {"base": "own"}, "lost": {"base": "nowhere"}, "listed": {"base": ["a"]},
                "under_lost": {"base": "lost", "y": 2}}
    flat, _, problems = resolve(profiles)
    assert problems == [
        "sglang_profiles: the bases of a, b, c form a cycle (a -> b -> c -> a)",
        "sglang_profiles.own.base names the profile itself",
        "sglang_profiles.lost.base = 'nowhere': no such profile in sglang_profiles (known: a, b, c, into, "
        "listed, lost, own, under_lost)",
        "sglang_profiles.listed.base = ['a']: no such profile in sglang_profiles (known: a, b, c, into, "
        "listed, lost, own, under_lost)"]
    # each keeps its own settings (no base key) for the checks that follow
    assert flat["a"] == {"x": 1} and flat["under_lost"] == {"y": 2} and flat["own"] == {}


def test_chains_at_their_edges_resolve_in_linear_time():
    for n in (1, 6, 1024, 100_000):
        profiles = {"p0": {"tp_size": 2, "context_length": 0}}
        profiles.update({"p%d" % i: {"base": "p%d" % (i - 1), "context_length": i} for i in range(1, n)})
        thresholds = {"p0": {"coding": {"min_tok_s": 45}}}
        flat, flat_thresholds, problems = resolve(profiles, thresholds)
        last = "p%d" % (n - 1)
        assert problems == [] and len(flat) == n
        assert flat[last] == {"tp_size": 2, "context_length": n - 1}
        assert flat_thresholds[last] == {"coding": {"min_tok_s": 45}}
    # a cycle through every one of 1,024 profiles is one problem
    ring = {"p%d" % i: {"base": "p%d" % ((i + 1) % 1024)} for i in range(1024)}
    assert len(resolve(ring)[2]) == 1


def test_the_deploy_plan_reads_the_resolved_profile_and_thresholds():
    plan = plan_for({"sglang_profile": "nextn_4step"}, plumbing=False)
    assert plan["problems"] == []
    assert plan["settings"] == FLAT["sglang_profiles"]["nextn_4step"] and "base" not in plan["settings"]
    assert {c["case"]: c["thresholds"] for c in plan["gate"]["cases"]
            if not c["report_only"] and not c["options"].get("check")} == \
        FLAT["sglang_gate_thresholds"]["nextn_4step"]


def test_a_new_judged_case_costs_its_thresholds_once():
    gate_plan = dict(raw_role_defaults("sglang_gate")["sglang_gate_plan"])
    gate_plan["tools"] = {"prompts": "coding", "concurrency": 2, "requests": 6, "max_tokens": 64}
    thresholds = raw_role_defaults("sglang_gate")["sglang_gate_thresholds"]
    thresholds = dict(thresholds, no_spec=dict(thresholds["no_spec"], tools={"min_aggregate_tok_s": 80}))
    for name in ("nextn_1step", "nextn_5step", "vllm_mtp_2", "vllm_mtp_5"):
        plan = plan_for({"sglang_profile": name, "sglang_gate_plan": gate_plan,
                         "sglang_gate_thresholds": thresholds}, plumbing=False)
        assert plan["problems"] == [], (name, plan["problems"])
        case = [c for c in plan["gate"]["cases"] if c["case"] == "tools"]
        assert case and case[0]["thresholds"] == {"min_aggregate_tok_s": 80}, name


def test_a_hosts_own_profiles_merge_by_name_over_the_inventorys():
    """sglang_host_profiles / sglang_gate_host_thresholds (a tuned winner in host_vars): merged by
    name, the inventory's profiles whole beside them; the deploy plan runs it with its bars."""
    winner = {"base": "nextn_3step", "speculative_num_steps": 4, "speculative_num_draft_tokens": 5,
              "mem_fraction_static": 0.86}
    bars = {"coding": {"min_tok_s": 50, "min_accept_len": 3.4}}
    plan = plan_for({"sglang_profile": "tuned", "sglang_host_profiles": {"tuned": winner},
                     "sglang_gate_host_thresholds": {"tuned": bars}})
    assert plan["problems"] == [] and plan["profile"] == "tuned"
    argv = plan["argv"]
    assert argv[argv.index("--speculative-num-steps") + 1] == "4"
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.86"
    coding = next(c for c in plan["gate"]["cases"] if c["case"] == "coding")
    assert coding["thresholds"] == {"min_tok_s": 50, "min_accept_len": 3.4}
    # the inventory's own profiles are all still there, and a host profile of the same name wins
    from sglang_perf.plan import inherit
    profiles = raw_role_defaults("sglang")["sglang_profiles"]
    merged, _ = inherit.with_host(profiles, {}, {"tuned": winner, "no_spec": {"tp_size": 1}})
    assert set(merged) == set(profiles) | {"tuned"} and merged["no_spec"] == {"tp_size": 1}
    assert inherit.with_host(profiles, None, None, None) == (profiles, None)
    assert inherit.with_host("not a mapping", None, {"x": {}})[0] == "not a mapping"
