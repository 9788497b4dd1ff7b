"""The watch (roles/sglang_watch) after the two rollouts: every host that passed its gate got its
timer; the canary, whose second gate failed, kept the first rollout's watch (the role never ran
after the failed gate, though that rollout turned the watch off); the third host's watch was
turned off at the end of converge. One run of the service writes the textfile with figures, and
the server's main process is the same before and after: the watch restarts nothing."""
from __future__ import annotations

import json

import testinfra
from conftest import assert_service_healthy, main_pid
from prometheus_client.parser import text_string_to_metric_families

CANARY, UNTOUCHED, TURNED_OFF = ("sglang-molecule-canary-%d" % i for i in (1, 2, 3))
UNIT = "sglang-watch"
TEXTFILE = "/var/lib/prometheus/node-exporter/sglang_watch.prom"
SETTINGS = "/etc/sglang/sglang-watch.json"
FILES = ["/etc/systemd/system/sglang-watch.timer", "/etc/systemd/system/sglang-watch.service",
         "/usr/local/sbin/sglang-watch", SETTINGS, TEXTFILE]


def container(name):
    return testinfra.get_host("podman://" + name)


def test_a_host_whose_gate_passed_runs_the_watch_timer_and_one_run_writes_its_figures():
    host = container(UNTOUCHED)
    assert host.check_output("systemctl is-enabled %s.timer" % UNIT) == "enabled"
    assert host.check_output("systemctl is-active %s.timer" % UNIT) == "active"
    pid = main_pid(host)
    run = host.run("systemctl start %s.service" % UNIT)  # a oneshot: returns when the run ended
    assert run.rc == 0, run.stderr
    assert main_pid(host) == pid
    assert_service_healthy(host)
    journal = host.check_output("journalctl -u %s.service -o cat --no-pager" % UNIT)
    assert "sglang-watch: up 1, idle (source probe); accept length " in journal, journal
    f = host.file(TEXTFILE)
    assert f.exists and f.mode == 0o644
    fams = {fam.name: {frozenset(s.labels.items()): s.value for s in fam.samples}
            for fam in text_string_to_metric_families(f.content_string)}
    settings = json.loads(host.file(SETTINGS).content_string)
    labels = frozenset(settings["labels"].items())
    assert settings["labels"]["profile"] == "nextn_3step" and settings["window_s"] == 1
    assert settings["probe"] == {"case": "coding", "prompts": "coding", "requests": 1, "max_tokens": 96,
                                 "thinking": False}
    assert settings["thinking_probe"] is None  # the plumbing plan has no thinking case
    assert fams["sglang_watch_up"] == {labels: 1}
    assert fams["sglang_watch_source"][frozenset(dict(settings["labels"], source="probe").items())] == 1
    assert 2.8 < fams["sglang_watch_accept_length"][labels] < 4.0
    assert fams["sglang_watch_decode_tokens_per_second"][labels] > 45
    assert fams["sglang_watch_decode_threshold_tokens_per_second"] == {labels: 45}
    assert fams["sglang_watch_interval_seconds"] == {labels: 900}
    assert fams["sglang_watch_requests"] == fams["sglang_watch_running_requests"] == {labels: 1}


def test_the_canary_whose_second_gate_failed_kept_the_watch_of_the_rollout_that_passed():
    host = container(CANARY)
    assert host.check_output("systemctl is-enabled %s.timer" % UNIT) == "enabled"
    settings = json.loads(host.file(SETTINGS).content_string)
    assert settings["labels"]["profile"] == "nextn_3step"


def test_the_watch_turned_off_is_stopped_disabled_and_removed_and_the_server_untouched():
    host = container(TURNED_OFF)
    before = json.loads(host.file("/var/tmp/molecule/before.json").content_string)
    assert [p for p in FILES if host.file(p).exists] == []
    assert host.run("systemctl is-active %s.timer" % UNIT).stdout.strip() == "inactive"
    assert main_pid(host) == before["main_pid"]
    assert_service_healthy(host)
