"""Running playbooks and commands against the local container (Ansible host ct-local) the way a
user does: through the repo's ansible.cfg and the embedded default inventory."""
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

needs_local_host = pytest.mark.skipif(
    subprocess.run(["scripts/local-host.sh", "status"], cwd=str(ROOT),
                   capture_output=True).returncode != 0,
    reason="the local container is not running: run `make test` (it starts it)")


def play(*args, timeout=900, env=None):
    e = dict(os.environ, ANSIBLE_NOCOLOR="1")
    e.update(env or {})
    return subprocess.run([str(BIN / "ansible-playbook"), *args], cwd=str(ROOT), env=e,
                          capture_output=True, text=True, timeout=timeout)


def on_host(cmd, check=True):
    """Run ``cmd`` on the host through Ansible (no podman specifics); its stdout."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    p = subprocess.run([str(BIN / "ansible"), HOST, "-m", "ansible.builtin.command", "-a", cmd],
                       cwd=str(ROOT), capture_output=True, text=True, timeout=120, env=env)
    res = json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"][HOST]
    if check:
        assert res.get("rc") == 0, res
    return res.get("stdout", "")


def recap_changed(output):
    line = [ln for ln in output.splitlines() if ln.startswith(HOST) and "changed=" in ln][-1]
    return int(line.split("changed=")[1].split()[0])


def flat(text):
    return " ".join(text.split())


def ensure_deployed():
    """The service runs a passing 3-step deploy (deploys it when it does not)."""
    if on_host("systemctl is-active sglang", check=False) != "active":
        p = play("deploy.yml")
        assert p.returncode == 0, p.stdout[-3000:]
