"""The gate's Prometheus textfile (plugins/module_utils/sglang_perf/record/exposition.py): history records
built by history.record() from plan results, rendered and read back with prometheus_client's
parser (families, types, label sets, values); the sglang_gate_decide module's write of the file
in-process against temporary directories; the preflight's refusals of the path."""
from __future__ import annotations

import datetime
import json
import math
import os
import re
import stat
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansiblerun import ansible
import resultutil
from planutil import plan_for
from plugins.modules import sglang_gate_decide as decide_module
from sglang_perf.judge import decision, verdict
from sglang_perf.record import exposition, history
from sglang_perf.plan import gate as plan

COMMON = ("profile", "release", "engine")
CONTEXT = {"host": "ct129", "profile": "nextn_3step", "sglang_version": "0.5.23", "engine": "sglang",
           "release": "sglang-0.5.23-3f2a9c", "venv": "/opt/sglang/releases/sglang-0.5.23-3f2a9c/venv",
           "time": "2026-12-01T10:00:00Z", "max_regression_pct": None}
UNIT, ENV = "u" * 64, "e" * 64
LKG = {"unit_sha256": "x" * 64, "env_sha256": ENV}


def interval(estimate, lower, upper, n):
    return {"estimate": estimate, "lower": lower, "upper": upper, "n": n, "method": "bootstrap percentile"}


def measured(name, decode, accept_len, by_position, ttft, concurrency=1, passed=True, verdict=None,
             intervals=None):
    """A case result of per-request speeds ``decode``, judged on the role's coding bars."""
    return resultutil.case_result(
        name, decode, accept_len, by_position, ttft, concurrency,
        aggregate=sum(decode) * 0.98 if concurrency > 1 else decode[0] * 0.98,
        thresholds={"min_tok_s": 45, "min_accept_len": 2.8}, passed=passed,
        failure={"threshold": "min_tok_s", "message": "decode tok/s below the threshold"},
        verdict=verdict, intervals=intervals, per_request=[{"rid": "r%d" % i} for i in range(len(decode))])


def unmeasured(name):
    """A case none of whose requests could be measured (plan._unmeasured)."""
    cfg = {"case": name, "prompts": "long_context", "concurrency": 1, "requests": 2, "max_tokens": 256,
           "prompt_tokens": 32768, **{k: None for k in plan.THRESHOLD_KEYS}}
    return plan._unmeasured(cfg, "all 2 measured requests failed (2 x http_500)")


def plan_result(cases, plan_verdict=None, seconds=112.4):
    out = verdict.judge_plan(cases, {"passed": True, "failures": [], "notes": []},
                             {"kind": "sglang", "version": "0.5.23"}, "nextn_3step", "Qwen3.6-27B",
                             "http://127.0.0.1:30000", seconds)
    if plan_verdict is not None:
        out["plan_verdict"] = plan_verdict
    return out


