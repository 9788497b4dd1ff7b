"""The sglang_bench module in-process, with ansible-core 2.19's module-args patching and patched
exit_json/fail_json, against real emulator processes on loopback."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from conftest import bench_args, free_port
from plugins.modules import sglang_bench
from sglang_perf.plan import gate as plan


class Exit(Exception):
    def __init__(self, kind, result):
        Exception.__init__(self, kind)
        self.kind, self.result = kind, result


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    def exit_json(self, **kw):
        raise Exit("exit", kw)

    def fail_json(self, msg, **kw):
        kw["msg"] = msg
        raise Exit("fail", kw)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def call(args, check=False):
    if check:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises(Exit) as e:
            sglang_bench.main()
    return e.value.kind, e.value.result


FAST = {"SGLEMU_SPEED_SCALE": "4"}
# 6 requests: the fewest whose median has a 95% interval
CODING = {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 128}


def resolved(thresholds=None, cases=None, profile="nextn_3step"):
    """Cases as the deploy plan hands them over: plan.resolve's, thresholds already chosen."""
    cases = cases or {"coding": CODING}
    return plan.resolve(cases, {profile: {n: dict(thresholds or {}) for n in cases}}, profile)


def gate(url, thresholds=None, cases=None, **kw):
    """The module's arguments for one run of resolved ``cases`` (default: one coding case); the
    engine options among ``kw`` go to the gate part's options."""
    options = {k: kw.pop(k) for k in list(kw) if k in sglang_bench.COMMON_OPTIONS}
    return bench_args(url, resolved(thresholds, cases), "nextn_3step", dict({"warmup": 2}, **options), **kw)


def test_passes_and_returns_every_figure(emulator):
    emu = emulator("nextn_3step", env=FAST)
    kind, r = call(gate(emu.url, {"min_tok_s": 45, "min_accept_len": 2.8}))
    assert kind == "exit" and r["passed"] is True and r["changed"] is False
    (case,) = r["cases"]
    for key in ("decode_tok_s", "accept_len", "aggregate_tok_s", "ttft_s", "itl_ms", "errors",
                "per_request", "accept_len_by_prompt", "failures", "intervals", "judged"):
        assert key in case, key
    for key in ("decode_tok_s", "accept_len", "aggregate_tok_s", "ttft_s", "itl_ms", "intervals"):
        assert r[key] == case[key], key  # the headline case's figures at the top
    assert r["msg"].startswith("passed in ") and "coding (C=1, 6 x 128 tok): decode " in r["msg"]
    assert r["server"]["speculative_algorithm"] == "EAGLE"
    assert case["threshold_source"] == {"min_tok_s": "thresholds", "min_accept_len": "thresholds"}


def test_fails_with_measured_vs_required_and_the_full_result(emulator):
    emu = emulator("nextn_1step", env=FAST)
    kind, r = call(gate(emu.url, {"min_tok_s": 1000, "min_accept_len": 2.8, "min_aggregate_tok_s": 5000}))
    assert kind == "fail" and r["passed"] is False and r["failed_cases"] == ["coding"]
    assert r["msg"].startswith("gate failed (coding): coding: decode tok/s (per-request median) ")
    assert "< required 1000.0" in r["msg"]
    assert "accept length 1." in r["msg"] and "< required 2.80" in r["msg"]
    assert "aggregate tok/s at C=1" in r["msg"] and "< required 5000.0" in r["msg"]
    # decided on the first 6: 2 warmup + 6 measured
    (case,) = r["cases"]
    assert case["decode_tok_s"]["median"] > 0 and len(case["per_request"]) == 8
    assert case["verdict"] == "fail" and case["sequential"]["looks"] == 0  # a fixed sample: judged once


def test_check_mode_states_the_cases_probes_and_does_not_benchmark(emulator):
    emu = emulator("nextn_3step", env=FAST)
    kind, r = call(gate(emu.url, {"min_tok_s": 45}), check=True)
    assert kind == "exit" and r["ready"] is True and r["changed"] is False
    assert "benchmark not run" in r["msg"] and "decode_tok_s" not in r
    assert "coding (C=1, 6 x 128 tokens, coding prompts): min_tok_s 45" in r["msg"]
    assert r["plan"].startswith("gate plan, each threshold judged on its 95% interval")
    generated = [q for q in emu.stats()["requests"] if not q.get("health")]
    assert generated == []


