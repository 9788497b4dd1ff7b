"""The embedded default host: `scripts/local-host.sh up` gives a podman container with systemd as
PID 1 that Ansible reaches through inventories/local (containers.podman.podman connection).

The container is left running: later tests (the deploy) reuse it, and `up` is cheap when it is
already up. The first run on a fresh machine installs podman and builds the image (about 1 min).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

ANSIBLE = str(Path(sys.executable).parent / "ansible")
LOCAL_HOST = str(ROOT / "scripts" / "local-host.sh")
CONTAINERS_CONF = str(ROOT / ".podman" / "containers.conf")
# The container tier, but these tests bring the container up themselves.
pytestmark = pytest.mark.container(starts_it=True)


def _podman_unavailable():
    """Why podman cannot be installed or run here, or None. podman-setup.sh installs it with
    apt-get as root; without podman, apt-get or root there is nothing to run the host with."""
    if shutil.which("podman"):
        return None
    if not shutil.which("apt-get"):
        return "podman is not installed and there is no apt-get to install it"
    if os.geteuid() != 0:
        return "podman is not installed and installing it needs root (sudo apt-get install podman runc)"
    return None


def _env():
    return dict(os.environ, CONTAINERS_CONF=os.environ.get("CONTAINERS_CONF", CONTAINERS_CONF),
                ANSIBLE_NOCOLOR="1")


def _run(cmd, timeout):
    p = subprocess.run(cmd, cwd=str(ROOT), env=_env(), capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr


@pytest.fixture(scope="module")
def local_host():
    why = _podman_unavailable()
    if why:
        pytest.skip(why)
    rc, out = _run([LOCAL_HOST, "up"], timeout=600)
    assert rc == 0, out
    return out


def _adhoc(*args):
    """`ansible -i inventories/local ct-local ARGS` from the repo root: (exit code, ct-local's result)."""
    env = dict(_env(), ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    p = subprocess.run([ANSIBLE, "-i", "inventories/local", "ct-local"] + list(args), cwd=str(ROOT),
                       env=env, capture_output=True, text=True, timeout=120)
    try:
        res = json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"]["ct-local"]
    except (ValueError, LookupError):
        raise AssertionError("no JSON result from ansible (rc %d):\n%s%s"
                             % (p.returncode, p.stdout, p.stderr))
    return p.returncode, res


@pytest.mark.timeout(900)
def test_local_host_runs_systemd(local_host):
    assert "systemd in " in local_host and ("running" in local_host or "degraded" in local_host)

    rc, res = _adhoc("-m", "ansible.builtin.setup", "-a", "filter=ansible_service_mgr")
    assert rc == 0, res
    assert res["ansible_facts"]["ansible_service_mgr"] == "systemd", res

    # running, or degraded when a unit of an earlier test failed (the container is shared);
    # ansible exits 2 on degraded (systemctl's non-zero exit code).
    rc, res = _adhoc("-m", "ansible.builtin.command", "-a", "systemctl is-system-running")
    assert (rc, res.get("stdout")) in ((0, "running"), (2, "degraded")), res


@pytest.mark.timeout(120)
def test_up_again_is_a_cheap_noop(local_host):
    rc, out = _run([LOCAL_HOST, "up"], timeout=60)
    assert rc == 0, out
    assert "already running" in out and "creating" not in out, out
    rc, out = _run([LOCAL_HOST, "status"], timeout=30)
    assert rc == 0 and ("systemd: running" in out or "systemd: degraded" in out), out
