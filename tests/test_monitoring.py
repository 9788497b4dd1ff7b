"""monitoring/: the Prometheus alert rules (checked and unit-tested by Prometheus' own promtool,
which scripts/promtool.sh puts at .tools/bin/promtool: `make promtool`) and the Grafana dashboard.
Every metric name they use is one something here serves: the watch's textfile
(sglang_perf/watch.py), the gate's (sglang_perf/exposition.py) or the engine's own /metrics as the
emulator serves them (bench/emulator/metrics.py, bench/emulator/vllm/metrics.py)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from bench.emulator.metrics import Metrics
from bench.emulator.vllm.metrics import VllmMetrics
from conftest import ROOT
from sglang_perf import exposition, watch

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
    assert p.returncode == 0 and "SUCCESS: 4 rules found" in p.stdout, p.stdout + p.stderr


def test_promtool_runs_the_rules_unit_tests():
    p = promtool("test", "rules", "alerts_test.yml")
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("old, new", [
    ("sglang_watch_accept_length < 1.3", "sglang_watch_accept_length < 1.0"),
    ("and sglang_watch_running_requests <= 1", "and sglang_watch_running_requests <= 3"),
    ("for: 30m", "for: 20m"),
])
def test_the_rules_unit_tests_catch_a_changed_rule(tmp_path, old, new):
    text = (MONITORING / "alerts.yml").read_text()
    assert old in text
    (tmp_path / "alerts.yml").write_text(text.replace(old, new))
    shutil.copy(MONITORING / "alerts_test.yml", tmp_path)
    p = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert p.returncode != 0 and "FAILED" in p.stdout + p.stderr, p.stdout


def test_the_alerts_are_the_ones_asked_for():
    """Drafts dead: accept length under 1.3 for 10 min; decode under the gate's threshold for 30 min
    (at one running request); the server down; the watch itself stale."""
    assert set(ALERTS) == {"SGLangServerDown", "SGLangDraftsDead", "SGLangDecodeBelowGate",
                           "SGLangWatchStale"}
    assert (ALERTS["SGLangDraftsDead"]["expr"], ALERTS["SGLangDraftsDead"]["for"]) == (
        "sglang_watch_accept_length < 1.3", "10m")
    assert ALERTS["SGLangDecodeBelowGate"]["expr"].startswith(
        "sglang_watch_decode_tokens_per_second < sglang_watch_decode_threshold_tokens_per_second")
    assert ALERTS["SGLangDecodeBelowGate"]["for"] == "30m"
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
             VllmMetrics({"served_model_name": "m", "speculative_num_steps": 3}).render()]
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


SERVED = {"watch": set(watch.WATCH_METRICS), "gate": set(exposition.METRICS),
          "engine": emulator_names()}


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
    assert {k for k, names in SERVED.items() if used & names} == {"watch", "gate", "engine"}
    assert {"sglang_watch_decode_tokens_per_second", "sglang_watch_decode_threshold_tokens_per_second",
            "sglang_watch_accept_length", "sglang_watch_up"} <= used


def test_the_dashboard_imports_as_grafana_reads_it():
    """One data source variable every panel and query uses (chosen at import), unique panel ids,
    panels inside Grafana's 24 columns, a host variable from the watch's own series."""
    assert DASHBOARD["uid"] == "sglang-watch" and DASHBOARD["title"]
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == ("datasource", "prometheus")
    assert variables["instance"]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    for p in DASHBOARD["panels"]:
        pos = p["gridPos"]
        assert pos["x"] + pos["w"] <= 24 and pos["h"] >= 1, p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"] == variables["instance"]["datasource"] and p["description"], p["title"]
        assert p["targets"] and all(t["datasource"] == p["datasource"] and t["expr"] for t in p["targets"])
        assert [t["refId"] for t in p["targets"]] == [chr(65 + i) for i in range(len(p["targets"]))]