def new_result():
    """The interval shape: every figure with an interval, an inconclusive case, a plan verdict."""
    coding = measured("coding", [55.9, 54.6, 53.8, 56.0], 3.21, [0.93, 0.77, 0.51], [0.18, 0.2, 0.22, 0.19],
                      verdict="pass", intervals={
                          "level": 0.95, "decode_tok_s": interval(54.6, 53.9, 55.2, 9),
                          "accept_len": interval(3.2, 3.11, 3.3, 9),
                          "aggregate_tok_s": interval(53.5, None, None, 1),
                          "ttft_s": interval(0.2, 0.18, 0.22, 4),
                          "step_time_s": interval(0.0586, 0.0571, 0.0598, 9)})
    long_context = measured("long_context", [34.2, 33.1], 2.05, [0.81, 0.55, 0.3], [10.9, 11.4],
                            verdict="inconclusive", intervals={
                                "level": 0.95, "decode_tok_s": interval(33.6, 31.9, 35.4, 2),
                                "accept_len": interval(2.05, 1.9, 2.2, 2)})
    concurrent = measured("concurrent", [56.1, 55.0, 57.2, 54.8, 55.5, 56.3, 54.1, 55.9], 3.15,
                          [0.92, 0.75, 0.5], [0.3, 0.41, 0.35, 0.32, 0.3, 0.38, 0.36, 0.33], concurrency=4,
                          verdict="pass", intervals={
                              "level": 0.95, "decode_tok_s": interval(55.7, 54.9, 56.2, 8),
                              "aggregate_tok_s": interval(218.4, 211.0, 224.9, 8)})
    # quality checks (quality.py): their own figures beside the case verdict
    answers = {"case": "answers", "check": "answers", "requests": 24, "errors": 0, "right": 23,
               "accuracy": {"estimate": 0.958, "lower": 0.798, "upper": 0.993}, "verdict": "inconclusive",
               "passed": True, "failures": []}
    agreement = {"case": "agreement", "check": "agreement", "requests": 8, "errors": 0, "right": 8,
                 "agreement": 1.0, "verdict": "pass", "passed": True, "failures": []}
    return plan_result([coding, long_context, concurrent, answers, agreement], plan_verdict="inconclusive")


def old_result():
    """A result from before intervals: no intervals, no verdicts (only passed)."""
    coding = measured("coding", [57.2, 58.1, 59.9, 58.4], 3.3, [0.94, 0.79, 0.55],
                      [0.17, 0.19, 0.2, 0.21])
    concurrent = measured("concurrent", [56.0, 55.1, 57.3, 54.9], 3.1, [0.92, 0.74, 0.5],
                          [0.3, 0.4, 0.35, 0.3], concurrency=4, passed=False)
    return plan_result([coding, concurrent])


def record_of(result, context=None, lkg=LKG, **kw):
    return history.record(result, decision.decide(result, UNIT, ENV, lkg, **kw), context or CONTEXT)


def parse(text):
    """{family name: (type, HELP, {(sample name, frozenset(labels)): value})}."""
    out = {}
    for fam in text_string_to_metric_families(text):
        assert fam.name not in out, "family %s written twice" % fam.name
        samples = {(s.name, frozenset(s.labels.items())): s.value for s in fam.samples}
        assert len(samples) == len(fam.samples), "a series of %s written twice" % fam.name
        out[fam.name] = (fam.type, fam.documentation, samples)
    return out


def labels(rec, **extra):
    return frozenset(dict({k: str(rec.get(k) or "") for k in COMMON}, **extra).items())


def value(families, name, rec, **extra):
    return families[name][2][(name, labels(rec, **extra))]


def by(families, name, *keys):
    """{the values of labels ``keys``: value} of every series of family ``name``."""
    return {tuple(dict(lab)[k] for k in keys): v for (_n, lab), v in families[name][2].items()}


def info(families, rec, action):
    return value(families, "sglang_gate_info", rec, host="ct129", engine_version="0.5.23",
                 venv=CONTEXT["venv"], action=action)


def test_every_family_is_a_documented_gauge_named_as_prometheus_asks():
    fams = parse(exposition.render(record_of(new_result())))
    assert set(fams) == set(exposition.METRICS)  # every family has a series in this record
    for name, (kind, doc, samples) in fams.items():
        assert kind == "gauge" and doc, name
        assert re.fullmatch(r"sglang_gate_[a-z_]+", name) and not name.endswith("_total"), name
        assert all(math.isfinite(v) for v in samples.values()), name


