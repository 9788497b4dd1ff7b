"""The embedded default host: `scripts/local-host.sh up` gives a podman container with systemd as
PID 1 that Ansible reaches through inventories/local (plugins/connection/podman_nsenter.py).

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


# -- plugins/connection/podman_nsenter.py: how every container test reaches its host -------------

@pytest.mark.timeout(300)
def test_nsenter_connection_runs_inside_the_container(local_host, tmp_path):
    # the container's namespaces and environment, not the controller's
    env = dict(_env(), SGLANG_DEPLOY_CONTROLLER_ONLY="leak")
    p = subprocess.run([ANSIBLE, "-i", "inventories/local", "ct-local", "-m", "ansible.builtin.shell",
                        "-a", "hostname; env; readlink /proc/1/exe; pwd"], cwd=str(ROOT), env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert "ct-local" in out.splitlines()[1]  # the container's UTS namespace
    assert "container=podman" in out and "SGLANG_DEPLOY_CONTROLLER_ONLY" not in out
    assert "/systemd" in out  # PID 1 is the container's systemd (its PID namespace)
    # pipelined: no AnsiballZ file is written to the host's temporary directory
    p = subprocess.run([ANSIBLE, "-i", "inventories/local", "ct-local", "-m", "ansible.builtin.ping",
                        "-vvv"], cwd=str(ROOT), env=_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "EXEC ['/bin/sh', '-c', '/usr/bin/python3 && sleep 0']" in p.stdout, p.stdout[-2000:]
    assert "PUT " not in p.stdout and "podman exec" not in p.stdout
    # files go through a shell inside the container: a symlink resolves as the container sees it
    src = tmp_path / "payload"
    src.write_bytes(bytes(range(256)) * 64)
    rc, res = _adhoc("-m", "ansible.builtin.shell", "-a",
                     "rm -rf /tmp/nsenter-t && mkdir /tmp/nsenter-t && ln -s /tmp/nsenter-t /tmp/nsenter-l")
    assert rc == 0, res
    rc, res = _adhoc("-m", "ansible.builtin.copy", "-a",
                     "src=%s dest=/tmp/nsenter-l/payload mode=0600" % src)
    assert rc == 0 and res["changed"], res
    rc, res = _adhoc("-m", "ansible.builtin.stat", "-a",
                     "path=/tmp/nsenter-t/payload checksum_algorithm=sha1")
    assert res["stat"]["exists"] and res["stat"]["mode"] == "0600", res
    back = tmp_path / "back"
    rc, res = _adhoc("-m", "ansible.builtin.fetch", "-a",
                     "src=/tmp/nsenter-t/payload dest=%s flat=true" % back)
    assert rc == 0, res
    assert back.read_bytes() == src.read_bytes()
    _adhoc("-m", "ansible.builtin.file", "-a", "path=/tmp/nsenter-l state=absent")
    _adhoc("-m", "ansible.builtin.file", "-a", "path=/tmp/nsenter-t state=absent")


@pytest.mark.timeout(300)
def test_nsenter_connection_names_a_container_that_is_not_there(local_host):
    env = dict(_env(), ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    p = subprocess.run([ANSIBLE, "-i", "inventories/local", "ct-local",
                        "-e", "ansible_host=sglang-no-such-ct", "-m", "ansible.builtin.ping"],
                       cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120)
    res = json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"]["ct-local"]
    assert p.returncode == 4 and res.get("unreachable"), res  # unreachable, as a stopped host is
    assert "no container sglang-no-such-ct" in res["msg"], res
    # a container that exists but does not run (created, never started: no PID 1)
    image = "localhost/sglang-deploy/debian12-systemd:latest"
    name = "sglang-nsenter-stopped"
    subprocess.run(["podman", "rm", "-f", name], env=_env(), capture_output=True)
    c = subprocess.run(["podman", "create", "--name", name, image], env=_env(), capture_output=True,
                       text=True)
    assert c.returncode == 0, c.stderr
    try:
        p = subprocess.run([ANSIBLE, "-i", "inventories/local", "ct-local", "-e", "ansible_host=" + name,
                            "-m", "ansible.builtin.ping"], cwd=str(ROOT), env=env, capture_output=True,
                           text=True, timeout=120)
        res = json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"]["ct-local"]
        assert p.returncode == 4 and res.get("unreachable"), res
        assert "container %s is not running" % name in res["msg"], res
    finally:
        subprocess.run(["podman", "rm", "-f", name], env=_env(), capture_output=True)
