"""The engine against the emulator for each profile at C=1 and C=4: measured decode tok/s and
accept length must be within 2% of the emulator's own exact per-request counters (matched by
request id), which the engine never reads (the other endpoints' decode: 7%, see there)."""
from __future__ import annotations

import pytest

from sglang_perf.measure import engine
from sglang_perf.judge import verdict
from sglang_perf.measure.stats import percentile

FAST = {"SGLEMU_SPEED_SCALE": "4"}


def truth(stats, result, prefix=""):
    """The emulator's own figures (``stats``: its /_emulator/stats) of the requests the engine
    measured, matched by request id (vLLM names a chat request ``chatcmpl-<request_id>``)."""
    server = {r["rid"]: r for r in stats["requests"] if r.get("rid")}
    mine = [r for r in result["per_request"] if r["phase"] == "measure" and r["decode_tok_s"]]
    matched = [server[prefix + r["rid"]] for r in mine]
    assert len(matched) == result["decode_tok_s"]["n"] > 0
    tokens = sum(s["completion_tokens"] for s in matched)
    verify = sum(s["verify_ct"] for s in matched)
    return {"median": percentile([s["decode_tok_s"] for s in matched], 50),
            "accept_len": tokens / verify if verify else None, "tokens": tokens}


@pytest.mark.parametrize("profile, al_range", [
    ("no_spec", None), ("nextn_1step", (1.6, 1.9)), ("nextn_3step", (2.9, 3.5))])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_engine_matches_the_emulators_counters(emulator, profile, al_range, concurrency):
    emu = emulator(profile, env=FAST)
    r = engine.run({"url": emu.url, "concurrency": concurrency, "requests": 2 * concurrency,
                    "warmup": 2, "max_tokens": 192}, judge=verdict.judge_case)
    t = truth(emu.stats(), r)
    assert r["errors"] == 0 and r["passed"]
    assert r["decode_tok_s"]["median"] == pytest.approx(t["median"], rel=0.02)
    if al_range is None:
        assert r["accept_len"] is None and t["accept_len"] is None
        assert "speculative decoding is off" in " ".join(r["notes"])
    else:
        assert r["accept_len"] == pytest.approx(t["accept_len"], rel=0.02)
        assert al_range[0] <= r["accept_len"] <= al_range[1]
    assert r["completion_tokens"] == t["tokens"] == 192 * 2 * concurrency


@pytest.mark.parametrize("api", ["native", "completions"])
def test_other_endpoints_measure_the_same(emulator, api):
    emu = emulator("nextn_3step", env=FAST)
    r = engine.run({"url": emu.url, "api": api, "concurrency": 2, "requests": 4, "warmup": 1,
                    "max_tokens": 160})
    t = truth(emu.stats(), r)
    # per-request decode: 2% when the machine is idle; under the full suite's load a native-API
    # median of 4 came out 5.1% above the emulator's (a late first chunk shortens the client's
    # window; CI, abab306's successor). Accept length is a count: exact up to rounding.
    assert r["decode_tok_s"]["median"] == pytest.approx(t["median"], rel=0.07)
    assert r["accept_len"] == pytest.approx(t["accept_len"], rel=0.02)


def test_metrics_window_cross_checks_the_client(emulator):
    emu = emulator("nextn_3step", env=FAST, extra=["--enable-metrics"])
    r = engine.run({"url": emu.url, "concurrency": 2, "requests": 4, "warmup": 2,
                    "max_tokens": 128, "metrics": "always"}, judge=verdict.judge_case)
    m = r["metrics"]
    assert m["matches_client"] is True and m["generation_tokens"] == r["completion_tokens"]
    assert m["accept_len"] == pytest.approx(r["accept_len"], rel=0.001)
    assert r["passed"]


def test_without_metrics_always_fails_and_auto_notes_it(emulator):
    emu = emulator("nextn_3step", env=FAST)
    base = {"url": emu.url, "requests": 1, "warmup": 0, "max_tokens": 64}
    r = engine.run(dict(base, metrics="always"), judge=verdict.judge_case)
    assert not r["passed"] and "exposes no /metrics" in verdict.case_failure_message(r)
    r = engine.run(base, judge=verdict.judge_case)
    assert r["passed"] and any("--enable-metrics" in n for n in r["notes"])


