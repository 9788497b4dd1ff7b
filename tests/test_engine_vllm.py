"""The one engine against a vLLM 0.33 server (tests/fakeserver.py FakeVllm: vLLM's stream, model
card, /metrics shapes from its source): discovery, the request body, the spec figures in the
convention both engines share, the /metrics window, the capacity verdict, the probe; and an SGLang
server still measured as before. Real HTTP on 127.0.0.1."""
from __future__ import annotations

import json

import pytest

from fakeserver import (FakeServer, FakeVllm, fixture_of, models, openai_stream, options, vllm_spec_metrics,
                        vllm_steps)
from sglang_perf.measure import config, engine, metrics
from sglang_perf import engines
from sglang_perf.plan import gate as plan
from sglang_perf.judge import verdict
from sglang_perf.measure.client import MeasureError

ACCEPTED, K = (2, 3, 1, 3), 3


vllm = pytest.fixture(fixture_of(FakeVllm), name="vllm")


def opts(url, **kw):
    return options(url, **dict({"max_tokens": 64}, **kw))


def expected(max_tokens, accepted=ACCEPTED, k=K):
    """The figures of one request, by hand from the steps the fake runs."""
    steps, verify = vllm_steps(max_tokens, list(accepted))
    hist = vllm_spec_metrics(verify, k)["acceptance_histogram"]
    return {"tokens": sum(steps), "verify": len(verify), "accepted": sum(verify), "hist": hist,
            "by_position": [sum(hist[i:]) / len(verify) for i in range(1, k + 1)]}


# --------------------------------------------------------------------------- discovery ----
def test_discover_recognises_vllm_and_reads_what_it_exposes(vllm):
    s = vllm()
    model, server = engine.discover(engine.Endpoint(s.url))
    assert model == "Qwen3.6-27B" and server["kind"] == "vllm" and server["version"] == "0.33.0"
    assert [p for _, p, _, _ in s.seen] == ["/v1/models", "/server_info", "/version", "/metrics"]
    # the model card's max_model_len is the context; vLLM's group-aware KV capacity
    assert server["context_length"] == 131072
    assert server["max_total_num_tokens"] == 221760
    assert server["kv_cache_tokens_from"] == "kv_cache_size_tokens"
    assert (server["num_gpu_blocks"], server["block_size"]) == (420, 1056)
    assert server["kv_cache_max_concurrency"] == 1.69 and server["enable_prefix_caching"] is True
    assert server["mamba_cache_mode"] == "align" and server["gpu_memory_utilization"] == 0.9
    # speculation: the spec-decode counters say it runs, their positions how many draft tokens
    assert server["num_speculative_tokens"] == 3 and server["speculative_num_steps"] == 3
    assert server["speculative_algorithm"] == engines.common.UNREPORTED
    assert server["speculative_method"] is None and server["max_running_requests"] is None
    assert sorted(server["not_exposed"]) == ["max_running_requests", "speculative_algorithm"]
    assert "max_num_seqs" in server["not_exposed"]["max_running_requests"]


def test_kv_capacity_falls_back_to_blocks_times_block_size(vllm):
    s = vllm(cache={"kv_cache_size_tokens": "None"})
    _, server = engine.discover(engine.Endpoint(s.url))
    assert server["max_total_num_tokens"] == 420 * 1056
    assert server["kv_cache_tokens_from"] == "num_gpu_blocks x block_size"


def test_without_metrics_the_kv_capacity_and_speculation_are_said_to_be_unknown(vllm):
    s = vllm(metrics=False)
    _, server = engine.discover(engine.Endpoint(s.url))
    assert server["kind"] == "vllm" and server["max_total_num_tokens"] is None
    assert server["speculative_algorithm"] is None
    assert sorted(server["not_exposed"]) == ["max_running_requests", "max_total_num_tokens",
                                             "speculative_algorithm"]
    # the responses then say that speculation runs, and with how many draft tokens
    r = engine.run(opts(s.url, requests=1, warmup=0))
    assert r["server"]["speculative_algorithm"] == engines.common.UNREPORTED
    assert r["server"]["speculative_num_steps"] == 3 and r["accept_len"] is not None
    assert any("/metrics not reachable" in n for n in r["notes"])


