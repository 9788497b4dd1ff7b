"""`ansible localhost -m sglang_bench` from the repo root: ansible.cfg's paths carry the module
and its module_utils through AnsiballZ, as on a real target host."""
from __future__ import annotations


from ansiblerun import ansible, module_result

FAST = {"SGLEMU_SPEED_SCALE": "4"}


def adhoc(args, check=False):
    rc, res, _ = module_result("sglang_bench", args, check=check)
    return rc, res


def test_ansible_doc_shows_the_module():
    p = ansible("ansible-doc", "-t", "module", "sglang_bench")
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
