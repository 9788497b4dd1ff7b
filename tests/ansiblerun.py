"""The one way the tests run Ansible's commands (ansible-playbook, ansible, ansible-doc,
ansible-lint): the venv's, from the repository root (its ansible.cfg: the roles, plugins and the
embedded default inventory), without colour. ``json_result`` runs a module ad hoc on localhost
and returns its result, through the json callback. The timeout is a hang guard, not a speed
bound: ansible-lint over the tree took 248 s, and once over 300 s, under the full suite's load on a
slow 2-core machine."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

BIN = Path(sys.executable).parent
JSON = {"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1"}


def _environment(env, json_output):
    e = dict(os.environ, ANSIBLE_NOCOLOR="1", **(JSON if json_output else {}))
    e.update(env or {})
    return e


def ansible(tool, *args, env=None, timeout=1200, cwd=ROOT, json_output=False):
    """Run ``tool ARGS``; the CompletedProcess (stdout: the json callback's with json_output)."""
    return subprocess.run([str(BIN / tool), *args], cwd=str(cwd), env=_environment(env, json_output),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def started(tool, *args, env=None, cwd=ROOT, output=None):
    """``tool ARGS`` started in a process group of its own (a test may kill the whole run, as a
    closed laptop does), its output to the file ``output``; the Popen."""
    return subprocess.Popen([str(BIN / tool), *args], cwd=str(cwd), env=_environment(env, False),
                            stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def module_result(module, args, check=False, timeout=180, env=None):
    """``ansible localhost -m MODULE -a ARGS [--check]``: (return code, the module's result)."""
    p = ansible("ansible", "localhost", "-m", module, "-a", args, *(["--check"] if check else []),
                env=env, timeout=timeout, json_output=True)
    return p.returncode, json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"], p
