"""Profiles and thresholds that inherit (sglang_perf/plan/inherit.py): every default profile resolves to
what its chain of bases states (the nearest statement winning, null removing) and plans, every
judged case has a bar for every profile stated once, the rules of `base` as Python calls, and the
deploy plan reading the resolved values (a new judged case costs its thresholds once)."""
from __future__ import annotations


from conftest import raw_role_defaults
from planutil import plan_for
from sglang_perf.plan.inherit import resolve


def _chain(profiles, name):
    """``name`` and its bases, nearest first."""
    chain = [name]
    while "base" in profiles[chain[-1]]:
        chain.append(profiles[chain[-1]]["base"])
    return chain


def test_every_default_profile_resolves_to_its_chain_and_its_thresholds_to_the_plans_cases():
    """The role's own profiles, as data: each flat profile holds exactly what its chain states,
    the nearest statement winning and null removing; every profile renders a deploy plan; every
    judged case of the gate plan has a bar for every profile, stated once where it is shared."""
    profiles = raw_role_defaults("sglang")["sglang_profiles"]
    thresholds = raw_role_defaults("sglang_gate")["sglang_gate_thresholds"]
    # the drafters placed under the models' directory, as the plan places them
    flat, flat_thresholds, problems = resolve(profiles, thresholds, "/srv/models")
    assert problems == [] and set(flat) == set(profiles)
    derived = ("draft_model", "speculative_draft_model_path")
    for name in profiles:
        expected = {}
        for link in reversed(_chain(profiles, name)):
            for key, value in profiles[link].items():
                if key == "base":
                    continue
                if value is None:
                    expected.pop(key, None)
                else:
                    expected[key] = value
        assert {k: v for k, v in flat[name].items() if k not in derived} == \
            {k: v for k, v in expected.items() if k not in derived}, name
        # (no sizes: no_spec, the root, is no deploy - its bar is above its roofline)
        plan = plan_for({"sglang_profile": name, "sglang_hardware": {}}, plumbing=False,
                        roles=("sglang", "sglang_gate"))
        assert plan["problems"] == [] and plan["settings"] == flat[name], (name, plan["problems"])
        assert plan["server"]["argv"], name
    # the root states what every profile shares; every other profile names a base
    assert [n for n, p in profiles.items() if "base" not in p] == ["no_spec"]
    plan_cases = raw_role_defaults("sglang_gate")["sglang_gate_plan"]
    judged = {c for c, o in plan_cases.items() if not (o or {}).get("report_only")}
    for name in profiles:
        assert judged <= set(flat_thresholds[name]), (name, judged - set(flat_thresholds[name]))
        for case, bars in flat_thresholds[name].items():  # a case's bars: its nearest statement, whole
            nearest = next(thresholds[link][case] for link in _chain(profiles, name)
                           if case in (thresholds.get(link) or {}))
            assert bars == nearest, (name, case)
    # stated once: no profile restates a bar its base already has
    for name, cases in thresholds.items():
        base = profiles[name].get("base")
        for case, bars in (cases or {}).items() if base else ():
            inherited = flat_thresholds[base].get(case, {})
            assert any(inherited.get(k) != v for k, v in bars.items()), (name, case, "restates its base")


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
    profiles = raw_role_defaults("sglang")["sglang_profiles"]
    thresholds = raw_role_defaults("sglang_gate")["sglang_gate_thresholds"]
    flat, flat_thresholds, _ = resolve(profiles, thresholds)
    assert plan["settings"] == flat["nextn_4step"] and "base" not in plan["settings"]
    assert profiles["nextn_4step"]["base"] and plan["settings"]["speculative_num_steps"] == 4
    assert {c["case"]: c["thresholds"] for c in plan["gate"]["cases"] if not c["report_only"]} == \
        flat_thresholds["nextn_4step"]


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
    argv = plan["server"]["argv"]
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