def test_check_mode_reports_a_server_that_is_not_up():
    kind, r = call(gate("http://127.0.0.1:%d" % free_port()), check=True)
    assert kind == "exit" and r["ready"] is False and "cannot connect" in r["msg"]


def test_check_mode_refuses_a_case_a_run_would_refuse():
    cases = resolved()
    cases[0]["options"]["concurrency"] = 0
    args = gate("http://127.0.0.1:1")
    args["gate"]["cases"] = cases
    kind, r = call(args, check=True)
    assert kind == "fail" and "invalid option concurrency: must be 1 or more, got 0" in r["msg"]


@pytest.mark.parametrize("change, words", [
    (lambda c: c[0]["thresholds"].update(min_tok_s=-5),
     "invalid option min_tok_s: must be 0.0 or more, got -5"),
    (lambda c: c[0]["options"].update(concurrency=0), "invalid option concurrency: must be 1 or more, got 0"),
    (lambda c: c[0]["options"].update(min_tok_s=1), "cases[0] (coding).options must be a mapping of case"),
    (lambda c: c[0]["thresholds"].update(max_tokens=1), "cases[0] (coding).thresholds must be a mapping of"),
    (lambda c: c[0].update(plan={}), "cases[0] (coding) has unknown key(s) plan"),
    (lambda c: c.append(dict(c[0])), "cases[1]: case coding is given twice"),
    (lambda c: c.append({"options": {}}), "cases[1] must be a resolved case"),
    (lambda c: c.clear(), "invalid option cases: must be a non-empty list of resolved cases"),
])
def test_bad_cases_are_named(change, words):
    cases = resolved()
    change(cases)
    args = gate("http://127.0.0.1:1")
    args["gate"]["cases"] = cases
    kind, r = call(args)
    assert kind == "fail" and words in r["msg"], r["msg"]


def test_a_bad_url_is_named():
    kind, r = call(gate("localhost:30000"))
    assert kind == "fail" and "invalid option url: expected http://HOST[:PORT]" in r["msg"]


@pytest.mark.parametrize("raw", [{"plan": {"coding": CODING}}, {"thresholds": {}}, {"calibrated": {}},
                                 {"min_tok_s": 45}, {"requests": 6}, {"prompts": "coding"},
                                 {"cases": []}, {"profile": "p"}, {"warmup": 2}, {"baseline_history": "h"}])
def test_the_raw_plan_and_flat_options_are_gone(raw):
    """One job: the module runs the plan's gate part; resolving (and single-case measuring: python
    -m bench run) is not its, and the gate's parts are not options of their own."""
    kind, r = call(dict(gate("http://127.0.0.1:1"), **raw))
    assert kind == "fail" and "Unsupported parameters" in r["msg"] and list(raw)[0] in r["msg"]


@pytest.mark.parametrize("change, words", [
    (lambda g: g.pop("profile"), "gate.profile is required (the deploy plan's gate part: a profile name)"),
    (lambda g: g.pop("cases"), "gate.cases is required (the deploy plan's gate part: its resolved cases)"),
    (lambda g: g["options"].update(requests=6), "gate.options has unknown key(s) requests (known: api, "),
    (lambda g: g.update(options=[1]), "gate.options must be a mapping of engine options"),
    (lambda g: g["options"].update(warmup=-1), "invalid option warmup: must be 0 or more, got -1"),
])
def test_a_bad_gate_part_is_named(change, words):
    args = gate("http://127.0.0.1:1")
    change(args["gate"])
    kind, r = call(args)
    assert kind == "fail" and words in r["msg"], r["msg"]


def test_the_deploy_plans_resolved_cases_run_as_they_are(emulator):
    """The gate task hands over the deploy plan's gate part (cases, options, promise, notes): the module
    judges with the thresholds the controller chose (calibrated over the defaults, key by key) and
    never reads the raw plan, thresholds or calibration."""
    from planutil import plan_for
    emu = emulator("nextn_3step", env=FAST)
    p = plan_for({"sglang_gate_calibrated": {"nextn_3step": {"coding": {"min_accept_len": 3.9}}}})
    assert p["problems"] == [], p["problems"]
    g = p["gate"]
    assert g["cases"][0]["source"]["min_accept_len"] == "calibrated"
    for c in g["cases"]:
        c["options"].update(requests=6, max_requests=6, max_tokens=64)
    g.update(notes=["a note of the plan"], options=dict(g["options"], warmup=1), measure_lock=None)
    kind, r = call({"url": emu.url, "gate": g, "per_request": False})
    assert kind == "fail" and "< required 3.90" in r["msg"], r["msg"]
    assert r["cases"][0]["threshold_source"]["min_accept_len"] == "calibrated"
    assert "a note of the plan" in r["notes"]


