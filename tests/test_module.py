"""The sglang_bench module in-process, with ansible-core 2.19's module-args patching and patched
exit_json/fail_json, against real emulator processes on loopback."""
from __future__ import annotations

import json

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from conftest import free_port
from plugins.modules import sglang_bench


class Exit(Exception):
    def __init__(self, kind, result):
        Exception.__init__(self, kind)
        self.kind, self.result = kind, result


@pytest.fixture(autouse=True)
def patched(monkeypatch):
    def exit_json(self, **kw):
        raise Exit("exit", kw)

    def fail_json(self, msg, **kw):
        kw["msg"] = msg
        raise Exit("fail", kw)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def call(args, check=False):
    if check:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises(Exit) as e:
            sglang_bench.main()
    return e.value.kind, e.value.result


FAST = {"SGLEMU_SPEED_SCALE": "4"}
SMALL = {"requests": 6, "warmup": 2, "max_tokens": 128}  # 6: a median's 95% interval


def test_passes_and_returns_every_figure(emulator):
    emu = emulator("nextn_3step", env=FAST)
    kind, r = call(dict(SMALL, url=emu.url, min_tok_s=45, min_accept_len=2.8))
    assert kind == "exit" and r["passed"] is True and r["changed"] is False
    for key in ("decode_tok_s", "accept_len", "aggregate_tok_s", "ttft_s", "itl_ms", "errors",
                "per_request", "accept_len_by_prompt", "server", "failures"):
        assert key in r
    assert r["msg"].startswith("passed: decode ")
    assert r["server"]["speculative_algorithm"] == "EAGLE"


def test_fails_with_measured_vs_required_and_the_full_result(emulator):
    emu = emulator("nextn_1step", env=FAST)
    kind, r = call(dict(SMALL, url=emu.url, min_tok_s=1000, min_accept_len=2.8,
                        min_aggregate_tok_s=5000))
    assert kind == "fail" and r["passed"] is False
    assert r["msg"].startswith("gate failed: decode tok/s (per-request median) ")
    assert "< required 1000.0" in r["msg"]
    assert "accept length 1." in r["msg"] and "< required 2.80" in r["msg"]
    assert "aggregate tok/s at C=1" in r["msg"] and "< required 5000.0" in r["msg"]
    # decided on the first 6: 2 warmup + 6 measured
    assert r["decode_tok_s"]["median"] > 0 and len(r["per_request"]) == 8
    assert r["verdict"] == "fail" and r["sequential"]["looks"] == 0  # a fixed sample: judged once, at its end


def test_check_mode_probes_and_does_not_benchmark(emulator):
    emu = emulator("nextn_3step", env=FAST)
    kind, r = call(dict(SMALL, url=emu.url, min_tok_s=45), check=True)
    assert kind == "exit" and r["ready"] is True and r["changed"] is False
    assert "benchmark not run" in r["msg"] and "decode_tok_s" not in r
    generated = [q for q in emu.stats()["requests"] if not q.get("health")]
    assert generated == []


def test_check_mode_reports_a_server_that_is_not_up():
    kind, r = call({"url": "http://127.0.0.1:%d" % free_port()}, check=True)
    assert kind == "exit" and r["ready"] is False and "cannot connect" in r["msg"]


@pytest.mark.parametrize("args, words", [
    ({"min_tok_s": -5}, "invalid option min_tok_s: must be 0.0 or more, got -5"),
    ({"concurrency": 0}, "invalid option concurrency: must be 1 or more, got 0"),
    ({"url": "localhost:30000"}, "invalid option url: expected http://HOST[:PORT]"),
])
def test_bad_options_are_named(args, words):
    kind, r = call(dict({"url": "http://127.0.0.1:1"}, **args))
    assert kind == "fail" and words in r["msg"]


def test_wrong_key_and_secret_never_in_the_result(emulator):
    emu = emulator("nextn_3step", env=FAST, extra=["--api-key", "right-key-123"])
    kind, r = call(dict(SMALL, url=emu.url, api_key="wrong-key-456"))
    assert kind == "fail"
    assert "authentication failed" in r["msg"] and "key is wrong" in r["msg"]
    kind, r = call(dict(SMALL, url=emu.url, api_key="right-key-123", min_tok_s=45))
    assert kind == "exit" and r["passed"]
    assert "right-key-123" not in json.dumps(r)
    assert sglang_bench.ARGUMENT_SPEC["api_key"]["no_log"] is True


def test_documentation_matches_the_argument_spec_and_engine_defaults():
    import yaml
    from sglang_perf import engine as plain_engine
    doc = yaml.safe_load(sglang_bench.DOCUMENTATION)["options"]
    spec = sglang_bench.ARGUMENT_SPEC
    assert set(doc) == set(spec)
    for name, opt in spec.items():
        assert doc[name]["type"] == opt["type"], name
        assert doc[name].get("default") == opt.get("default"), name
        assert doc[name].get("choices") == opt.get("choices"), name
        assert bool(doc[name].get("required")) == bool(opt.get("required")), name
        if name not in sglang_bench.MODULE_ONLY + sglang_bench.PLAN_ONLY:
            assert plain_engine.DEFAULTS[name] == opt.get("default"), name
    assert set(spec) - set(sglang_bench.MODULE_ONLY + sglang_bench.PLAN_ONLY) == set(plain_engine.DEFAULTS)
