"""The watch's textfile and the engine's /metrics as a real Prometheus sees them (Debian's
prometheus and prometheus-node-exporter, `make prometheus`), on the local container: what the
rules' unit tests (promtool) cannot show - series joined across node_exporter's and the engine's
targets, the dashboard's queries for one host, the alerts on real series.

Both run on the host itself (the container), as transient systemd units: node_exporter with only
its textfile collector on the watch's directory at :9100, Prometheus scraping it and the engine's
own /metrics at :30000 (the server listens on the host's loopback) every second, with
monitoring/alerts.yml. In order: drafts never accepted (the emulator restarted by hand with its
acceptance at 0) raise SGLangDraftsDead; a deploy with the watch on, the watch run again and again
while the deploy restarts the server under its lock, raises no SGLangServerDown and ends with no
alert at all; every dashboard panel finds series for the host. The container is left deployed as
the deploy leaves it, without the watch or the two."""
from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time

import pytest
import yaml

from conftest import ROOT
from hostutil import ensure_deployed, needs_local_host, on_host, play

pytestmark = [needs_local_host, pytest.mark.timeout(600)]

TOOLS = ROOT / ".tools" / "bin"
TEXTFILES = "/var/lib/prometheus/node-exporter"
ENV_FILE = "/etc/sglang/sglang.env"
# Where the two live on the host while the test runs (beside the stand-in nvidia-smi).
HERE = "/usr/local/lib/sglang-test"
DATA = "/var/tmp/sglang-test-prometheus"
UNITS = ("sglang-test-node-exporter", "sglang-test-prometheus")
# The watch short (a 1 s window, a probe of one request) and the gate's textfile beside its own.
WATCH = {"sglang_watch_enabled": True, "sglang_watch_window": 1, "sglang_watch_probe_requests": 1,
         "sglang_gate_textfile_path": TEXTFILES + "/sglang_gate.prom"}
# Drafts never accepted: every position, and position 1 at a coding prompt's context.
DEAD_DRAFTS = ("SGLEMU_ACCEPT_PROBS=0", "SGLEMU_ACCEPT_P1_CONTEXT=0")
DASHBOARD = json.loads((ROOT / "monitoring" / "dashboard.json").read_text())
HOST = "localhost"  # the host part of both targets' instance


def podman(*args, stdin=None):
    env = dict(os.environ, CONTAINERS_CONF=str(ROOT / ".podman" / "containers.conf"))
    p = subprocess.run(["podman", *args], capture_output=True, text=True, env=env, timeout=120, input=stdin)
    assert p.returncode == 0, "podman %s: %s%s" % (" ".join(args[:3]), p.stdout, p.stderr)
    return p.stdout


# Run on the host by podman exec -i: the Prometheus HTTP API's answers to the expressions on stdin.
QUERY = """import json, sys, urllib.parse, urllib.request
out = []
for expr in json.load(sys.stdin):
    url = "http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    out.append(body["data"]["result"] if body["status"] == "success" else body)
print(json.dumps(out))
"""


class Stack(object):
    """node_exporter and Prometheus on the host."""

    def __init__(self):
        self.container = os.environ["LOCAL_HOST_NAME"]
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                  "rule_files": [HERE + "/alerts.yml"],
                  "scrape_configs": [
                      {"job_name": "node", "static_configs": [{"targets": ["%s:9100" % HOST]}]},
                      {"job_name": "engine", "static_configs": [{"targets": ["%s:30000" % HOST]}]}]}
        for name in ("prometheus", "prometheus-node-exporter"):
            podman("cp", str(TOOLS / name), "%s:%s/%s" % (self.container, HERE, name))
        podman("cp", str(ROOT / "monitoring" / "alerts.yml"), "%s:%s/alerts.yml" % (self.container, HERE))
        podman("exec", "-i", self.container, "sh", "-c", "cat > %s/prometheus.yml" % HERE,
               stdin=yaml.safe_dump(config))
        on_host("systemd-run --unit %s --collect %s/prometheus-node-exporter --collector.disable-defaults "
                "--web.listen-address=127.0.0.1:9100 --collector.textfile --collector.textfile.directory=%s"
                % (UNITS[0], HERE, TEXTFILES))
        on_host("systemd-run --unit %s --collect %s/prometheus --config.file=%s/prometheus.yml "
                "--storage.tsdb.path=%s --web.listen-address=127.0.0.1:9090" % (UNITS[1], HERE, HERE, DATA))
        answers("http://127.0.0.1:9090/-/ready", 60, UNITS[1])

    def stop(self):
        on_host("systemctl stop %s" % " ".join(UNITS), check=False)
        on_host("rm -rf %s %s/prometheus %s/prometheus-node-exporter %s/alerts.yml %s/prometheus.yml"
                % (DATA, HERE, HERE, HERE, HERE))

    def queries(self, exprs):
        answer = podman("exec", "-i", self.container, "python3", "-c", QUERY, stdin=json.dumps(exprs))
        return json.loads(answer)

    def query(self, expr):
        (result,) = self.queries([expr])
        assert isinstance(result, list), result
        return result

    def alerts(self):
        return sorted((a["metric"]["alertname"], a["metric"]["alertstate"]) for a in self.query("ALERTS"))

    def sees_run(self, textfile):
        """Until Prometheus has scraped the run that wrote ``textfile``, and evaluated its rules
        since."""
        name = "sglang_watch_last_run_timestamp_seconds"
        stamp = float(re.search(r"^%s\{[^}]*\} (\S+)$" % name, textfile, re.M).group(1))
        deadline = time.monotonic() + 30
        while stamp not in [float(s["value"][1]) for s in self.query(name)]:
            assert time.monotonic() < deadline, "Prometheus never scraped the run of %s" % stamp
            time.sleep(0.5)
        time.sleep(2.5)


