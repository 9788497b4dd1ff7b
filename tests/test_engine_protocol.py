"""The engine against scripted servers on loopback: a non-SGLang OpenAI server, broken streams,
timeouts. Real HTTP; the emulator tests cover SGLang's own behaviour."""
from __future__ import annotations

import time

import pytest

from conftest import free_port
from fakeserver import FakeServer, fixture_of, models, openai_stream, options, sse
from sglang_perf.measure import engine
from sglang_perf.judge import verdict
from sglang_perf.measure.client import MeasureError


fake = pytest.fixture(fixture_of(FakeServer), name="fake")
opts = options


def test_plain_openai_server_has_no_accept_length_and_says_why(fake):
    s = fake({("GET", "/v1/models"): models("plain-model"),
              ("POST", "/v1/chat/completions"): lambda b: (200, openai_stream(16, 2))})
    r = engine.run(opts(s.url), judge=verdict.judge_case)
    assert r["accept_len"] is None and r["server"]["kind"] == "unknown"
    assert any("not an SGLang server" in n for n in r["notes"])
    assert r["passed"] and r["errors"] == 0 and r["decode_tok_s"]["n"] == 3
    r = engine.run(opts(s.url, min_accept_len=2.8), judge=verdict.judge_case)
    assert not r["passed"]
    assert "accept length could not be measured" in verdict.case_failure_message(r)


def test_request_carries_ignore_eos_spec_details_and_usage_stats(fake):
    s = fake({("GET", "/v1/models"): models("m"),
              ("POST", "/v1/chat/completions"): lambda b: (200, openai_stream(16, 4))})
    engine.run(opts(s.url, requests=1, warmup=0, api_key="sekret"))
    method, path, headers, body = s.seen[-1]
    assert body["ignore_eos"] is True and body["return_spec_tokens_details"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["max_tokens"] == 16 and body["model"] == "m"
    assert headers["Authorization"] == "Bearer sekret"


def test_short_outputs_are_reported_and_excluded(fake):
    s = fake({("GET", "/v1/models"): models("m"),
              ("POST", "/v1/chat/completions"): lambda b: (200, openai_stream(10, 2))})
    # 6: a median's 95% interval
    r = engine.run(opts(s.url, min_tok_s=1, requests=6), judge=verdict.judge_case)
    assert r["excluded_short"] == 6 and r["decode_tok_s"]["n"] == 0
    assert any("stopped before max_tokens" in n for n in r["notes"])
    assert "could not be measured" in verdict.case_failure_message(r)


def test_unreachable_url_is_a_measure_error():
    with pytest.raises(MeasureError, match="cannot connect to 127.0.0.1:%d" % 9 + "|cannot connect"):
        engine.run(opts("http://127.0.0.1:%d" % free_port()))


def test_server_that_is_not_openai_compatible(fake):
    s = fake({})
    with pytest.raises(MeasureError, match="HTTP 404 without a model list"):
        engine.run(opts(s.url))


def test_unknown_model_lists_what_is_served(fake):
    s = fake({("GET", "/v1/models"): models("a", "b")})
    with pytest.raises(MeasureError, match="'c' is not served .* offers: a, b"):
        engine.run(opts(s.url, model="c"))


def test_stream_without_done_is_truncated_and_counted(fake):
    s = fake({("GET", "/v1/models"): models("m"),
              ("POST", "/v1/chat/completions"): lambda b: (200, openai_stream(16, 2)[:4])})
    with pytest.raises(MeasureError, match=r"all 3 measured requests failed \(3 x truncated\)"):
        engine.run(opts(s.url))


def test_error_event_mid_stream(fake):
    s = fake({("GET", "/v1/models"): models("m"),
              ("POST", "/v1/chat/completions"): lambda b: (
                  200, openai_stream(16, 2)[:3] + [sse({"error": {"message": "boom"}})])})
    with pytest.raises(MeasureError, match="server reported an error mid-stream: boom"):
        engine.run(opts(s.url))


def test_first_token_timeout(fake):
    s = fake({("GET", "/v1/models"): models("m"),
              ("POST", "/v1/chat/completions"): lambda b: (200, [(3.0, b"")] + openai_stream())})
    t0 = time.monotonic()
    with pytest.raises(MeasureError, match=r"no token within 0.5s \(first-token timeout\)"):
        engine.run(opts(s.url, first_token_timeout=0.5, requests=1, warmup=0))
    assert time.monotonic() - t0 < 3.0


def test_stall_between_tokens(fake):
    chunks = openai_stream(16, 2)
    s = fake({("GET", "/v1/models"): models("m"),
              ("POST", "/v1/chat/completions"): lambda b: (200, chunks[:3] + [(3.0, b"")]
                                                           + chunks[3:])})
    t0 = time.monotonic()
    with pytest.raises(MeasureError, match=r"stalled: nothing for 0.5s"):
        engine.run(opts(s.url, stall_timeout=0.5, requests=1, warmup=0))
    assert time.monotonic() - t0 < 3.0


def test_run_timeout_aborts_open_streams_and_counts_them(fake):
    slow = openai_stream(16, 1, delay=0.2)  # 3.2 s per request
    s = fake({("GET", "/v1/models"): models("m"),
              ("POST", "/v1/chat/completions"): lambda b: (200, slow)})
    t0 = time.monotonic()
    with pytest.raises(MeasureError, match="aborted"):
        engine.run(opts(s.url, run_timeout=1.0, requests=2, warmup=0, concurrency=2))
    assert time.monotonic() - t0 < 3.0


def test_some_errors_fail_the_gate_by_default_but_can_be_tolerated(fake):
    calls = {"n": 0}

    def flaky(body):
        calls["n"] += 1
        if calls["n"] % 2 == 0:
            return 500, [b'{"object":"error","message":"Internal server error"}']
        return 200, openai_stream(16, 4)

    s = fake({("GET", "/v1/models"): models("m"), ("POST", "/v1/chat/completions"): flaky})
    r = engine.run(opts(s.url, requests=4, warmup=0), judge=verdict.judge_case)
    assert r["errors"] == 2 and r["error_kinds"] == {"http_500": 2} and not r["passed"]
    assert "HTTP 500 from POST /v1/chat/completions" in r["error_details"][0]["message"]
    calls["n"] = 0
    r = engine.run(opts(s.url, requests=4, warmup=0, max_errors=2), judge=verdict.judge_case)
    assert r["passed"]
