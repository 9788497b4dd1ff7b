"""Real process faults and the 'nothing lost' promises on the local container: SIGKILL and
container restarts are survived; a new unit that never becomes ready is rolled back; a missing or
corrupt last-known-good is reported precisely and leaves the installed unit alone."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import ROOT
from hostutil import ensure_deployed, flat, needs_local_host, on_host, play

pytestmark = needs_local_host
UNIT = "/etc/systemd/system/sglang.service"
LKG = "/var/lib/sglang/last-known-good"


@pytest.fixture(scope="module", autouse=True)
def deployed():
    ensure_deployed()


def state():
    return {k: on_host("systemctl show -p %s --value sglang" % k) for k in ("MainPID", "NRestarts")}


def test_sigkill_is_restarted_by_systemd_and_passes_the_gate_again():
    before = state()
    on_host("kill -9 %s" % before["MainPID"])
    p = play("playbooks/bench.yml")  # waits for readiness, then gates
    assert p.returncode == 0, p.stdout[-3000:]
    after = state()
    assert after["MainPID"] != before["MainPID"]
    assert int(after["NRestarts"]) == int(before["NRestarts"]) + 1


def test_the_enabled_service_comes_back_after_a_container_restart():
    env = dict(os.environ, CONTAINERS_CONF=str(ROOT / ".podman" / "containers.conf"))
    name = os.environ.get("LOCAL_HOST_NAME", "sglang-local")
    subprocess.run(["podman", "restart", "--time", "20", name], check=True, env=env,
                   capture_output=True)
    subprocess.run(["scripts/local-host.sh", "up"], cwd=str(ROOT), check=True, env=env,
                   capture_output=True)
    p = play("playbooks/bench.yml")
    assert p.returncode == 0, p.stdout[-3000:]
    assert on_host("systemctl is-enabled sglang") == "enabled"


def test_a_unit_that_never_becomes_ready_is_rolled_back():
    lkg = on_host("sha256sum %s/sglang.service" % LKG).split()[0]
    history = on_host("wc -l /var/lib/sglang/gate-history.jsonl").split()[0]
    # a new unit (LimitNOFILE 19999) and environment (a server that never finishes loading)
    p = play("deploy.yml", "-e", json.dumps({"sglang_environment": {"SGLEMU_LOAD_SECONDS": "600"},
                                             "sglang_limit_nofile": 19999, "sglang_ready_timeout": 30}))
    out = flat(p.stdout)
    assert p.returncode != 0
    assert "was not ready within 30 s (sglang_ready_timeout): last status seen: port 30000 " \
           "never opened" in out, out[-3000:]
    assert "restored the last-known-good unit (profile nextn_3step" in out
    assert on_host("sha256sum %s" % UNIT).split()[0] == lkg
    assert "SGLEMU_LOAD_SECONDS" not in on_host("cat /etc/sglang/sglang.env")
    assert on_host("systemctl is-active sglang") == "active"
    # the unit that failed is kept beside the restored one (the role's backup of a replaced unit;
    # this test's own change, so it holds on a container no other test has deployed to)
    assert on_host("sh -c 'grep -l \"^LimitNOFILE=19999$\" /etc/systemd/system/sglang.service.*~'")
    # the failed deploy never reached the gate: history unchanged
    assert on_host("wc -l /var/lib/sglang/gate-history.jsonl").split()[0] == history


@pytest.mark.parametrize("damage, words", [
    ("mv {lkg}/sglang.json {lkg}/sglang.json.saved", "is missing {lkg}/sglang.json"),
    ("sh -c 'cp {lkg}/sglang.json {lkg}/sglang.json.saved && echo {{oops > {lkg}/sglang.json'",
     "is corrupt (sglang.json is not the JSON record a passing gate writes"),
    ("mv {lkg}/sglang.service {lkg}/sglang.service.saved", "is missing {lkg}/sglang.service"),
])
def test_rollback_with_a_broken_last_known_good_changes_nothing(damage, words):
    unit = on_host("sha256sum %s" % UNIT)
    pid = on_host("systemctl show -p MainPID --value sglang")
    on_host(damage.format(lkg=LKG))
    try:
        p = play("playbooks/rollback.yml")
        out = flat(p.stdout)
        assert p.returncode != 0
        assert "Cannot roll back on ct-local: the last-known-good in %s %s" % (
            LKG, words.format(lkg=LKG)) in out, out[-2000:]
        assert "nothing was changed: the installed unit stays as it is" in out
    finally:
        saved = "sglang.service" if "service.saved" in damage else "sglang.json"
        on_host("mv %s/%s.saved %s/%s" % (LKG, saved, LKG, saved))
    assert on_host("sha256sum %s" % UNIT) == unit
    assert on_host("systemctl show -p MainPID --value sglang") == pid


def test_history_is_append_only_json_lines():
    lines = on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines()
    records = [json.loads(line) for line in lines]
    assert records and all({"time", "profile", "passed", "action"} <= set(r) for r in records)
    times = [r["time"] for r in records]
    assert times == sorted(times)
    assert on_host("stat -c %a /var/lib/sglang/gate-history.jsonl") == "640"
