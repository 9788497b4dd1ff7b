"""`ansible localhost -m sglang_bench` from the repo root: ansible.cfg's paths carry the module
and its module_utils through AnsiballZ, as on a real target host."""
from __future__ import annotations


import json

from ansiblerun import ansible, module_result
from conftest import bench_args
from sglang_perf.plan import gate as plan

FAST = {"SGLEMU_SPEED_SCALE": "4"}


def adhoc(args, check=False):
    rc, res, _ = module_result("sglang_bench", args, check=check)
    return rc, res


def test_ansible_doc_shows_the_module():
    p = ansible("ansible-doc", "-t", "module", "sglang_bench")
    assert p.returncode == 0 and "gate" in p.stdout and "EXAMPLES" in p.stdout


def test_adhoc_pass_and_fail(emulator):
    """The module's JSON arguments: one resolved case (plan.resolve's, as the deploy plan hands
    them over)."""
    emu = emulator("nextn_3step", env=FAST)

    def args(**thresholds):
        coding = {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 96}
        cases = plan.resolve({"coding": coding}, {"p": {"coding": thresholds}}, "p")
        return json.dumps(bench_args(emu.url, cases, "p", {"warmup": 1}))

    rc, res = adhoc(args(min_tok_s=45, min_accept_len=2.8))
    assert rc == 0 and res["passed"] is True and res["accept_len"] > 2.8
    rc, res = adhoc(args(min_tok_s=100000))
    assert rc == 2 and res["failed"] is True
    assert "decode tok/s (per-request median)" in res["msg"] and "< required 100000.0" in res["msg"]
    rc, res = adhoc(args(min_tok_s=45), check=True)
    assert rc == 0 and res["ready"] is True and "benchmark not run" in res["msg"]