def test_each_case_figure_with_its_interval_bounds_and_level():
    rec = record_of(new_result())
    fams = parse(exposition.render(rec))
    expected = {  # coding: every figure has an interval; the value is its estimate
        "sglang_gate_decode_tokens_per_second": 54.6, "sglang_gate_decode_tokens_per_second_lower": 53.9,
        "sglang_gate_decode_tokens_per_second_upper": 55.2, "sglang_gate_accept_length": 3.2,
        "sglang_gate_accept_length_lower": 3.11, "sglang_gate_accept_length_upper": 3.3,
        "sglang_gate_ttft_seconds": 0.2, "sglang_gate_ttft_seconds_lower": 0.18,
        "sglang_gate_ttft_seconds_upper": 0.22, "sglang_gate_interval_level": 0.95,
        "sglang_gate_verify_step_seconds": 0.0586, "sglang_gate_verify_step_seconds_lower": 0.0571,
        "sglang_gate_verify_step_seconds_upper": 0.0598,
        "sglang_gate_requests": 4, "sglang_gate_request_errors": 0,
        # an interval with null bounds: the estimate, no bounds
        "sglang_gate_aggregate_tokens_per_second": 53.5}
    assert {name: value(fams, name, rec, case="coding") for name in expected} == expected
    for bound in ("lower", "upper"):
        assert set(by(fams, "sglang_gate_aggregate_tokens_per_second_" + bound, "case")) == {("concurrent",)}
    assert value(fams, "sglang_gate_aggregate_tokens_per_second_lower", rec, case="concurrent") == 211.0
    # the other cases' intervals have no ttft: its figure is the record's p50, without bounds
    assert by(fams, "sglang_gate_ttft_seconds", "case")[("long_context",)] == rec["cases"][1]["ttft_s"]["p50"]
    assert set(by(fams, "sglang_gate_ttft_seconds_lower", "case")) == {("coding",)}
    assert value(fams, "sglang_gate_decode_tokens_per_second_lower", rec, case="long_context") == 31.9


def test_per_position_acceptance_one_series_per_position():
    rec = record_of(new_result())
    fams = parse(exposition.render(rec))
    assert by(fams, "sglang_gate_accept_ratio", "case", "position") == {
        ("coding", "1"): 0.93, ("coding", "2"): 0.77, ("coding", "3"): 0.51,
        ("long_context", "1"): 0.81, ("long_context", "2"): 0.55, ("long_context", "3"): 0.3,
        ("concurrent", "1"): 0.92, ("concurrent", "2"): 0.75, ("concurrent", "3"): 0.5}


def test_verdicts_are_enums_with_the_inconclusive_case_and_the_plan():
    rec = record_of(new_result())
    fams = parse(exposition.render(rec))
    current = {"coding": "pass", "long_context": "inconclusive", "concurrent": "pass",
               "answers": "inconclusive", "agreement": "pass"}
    assert by(fams, "sglang_gate_case_verdict", "case", "verdict") == {
        (case, v): int(v == now) for case, now in current.items() for v in ("pass", "fail", "inconclusive")}
    assert by(fams, "sglang_gate_plan_verdict", "verdict") == {
        ("pass",): 0, ("fail",): 0, ("inconclusive",): 1}
    # the decision's verdict: every case passed its thresholds, so the gate passed and recorded
    assert value(fams, "sglang_gate_passed", rec) == 1


def test_plan_level_figures_the_timestamp_and_the_info_series():
    rec = record_of(new_result())
    fams = parse(exposition.render(rec))
    assert value(fams, "sglang_gate_time_to_verdict_seconds", rec) == 112.4
    when = datetime.datetime(2026, 12, 1, 10, 0, tzinfo=datetime.timezone.utc).timestamp()
    assert value(fams, "sglang_gate_last_run_timestamp_seconds", rec) == when
    assert len(fams["sglang_gate_info"][2]) == 1 and info(fams, rec, "record") == 1


def test_every_series_carries_profile_release_engine_and_the_case_ones_the_case():
    rec = record_of(new_result())
    plan_level = {"sglang_gate_passed", "sglang_gate_plan_verdict", "sglang_gate_time_to_verdict_seconds",
                  "sglang_gate_last_run_timestamp_seconds", "sglang_gate_info"}
    extra = {"sglang_gate_accept_ratio": {"position"}, "sglang_gate_case_verdict": {"verdict"},
             "sglang_gate_plan_verdict": {"verdict"},
             "sglang_gate_info": {"host", "engine_version", "venv", "action"}}
    for name, (_t, _d, samples) in parse(exposition.render(rec)).items():
        want = set(COMMON) | extra.get(name, set()) | (set() if name in plan_level else {"case"})
        for _n, lab in samples:
            assert set(dict(lab)) == want, name
            assert {k: dict(lab)[k] for k in COMMON} == {k: rec[k] for k in COMMON}, name


