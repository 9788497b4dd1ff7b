"""Helpers shared by the scenarios' testinfra tests (molecule/<scenario>/tests/test_*.py).

Molecule runs pytest in the scenario directory with ``--rootdir molecule`` (the base config), so
this file is loaded for every scenario. ``host`` is testinfra's fixture: the scenario's container
over the podman connection. Ansible runs here use Molecule's inventory and ansible.cfg (the
MOLECULE_* and ANSIBLE_CONFIG variables Molecule exports to the verifier).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
STATE_DIR = "/var/lib/sglang"
HISTORY = STATE_DIR + "/gate-history.jsonl"
LKG_DIR = STATE_DIR + "/last-known-good"
UNIT = "/etc/systemd/system/sglang.service"
URL = "http://127.0.0.1:30000"


@pytest.fixture(scope="session")
def instance():
    """The Ansible host name of the scenario's container (Molecule's platform name)."""
    return "sglang-molecule-" + os.environ["MOLECULE_SCENARIO_NAME"]


@pytest.fixture(scope="session")
def ansible_module(instance):
    """Run one module on the container through Molecule's inventory; its result dict."""

    def run(module, args, timeout=600):
        inventory = str(Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent)
        env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                   ANSIBLE_NOCOLOR="1")
        p = subprocess.run([str(BIN / "ansible"), instance, "-i", inventory, "--become", "-m", module,
                            "-a", json.dumps(args)], cwd=str(ROOT), env=env, capture_output=True,
                           text=True, timeout=timeout)
        try:
            return json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"][instance]
        except (ValueError, LookupError):
            raise AssertionError("ansible %s: rc %d\n%s\n%s" % (module, p.returncode, p.stdout[-3000:],
                                                               p.stderr[-3000:]))

    return run


@pytest.fixture(scope="session")
def rendered_unit(tmp_path_factory):
    """The unit playbooks/render.yml renders for the local inventory's host with a profile (and
    extra ansible-playbook arguments, e.g. a scenario's vars file): what the role must have
    installed (the scenarios run with the local inventory's group_vars)."""

    def render(profile, *extra):
        out = tmp_path_factory.mktemp("render-" + profile)
        env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
        p = subprocess.run([str(BIN / "ansible-playbook"), "-i", "inventories/local/hosts.yml",
                            "playbooks/render.yml", "--limit", "ct-local", "-e", "render_dir=%s" % out,
                            "-e", "sglang_profile=%s" % profile, *extra], cwd=str(ROOT), env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        return (out / "ct-local.service").read_text()

    return render


def exec_start(unit_text):
    """The ExecStart line's words of a unit file."""
    line = [ln for ln in unit_text.splitlines() if ln.startswith("ExecStart=")]
    assert len(line) == 1, unit_text
    return line[0].split("=", 1)[1].split()


def history(host):
    """The gate history on the container, one dict per line."""
    f = host.file(HISTORY)
    assert f.exists, HISTORY + " is missing"
    return [json.loads(ln) for ln in f.content_string.splitlines() if ln.strip()]


def main_pid(host):
    pid = int(host.check_output("systemctl show --property MainPID --value sglang"))
    assert pid > 0, "sglang has no main process"
    return pid


def listener_pids(host, port=30000):
    """pids holding a listening TCP socket on ``port``. ss -p reads /proc/PID/fd, which root in a
    container (no CAP_SYS_PTRACE) may only do for its own processes: ask as root and as sglang."""
    pids = set()
    for prefix in ("", "runuser -u sglang -- "):
        out = host.check_output("%sss -Hltnp 'sport = :%d'" % (prefix, port))
        pids |= {int(part.split("=", 1)[1]) for part in out.replace(",", " ").replace(")", " ").split()
                 if part.startswith("pid=")}
    return pids


def assert_service_healthy(host, ready="/health_generate"):
    """Active, enabled, running as the service user, listening on the port, ``ready`` 200 (SGLang's
    /health_generate; vLLM's is /health)."""
    svc = host.service("sglang")
    assert svc.is_running and svc.is_enabled
    pid = main_pid(host)
    assert host.check_output("ps -o user= -p %d" % pid) == "sglang"
    assert pid in listener_pids(host), "port 30000 is not held by the service's main process %d" % pid
    code = host.check_output("curl -s -o /dev/null -w '%%{http_code}' --max-time 60 %s%s" % (URL, ready))
    assert code == "200"
    return pid
