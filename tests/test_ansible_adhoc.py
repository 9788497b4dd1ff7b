"""`ansible localhost -m sglang_bench` from the repo root: ansible.cfg's paths carry the module
and its module_utils through AnsiballZ, as on a real target host."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

ANSIBLE = str(Path(sys.executable).parent / "ansible")
FAST = {"SGLEMU_SPEED_SCALE": "4"}


def adhoc(args, check=False):
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
               ANSIBLE_NOCOLOR="1")
    cmd = [ANSIBLE, "localhost", "-m", "sglang_bench", "-a", args] + (["--check"] if check else [])
    p = subprocess.run(cmd, cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=180)
    res = json.loads(p.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return p.returncode, res


def test_ansible_doc_shows_the_module():
    p = subprocess.run([str(Path(sys.executable).parent / "ansible-doc"), "-t", "module",
                        "sglang_bench"], cwd=str(ROOT), capture_output=True, text=True)
    assert p.returncode == 0 and "min_accept_len" in p.stdout and "EXAMPLES" in p.stdout


def test_adhoc_pass_and_fail(emulator):
    emu = emulator("nextn_3step", env=FAST)
    base = "url=%s requests=6 warmup=1 max_tokens=96" % emu.url
    rc, res = adhoc(base + " min_tok_s=45 min_accept_len=2.8")
    assert rc == 0 and res["passed"] is True and res["accept_len"] > 2.8
    rc, res = adhoc(base + " min_tok_s=100000")
    assert rc == 2 and res["failed"] is True
    assert "decode tok/s (per-request median)" in res["msg"] and "< required 100000.0" in res["msg"]
    rc, res = adhoc(base + " min_tok_s=45", check=True)
    assert rc == 0 and res["ready"] is True and "benchmark not run" in res["msg"]
