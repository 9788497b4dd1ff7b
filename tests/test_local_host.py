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

import pytest

from ansiblerun import ansible
from conftest import DEFAULT_HOST, ROOT

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


def _ansible(*args, env=None):
    """`ansible -i inventories/local ct-local ARGS` from the repo root, its output as text."""
    return ansible("ansible", "-i", "inventories/local", "ct-local", *args, env=dict(_env(), **(env or {})),
                   timeout=120)


def _adhoc(*args, env=None):
    """`ansible -i inventories/local ct-local ARGS` from the repo root: (exit code, ct-local's result)."""
    p = _ansible(*args, env=dict(env or {}, ANSIBLE_STDOUT_CALLBACK="json",
                                 ANSIBLE_LOAD_CALLBACK_PLUGINS="1"))
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
    rc, res = _adhoc("-m", "ansible.builtin.shell", "-a", "hostname; readlink /proc/1/exe; env",
                     env={"SGLANG_DEPLOY_CONTROLLER_ONLY": "leak"})
    assert rc == 0, res
    hostname, init, *env = res["stdout_lines"]
    assert hostname == "ct-local"  # the container's UTS namespace
    assert init.endswith("/systemd")  # PID 1 is the container's systemd (its PID namespace)
    assert "container=podman" in env and not any(v.startswith("SGLANG_DEPLOY_CONTROLLER_ONLY") for v in env)
    # pipelined: the module goes to the interpreter's stdin, no AnsiballZ file is put on the host
    p = _ansible("-m", "ansible.builtin.ping", "-vvv")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "EXEC ['/bin/sh', '-c', '/usr/bin/python3 && sleep 0']" in p.stdout, p.stdout[-2000:]
    assert "PUT " not in p.stdout, p.stdout[-2000:]
    # its zipped Python compiled once, into root's own cache (tests/test_nsenter_compile.py)
    rc, res = _adhoc("-m", "ansible.builtin.shell", "-a",
                     "stat -c '%U %a' /tmp/ansible-nsenter-pyc-0; ls /tmp/ansible-nsenter-pyc-0 | wc -l")
    assert rc == 0 and res["stdout_lines"][0] == "root 700" and int(res["stdout_lines"][1]) > 10, res
    # files go through a shell inside the container: a symlink resolves as the container sees it
    src = tmp_path / "payload"
    src.write_bytes(bytes(range(256)) * 64)
    rc, res = _adhoc("-m", "ansible.builtin.shell", "-a",
                     "rm -rf /tmp/nsenter-t && mkdir /tmp/nsenter-t && ln -s /tmp/nsenter-t /tmp/nsenter-l")
    assert rc == 0, res
    rc, res = _adhoc("-m", "ansible.builtin.copy", "-a",
                     "src=%s dest=/tmp/nsenter-l/payload mode=0600" % src)
    assert rc == 0 and res["changed"], res
    rc, res = _adhoc("-m", "ansible.builtin.stat", "-a", "path=/tmp/nsenter-t/payload")
    assert res["stat"]["exists"] and res["stat"]["mode"] == "0600", res
    back = tmp_path / "back"
    rc, res = _adhoc("-m", "ansible.builtin.fetch", "-a",
                     "src=/tmp/nsenter-t/payload dest=%s flat=true" % back)
    assert rc == 0, res
    assert back.read_bytes() == src.read_bytes()
    _adhoc("-m", "ansible.builtin.shell", "-a", "rm -rf /tmp/nsenter-l /tmp/nsenter-t")


@pytest.mark.timeout(300)
def test_nsenter_connection_names_a_container_that_is_not_there(local_host):
    # unreachable (ansible exits 4), as a stopped host is, with the reason
    rc, res = _adhoc("-e", "ansible_host=sglang-no-such-ct", "-m", "ansible.builtin.ping")
    assert rc == 4 and res.get("unreachable"), res
    assert "no container sglang-no-such-ct" in res["msg"], res
    # a container that exists but does not run (created from the local host's image, never started)
    name = "sglang-nsenter-stopped"
    image = subprocess.run(["podman", "inspect", "--format", "{{.ImageName}}",
                            os.environ.get("LOCAL_HOST_NAME", DEFAULT_HOST)], env=_env(),
                           capture_output=True, text=True).stdout.strip()
    subprocess.run(["podman", "rm", "-f", name], env=_env(), capture_output=True)
    c = subprocess.run(["podman", "create", "--name", name, image], env=_env(), capture_output=True,
                       text=True)
    assert c.returncode == 0, c.stderr
    try:
        rc, res = _adhoc("-e", "ansible_host=" + name, "-m", "ansible.builtin.ping")
        assert rc == 4 and res.get("unreachable"), res
        assert "container %s is not running" % name in res["msg"], res
    finally:
        subprocess.run(["podman", "rm", "-f", name], env=_env(), capture_output=True)
