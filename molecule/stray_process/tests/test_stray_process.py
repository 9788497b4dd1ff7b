"""The hand-started server is gone and the service holds the port."""
from __future__ import annotations

from conftest import assert_service_healthy, history, listener_pids, main_pid


def test_the_hand_started_server_is_gone(host):
    pid = int(host.file("/var/tmp/molecule/stray.pid").content_string)
    assert not host.file("/proc/%d" % pid).exists
    assert host.run("pgrep -f '^/opt/stray/venv/bin/python'").rc == 1


def test_the_service_holds_the_port(host):
    assert_service_healthy(host)
    assert listener_pids(host) == {main_pid(host)}


def test_the_deploy_passed_its_gate(host):
    runs = history(host)
    assert [(r["profile"], r["passed"], r["reason"]) for r in runs] == \
        [("nextn_3step", True, "recorded as last-known-good")]
