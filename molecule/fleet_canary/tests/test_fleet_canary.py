"""After rollout 1 (3-step everywhere, passed) and rollout 2 (1-step: the canary failed its gate and
was rolled back, the rollout stopped): the canary runs the 3-step unit again; the two hosts the
rollout never reached kept their unit, their main process and their history."""
from __future__ import annotations

import json

import pytest
import testinfra
from conftest import LKG_DIR, UNIT, assert_service_healthy, exec_start, history, main_pid

CANARY = "sglang-molecule-canary-1"
UNTOUCHED = ["sglang-molecule-canary-2", "sglang-molecule-canary-3"]


def container(name):
    return testinfra.get_host("podman://" + name)


def test_the_canary_was_rolled_back_and_serves_the_3step_unit():
    host = container(CANARY)
    runs = history(host)
    assert [(r["profile"], r["passed"]) for r in runs] == [("nextn_3step", True), ("nextn_1step", False)]
    assert (runs[1]["action"], runs[1]["reason"]) == ("restore", "rolled back to the last-known-good unit")
    unit = host.file(UNIT).content_string
    assert unit == host.file(LKG_DIR + "/sglang.service").content_string
    argv = exec_start(unit)
    assert argv[argv.index("--speculative-num-steps") + 1] == "3"
    assert_service_healthy(host)


@pytest.mark.parametrize("name", UNTOUCHED)
def test_hosts_the_rollout_never_reached_are_untouched(name):
    host = container(name)
    before = json.loads(host.file("/var/tmp/molecule/before.json").content_string)
    assert host.check_output("sha256sum %s" % UNIT).split()[0] == before["unit_sha256"]
    assert main_pid(host) == before["main_pid"]
    runs = history(host)
    assert len(runs) == before["history_lines"] == 1
    assert (runs[0]["profile"], runs[0]["passed"]) == ("nextn_3step", True)
    shown = host.check_output("systemctl show --property ExecStart --value sglang")
    assert "--speculative-num-steps 3 " in shown
    assert_service_healthy(host)
