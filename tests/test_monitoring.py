"""monitoring/: the Prometheus alert rules (checked and unit-tested by Prometheus' own promtool,
which scripts/promtool.sh puts at .tools/bin/promtool: `make promtool`) and the Grafana dashboard.
Every metric name they use is one something here serves: the watch's textfile
(sglang_perf/host/watch.py), the gate's (sglang_perf/record/exposition.py) or the engine's own /metrics as the
emulator serves them (emulator/metrics.py, emulator/vllm/metrics.py)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from emulator.metrics import Metrics
from emulator.vllm.metrics import VllmMetrics
from conftest import ROOT
from sglang_perf.record import exposition
from sglang_perf.host import watch

MONITORING = ROOT / "monitoring"
PROMTOOL = Path(os.environ.get("PROMTOOL") or ROOT / ".tools" / "bin" / "promtool")
RULES = yaml.safe_load((MONITORING / "alerts.yml").read_text())
RULE_TESTS = yaml.safe_load((MONITORING / "alerts_test.yml").read_text())
DASHBOARD = json.loads((MONITORING / "dashboard.json").read_text())
ALERTS = {r["alert"]: r for g in RULES["groups"] for r in g["rules"] if "alert" in r}


def promtool(*args, cwd=MONITORING):
    # fails, never skips, without promtool: make test runs pytest with --no-skips
    assert PROMTOOL.is_file(), "no promtool at %s: run `make promtool` (scripts/promtool.sh)" % PROMTOOL
    return subprocess.run([str(PROMTOOL), *args], cwd=str(cwd), capture_output=True, text=True, timeout=120)


def test_promtool_checks_the_rules():
    p = promtool("check", "rules", "alerts.yml")
    assert p.returncode == 0 and "SUCCESS: 6 rules found" in p.stdout, p.stdout + p.stderr


def test_promtool_runs_the_rules_unit_tests():
    p = promtool("test", "rules", "alerts_test.yml")
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("old, new", [
    ("sglang_watch_accept_length < 1.3", "sglang_watch_accept_length < 1.0"),
    # all traffic against the coding bar: prose and long contexts at their own speeds fire
    ("< sglang_watch_decode_bar_tokens_per_second", "< sglang_watch_decode_threshold_tokens_per_second"),
    ("for: 30m", "for: 20m"),
    ("for: 2h", "for: 1h"),
    ("expr: sglang_watch_up == 0", "expr: sglang_watch_up == 0 or sglang_watch_deploying == 1"),
])
def test_the_rules_unit_tests_catch_a_changed_rule(tmp_path, old, new):
    text = (MONITORING / "alerts.yml").read_text()
    assert old in text
    (tmp_path / "alerts.yml").write_text(text.replace(old, new))
    shutil.copy(MONITORING / "alerts_test.yml", tmp_path)
    p = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert p.returncode != 0 and "FAILED" in p.stdout + p.stderr, p.stdout


def test_the_alerts_are_the_ones_asked_for():
    """Drafts dead: accept length under 1.3 for 10 min; decode under the bar the watch chose for
    what it saw for 30 min (watch.py decode_bar: no bar, not judged); the server down; a deploy
    lock held for 2 h; the watch itself stale."""
    assert set(ALERTS) == {"SGLangServerDown", "SGLangDraftsDead", "SGLangDecodeBelowGate",
                           "SGLangDeployLockHeld", "SGLangWatchStale", "SGLangWrongAnswer"}
    assert (ALERTS["SGLangWrongAnswer"]["expr"], ALERTS["SGLangWrongAnswer"]["for"]) == (
        "sglang_watch_answer_right == 0", "1m")
    assert (ALERTS["SGLangDraftsDead"]["expr"], ALERTS["SGLangDraftsDead"]["for"]) == (
        "sglang_watch_accept_length < 1.3", "10m")
    assert (ALERTS["SGLangDecodeBelowGate"]["expr"], ALERTS["SGLangDecodeBelowGate"]["for"]) == (
        "sglang_watch_decode_tokens_per_second < sglang_watch_decode_bar_tokens_per_second", "30m")
    assert (ALERTS["SGLangDeployLockHeld"]["expr"], ALERTS["SGLangDeployLockHeld"]["for"]) == (
        "sglang_watch_deploying == 1", "2h")
    assert ALERTS["SGLangServerDown"]["expr"] == "sglang_watch_up == 0"
    for name, rule in ALERTS.items():
        assert rule["labels"]["severity"] in ("critical", "warning") and rule["annotations"]["summary"], name


def test_every_alert_has_a_firing_and_a_quiet_case_in_the_unit_tests():
    cases = {}
    for test in RULE_TESTS["tests"]:
        for case in test["alert_rule_test"]:
            cases.setdefault(case["alertname"], []).append(bool(case["exp_alerts"]))
    assert set(cases) == set(ALERTS)
    assert all(True in fired and False in fired for fired in cases.values()), cases


KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
            "offset", "inf", "nan"}
NAME = re.compile(r"(?<![\w.:$])[a-zA-Z_:][\w:]*")


def metric_names(expr):
    """The metric names a PromQL expression reads: identifiers outside strings, label matchers,
    ranges and label lists that are neither a function (followed by a parenthesis) nor a keyword."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    return {m.group(0) for m in NAME.finditer(text)
            if m.group(0).lower() not in KEYWORDS and not text[m.end():].lstrip().startswith("(")}


