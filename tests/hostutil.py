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

# The container tier: conftest.py fails such a test, saying to run `make local-host`, when the
# container is not up; `pytest -m "not container"` leaves the tier out.
needs_local_host = pytest.mark.container


PLUMBING_GATE = "@" + str(ROOT / "tests" / "vars" / "plumbing_gate.yml")


def play(*args, timeout=900, env=None, gate="plumbing"):
    """ansible-playbook ARGS as a user runs it. gate="plumbing": the short gate run of
    tests/vars/plumbing_gate.yml first (the test's own -e still wins); gate="inventory": the
    inventory's own gate settings."""
    e = dict(os.environ, ANSIBLE_NOCOLOR="1")
    e.update(env or {})
    pre = ["-e", PLUMBING_GATE] if gate == "plumbing" else []
    return subprocess.run([str(BIN / "ansible-playbook"), *pre, *args], cwd=str(ROOT), env=e,
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