def test_metrics_without_vllm_series_teach_nothing(vllm):
    """--disable-log-stats: /metrics serves only the process collectors, no vllm:* series."""
    s = vllm()
    s.server.routes[("GET", "/metrics")] = lambda b: (200, [b"# TYPE process_cpu_seconds_total counter\n"
                                                           b"process_cpu_seconds_total 1.5\n"])
    _, server = engine.discover(engine.Endpoint(s.url))
    assert server["metrics_exposed"] is False and server["speculative_algorithm"] is None
    assert "speculative_algorithm" in server["not_exposed"]
    assert "--disable-log-stats" in server["not_exposed"]["max_total_num_tokens"]
    r = engine.run(opts(s.url, requests=1, warmup=0))
    assert r["metrics"] is None and r["accept_len"] is not None
    assert "/metrics has no vllm:* series (vLLM started with --disable-log-stats?): no window " \
           "cross-check" in r["notes"]


def test_dev_mode_server_info_gives_max_num_seqs_and_the_method(vllm):
    s = vllm(dev_mode={"scheduler_config": {"max_num_seqs": 8},
                       "speculative_config": {"method": "mtp", "num_speculative_tokens": 3},
                       "parallel_config": {"tensor_parallel_size": 2}})
    _, server = engine.discover(engine.Endpoint(s.url))
    assert server["kind"] == "vllm" and server["max_running_requests"] == 8
    assert server["speculative_algorithm"] == server["speculative_method"] == "mtp"
    assert server["tp_size"] == 2 and server["not_exposed"] == {}


def test_no_speculation_is_known_from_metrics_not_a_gap(vllm):
    s = vllm(accepted=())
    r = engine.run(opts(s.url))
    assert r["server"]["speculative_algorithm"] is None
    assert "speculative_algorithm" not in r["server"]["not_exposed"]
    assert r["accept_len"] is None and r["engine_accept_len"] is None
    assert "speculative decoding is off on this server: no accept length" in r["notes"]
    assert r["metrics"]["verify_calls"] is None and r["metrics"]["matches_client"] is True


def test_an_sglang_server_is_discovered_and_asked_as_before():
    info = {"version": "0.5.23", "speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
            "context_length": 131072, "max_total_num_tokens": 222050, "max_running_requests": 16,
            "internal_states": [{"avg_spec_accept_length": 3.1,
                                 "effective_max_running_requests_per_dp": 4}]}
    spec = {"spec_verify_ct": 5, "spec_correct_drafts_histogram": [0, 1, 1, 3]}
    s = FakeServer({("GET", "/v1/models"): models("m"),
                    ("GET", "/server_info"): lambda b: (200, [json.dumps(info).encode()]),
                    ("POST", "/v1/chat/completions"): lambda b: (200, openai_stream(16, 4, spec=spec))})
    try:
        r = engine.run(opts(s.url, requests=1, warmup=0, max_tokens=16))
    finally:
        s.close()
    assert [p for _, p, _, _ in s.seen][:2] == ["/v1/models", "/server_info"]
    assert "/version" not in [p for _, p, _, _ in s.seen]
    assert r["server"]["kind"] == "sglang" and r["server"]["effective_max_running_requests"] == 4
    body = [q for q in s.seen if q[0] == "POST"][-1][3]
    assert body["rid"].startswith("bench-") and body["return_spec_tokens_details"] is True
    assert "request_id" not in body
    assert r["accept_len"] == 16 / 5 and r["engine_accept_len"] is None
    assert r["engine_accept_len_convention"] is None
    assert r["accept_by_position"] == pytest.approx([1.0, 0.8, 0.6])
    assert verdict.context_line(r) == ""


