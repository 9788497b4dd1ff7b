"""`ansible-playbook deploy.yml` against the local systemd container (the embedded default
inventory; `make test` brings the container up and builds the emulator wheel first)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

BIN = Path(sys.executable).parent
HOST = "ct-local"
pytestmark = pytest.mark.skipif(
    subprocess.run(["scripts/local-host.sh", "status"], cwd=str(ROOT),
                   capture_output=True).returncode != 0,
    reason="the local container is not running: run `make test` (it starts it)")


def play(*args):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(BIN / "ansible-playbook"), *args], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=900)


def on_host(cmd):
    """Run ``cmd`` on the host through Ansible (no podman specifics); its stdout."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    p = subprocess.run([str(BIN / "ansible"), HOST, "-m", "ansible.builtin.command", "-a", cmd],
                       cwd=str(ROOT), capture_output=True, text=True, timeout=120, env=env)
    res = json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"][HOST]
    assert res.get("rc") == 0, res
    return res["stdout"]


def recap_changed(output):
    line = [ln for ln in output.splitlines() if ln.startswith(HOST) and "changed=" in ln][-1]
    return int(line.split("changed=")[1].split()[0])


def test_deploy_passes_the_gate_and_records_it(tmp_path):
    before = on_host("sh -c 'wc -l < /var/lib/sglang/gate-history.jsonl 2>/dev/null || echo 0'")
    p = play("deploy.yml")
    assert p.returncode == 0, p.stdout[-4000:]
    assert "profile nextn_3step: passed: decode" in " ".join(p.stdout.split())
    # the unit on the host is exactly what render.yml renders for this host
    r = play("playbooks/render.yml", "-e", "render_dir=%s" % tmp_path, "--limit", HOST)
    assert r.returncode == 0, r.stdout
    rendered = (tmp_path / (HOST + ".service")).read_text()
    assert on_host("cat /etc/systemd/system/sglang.service") == rendered.rstrip("\n")
    assert on_host("systemctl is-active sglang") == "active"
    assert on_host("systemctl is-enabled sglang") == "enabled"
    pid = on_host("systemctl show -p MainPID --value sglang")
    assert on_host("ps -o user= -p %s" % pid) == "sglang"
    lines = on_host("cat /var/lib/sglang/gate-history.jsonl").splitlines()
    assert len(lines) == int(before.strip() or 0) + 1
    last = json.loads(lines[-1])
    assert last["passed"] is True and last["profile"] == "nextn_3step"
    assert last["action"] == "recorded as last-known-good" and last["accept_len"] > 2.8
    assert on_host("cat /var/lib/sglang/last-known-good/sglang.service") == rendered.rstrip("\n")


def test_bad_input_fails_before_the_host_changes():
    unit = on_host("sha256sum /etc/systemd/system/sglang.service")
    pid = on_host("systemctl show -p MainPID --value sglang")
    p = play("deploy.yml", "-e", "sglang_profile=nextn_2step")
    assert p.returncode != 0
    assert "sglang_profile: 'nextn_2step' is not defined in sglang_profiles" in \
        " ".join(p.stdout.split())
    assert recap_changed(p.stdout) == 0
    assert on_host("sha256sum /etc/systemd/system/sglang.service") == unit
    assert on_host("systemctl show -p MainPID --value sglang") == pid
