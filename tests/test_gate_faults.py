"""Fault matrix for the gate: `ansible localhost -m sglang_bench` (a real Ansible run of the gate
module) against the emulator's fault switches and real process faults. Each must end in a failed
gate whose message says what happened, within its configured timeout: never a pass, a
traceback or a hang. The message names the fault, so a fault reported as a timeout fails on its
words; the time bound (LIMIT) only guards against a hang (a tighter speed bound belongs in a
benchmark, not a test)."""
from __future__ import annotations

import json
import time

import pytest

from ansiblerun import ansible, module_result
from sglang_perf.plan import gate as plan
from conftest import bench_args, free_port

FAST = {"SGLEMU_SPEED_SCALE": "4"}
RUN_TIMEOUT = 40  # the gate's whole run, warmup included
# one resolved coding case (the deploy plan's gate.cases), as the gate task hands it over
CODING = {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 96}
THRESHOLDS = {"p": {"coding": {"min_tok_s": 45, "min_accept_len": 2.8}}}
RESOLVED = plan.resolve({"coding": CODING}, THRESHOLDS, "p")
OPTIONS = {"warmup": 1, "connect_timeout": 2, "first_token_timeout": 5, "stall_timeout": 2,
           "run_timeout": RUN_TIMEOUT}
# ansible's own start-up took up to 50 s of a run on a loaded 2-core CI machine
ANSIBLE_START_UP = 60
LIMIT = RUN_TIMEOUT + ANSIBLE_START_UP  # the most a failed gate may take


def gate(url, extra=None):
    t0 = time.monotonic()
    args = bench_args(url, RESOLVED, "p", OPTIONS, **(extra or {}))
    rc, res, p = module_result("sglang_bench", json.dumps(args), timeout=3 * LIMIT)
    took = time.monotonic() - t0
    assert "Traceback" not in p.stdout + p.stderr
    return rc, res, took


# (case, emulator profile, emulator env, extra module args, words in msg)
CASES = [
    ("http 500 on some requests", "nextn_3step", {"SGLEMU_FAULT_HTTP500_EVERY": "2"}, "",
     ["request(s) failed (allowed 0)", "x http_500"]),
    ("truncated streams", "nextn_3step", {"SGLEMU_FAULT_TRUNCATE_AFTER_TOKENS": "20"}, "",
     ["all 6 measured requests failed (6 x truncated)"]),
    ("a stream that stalls", "nextn_3step", {"SGLEMU_FAULT_STALL_AFTER_TOKENS": "10",
                                             "SGLEMU_FAULT_STALL_SECONDS": "8"}, "",
     ["stream stalled: nothing for 2.0s (stall timeout)"]),
    ("server killed mid-benchmark", "nextn_3step", {"SGLEMU_FAULT_CRASH_AFTER_REQUESTS": "2"}, "",
     ["could not be measured: all 6 measured requests failed"]),
    ("wrong model name", "nextn_3step", {}, {"model": "Qwen2-7B"},
     ["model 'Qwen2-7B' is not served", "offers: Qwen3.6-27B"]),
    ("wrong api key", ["--api-key", "the-right-key-0123456789"], {}, {"api_key": "the-wrong-key-012345"},
     ["authentication failed", "the API key is wrong"]),
    ("missing api key", ["--api-key", "the-right-key-0123456789"], {}, "",
     ["authentication failed", "the API key is missing"]),
    ("no speculative counters", "no_spec", {}, "",
     ["accept length could not be measured (required >= 2.8)"]),
    ("slow server", "nextn_1step", {"SGLEMU_SPEED_SCALE": "1"}, "",
     ["decode tok/s (per-request median)", "< required 45.0", "accept length 1.", "< required 2.80"]),
]


@pytest.mark.parametrize("case, profile, env, extra, words", CASES, ids=[c[0] for c in CASES])
def test_fault_fails_the_gate_with_a_reason(emulator, case, profile, env, extra, words):
    if isinstance(profile, list):  # the 3-step profile plus extra server flags
        from conftest import PROFILE_ARGS
        emu = emulator(PROFILE_ARGS["nextn_3step"] + profile, env=dict(FAST, **env))
    else:
        emu = emulator(profile, env=dict(FAST, **env))
    rc, res, took = gate(emu.url, extra)
    assert rc != 0 and res["failed"] is True and res.get("passed") is not True
    for w in words:
        assert w in res["msg"], res["msg"]
    assert took < LIMIT, "took %.1f s" % took
    assert "the-right-key" not in json.dumps(res)


def test_server_not_listening():
    rc, res, took = gate("http://127.0.0.1:%d" % free_port())
    assert rc != 0 and "could not measure" in res["msg"] and "cannot connect" in res["msg"]
    assert took < LIMIT, "took %.1f s" % took


def test_port_open_but_503_fails_the_readiness_wait_in_time(emulator):
    """The sglang role's readiness wait (tasks_from ready.yml) against a server whose port is open
    but whose /health_generate answers 503 (warming up) past sglang_ready_timeout."""
    emu = emulator("nextn_3step", env=dict(FAST, SGLEMU_WARMUP_SECONDS="300"), wait=False)
    t0 = time.monotonic()
    p = ansible("ansible-playbook", "tests/playbooks/ready.yml", "-e", "sglang_port=%d" % emu.port,
                "-e", "sglang_ready_timeout=10", timeout=120)
    took = time.monotonic() - t0
    out = " ".join(p.stdout.split())
    assert p.returncode != 0 and "Traceback" not in out
    assert "was not ready within 10 s (sglang_ready_timeout): last status seen: " \
           "/health_generate HTTP 503" in out, out[-2000:]
    # ended by the 10 s timeout, not the default 900 s: a bound far from both, with ansible's own
    # start-up (ANSIBLE_START_UP) in it
    assert took < 110, took