def test_the_deploy_plan_notes_thresholds_of_cases_it_does_not_run():
    from planutil import plan_for
    p = plan_for({"sglang_gate_thresholds": {"nextn_3step": {"coding": {"min_tok_s": 1}, "gone": {}}}})
    assert "thresholds for gone are not used: the plan has no such case" in p["gate"]["notes"], p["problems"]


def test_wrong_key_and_secret_never_in_the_result(emulator):
    emu = emulator("nextn_3step", env=FAST, extra=["--api-key", "right-key-123"])
    kind, r = call(gate(emu.url, api_key="wrong-key-456"))
    assert kind == "fail"
    assert "authentication failed" in r["msg"] and "key is wrong" in r["msg"]
    kind, r = call(gate(emu.url, {"min_tok_s": 45}, api_key="right-key-123"))
    assert kind == "exit" and r["passed"]
    assert "right-key-123" not in json.dumps(r)
    assert sglang_bench.ARGUMENT_SPEC["api_key"]["no_log"] is True


def test_documentation_matches_the_argument_spec_and_the_gate_options_are_the_engines():
    import yaml
    from sglang_perf.measure import config
    doc = yaml.safe_load(sglang_bench.DOCUMENTATION)["options"]
    spec = sglang_bench.ARGUMENT_SPEC
    assert set(doc) == set(spec) and len(spec) <= 8
    for name, opt in spec.items():
        assert doc[name]["type"] == opt["type"], name
        assert doc[name].get("default") == opt.get("default"), name
        assert doc[name].get("choices") == opt.get("choices"), name
        assert bool(doc[name].get("required")) == bool(opt.get("required")), name
        assert doc[name]["description"], name
    # the gate part's options: the engine options common to every case, each named in the docs
    assert set(sglang_bench.COMMON_OPTIONS) == set(config.DEFAULTS) - set(plan.PER_CASE) \
        - set(config.CALLER_ONLY) - {"url", "api_key", "model"}
    told = " ".join(doc["gate"]["description"])
    assert all("C(%s)" % k in told for k in sglang_bench.COMMON_OPTIONS)


def test_a_hosts_answers_file_reaches_the_checks_and_a_bad_one_is_refused(emulator, tmp_path):
    """What measure.yml hands over: the file's text (answers) and where it came from."""
    rows = [{"id": "own-%d" % i, "prompt": "What is %d plus %d? Reply with the number." % (i, 2 * i),
             "answer": 3 * i} for i in range(12)]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    path = tmp_path / "own.jsonl"
    path.write_text(text)
    emu = emulator("nextn_3step", env=dict(FAST, SGLEMU_ANSWERS=str(path)))
    cases = {"answers": {"check": "answers", "concurrency": 4, "requests": 12, "max_tokens": 64}}
    args = gate(emu.url, {"min_accuracy": 0.7}, cases, answers=text)
    args["gate"]["answers"] = {"source": "sglang_gate_answers own.jsonl"}  # the plan's summary of the file
    kind, r = call(args)
    assert kind == "exit" and r["passed"] is True, r["msg"]
    (case,) = r["cases"]
    assert case["right"] == 12 and case["rows_from"] == "sglang_gate_answers own.jsonl"
    assert "answers: 12 of 12 right, accuracy 1.00" in r["msg"]
    kind, r = call(gate(emu.url, {"min_accuracy": 0.7}, cases, answers='{"prompt": "x"}\n'))
    assert kind == "fail" and r["msg"].startswith("invalid option answers: 1 bad row(s): line 1.answer")


