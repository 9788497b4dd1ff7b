"""After 3-step (passed) then 1-step (failed at the gate): the 3-step unit is back, running and
fast, and the history holds both runs."""
from __future__ import annotations

from conftest import LKG_DIR, UNIT, URL, assert_service_healthy, exec_start, history


def test_history_holds_both_runs(host):
    runs = history(host)
    assert [(r["profile"], r["passed"]) for r in runs] == [("nextn_3step", True), ("nextn_1step", False)]
    assert [(r["action"], r["reason"]) for r in runs] == [
        ("record", "recorded as last-known-good"), ("restore", "rolled back to the last-known-good unit")]
    assert "coding" in runs[1]["failed_cases"] and runs[1]["cases"][0]["passed"] is False
    assert runs[1]["decode_tok_s"]["median"] < 45  # why it failed: the production threshold
    assert runs[1]["unit_sha256"] != runs[0]["unit_sha256"]


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
    r = ansible_module("sglang_bench", {"url": URL, "model": "Qwen3.6-27B", "requests": 4, "warmup": 2,
                                        "max_tokens": 512, "min_tok_s": 45, "min_accept_len": 2.8})
    assert not r.get("failed"), r.get("msg")
    assert r["passed"] is True and r["accept_len"] >= 2.8 and r["decode_tok_s"]["median"] >= 45, r["msg"]
