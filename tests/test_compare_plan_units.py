"""playbooks/compare.yml's decisions as Python calls (sglang_perf/plan/comparison.py, through the
sglang_compare_plan action): which profiles, the cases each is measured with, the module's
options, the report's arguments, every refusal of compare's inputs, and the sweep's rows."""
from __future__ import annotations

import pytest

from conftest import role_defaults
from plugins.action.sglang_compare_plan import inputs
from sglang_perf.plan import comparison, gate as plan
from resultutil import case_result

GATE = role_defaults("sglang_gate")
GATE_PLAN = {"coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 128},
             "long": {"prompts": "long_context", "prompt_tokens": 8192, "concurrency": 1, "requests": 6,
                      "max_tokens": 64},
             "concurrent": {"prompts": "coding", "concurrency": 4, "requests": 8, "max_tokens": 128}}
# what compare.yml passes: the role's sglang_gate_compare_profiles and its own sweep's three
SWEEP = {"engines": [], "levels": [1, 4, 16], "requests": 4, "warmup": 2, "max_tokens": 512,
         "topology": {"enabled": False}, "current": "nextn_3step",
         "engine_profiles": GATE["sglang_gate_compare_profiles"],
         "sweep_profiles": ["no_spec", "nextn_1step", "nextn_3step"]}
ENGINES = dict(SWEEP, engines="sglang,vllm", gate_plan=GATE_PLAN,
               gate={"api": "chat", "confidence": 0.9, "warmup": 1, "first_token_timeout": 60,
                     "stall_timeout": 20, "run_timeout": 900})


def make(**kw):
    return comparison.make(dict(ENGINES, **kw))


def test_the_engine_sweep_runs_each_engines_depths_on_the_gate_plan_at_the_context_depths():
    out = make()
    assert out["problems"] == [] and out["by_plan"] is True and out["engines"] == ["sglang", "vllm"]
    table = GATE["sglang_gate_compare_profiles"]
    assert out["profiles"] == table["sglang"] + table["vllm"]
    assert [c["case"] for c in out["cases"]] == ["coding", "context_1k", "context_8k", "context_32k",
                                                 "concurrent"]
    assert all(c["thresholds"] == {} and c["source"] == {} for c in out["cases"])  # measured, not judged
    assert out["plan"] == plan.context_plan(GATE_PLAN)
    depth = out["cases"][1]["options"]
    assert (depth["prompt_tokens"], depth["requests"], depth["max_requests"], depth["max_tokens"]) == \
        (1024, 6, 6, 64)
    # the gate's level, warmup and timeouts: the answer decides on the intervals the gate would
    assert out["bench"] == ENGINES["gate"]
    # the report the tuner writes: by the plan, the host's profile named when it is compared
    assert out["report"] == {"by": "plan", "current": "nextn_3step"}
    assert make(current="vllm_mtp_9")["report"] == {"by": "plan", "current": None}


def test_the_engine_table_is_replaced_by_compare_engine_profiles_and_the_depths_by_their_own():
    out = make(engine_profiles={"sglang": ["nextn_1step"], "vllm": ["vllm_mtp_1", "vllm_mtp_3"]},
               context_tokens=[1024, 4096], context_requests=3, gate_plan={"coding": GATE_PLAN["coding"]})
    assert out["profiles"] == ["nextn_1step", "vllm_mtp_1", "vllm_mtp_3"]
    assert [(c["case"], c["options"]["requests"]) for c in out["cases"]] == [
        ("coding", 6), ("context_1k", 3), ("context_4k", 3)]
    assert make(engines=["vllm"], profiles=["vllm_mtp_2"])["profiles"] == ["vllm_mtp_2"]
    assert [c["case"] for c in make(context_tokens=[])["cases"]] == list(GATE_PLAN)


@pytest.mark.parametrize("levels, requests, expected", [
    ([1], 4, [("c1", 1, 4)]),
    ([1, 6, 1024], 4, [("c1", 1, 4), ("c6", 6, 12), ("c1024", 1024, 2048)]),
    ([16], 100000, [("c16", 16, 100000)]),
])
def test_the_concurrency_sweep_is_one_case_per_level_at_least_two_full_waves(levels, requests, expected):
    out = comparison.make(dict(SWEEP, levels=levels, requests=requests))
    assert out["problems"] == [] and out["by_plan"] is False
    assert out["profiles"] == ["no_spec", "nextn_1step", "nextn_3step"]
    got = [(c["case"], c["options"]["concurrency"], c["options"]["requests"]) for c in out["cases"]]
    assert got == expected
    assert all(c["options"]["max_tokens"] == 512 and c["thresholds"] == {} for c in out["cases"])
    assert out["bench"]["warmup"] == 2 and out["bench"]["confidence"] == 0.95
    assert out["report"] == {"by": "sweep", "current": None}