def test_warmup_requests_are_discarded(emulator):
    # The emulator's first two requests decode at 0.4x (JIT/CUDA-graph warmup).
    emu = emulator("nextn_3step", env=FAST)
    cold = engine.run({"url": emu.url, "requests": 4, "warmup": 0, "max_tokens": 128})
    assert cold["decode_tok_s"]["min"] < 0.6 * cold["decode_tok_s"]["max"]
    emu = emulator("nextn_3step", env=FAST)
    warm = engine.run({"url": emu.url, "requests": 4, "warmup": 2, "max_tokens": 128})
    # warmup requests run at 0.4x: 0.7 leaves room for a loaded machine's jitter (0.85 once
    # failed at 0.849 in the parallel suite) and still tells a 0.4x request apart
    assert warm["decode_tok_s"]["min"] > 0.7 * warm["decode_tok_s"]["max"]
    server_al = warm["server"]  # cumulative figure is reported, labelled, and not used
    assert "cumulative_accept_len" in server_al


def test_long_context_prompts_hit_the_servers_count_and_lower_acceptance(emulator):
    emu = emulator("nextn_3step", env=FAST)
    short = engine.run({"url": emu.url, "requests": 3, "warmup": 0, "max_tokens": 128})
    r = engine.run({"url": emu.url, "requests": 2, "warmup": 2, "max_tokens": 128,
                    "prompts": "long_context", "prompt_tokens": 16384})
    # the warmup learned the server's characters per token: the prompts land on the target
    assert r["chars_per_token"] == pytest.approx(4.0, rel=0.02)  # the emulator's SGLEMU_CHARS_PER_TOKEN
    assert r["prompt_tokens"]["target"] == 16384
    assert abs(r["prompt_tokens"]["median"] - 16384) < 0.02 * 16384
    assert r["accept_len"] < short["accept_len"]
    truth = [q for q in emu.stats()["requests"] if not q["health"]]
    measured = [q for q in truth if q["prompt_tokens"] > 10000]
    assert len(measured) == 2 and len({q["prompt_tokens"] for q in truth}) >= 4


def test_queueing_beyond_max_running_requests_shows_in_ttft(emulator):
    emu = emulator(["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                    "--max-running-requests", "2"], env=FAST)
    r = engine.run({"url": emu.url, "requests": 4, "concurrency": 4, "warmup": 0,
                    "max_tokens": 96})
    ttfts = sorted(q["ttft_s"] for q in r["per_request"])
    # two start at once, two wait for a whole generation
    assert ttfts[2] > ttfts[1] + 0.5 * min(q["e2e_s"] for q in r["per_request"])


@pytest.fixture
def vllm_emulator():
    """Factory: a vLLM emulator (python -m emulator.vllm serve ...) of a defaults profile,
    with the argv the role renders."""
    import tempfile


    from bench.launch import EmulatorProcess
    from conftest import role_defaults
    from sglang_perf.plan import profile as flt

    defaults = role_defaults()
    started = []

    def start(profile, env=None):
        log = tempfile.TemporaryFile()
        argv = flt.sglang_argv(defaults["sglang_profiles"][profile], defaults["sglang_vllm_version"],
                               {"model_path": "/models/Qwen3.6-27B", "served_model_name": "Qwen3.6-27B"})
        emu = EmulatorProcess(argv, log, env=dict({"SGLEMU_SEED": "0"}, **(env or {})),
                              module="emulator.vllm")
        started.append((emu, log))
        emu.wait_ready("/health", 60)
        return emu

    yield start
    for emu, log in started:
        emu.stop()
        log.close()


def vllm_stats(emu):
    import json
    import urllib.request
    with urllib.request.urlopen(emu.url + "/_emulator/stats", timeout=10) as r:
        return json.loads(r.read())


@pytest.mark.parametrize("profile, al_range", [
    ("vllm_no_spec", None), ("vllm_mtp_1", (1.6, 1.95)), ("vllm_mtp_3", (2.4, 2.95))])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_engine_matches_the_vllm_emulators_counters(vllm_emulator, profile, al_range, concurrency):
    """The same 2% as for SGLang, against vLLM 0.33's shapes: decode tok/s and the accept length
    (completion tokens per verify step, from metrics.speculative_decoding) per request."""
    emu = vllm_emulator(profile, env=FAST)
    r = engine.run({"url": emu.url, "concurrency": concurrency, "requests": 2 * concurrency,
                    "warmup": 2, "max_tokens": 192}, judge=verdict.judge_case)
    t = truth(vllm_stats(emu), r, prefix="chatcmpl-")
    assert r["errors"] == 0 and r["passed"] and r["server"]["kind"] == "vllm"
    assert r["decode_tok_s"]["median"] == pytest.approx(t["median"], rel=0.02)
    if al_range is None:
        assert r["accept_len"] is None and t["accept_len"] is None
    else:
        assert r["accept_len"] == pytest.approx(t["accept_len"], rel=0.02)
        assert al_range[0] <= r["accept_len"] <= al_range[1]
        assert r["engine_accept_len"] is not None
    assert r["completion_tokens"] == t["tokens"] == 192 * 2 * concurrency