# the loader and the prompts as the module imports them (ansible.module_utils.sglang_perf: other
# module objects than sglang_perf's)
corpus, prompts = sglang_bench.corpus, sglang_bench.engine.promptset
# the shortest long-context case (config.MIN_LONG_PROMPT_TOKENS)
LONG = {"prompts": "long_context", "prompt_tokens": 1024, "concurrency": 1, "requests": 6, "max_tokens": 32}


@pytest.fixture
def host_corpus(tmp_path):
    """Where the sglang_gate role puts the corpus on a host (gate.corpus_path); the loader back at
    its default afterwards (the module points it at the gate's path)."""
    yield tmp_path / "state" / "corpus.json"
    corpus.use(None)


def test_a_long_context_case_reads_the_corpus_at_the_gates_corpus_path(emulator, host_corpus):
    """AnsiballZ ships no data file: the module reads the host's copy the role put at
    gate.corpus_path. A copy with the documents in another order is another prompt set, and the
    case's prompt_set names that one, not the repository's."""
    documents = json.loads(Path(corpus.DEFAULT_PATH).read_text())
    host_corpus.parent.mkdir()
    host_corpus.write_text(json.dumps(documents[::-1]))
    emu = emulator("nextn_3step", env=FAST)
    kind, r = call(gate(emu.url, cases={"long": LONG}, corpus_path=str(host_corpus)))
    assert kind == "exit" and r["passed"] is True, r["msg"]
    assert corpus.path() == str(host_corpus)
    (case,) = r["cases"]
    assert case["prompt_set"] == prompts.set_id("long_context")
    corpus.use(None)
    assert case["prompt_set"] != prompts.set_id("long_context")
    # without a corpus_path the loader reads its default again (a run from the repository)
    kind, r = call(gate(emu.url, cases={"long": LONG}))
    assert kind == "exit" and r["cases"][0]["prompt_set"] == prompts.set_id("long_context"), r["msg"]


def test_a_corpus_missing_on_the_host_is_named_and_check_mode_states_the_cases_unchecked(host_corpus):
    """A run fails before its first request, naming the path and how the file gets there; check mode
    (whose copy task wrote nothing) names the cases without checking them; a case without the
    corpus never reads it."""
    args = gate("http://127.0.0.1:%d" % free_port(), cases={"long": LONG}, corpus_path=str(host_corpus))
    kind, r = call(args)
    assert kind == "fail" and str(host_corpus) in r["msg"], r["msg"]
    assert r["msg"].startswith("could not measure http://127.0.0.1:")
    assert "cannot read the long-context corpus" in r["msg"]
    assert "the sglang_gate role copies it to a target host's sglang_deploy_plan.gate.corpus_path" in r["msg"]
    kind, r = call(args, check=True)
    assert kind == "exit" and r["ready"] is False
    assert r["plan"].startswith("gate plan of the cases long, not checked on the host: cannot read")
    kind, r = call(gate("http://127.0.0.1:%d" % free_port(), corpus_path=str(host_corpus)), check=True)
    assert kind == "exit" and r["plan"].startswith("gate plan, each threshold judged"), r["plan"]
    kind, r = call(dict(args, gate=dict(args["gate"], corpus_path=["a"])))
    assert kind == "fail" and "gate.corpus_path must be the path of the host's corpus.json" in r["msg"]


def test_under_ansiballz_the_corpus_is_the_hosts_copy_only(host_corpus):
    """As Ansible runs it: AnsiballZ ships the module's Python imports, not corpus.json, so without
    gate.corpus_path a long-context case cannot even be checked (check mode says so, naming where it
    looked); with the host's copy it is checked and stated."""
    from ansiblerun import module_result
    args = gate("http://127.0.0.1:%d" % free_port(), cases={"long": LONG})
    rc, r, _ = module_result("sglang_bench", json.dumps(args), check=True)
    assert rc == 0 and r["plan"].startswith("gate plan of the cases long, not checked on the host"), r
    assert "_payload.zip/ansible/module_utils/sglang_perf/measure/corpus.json" in r["plan"]
    host_corpus.parent.mkdir()
    host_corpus.write_bytes(Path(corpus.DEFAULT_PATH).read_bytes())
    args["gate"]["corpus_path"] = str(host_corpus)
    rc, r, _ = module_result("sglang_bench", json.dumps(args), check=True)
    assert rc == 0 and "long (C=1, 6 x 32 tokens, ~1024-token prompts): measured only" in r["plan"], r
