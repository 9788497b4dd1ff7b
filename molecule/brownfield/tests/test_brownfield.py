"""After the takeover: the hand-made unit is disabled and backed up, the stray is gone, the history
shows the failing first gate that stopped the server, the restore of the imported unit and the
passing deploy; after a container restart only the
managed server runs; rollback.yml gives the hand-made unit back (the last test: it changes the
host)."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from conftest import BIN, LKG_DIR, ROOT, UNIT, assert_service_healthy, history, listener_pids, main_pid

HAND = "/etc/systemd/system/sglang-qwen.service"
BACKUPS = "/var/lib/sglang/adopted"


def _backup(host):
    names = host.check_output("ls %s" % BACKUPS).split()
    assert len(names) == 1, names  # one takeover: the second deploy found nothing left to adopt
    return "%s/%s" % (BACKUPS, names[0])


def test_the_hand_made_unit_is_disabled_stopped_and_backed_up(host):
    unit = host.service("sglang-qwen")
    assert not unit.is_enabled and not unit.is_running
    assert host.file(HAND).exists  # disabled in place, not deleted
    backup = _backup(host)
    assert host.file(backup + "/sglang-qwen.service").content_string == host.file(HAND).content_string
    manifest = json.loads(host.file(backup + "/manifest.json").content_string)
    [entry] = manifest["units"]
    assert (entry["name"], entry["path"], entry["enabled"], entry["active"], entry["engine"]) == (
        "sglang-qwen.service", HAND, True, True, "sglang")
    # the continuation line was joined: the whole command line was read
    assert entry["argv"][-4:] == ["--host", "0.0.0.0", "--port", "30000"]


def test_the_stray_is_gone(host):
    pid = int(host.file("/var/tmp/molecule/stray.pid").content_string)
    assert not host.file("/proc/%d" % pid).exists


def test_the_history_shows_the_imported_unit_restored_then_the_passing_deploy(host):
    runs = history(host)
    assert [(r["profile"], r["verdict"], r["action"]) for r in runs] == [
        ("nextn_3step", "fail", "stop"), ("nextn_3step", "fail", "restore"),
        ("nextn_3step", "pass", "record")]
    assert runs[0]["reason"] == ("no last-known-good unit to restore: the failing server was stopped and "
                                 "disabled (sglang_gate_no_lkg: stop)")
    # the passing deploy replaced the imported last-known-good
    lkg = json.loads(host.file(LKG_DIR + "/sglang.json").content_string)
    assert lkg["profile"] == "nextn_3step" and "adopted" not in lkg


def test_the_managed_unit_serves(host):
    assert_service_healthy(host)
    assert "/opt/sglang/releases/" in host.file(UNIT).content_string


def test_after_a_restart_only_the_managed_server_runs(host, instance):
    env = dict(os.environ, CONTAINERS_CONF=str(ROOT / ".podman" / "containers.conf"))
    subprocess.run(["podman", "restart", "--time", "30", instance], check=True, env=env, timeout=180)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        state = host.run("systemctl is-active sglang").stdout.strip()
        code = host.run("curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:30000/health")
        if state == "active" and code.stdout == "200":
            break
        time.sleep(2)
    assert_service_healthy(host)
    assert host.run("systemctl is-active sglang-qwen").stdout.strip() == "inactive"
    assert listener_pids(host) == {main_pid(host)}
    assert host.run("pgrep -f '^/opt/hand/venv/bin/python'").rc == 1


def test_rollback_gives_the_hand_made_unit_back(host):
    inventory = str(Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    p = subprocess.run([str(BIN / "ansible-playbook"), "-i", inventory, "playbooks/rollback.yml",
                        "-e", "sglang_rollback_adopted=true"], cwd=str(ROOT), env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    said = " ".join(p.stdout.split())
    assert "sglang.service is stopped and disabled; put back from %s" % _backup(host) in said
    svc, hand = host.service("sglang"), host.service("sglang-qwen")
    assert not svc.is_running and not svc.is_enabled
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and host.run("curl -sf --max-time 5 http://127.0.0.1:30000/health").rc:
        time.sleep(2)
    assert hand.is_enabled and hand.is_running
    info = json.loads(host.check_output("curl -sf http://127.0.0.1:30000/server_info"))
    assert info["speculative_num_steps"] == 1  # the hand-made unit's flags again