def written_before_intervals(rec):
    """A record as the gate wrote it before intervals: none of their keys."""
    for key in ("plan_verdict", "inconclusive_cases", "intervals"):
        rec.pop(key, None)
    for case in rec["cases"]:
        for key in ("intervals", "verdict", "sequential", "time_to_verdict_s"):
            case.pop(key, None)
    return rec


def test_an_old_record_renders_from_its_own_figures_without_bounds():
    rec = written_before_intervals(record_of(old_result()))
    fams = parse(exposition.render(rec))
    coding = rec["cases"][0]
    decode = coding["decode_tok_s"]["median"]
    assert value(fams, "sglang_gate_decode_tokens_per_second", rec, case="coding") == decode
    assert value(fams, "sglang_gate_ttft_seconds", rec, case="coding") == coding["ttft_s"]["p50"]
    assert value(fams, "sglang_gate_accept_length", rec, case="concurrent") == 3.1
    assert not [n for n in fams if n.endswith(("_lower", "_upper"))]
    assert "sglang_gate_interval_level" not in fams and "sglang_gate_plan_verdict" not in fams
    verdicts = by(fams, "sglang_gate_case_verdict", "case", "verdict")
    assert {k for k, v in verdicts.items() if v == 1} == {("coding", "pass"), ("concurrent", "fail")}
    assert value(fams, "sglang_gate_passed", rec) == 0 and info(fams, rec, "restore") == 1


def test_a_figure_the_record_lacks_is_left_out_never_nan_or_zero():
    rec = record_of(plan_result([measured("coding", [55.0, 54.0], None, None, [0.2, 0.2]),
                                 unmeasured("long_context")]))
    fams = parse(exposition.render(rec))
    for name in ("sglang_gate_decode_tokens_per_second", "sglang_gate_ttft_seconds",
                 "sglang_gate_aggregate_tokens_per_second"):
        assert set(by(fams, name, "case")) == {("coding",)}, name
    assert "sglang_gate_accept_length" not in fams and "sglang_gate_accept_ratio" not in fams
    # the unmeasured case still says what it is: its verdict and its failed requests
    assert value(fams, "sglang_gate_case_verdict", rec, case="long_context", verdict="fail") == 1
    assert value(fams, "sglang_gate_request_errors", rec, case="long_context") == 2
    for _name, (_t, _d, samples) in fams.items():
        assert all(math.isfinite(v) for v in samples.values())
    # NaN, inf, a bool or a string in a record are no figures either
    bad = dict(rec, time_to_verdict_s=float("nan"), cases=[dict(rec["cases"][0], accept_len=float("inf"),
                                                                requests=True, errors="2")])
    fams = parse(exposition.render(bad))
    assert not {"sglang_gate_time_to_verdict_seconds", "sglang_gate_accept_length", "sglang_gate_requests",
                "sglang_gate_request_errors"} & set(fams)


def test_label_values_with_a_quote_a_backslash_and_a_newline_read_back_as_written():
    context = dict(CONTEXT, release='rel "quoted" C:\\path\nsecond line', profile='p\\"', engine="sglang")
    rec = record_of(new_result(), context=context)
    rec["cases"][0]["case"] = 'co"d\\i\nng'
    fams = parse(exposition.render(rec))
    assert value(fams, "sglang_gate_decode_tokens_per_second", rec, case='co"d\\i\nng') == 54.6
    assert value(fams, "sglang_gate_passed", rec) == 1