@pytest.mark.parametrize("change, words", [
    ({"engines": "sglang,tgi"}, "compare_engines (sglang, tgi) must name engines of "
                                "sglang_gate_compare_profiles (sglang, vllm)"),
    ({"engine_profiles": None}, "must name engines of sglang_gate_compare_profiles (none)"),
    ({"engines": [], "deploy_best": True}, "compare_deploy_best needs compare_engines"),
    ({"profiles": []}, "compare_profiles ([]) must be a non-empty list of profiles"),
    ({"known_profiles": ["no_spec"], "engines": "sglang"},
     "compare_profiles: no such profile nextn_1step, nextn_2step, nextn_3step, nextn_4step, nextn_5step, "
     "dflash in sglang_profiles (known: no_spec)"),
    ({"engines": [], "levels": []}, "compare_levels ([]) must be a non-empty list of concurrency levels"),
    ({"engines": [], "levels": [1, 0]}, "compare_levels ([1, 0]) must be"),
    ({"engines": [], "levels": ["x"]}, "compare_levels (['x']) must be"),
    ({"engines": [], "requests": 0}, "compare_requests must be an integer >= 1, got 0"),
    ({"engines": [], "max_tokens": 1}, "compare_max_tokens must be an integer >= 2, got 1"),
    ({"context_tokens": [512]}, "compare_context_tokens: must be a list of different token counts"),
    ({"context_requests": 0}, "compare_context_requests: must be an integer >= 1, got 0"),
    ({"gate_plan": {}, "context_tokens": []}, "sglang_gate_plan: the comparison has no case to measure"),
    ({"gate": None}, "the gate's options are not planned"),
    ({"topology": {"enabled": True, "node_rank": 1, "group": "pair"}, "host": "gpu2"},
     "gpu2 is node 1 of multi-node deployment pair: playbooks/compare.yml switches one host's profile at "
     "a time, which would break the deployment"),
])
def test_compares_inputs_are_refused_naming_the_variable(change, words):
    out = make(**change)
    assert any(words in p for p in out["problems"]), out["problems"]


def test_the_action_takes_numbers_jinja_rendered_as_text():
    a = inputs({"levels": ["1", 4], "requests": "4", "max_tokens": "512", "warmup": "2",
                "gate": {"api": None, "confidence": 0.95}})
    assert (a["levels"], a["requests"], a["max_tokens"], a["warmup"]) == ([1, 4], 4, 512, 2)
    assert a["gate"] == {"confidence": 0.95}  # unset gate options: the engine's defaults
    assert comparison.make(dict(SWEEP, **a))["problems"] == []


def test_the_gate_defaults_plan_compares():
    """The role's own gate plan, as the engine sweep measures it."""
    out = make(gate_plan=GATE["sglang_gate_plan"], gate={})
    assert out["problems"] == [] and out["cases"]


def test_the_sweeps_rows_one_per_profile_and_level_errors_named():
    cases = comparison.make(dict(SWEEP, levels=[1, 4, 16]))["cases"]
    server = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3}
    results = [
        {"profile": "nextn_3step", "url": "u", "error": None,
         "slowdowns": ["GPU 0 held by sw_thermal_slowdown for 40% of the measurement"],
         "result": {"server": server, "cases": [
            case_result("c1", [54.0, 55.0, 56.0], 3.1, [0.9, 0.8], [0.05] * 3, aggregate=110.0),
            case_result("c4", [], None, None, [], unmeasured="cannot connect")]}},
        {"profile": "no_spec", "url": "u", "result": None, "error": "could not measure u: refused"},
    ]
    rows = comparison.sweep_rows(results, cases)
    assert [(r["profile"], r["concurrency"]) for r in rows] == [
        ("nextn_3step", 1), ("nextn_3step", 4), ("nextn_3step", 16),
        ("no_spec", 1), ("no_spec", 4), ("no_spec", 16)]
    ok = rows[0]
    assert (ok["decode_tok_s_median"], ok["decode_tok_s_min"], ok["aggregate_tok_s"], ok["ttft_p50_s"],
            ok["spec_steps"], ok["error"], ok["requests"]) == (55.0, 54.0, 110.0, 0.05, 3, None, 3)
    assert rows[1]["error"] == "cannot connect" and rows[1]["decode_tok_s_median"] is None
    assert rows[2]["error"] == "no result"
    assert {r["error"] for r in rows[3:]} == {"could not measure u: refused"}
    assert rows[3]["spec_steps"] == 0
    # what held a profile's GPUs down, on each of its rows, and said once in the report
    assert [len(r["slowdowns"]) for r in rows] == [1, 1, 1, 0, 0, 0]
    from bench import compare
    said = compare.analyse([dict(r) for r in rows])
    assert said["slowdowns"] == {"nextn_3step": results[0]["slowdowns"]}
    assert [s for s in said["statements"] if "held down" in s] == [
        "nextn_3step: GPU clocks held down while it was measured (GPU 0 held by sw_thermal_slowdown for 40% "
        "of the measurement): its figures are the GPUs' at those clocks, not the setting's alone"]
    # the row keys bench compare-report reads
    from bench.compare import load_rows
    assert all(set(r) == set(comparison.ROW_KEYS) for r in rows)
    import json
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(rows, f)
        f.flush()
        assert load_rows(f.name) == rows