@pytest.mark.parametrize("expr, names", [
    ('max by (instance) (sglang_watch_up{instance=~"$instance"})', {"sglang_watch_up"}),
    ('sum by (instance) (rate(sglang:generation_tokens_total{instance=~"$instance"}[5m]))',
     {"sglang:generation_tokens_total"}),
    ("a < b\nand c <= 1", {"a", "b", "c"}),
    ("time() - x > 3 * y", {"x", "y"}),
    ("histogram_quantile(0.9, sum by (le) (rate(h_bucket[$__rate_interval])))", {"h_bucket"}),
    ("max(x) offset 5m / 1e3", {"x"}),
    ('count without (source) (s{source="probe"} == 1) unless on (instance) t', {"s", "t"}),
    ("maximum_thing", {"maximum_thing"}),
])
def test_the_metric_name_reader(expr, names):
    assert metric_names(expr) == names


def emulator_names():
    """Every sample name the emulator's /metrics can hold, SGLang's and vLLM's, from its families'
    TYPE lines (a counter without samples yet still names its family)."""
    texts = [Metrics("m", True).render(),
             VllmMetrics({"served_model_name": "m", "speculative_num_steps": 3,
                          "max_model_len": 131072}).render()]
    names = set()
    for line in "\n".join(texts).splitlines():
        m = re.match(r"# TYPE (\S+) (\w+)$", line)
        if not m:
            continue
        name, kind = m.groups()
        if kind == "histogram":
            names |= {name + "_bucket", name + "_sum", name + "_count"}
        elif kind == "counter" and not name.endswith("_total"):  # prometheus_client's: vLLM
            names |= {name + "_total", name + "_created"}
        else:
            names.add(name)
    return names


# "prometheus": the series Prometheus writes for every target it scrapes (the host variable's)
SERVED = {"watch": set(watch.WATCH_METRICS), "gate": set(exposition.METRICS),
          "engine": emulator_names(), "prometheus": {"up"}}


def dashboard_queries():
    exprs = [t["expr"] for p in DASHBOARD["panels"] for t in p.get("targets", [])]
    for var in DASHBOARD["templating"]["list"]:
        query = var.get("query")
        if isinstance(query, dict):
            m = re.match(r"label_values\(\s*([^,\s]+)\s*,", query["query"])
            assert m and query["query"] == var["definition"], var
            exprs.append(m.group(1))
    return exprs