@pytest.fixture(scope="module")
def stack():
    ensure_deployed()
    on_host("mkdir -p %s" % TEXTFILES)
    p = play("tests/playbooks/watch.yml", "-e", json.dumps(WATCH))
    assert p.returncode == 0, p.stdout[-3000:]
    s = Stack()
    try:
        yield s
    finally:
        s.stop()
        if on_host("grep -c ^SGLEMU_ACCEPT %s" % ENV_FILE, check=False) != "0":  # a test stopped half-way
            on_host("sed -i /^SGLEMU_ACCEPT/d %s" % ENV_FILE)
            on_host("systemctl restart sglang")
        p = play("tests/playbooks/watch.yml", "-e", json.dumps(dict(WATCH, sglang_watch_enabled=False)))
        assert p.returncode == 0, p.stdout[-3000:]
        on_host("rm -f %s/sglang_gate.prom" % TEXTFILES)
        on_host("rmdir %s /var/lib/prometheus" % TEXTFILES)


def watch_run():
    """One run of the installed watch (its oneshot unit); the textfile it wrote."""
    # as often as the test asks: past systemd's start limit (5 in 10 s) too
    on_host("sh -c 'systemctl reset-failed sglang-watch; systemctl start sglang-watch'")
    return on_host("cat %s/sglang_watch.prom" % TEXTFILES)


def answers(url, timeout, unit):
    """Until ``url`` answers 200 on the host (its ``unit``'s journal when it never does)."""
    deadline = time.monotonic() + timeout
    while on_host("curl -s -o /dev/null -w %%{http_code} %s" % url, check=False) != "200":
        assert time.monotonic() < deadline, on_host("journalctl -u %s --no-pager -n 30" % unit)
        time.sleep(0.5)


def test_drafts_never_accepted_raise_the_drafts_dead_alert(stack):
    on_host("sh -c 'printf \"%s\\n\" >> %s'" % ("\\n".join(DEAD_DRAFTS), ENV_FILE))
    on_host("systemctl restart sglang")
    answers("http://127.0.0.1:30000/health_generate", 120, "sglang")  # the role's readiness path
    text = watch_run()
    assert float(re.search(r"^sglang_watch_accept_length\{[^}]*\} (\S+)$", text, re.M).group(1)) < 1.1, text
    stack.sees_run(text)
    assert ("SGLangDraftsDead", "pending") in stack.alerts()  # its for: 10m is promtool's to prove


def test_a_deploy_with_the_watch_on_raises_no_alert(stack):
    """The deploy rewrites the environment and restarts the server under its lock while the watch
    runs over and over: no SGLangServerDown then, and no alert at all once it is done."""
    seen, deploying, done = set(), [], threading.Event()

    def poll():
        while not done.is_set():
            seen.update(stack.alerts())
            time.sleep(0.5)

    def runs():
        while not done.is_set():
            text = watch_run()
            deploying.append(re.search(r"^sglang_watch_deploying\{[^}]*\} 1(\.0)?$", text, re.M) is not None)
            time.sleep(1.0)

    pid = on_host("systemctl show --property MainPID --value sglang")
    threads = [threading.Thread(target=poll), threading.Thread(target=runs)]
    for t in threads:
        t.start()
    try:
        p = play("deploy.yml", "-e", json.dumps(WATCH))
    finally:
        done.set()
        for t in threads:
            t.join(120)
    assert p.returncode == 0, p.stdout[-3000:]
    assert on_host("systemctl show --property MainPID --value sglang") != pid  # restarted
    assert "SGLEMU_ACCEPT" not in on_host("cat %s" % ENV_FILE)
    assert any(deploying), "no run of the watch fell inside the deploy's lock"
    assert stack.query("max_over_time(sglang_watch_deploying[10m]) == 1")
    # the lock held: pending (it fires after two hours); before the deploy the drafts were dead
    # (the alerts on them are true); no SGLangServerDown for the restart, nothing firing
    assert ("SGLangDeployLockHeld", "pending") in seen
    assert {name for name, _ in seen} <= {"SGLangDeployLockHeld", "SGLangDraftsDead",
                                          "SGLangDecodeBelowGate"}, seen
    assert {state for _, state in seen} == {"pending"}
    text = watch_run()
    assert "sglang_watch_up{" in text and "sglang_watch_deploying{" in text, text
    stack.sees_run(text)
    assert stack.alerts() == []


def test_every_dashboard_panel_finds_series_for_the_host(stack):
    """The host variable from every target's `up` (node_exporter's and the engine's): one host;
    every panel's query with it finds series, and so does every query of the watch, the gate and
    SGLang (vLLM's are the vLLM emulator's names, tests/test_monitoring.py)."""
    host = {v["name"]: v for v in DASHBOARD["templating"]["list"]}["host"]
    regex = re.compile(host["regex"][1:-1])
    instances = {s["metric"]["instance"] for s in stack.query("up")}
    assert instances == {"%s:9100" % HOST, "%s:30000" % HOST}
    assert {regex.search(i).group(1) for i in instances} == {HOST}
    targets = [(p["title"], t["expr"].replace("$host", HOST))
               for p in DASHBOARD["panels"] for t in p.get("targets", [])]
    found = dict(zip(targets, (bool(r) for r in stack.queries([expr for _, expr in targets]))))
    panels = {title for title, _ in targets}
    assert {title for (title, _), ok in found.items() if ok} == panels
    # each query but vLLM's and the deploying state's (== 1: not deploying now)
    empty = [expr for (_, expr), ok in found.items()
             if not ok and "vllm:" not in expr and "sglang_watch_deploying" not in expr]
    assert empty == []
