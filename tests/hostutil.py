"""Running playbooks and commands against the local container (Ansible host ct-local) the way a
user does: through the repo's ansible.cfg and the embedded default inventory."""
from __future__ import annotations

import os
import shlex
import subprocess

import pytest

from ansiblerun import ansible, started
from conftest import DEFAULT_HOST, ROOT

HOST = "ct-local"

# The container tier: conftest.py fails such a test, saying to run `make local-host`, when the
# container is not up; `pytest -m "not container"` leaves the tier out. Which container a file
# runs on: conftest.CONTAINER_FILES.
needs_local_host = pytest.mark.container


PLUMBING_GATE = "@" + str(ROOT / "tests" / "vars" / "plumbing_gate.yml")


def _play_args(gate):
    pre = ["-e", PLUMBING_GATE] if gate == "plumbing" else []
    # each container's controller copy of the gate history apart from the others' (and from the
    # user's history/ directory); a test's own -e still wins
    history = ROOT / "out" / "test-history" / os.environ.get("LOCAL_HOST_NAME", DEFAULT_HOST)
    return pre + ["-e", "sglang_gate_controller_history_dir=%s" % history]


def play(*args, timeout=900, env=None, gate="plumbing"):
    """ansible-playbook ARGS as a user runs it. gate="plumbing": the short gate run of
    tests/vars/plumbing_gate.yml first (the test's own -e still wins); gate="inventory": the
    inventory's own gate settings."""
    return ansible("ansible-playbook", *_play_args(gate), *args, env=env, timeout=timeout)


def play_started(*args, output, gate="plumbing"):
    """play(ARGS) started in the background (its own process group), its output to ``output``."""
    return started("ansible-playbook", *_play_args(gate), *args, output=output)


def on_host(cmd, check=True):
    """Run ``cmd`` (split like ansible.builtin.command splits it: no shell) as root on the test's
    container with `scripts/local-host.sh shell`; its stdout without the trailing newline. The
    plays under test go through Ansible; reading the host's state does not need to: one podman
    exec costs about a tenth of an `ansible` ad-hoc run, and the suite makes about a hundred."""
    p = subprocess.run([str(ROOT / "scripts" / "local-host.sh"), "shell", *shlex.split(cmd)], cwd=str(ROOT),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if check:
        assert p.returncode == 0, "on the host: %s -> exit %d\n%s%s" % (cmd, p.returncode, p.stdout, p.stderr)
    return p.stdout.rstrip("\r\n")


def recap_changed(output):
    line = [ln for ln in output.splitlines() if ln.startswith(HOST) and "changed=" in ln][-1]
    return int(line.split("changed=")[1].split()[0])


def flat(text):
    return " ".join(text.split())


def ensure_deployed():
    """The service runs a passing 3-step deploy (deploys it when it does not: a stopped service, one
    without a last-known-good record, which a run interrupted before its gate leaves, or another
    profile a test before this one left: a test need not put the 3-step profile back)."""
    profile = on_host("python3 -c \"import json; print(json.load(open('/var/lib/sglang/last-known-good/"
                      "sglang.json')).get('profile'))\"", check=False)
    unit = on_host("systemctl show -p ExecStart --value sglang", check=False)
    running = on_host("systemctl is-active sglang", check=False) == "active"
    if not running or profile != "nextn_3step" or "-m emulator --" not in unit \
            or "--speculative-num-steps 3 " not in unit:
        p = play("deploy.yml")
        assert p.returncode == 0, p.stdout[-3000:]