@pytest.mark.parametrize("where, exprs", [
    ("alerts.yml", [r["expr"] for r in ALERTS.values()]),
    ("dashboard.json", dashboard_queries()),
])
def test_every_metric_name_is_one_something_here_serves(where, exprs):
    used = set().union(*(metric_names(e) for e in exprs))
    unknown = sorted(used - set().union(*SERVED.values()))
    assert unknown == [], "%s uses metric names nothing serves: %s" % (where, unknown)
    assert used & SERVED["watch"], where


def test_the_dashboard_shows_the_watch_the_gate_and_the_engine():
    used = set().union(*(metric_names(e) for e in dashboard_queries()))
    assert {k for k, names in SERVED.items() if used & names} == {"watch", "gate", "engine", "prometheus"}
    assert {"sglang_watch_decode_tokens_per_second", "sglang_watch_decode_threshold_tokens_per_second",
            "sglang_watch_decode_bar_tokens_per_second", "sglang_watch_deploying",
            "sglang_watch_accept_length", "sglang_watch_up"} <= used


HOST_MATCHER = 'instance=~"$host:.*"'
SELECTOR = re.compile(r"([a-zA-Z_:][\w:]*)\{([^}]*)\}")


def panels():
    return [p for p in DASHBOARD["panels"] if p["type"] != "row"]


def grafana_regex(text):
    """A Grafana variable's regex (/.../) as Python's."""
    assert text.startswith("/") and text.endswith("/"), text
    return re.compile(text[1:-1])


def test_one_host_variable_selects_node_exporters_and_the_engines_series():
    """node_exporter's target is host:9100 (the watch's and the gate's textfiles), the engine's the
    server's port: the host variable is the part before the port of every scrape target, and every
    selector of every query matches that host on any port."""
    host = {v["name"]: v for v in DASHBOARD["templating"]["list"]}["host"]
    assert host["query"]["query"] == host["definition"] == "label_values(up, instance)"
    regex = grafana_regex(host["regex"])
    for instance, name in (("ct129:9100", "ct129"), ("ct129:30000", "ct129"),
                           ("10.1.230.5:8000", "10.1.230.5"), ("ct-local:30000", "ct-local")):
        assert regex.search(instance).group(1) == name
    for p in panels():
        for t in p["targets"]:
            selectors = SELECTOR.findall(t["expr"])
            assert len(selectors) == len(re.findall(r"[a-zA-Z_:][\w:]*\{", t["expr"]))
            assert selectors and all(HOST_MATCHER in matchers for _, matchers in selectors), t["expr"]
            # every metric the query reads is one of those selectors: none without the host
            assert metric_names(t["expr"]) == {name for name, _ in selectors}, t["expr"]
    matcher = re.compile("ct129" + ":.*")  # Prometheus anchors =~ at both ends
    assert matcher.fullmatch("ct129:9100") and matcher.fullmatch("ct129:30000")
    assert not matcher.fullmatch("ct1290:9100") and not matcher.fullmatch("ct12:9100")


def engine_panels():
    return [p for p in panels() if p["title"].startswith("Engine: ")]


def test_vllm_panels_beside_sglangs():
    """Each figure of the engine row for both engines, each by its own names."""
    assert len(engine_panels()) == 5
    for p in engine_panels():
        names = set().union(*(metric_names(t["expr"]) for t in p["targets"]))
        assert {n.split(":")[0] for n in names} == {"sglang", "vllm"}, p["title"]
        assert all(len({n.split(":")[0] for n in metric_names(t["expr"])}) == 1 for t in p["targets"])
    used = set().union(*(metric_names(t["expr"]) for p in engine_panels() for t in p["targets"]))
    assert {"vllm:inter_token_latency_seconds_count", "vllm:inter_token_latency_seconds_sum",
            "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_drafts_total",
            "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
            "vllm:generation_tokens_total"} <= used


def panel_expr(title, engine):
    (p,) = [p for p in engine_panels() if p["title"] == title]
    (expr,) = [t["expr"] for t in p["targets"] if t["legendFormat"].endswith(engine)]
    return expr.replace("$host", "h")