def test_check_mode_and_time_oddities():
    rec = record_of(plan_result([]), check_mode=True)
    fams = parse(exposition.render(rec))
    assert rec["verdict"] == "not judged" and "sglang_gate_passed" not in fams
    assert info(fams, rec, "nothing") == 1
    for text, ts in (("2026-12-01T11:00:00+01:00", 1796119200.0), ("2026-12-01T10:00:00", 1796119200.0),
                     ("yesterday", None), (None, None), ("", None)):
        assert exposition.timestamp(text) == ts, text
    fams = parse(exposition.render(dict(rec, time="yesterday")))
    assert "sglang_gate_last_run_timestamp_seconds" not in fams
    assert set(parse(exposition.render({}))) == {"sglang_gate_info"}


def test_a_repeated_case_name_is_written_once():
    rec = record_of(new_result())
    rec["cases"].append(dict(rec["cases"][0], decode_tok_s={"median": 1.0}, intervals=None))
    fams = parse(exposition.render(rec))  # parse() asserts no series twice
    assert value(fams, "sglang_gate_decode_tokens_per_second", rec, case="coding") == 54.6


# -------------------------------------------------------- the module writes the textfile ------
class Exit(Exception):
    def __init__(self, kind, result):
        Exception.__init__(self, kind)
        self.kind, self.result = kind, result


@pytest.fixture
def module(monkeypatch):
    warned = []

    def exit_json(self, **kw):
        raise Exit("exit", dict(kw, warnings=list(warned)))

    def fail_json(self, msg, **kw):
        raise Exit("fail", dict(kw, msg=msg))

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg, **kw: warned.append(msg))

    def call(tmp, textfile, check=False, result=None, **kw):
        unit, env = tmp / "sglang.service", tmp / "sglang.env"
        unit.write_text("[Service]\n")
        env.write_text("A=1\n")
        args = dict(result=result or new_result(), unit_path=str(unit), env_path=str(env),
                    lkg_dir=str(tmp / "lkg"), service_name="sglang", history_path=str(tmp / "history.jsonl"),
                    textfile_path=str(textfile), context=CONTEXT, **kw)
        if check:
            args["_ansible_check_mode"] = True
        with patch_module_args(args):
            with pytest.raises(Exit) as e:
                decide_module.main()
        return e.value.kind, e.value.result
    return call


def history_lines(tmp):
    path = tmp / "history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_module_writes_the_textfile_atomically_with_mode_0644(module, tmp_path, monkeypatch):
    prom = tmp_path / "textfile" / "sglang_gate.prom"
    prom.parent.mkdir()
    prom.write_text("old_metric 1\n")
    old_inode = prom.stat().st_ino
    seen = {}
    real_replace = os.replace

    def replace(src, dst):
        # at the rename the temporary file is complete, in the same directory, never a *.prom
        seen.update(src=src, dst=dst, mode=stat.S_IMODE(os.stat(src).st_mode), text=Path(src).read_text(),
                    old=Path(dst).read_text())
        return real_replace(src, dst)

    monkeypatch.setattr(decide_module.exposition.os, "replace", replace)
    kind, r = module(tmp_path, prom)
    assert kind == "exit" and r["changed"] and r["history_written"] and r["textfile_written"] == str(prom)
    assert "textfile_error" not in r and not r["warnings"]
    assert os.path.dirname(seen["src"]) == str(prom.parent) and seen["dst"] == str(prom)
    assert not seen["src"].endswith(".prom") and os.path.basename(seen["src"]).startswith(".")
    assert seen["mode"] == 0o644 and seen["old"] == "old_metric 1\n"
    assert seen["text"] == prom.read_text() == r["textfile_content"]
    assert stat.S_IMODE(prom.stat().st_mode) == 0o644 and prom.stat().st_ino != old_inode
    assert sorted(p.name for p in prom.parent.iterdir()) == ["sglang_gate.prom"]  # no temporary left
    fams = parse(prom.read_text())
    rec = history_lines(tmp_path)[-1]
    assert value(fams, "sglang_gate_decode_tokens_per_second", rec, case="coding") == 54.6
    assert value(fams, "sglang_gate_passed", rec) == 1