# ------------------------------------------------------------------------- the requests ----
def test_the_request_body_is_what_vllm_takes(vllm):
    s = vllm()
    engine.run(opts(s.url, requests=1, warmup=0, api_key="sekret"))
    _, path, headers, body = [q for q in s.seen if q[0] == "POST"][-1]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer sekret"
    # ChatCompletionRequest fields only: no SGLang rid / return_spec_tokens_details, which vLLM
    # would only log as ignored
    assert sorted(body) == ["chat_template_kwargs", "ignore_eos", "max_tokens", "messages", "model",
                            "request_id", "stream", "stream_options", "temperature"]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}  # the case's thinking, stated
    engine.run(opts(s.url, requests=1, warmup=0, api_key="sekret", thinking=True))
    assert [q for q in s.seen if q[0] == "POST"][-1][3]["chat_template_kwargs"] == {"enable_thinking": True}
    with pytest.raises(config.ConfigError, match="thinking: needs the chat API"):
        config.validate(dict(opts(s.url), api="completions", thinking=True))
    assert body["request_id"].startswith("bench-") and body["ignore_eos"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


def _events(raw_parts):
    for part in raw_parts:
        if isinstance(part, tuple):
            part = part[1]
        payload = part.decode().strip()[len("data: "):]
        yield payload if payload == "[DONE]" else json.loads(payload)


@pytest.mark.parametrize("reasoning", [4, 0])
def test_the_first_token_is_the_role_chunk_even_when_the_parser_hides_it(vllm, reasoning):
    """vLLM sends the role chunk on the first RequestOutput, which carries the prefill's token;
    with reasoning=0 the qwen3 parser hides that token (</think>) and no chunk of its own follows."""
    s = vllm(reasoning=reasoning)
    status, parts = s.stream({"max_tokens": 16, "stream": True, "request_id": "t",
                              "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
                             chat=True)
    events = list(_events(parts))
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert events[0]["usage"]["completion_tokens"] == 0
    assert events[-2]["choices"] == [] and "speculative_decoding" in events[-2]["metrics"]
    rec = engine._Request("t", "measure", "c")
    rec.t_send = 0.0
    for i, ev in enumerate(events):
        if ev == "[DONE]":
            rec.done = True
        else:
            engine._consume_openai(rec, 1.0 + 0.1 * i, ev)
    e = expected(16)
    assert rec.t_first == 1.0 and rec.completion_tokens == 16 == e["tokens"]
    assert (rec.verify_ct, rec.accepted, rec.spec_tokens) == (e["verify"], e["accepted"], 3)
    last_token_chunk = len(events) - 3
    assert rec.t_last == pytest.approx(1.0 + 0.1 * last_token_chunk)
    assert rec.decode_tok_s() == pytest.approx(15 / (0.1 * last_token_chunk))


def test_reasoning_deltas_count_as_tokens_without_usage_counts():
    """vLLM 0.33 streams thinking as delta.reasoning (not SGLang's reasoning_content)."""
    rec = engine._Request("t", "measure", "c")
    engine._consume_openai(rec, 1.0, {"choices": [{"index": 0, "delta": {"role": "assistant",
                                                                         "content": ""}}]})
    for i in range(3):
        engine._consume_openai(rec, 1.1 + 0.1 * i, {"choices": [{"index": 0, "delta": {"reasoning": "r"},
                                                                 "logprobs": None, "finish_reason": None}]})
    assert (rec.tokens, rec.counted, rec.t_last) == (4, False, pytest.approx(1.3))


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_accept_length_in_the_shared_convention_and_vllms_own_beside_it(vllm, api):
    s = vllm()
    r = engine.run(opts(s.url, api=api), judge=verdict.judge_case)
    e = expected(64)
    # ours: completion tokens / verify steps (num_spec_steps), as SGLang's spec_verify_ct
    assert r["accept_len"] == pytest.approx(64 / e["verify"])
    assert r["accept_by_position"] == pytest.approx(e["by_position"])
    # vLLM's: 1 + accepted / verify steps
    assert r["engine_accept_len"] == pytest.approx(1 + e["accepted"] / e["verify"])
    # vLLM's - ours = (tokens max_tokens cut from the last step - the prefill's token) / steps:
    # here the last step accepted 3 drafts but kept 2 of its 4 tokens, so vLLM's is the larger
    assert r["engine_accept_len"] - r["accept_len"] == pytest.approx((2 - 1) / e["verify"])
    assert "num_spec_steps" in r["accept_len_convention"]
    assert "1 + accepted draft tokens / verify steps" in r["engine_accept_len_convention"]
    pr = [q for q in r["per_request"] if q["phase"] == "measure"]
    assert [q["verify_ct"] for q in pr] == [e["verify"]] * 3
    assert pr[0]["engine_accept_len"] == pytest.approx(1 + e["accepted"] / e["verify"])
    assert r["decode_tok_s"]["n"] == 3 and r["errors"] == 0 and r["passed"]
    assert "accept length %.2f = completion tokens / verify steps; vLLM's own 1 + accepted / " \
           "drafts %.2f" % (r["accept_len"], r["engine_accept_len"]) in verdict.context_line(r)


def test_the_accept_length_threshold_names_the_convention(vllm):
    s = vllm()
    r = engine.run(opts(s.url, min_accept_len=4.5), judge=verdict.judge_case)
    assert not r["passed"]
    msg = verdict.case_failure_message(r)
    assert "accept length %s < required 4.50 (completion tokens / verify steps; vLLM's own 1 + " \
           "accepted / drafts is %.2f)" % (verdict.fmt_interval(r["intervals"]["accept_len"], ".2f"),
                                         r["engine_accept_len"]) in msg


def test_without_per_request_metrics_the_note_names_the_flag(vllm):
    s = vllm(per_request_metrics=False)
    r = engine.run(opts(s.url, min_accept_len=2.0), judge=verdict.judge_case)
    assert r["accept_len"] is None and not r["passed"]
    assert any("--per-request-spec-decode-metrics summary" in n for n in r["notes"])
    assert "accept length could not be measured" in verdict.case_failure_message(r)
    # the window still shows what the counters say
    assert r["metrics"]["verify_calls"] > 0 and r["metrics"]["engine_accept_len"] is not None


def test_native_api_is_refused_for_vllm(vllm):
    s = vllm()
    with pytest.raises(MeasureError, match="vLLM 0.33.0 serves no /generate"):
        engine.run(opts(s.url, api="native"))


def test_the_roofline_uses_vllms_draft_steps(vllm):
    s = vllm()
    r = engine.run(opts(s.url, requests=1, warmup=0,
                        model_size={"params_b": 27.78, "dtype_bytes": 2, "lm_head_params_b": 1.2714,
                                    "mtp_layer_params_b": 0.425},
                        hardware={"gpu_count": 2, "gpu_bandwidth_gbs": 768}))
    assert r["roofline"]["spec_steps"] == 3
    assert r["roofline"]["accept_len"] == pytest.approx(r["accept_len"])


# --------------------------------------------------------------------------- /metrics ----
VLLM_TEXT = r'''# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="m",engine="0"} 100.0
vllm:generation_tokens_total{model_name="m",engine="1"} 20.0
vllm:generation_tokens_created{model_name="m",engine="0"} 1.7e+09
vllm:request_success_total{model_name="m",engine="0",finished_reason="stop"} 2.0
vllm:request_success_total{model_name="m",engine="0",finished_reason="length"} 5.0
vllm:spec_decode_num_drafts_total{model_name="m",engine="0"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",engine="0",position="1"} 20.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",engine="0",position="0"} 30.0
vllm:cache_config_info{block_size="1056",kv_cache_dtype_skip_layers="[]",odd="a{b}, c=\"d\"",engine="0"} 1.0
vllm:cache_config_info{block_size="16",engine="1"} 1.0
'''


def test_one_parser_reads_vllm_counters_positions_and_the_cache_info():
    got = metrics.parse(VLLM_TEXT)
    assert got["vllm:generation_tokens_total"] == 120.0          # summed over engines
    assert got["vllm:request_success_total"] == 7.0              # over finish reasons
    assert got[engines.vllm.per_position] == {"0": 30.0, "1": 20.0}
    assert engines.common.positions(got[engines.vllm.per_position]) == [30.0, 20.0]
    info = got["vllm:cache_config_info"]
    assert info == {"block_size": "1056", "kv_cache_dtype_skip_layers": "[]", "odd": 'a{b}, c="d"',
                    "engine": "0"}                               # engine 0's, braces and quotes kept
    assert metrics.kind_of(got) == "vllm" and metrics.kind_of({}) is None


def _scrape(gen, drafts, draft_tokens, accepted, per_pos, requests=0):
    return {"vllm:generation_tokens_total": gen, "vllm:prompt_tokens_total": 0.0,
            "vllm:spec_decode_num_drafts_total": drafts,
            "vllm:spec_decode_num_draft_tokens_total": draft_tokens,
            "vllm:spec_decode_num_accepted_tokens_total": accepted,
            "vllm:request_success_total": requests,
            engines.vllm.per_position: {str(i): v for i, v in enumerate(per_pos)}}


def test_the_vllm_window_by_hand():
    before = _scrape(1000.0, 300.0, 900.0, 500.0, [250, 170, 80], 10)
    # 40 drafts of 3 tokens, 70 accepted (30 + 25 + 15 by position), 150 tokens for 2 requests
    after = _scrape(1150.0, 340.0, 1020.0, 570.0, [280, 195, 95], 12)
    w = metrics.window(before, after, client_tokens=150, client_verify_steps=40)
    assert w["kind"] == "vllm" and w["requests"] == 2
    assert (w["generation_tokens"], w["verify_calls"], w["draft_tokens"], w["accepted_tokens"]) == \
        (150.0, 40.0, 120.0, 70.0)
    assert w["accept_len"] == pytest.approx(150 / 40)            # ours: tokens / verify steps
    assert w["engine_accept_len"] == pytest.approx(1 + 70 / 40)  # vLLM's: 1 + accepted / drafts
    assert w["acceptance_rate"] == pytest.approx(70 / 120)
    assert w["by_position"] == pytest.approx([30 / 40, 25 / 40, 15 / 40])
    assert w["matches_client"] and w["matches_client_verify"]
    assert "1 + accepted draft tokens / drafts" in w["engine_accept_len_convention"]
    w = metrics.window(before, after, client_tokens=150, client_verify_steps=39)
    assert w["matches_client_verify"] is False


def test_the_sglang_window_keeps_its_figures():
    before = {"sglang:generation_tokens_total": 100.0, "sglang:spec_verify_calls_total": 40.0}
    after = {"sglang:generation_tokens_total": 420.0, "sglang:spec_verify_calls_total": 140.0}
    w = metrics.window(before, after, client_tokens=320, client_verify_steps=99)
    assert w["kind"] == "sglang" and w["accept_len"] == pytest.approx(3.2)
    assert w["engine_accept_len"] is None and w["by_position"] is None
    assert w["client_verify_steps"] is None and w["matches_client_verify"] is None


def test_the_run_cross_checks_per_request_figures_against_the_window(vllm):
    s = vllm()
    r = engine.run(opts(s.url))
    m, e = r["metrics"], expected(64)
    assert m["kind"] == "vllm" and m["matches_client"] and m["generation_tokens"] == 3 * 64
    assert m["requests"] == 3 and m["verify_calls"] == 3 * e["verify"] and m["matches_client_verify"]
    assert m["accept_len"] == pytest.approx(r["accept_len"])
    assert m["engine_accept_len"] == pytest.approx(r["engine_accept_len"])
    assert m["by_position"] == pytest.approx(r["accept_by_position"])


def test_other_traffic_in_the_window_is_reported(vllm):
    s = vllm(extra_generated=7)
    r = engine.run(opts(s.url))
    assert r["metrics"]["matches_client"] is False and "other traffic" in r["metrics"]["note"]


# --------------------------------------------------------------------------- capacity ----
PLAN = {"coding": {"concurrency": 1, "requests": 2, "max_tokens": 32},
        "long_context": {"prompts": "long_context", "prompt_tokens": 32768, "concurrency": 1,
                         "requests": 1, "max_tokens": 256},
        "concurrent": {"concurrency": 4, "requests": 4, "max_tokens": 32}}
THRESHOLDS = {"vllm_mtp_3": {"coding": {"min_accept_len": 2.0}, "long_context": {}, "concurrent": {}}}
CASES = plan.resolve(PLAN, THRESHOLDS, "vllm_mtp_3")
PROMISE = {"context_length": 131072, "max_running_requests": 8}


def _vllm_server(**kw):
    server = {"kind": "vllm", "context_length": 131072, "max_total_num_tokens": 221760,
              "kv_cache_tokens_from": "kv_cache_size_tokens", "kv_cache_max_concurrency": 1.69,
              "max_running_requests": None,
              "not_exposed": {"max_running_requests": engines.vllm.not_exposed["max_running_requests"]}}
    server.update(kw)
    return server


def test_capacity_with_vllm_figures_passes_and_names_what_it_could_not_verify():
    cap = plan.check_capacity(_vllm_server(), CASES, PROMISE)
    assert cap["passed"] and cap["figures"]["effective_context"] == 131072
    assert cap["figures"]["kv_cache_tokens_from"] == "kv_cache_size_tokens"
    assert cap["unverified"] == [{"what": "running requests",
                                  "needed_by": ["case concurrent runs 4", "the profile asks for 8"],
                                  "why": engines.vllm.not_exposed["max_running_requests"]}]
    assert cap["notes"][0].startswith("not verified: running requests (case concurrent runs 4, the "
                                      "profile asks for 8): vLLM exposes max_num_seqs nowhere but")


def test_capacity_fails_a_vllm_context_shorter_than_promised_naming_its_figures():
    cap = plan.check_capacity(_vllm_server(context_length=16384, max_total_num_tokens=20000), CASES,
                              PROMISE)
    assert not cap["passed"]
    (f,) = cap["failures"]
    assert (f["measured"]["effective_context"], f["required"]["context"]) == (16384, 131072)
    # named as vLLM names them
    assert all(w in f["message"] for w in ("max_model_len 16,384", "kv_cache_size_tokens 20,000"))
    cap = plan.check_capacity(_vllm_server(max_total_num_tokens=30000), CASES, PROMISE)
    assert cap["failures"][0]["measured"]["effective_context"] == 30000


def test_capacity_with_dev_mode_max_num_seqs_judges_running_requests():
    cap = plan.check_capacity(_vllm_server(max_running_requests=2, not_exposed={}), CASES, PROMISE)
    assert not cap["passed"] and cap["unverified"] == []
    (f,) = cap["failures"]
    assert (f["measured"]["max_running_requests"], f["required"]["running"]) == (2, 4)
    assert "(max_num_seqs)" in f["message"]  # vLLM's name for it


def test_capacity_without_the_kv_figure_says_so():
    hidden = dict(engines.vllm.not_exposed)
    cap = plan.check_capacity(_vllm_server(max_total_num_tokens=None, not_exposed=hidden), CASES,
                              PROMISE)
    assert cap["passed"] and [u["what"] for u in cap["unverified"]] == ["running requests",
                                                                        "KV capacity"]
    assert "the profile promises 131,072" in cap["unverified"][1]["needed_by"][0]


def test_the_plan_runs_on_vllm_with_the_capacity_gaps_in_its_notes(vllm):
    s = vllm()
    small = {k: v for k, v in PLAN.items() if k != "long_context"}
    r = plan.run({"url": s.url, "warmup": 1, "first_token_timeout": 5, "stall_timeout": 2}, small,
                 THRESHOLDS, "vllm_mtp_3", promise=PROMISE)
    assert r["passed"], verdict.table(r)
    assert r["server"]["kind"] == "vllm" and r["capacity"]["unverified"]
    assert any(n.startswith("not verified: running requests") for n in r["notes"])
    assert "KV pool 221,760), ? (not exposed) running requests" in verdict.table(r)
    assert "vLLM's own 1 + accepted / drafts" in verdict.summary(r)
    assert r["engine_accept_len"] == r["cases"][0]["engine_accept_len"] is not None
    # every request of the plan went out as vLLM takes it
    bodies = [b for m, p, _, b in s.seen if m == "POST"]
    assert len(bodies) == 1 + 2 + 4 and all("rid" not in b and "request_id" in b for b in bodies)


# ------------------------------------------------------------------------------ probe ----
def test_the_probe_fits_vllm(vllm):
    s = vllm()
    out = engine.probe({"url": s.url})
    assert out["ready"] and out["health_status"] == 200 and out["server"]["kind"] == "vllm"
    assert [p for _, p, _, _ in s.seen][:2] == ["/health", "/v1/models"]
    assert not [m for m, _, _, _ in s.seen if m == "POST"]  # no generation in check mode
    s.server.routes[("GET", "/health")] = lambda b: (503, [b""])
    out = engine.probe({"url": s.url})
    assert not out["ready"] and "vLLM: its engine died" in out["reason"]


def test_the_cli_table_names_the_convention_and_the_gaps(vllm):
    from bench import cli
    s = vllm()
    r = engine.run(opts(s.url, requests=1, warmup=0), judge=verdict.judge_case)
    table = cli.table(r)
    assert "vllm 0.33.0 (unreported steps=3 num_speculative_tokens=3)" in table
    assert "= completion tokens / verify steps; vLLM's own 1 + accepted / drafts: %.2f" \
        % r["engine_accept_len"] in table
    assert "not exposed            max_running_requests: vLLM exposes max_num_seqs" in table