def test_the_engine_decode_panel_reads_each_engine_as_it_counts(tmp_path):
    """Prometheus itself (promtool) evaluates the panel's queries on series of one stream: vLLM at
    60 tok/s and accept length 3 observes 20 engine steps a second (its histogram's count), and
    the panel reads 60, as the watch does from the same counters (watch.decode_tok_s); without
    speculation (no spec-decode series) its steps are its tokens; SGLang's histogram counts tokens."""
    steps, accepted, per_min = 20, 40, 60
    assert watch.decode_tok_s("step", (steps * per_min, 1.0 * per_min), (None, None), steps * per_min,
                              accepted * per_min) == 60
    decode = "Engine: one stream's decode tok/s"
    series = [
        ('vllm:inter_token_latency_seconds_count{instance="h:8000"}', "0+%dx20" % (steps * per_min)),
        ('vllm:inter_token_latency_seconds_sum{instance="h:8000"}', "0+%dx20" % per_min),
        ('vllm:spec_decode_num_drafts_total{instance="h:8000"}', "0+%dx20" % (steps * per_min)),
        ('vllm:spec_decode_num_accepted_tokens_total{instance="h:8000"}', "0+%dx20" % (accepted * per_min)),
        ('vllm:inter_token_latency_seconds_count{instance="h:8001"}', "0+%dx20" % (32 * per_min)),
        ('vllm:inter_token_latency_seconds_sum{instance="h:8001"}', "0+%dx20" % per_min),
        ('sglang:inter_token_latency_seconds_count{instance="h:30000"}', "0+%dx20" % (64 * per_min)),
        ('sglang:inter_token_latency_seconds_sum{instance="h:30000"}', "0+%dx20" % per_min),
    ]
    test = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": [{"series": s, "values": v} for s, v in series],
        "promql_expr_test": [
            {"expr": panel_expr(decode, "vLLM"), "eval_time": "15m",
             "exp_samples": [{"labels": '{instance="h:8000"}', "value": 60},
                             {"labels": '{instance="h:8001"}', "value": 32}]},
            {"expr": panel_expr(decode, "SGLang"), "eval_time": "15m",
             "exp_samples": [{"labels": '{instance="h:30000"}', "value": 64}]},
            {"expr": panel_expr("Engine: accept length", "vLLM"), "eval_time": "15m",
             "exp_samples": [{"labels": '{instance="h:8000"}', "value": 3}]}]}]}
    (tmp_path / "panels_test.yml").write_text(yaml.safe_dump(test))
    p = promtool("test", "rules", "panels_test.yml", cwd=tmp_path)
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


def test_the_dashboard_imports_as_grafana_reads_it():
    """The data source an input at import (__inputs: DS_PROMETHEUS, the data source variable's
    value) that every panel and query uses through the variable, what it requires (__requires),
    unique panel ids, panels inside Grafana's 24 columns."""
    assert DASHBOARD["uid"] == "sglang-watch" and DASHBOARD["title"]
    (ds,) = DASHBOARD["__inputs"]
    assert ds == {"name": "DS_PROMETHEUS", "label": "Prometheus", "description": ds["description"],
                  "type": "datasource", "pluginId": "prometheus", "pluginName": "Prometheus"}
    required = {(r["type"], r["id"]) for r in DASHBOARD["__requires"]}
    assert required == {("grafana", "grafana"), ("datasource", "prometheus")} | {
        ("panel", p["type"]) for p in panels()}
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == ("datasource", "prometheus")
    assert variables["datasource"]["current"]["value"] == "${DS_PROMETHEUS}"
    assert variables["host"]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert "${DS_PROMETHEUS}" not in json.dumps(DASHBOARD["panels"])  # the panels follow the variable
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    for p in DASHBOARD["panels"]:
        pos = p["gridPos"]
        assert pos["x"] + pos["w"] <= 24 and pos["h"] >= 1, p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"] == variables["host"]["datasource"] and p["description"], p["title"]
        assert p["targets"] and all(t["datasource"] == p["datasource"] and t["expr"] for t in p["targets"])
        assert [t["refId"] for t in p["targets"]] == [chr(65 + i) for i in range(len(p["targets"]))]
