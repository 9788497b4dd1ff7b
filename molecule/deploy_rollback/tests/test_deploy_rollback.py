"""After 3-step (passed), 1-step (failed at the gate) and a bump to emulator release 0.5.24 (failed
at the gate): the 3-step unit of release 0.5.23 is back, running and fast, and the history holds
the three runs."""
from __future__ import annotations

import json
import re

from conftest import LKG_DIR, UNIT, URL, assert_service_healthy, exec_start, history

RELEASES = "/opt/sglang/releases"


def test_history_holds_the_three_runs(host):
    runs = history(host)
    assert [(r["profile"], r["sglang_version"], r["passed"]) for r in runs] == [
        ("nextn_3step", "0.5.23", True), ("nextn_1step", "0.5.23", False), ("nextn_3step", "0.5.24", False)]
    assert [(r["action"], r["reason"]) for r in runs] == [
        ("record", "recorded as last-known-good"), ("restore", "rolled back to the last-known-good unit"),
        ("restore", "rolled back to the last-known-good unit")]
    assert "coding" in runs[1]["failed_cases"] and runs[1]["cases"][0]["passed"] is False
    assert runs[1]["decode_tok_s"]["median"] < 45  # why it failed: the production threshold
    assert runs[1]["unit_sha256"] != runs[0]["unit_sha256"]
    # each run names its release: the bump was a release of its own, the 1-step run was not
    assert runs[0]["release"] == runs[1]["release"] != runs[2]["release"]
    assert runs[0]["release"].startswith("0.5.23-") and runs[2]["release"].startswith("0.5.24-")
    assert runs[2]["venv"] == "%s/%s/venv" % (RELEASES, runs[2]["release"])


def test_the_first_deploy_passed_and_is_the_last_known_good(host):
    run = history(host)[0]
    # the plumbing plan's one case, with the production thresholds of its case
    assert [c["case"] for c in run["cases"]] == ["coding"] and run["cases"][0]["passed"] is True
    t = run["cases"][0]["thresholds"]
    assert (t["min_tok_s"], t["min_accept_len"]) == (45, 2.8)
    assert run["decode_tok_s"]["median"] >= 45 and run["accept_len"] >= 2.8 and run["errors"] == 0
    meta = json.loads(host.file(LKG_DIR + "/sglang.json").content_string)
    assert meta["passed"] is True and meta["profile"] == "nextn_3step"
    assert meta["unit_sha256"] == host.file(UNIT).sha256sum == run["unit_sha256"]
    env = host.file("/etc/sglang/sglang.env").content_string
    assert host.file(LKG_DIR + "/sglang.env").content_string == env


def test_both_releases_are_installed_side_by_side(host):
    runs = history(host)
    for run in (runs[0], runs[2]):
        release = host.file("%s/%s/release.json" % (RELEASES, run["release"]))
        assert release.exists, run["release"]
        meta = json.loads(release.content_string)
        assert (meta["release"], meta["engine"], meta["version"]) == (run["release"], "sglang",
                                                                       run["sglang_version"])
        assert host.file("%s/%s/constraints.txt" % (RELEASES, run["release"])).contains("^aiohttp==3.14.5$")
    # the venvs hold their own emulator release
    for run, version in ((runs[0], "0.5.23"), (runs[2], "0.5.24")):
        shown = host.check_output("%s/bin/python -m pip show sglang-emulator" % run["venv"])
        assert re.search(r"^Version: %s$" % re.escape(version), shown, re.M), shown
    # the last-known-good names the 0.5.23 release
    lkg = json.loads(host.file(LKG_DIR + "/sglang.json").content_string)
    assert (lkg["release"], lkg["sglang_version"]) == (runs[0]["release"], "0.5.23")


def test_the_server_runs_release_0523_again(host):
    runs = history(host)
    unit = host.file(UNIT).content_string
    assert exec_start(unit)[0] == runs[0]["venv"] + "/bin/python"
    assert "release %s (" % runs[0]["release"] in unit
    info = json.loads(host.check_output("curl -sf %s/server_info" % URL))
    assert info["version"] == "0.5.23"
    # the slowing environment of the failed bump is gone with it
    assert "SGLEMU_SPEED_SCALE" not in host.file("/etc/sglang/sglang.env").content_string


def test_the_3step_unit_is_on_disk_again(host, rendered_unit):
    unit = host.file(UNIT).content_string
    assert unit == rendered_unit("nextn_3step")
    assert unit == host.file(LKG_DIR + "/sglang.service").content_string
    argv = exec_start(unit)
    assert argv[argv.index("--speculative-num-steps") + 1] == "3"
    # the failing 1-step unit was replaced, and kept as a backup beside the unit
    backups = host.check_output("find /etc/systemd/system -maxdepth 1 -name 'sglang.service.*~'").split()
    assert any("--speculative-num-steps 1 " in host.file(b).content_string for b in backups), backups


def test_systemd_runs_the_restored_unit(host):
    shown = host.check_output("systemctl show --property ExecStart --value sglang")
    assert "--speculative-num-steps 3 " in shown
    assert host.check_output("systemctl show --property NeedDaemonReload --value sglang") == "no"
    assert_service_healthy(host)


def test_it_answers_at_3step_speed(ansible_module):
    # the gate's own module with the 3-step profile's production thresholds
    # (6 requests, up to 12: the fewest that bound a median at 95%)
    # one resolved case, as the deploy plan hands the gate's cases over (sglang_perf/plan/gate.py resolve)
    coding = {"case": "coding", "description": "", "report_only": False, "source": {},
              "options": {"case": "coding", "prompts": "coding", "prompt_tokens": None, "concurrency": 1,
                          "requests": 6, "max_requests": 12, "max_tokens": 192},
              "thresholds": {"min_tok_s": 45, "min_accept_len": 2.8}}
    r = ansible_module("sglang_bench", {"url": URL, "model": "Qwen3.6-27B", "gate": {
        "profile": "nextn_3step", "cases": [coding], "options": {"warmup": 2}}})
    assert not r.get("failed"), r.get("msg")
    assert r["passed"] is True and r["accept_len"] >= 2.8 and r["decode_tok_s"]["median"] >= 45, r["msg"]