def test_check_mode_writes_nothing_and_says_what_it_would(module, tmp_path):
    prom = tmp_path / "sglang_gate.prom"
    kind, r = module(tmp_path, prom, check=True)
    assert kind == "exit" and not r["changed"] and r["textfile_written"] == ""
    assert not prom.exists() and not history_lines(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sglang.env", "sglang.service"]
    fams = parse(r["textfile_content"])
    assert "sglang_gate_passed" not in fams  # not judged
    assert dict(next(iter(fams["sglang_gate_info"][2]))[1])["action"] == "nothing"


def test_a_passing_run_keeps_its_unit_environment_and_record_as_last_known_good(module, tmp_path):
    """The decision that records also writes the last-known-good copies (one task, not four)."""
    kind, r = module(tmp_path, "")
    lkg = tmp_path / "lkg"
    assert kind == "exit" and r["action"] == "record" and r["lkg_written"] and r["changed"]
    assert stat.S_IMODE(lkg.stat().st_mode) == 0o750
    assert sorted(p.name for p in lkg.iterdir()) == ["sglang.env", "sglang.json", "sglang.service"]
    assert (lkg / "sglang.service").read_text() == "[Service]\n"
    assert (lkg / "sglang.env").read_text() == "A=1\n"
    for name in ("sglang.env", "sglang.json", "sglang.service"):
        assert stat.S_IMODE((lkg / name).stat().st_mode) == 0o644, name
    assert json.loads((lkg / "sglang.json").read_text()) == r["record"]
    # the same unit, environment and record again: nothing in lkg_dir changes
    kind, again = module(tmp_path, "")
    assert again["action"] == "record" and not again["lkg_written"]
    (lkg / "sglang.json").write_text("{}\n")
    kind, again = module(tmp_path, "")
    assert again["lkg_written"] and json.loads((lkg / "sglang.json").read_text()) == again["record"]


def test_check_mode_and_a_failed_gate_keep_no_last_known_good(module, tmp_path):
    kind, r = module(tmp_path, "", check=True)
    assert not r["lkg_written"] and not (tmp_path / "lkg").exists()
    failed = new_result()
    failed["passed"] = False
    kind, r = module(tmp_path, "", result=failed)
    assert r["action"] != "record" and not r["lkg_written"] and not (tmp_path / "lkg").exists()


def test_a_follower_node_writes_no_textfile(module, tmp_path):
    prom = tmp_path / "sglang_gate.prom"
    kind, r = module(tmp_path, prom, node_rank=1, multinode=True)
    assert kind == "exit" and r["textfile_written"] == "" and "textfile_content" not in r
    assert not prom.exists()


def test_no_textfile_path_no_textfile(module, tmp_path):
    kind, r = module(tmp_path, "")
    assert kind == "exit" and r["textfile_written"] == "" and "textfile_content" not in r
    assert r["history_written"] and len(history_lines(tmp_path)) == 1


@pytest.fixture
def unwritable_dir(tmp_path):
    """A directory the module cannot create a file in: as root, sysfs (nobody can); otherwise one
    without write permission."""
    if os.geteuid() == 0:
        yield Path("/sys")
        return
    d = tmp_path / "readonly"
    d.mkdir()
    d.chmod(0o555)
    yield d
    d.chmod(0o755)


@pytest.mark.parametrize("where", ["unwritable", "missing", "relative", "suffix"])
def test_a_textfile_it_cannot_write_is_a_warning_and_the_history_and_decision_stand(
        module, tmp_path, unwritable_dir, where):
    prom = {"unwritable": unwritable_dir / "sglang_gate.prom",
            "missing": tmp_path / "no-such-dir" / "sglang_gate.prom",
            "relative": "textfile/sglang_gate.prom", "suffix": tmp_path / "sglang_gate.txt"}[where]
    result = plan_result([measured("coding", [20.0, 21.0], 1.5, [0.5], [0.3, 0.3], passed=False)])
    (tmp_path / "lkg").mkdir()
    (tmp_path / "lkg" / "sglang.service").write_text("[Service]\nExecStart=/the/last/good\n")
    (tmp_path / "lkg" / "sglang.env").write_text("A=1\n")
    kind, r = module(tmp_path, prom, result=result)
    assert kind == "exit", r.get("msg")
    assert r["verdict"] == "fail" and r["action"] == "restore" and r["history_written"] and r["changed"]
    assert history_lines(tmp_path)[-1]["action"] == "restore"
    assert r["textfile_written"] == ""
    assert str(prom) in r["textfile_error"] and "sglang_gate_textfile_path" in r["textfile_error"]
    assert r["warnings"] == [r["textfile_error"]]
    assert not os.path.exists(str(prom))
    if where in ("unwritable", "missing"):
        assert not [p for p in (tmp_path / "textfile", tmp_path) if p.exists() and list(p.glob(".*.tmp"))]


def test_a_failed_rename_leaves_no_temporary_file(module, tmp_path, monkeypatch):
    def replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(decide_module.exposition.os, "replace", replace)
    kind, r = module(tmp_path, tmp_path / "sglang_gate.prom")
    assert kind == "exit" and r["history_written"] and "No space left on device" in r["textfile_error"]
    assert not list(tmp_path.glob("*.prom")) and not list(tmp_path.glob(".*"))


def test_a_record_the_renderer_cannot_take_is_a_warning_too(module, tmp_path, monkeypatch):
    def render(rec):
        raise TypeError("an unexpected record")

    monkeypatch.setattr(decide_module.exposition, "render", render)
    kind, r = module(tmp_path, tmp_path / "sglang_gate.prom")
    assert kind == "exit" and r["history_written"] and r["action"] == "record"
    assert "an unexpected record" in r["textfile_error"] and r["warnings"] == [r["textfile_error"]]
    assert not list(tmp_path.glob("*.prom"))


def test_the_documentation_lists_the_option_and_its_results():
    import yaml
    doc = yaml.safe_load(decide_module.DOCUMENTATION)["options"]["textfile_path"]
    assert doc["type"] == "str" and doc["default"] == ""
    ret = yaml.safe_load(decide_module.RETURN)
    assert {"textfile_written", "textfile_content", "textfile_error"} <= set(ret)


def play(tmp_path, hosts, tasks):
    """ansible-playbook from the repo root (ansible.cfg: the modules, module_utils, filters, roles)
    on ``hosts`` ({name: vars}, each a local connection); its json callback's output."""
    inventory = {"all": {"hosts": {name: dict(hostvars, ansible_connection="local",
                                              ansible_python_interpreter=sys.executable)
                                   for name, hostvars in hosts.items()}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": tasks}]))
    p = ansible("ansible-playbook", "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"),
                timeout=180, json_output=True)
    out = json.loads(p.stdout)
    assert not any(s["unreachable"] for s in out["stats"].values()), p.stdout[-2000:]
    return out


def test_ansible_runs_the_module_with_its_module_utils(tmp_path, unwritable_dir):
    """AnsiballZ carries exposition.py to the host; the file is written, and a directory the module
    cannot write in is a warning in the task's result, the task ok."""
    prom = tmp_path / "sglang_gate.prom"
    (tmp_path / "sglang.service").write_text("[Service]\n")
    args = dict(result=new_result(), unit_path=str(tmp_path / "sglang.service"),
                env_path=str(tmp_path / "sglang.env"), lkg_dir=str(tmp_path / "lkg"), service_name="sglang",
                history_path=str(tmp_path / "history.jsonl"), context=CONTEXT)
    out = play(tmp_path, {"localhost": {}}, [
        {"sglang_gate_decide": dict(args, textfile_path=str(prom))},
        {"sglang_gate_decide": dict(args, textfile_path=str(unwritable_dir / "sglang_gate.prom"))}])
    wrote, warned = [t["hosts"]["localhost"] for t in out["plays"][0]["tasks"]]
    assert wrote["textfile_written"] == str(prom) and stat.S_IMODE(prom.stat().st_mode) == 0o644
    assert parse(prom.read_text())["sglang_gate_passed"][2] == {
        ("sglang_gate_passed", labels(wrote["record"])): 1}
    assert warned["history_written"] and warned["textfile_written"] == "" and not warned.get("failed")
    assert warned["textfile_error"] in [w if isinstance(w, str) else w.get("msg") for w in warned["warnings"]]
    assert len(history_lines(tmp_path)) == 2


# ------------------------------------------------------------------- the preflight ------
@pytest.mark.parametrize("path", ["", "/var/lib/prometheus/node-exporter/sglang_gate.prom", "/tmp/x.prom"])
def test_the_preflight_accepts_an_absolute_prom_path_or_none(path):
    assert plan_for({"sglang_gate_textfile_path": path})["problems"] == []


@pytest.mark.parametrize("path, words", [
    ("node-exporter/sglang_gate.prom", ["not an absolute path"]),
    ("~/sglang_gate.prom", ["not an absolute path"]),
    ("/var/lib/prometheus/node-exporter/sglang_gate.txt", ["reads only files named *.prom"]),
    ("/var/lib/prometheus/node-exporter/sglang_gate.prom.tmp", ["reads only files named *.prom"]),
    ("/var/lib/prometheus/node-exporter/", ["reads only files named *.prom"]),
    ("/var/lib/prometheus/node-exporter/.prom", ["reads only files named *.prom"]),
    ("metrics.txt", ["not an absolute path", "reads only files named *.prom"]),
    (5, ["not an absolute path", "reads only files named *.prom"]),  # a str by its argument spec
])
def test_the_preflight_refuses_naming_the_variable(path, words):
    """The deploy plan's check of the path (plugins/action/sglang_deploy_plan.py)."""
    errors = plan_for({"sglang_gate_textfile_path": path})["problems"]
    assert len(errors) == len(words)
    for error, w in zip(errors, words):
        assert error.startswith("sglang_gate_textfile_path = %s: " % path) and w in error


def test_the_role_preflight_refuses_a_missing_directory_naming_the_variable(tmp_path):
    """validate_textfile.yml (host_checks.yml includes it when the path is set) on local hosts, one
    per case: the host's side (the plan refused a bad path already:
    test_the_preflight_refuses_naming_the_variable)."""
    (tmp_path / "textfile").mkdir()
    (tmp_path / "a-file").write_text("")
    paths = {"good": str(tmp_path / "textfile" / "sglang_gate.prom"),
             "missing": str(tmp_path / "no-such-dir" / "sglang_gate.prom"),
             "not_a_dir": str(tmp_path / "a-file" / "sglang_gate.prom")}
    out = play(tmp_path, {name: {"sglang_gate_textfile_path": path} for name, path in paths.items()}, [
        {"ansible.builtin.include_role": {"name": "sglang_gate", "tasks_from": "validate_textfile.yml"}}])
    failed = {host: res["msg"] for task in out["plays"][0]["tasks"] for host, res in task["hosts"].items()
              if res.get("failed")}
    assert set(failed) == {"missing", "not_a_dir"}, failed
    assert set(out["stats"]) == set(paths)
    for host, msg in failed.items():
        assert msg.startswith("sglang_gate_textfile_path = %s: " % paths[host]), msg
    for host, words in (("missing", "does not exist"), ("not_a_dir", "is not a directory")):
        assert "its directory %s %s on %s" % (os.path.dirname(paths[host]), words, host) in failed[host]
    assert not (tmp_path / "no-such-dir").exists()  # the preflight creates nothing
