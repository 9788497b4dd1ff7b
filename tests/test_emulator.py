"""The SGLang 0.5.23 emulator (emulator/), over real HTTP on 127.0.0.1."""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from emulator.request import is_prose
from bench.profiles import HAND_LAUNCH_ARGS
from sglang_perf.measure import prompts
from conftest import MODEL_ARGS, ROOT, free_port

pytestmark = pytest.mark.timeout(60)

FAST = {"SGLEMU_SPEED_SCALE": "50", "SGLEMU_WARMUP_REQUESTS": "0"}
# SGLang's own defaults: the model flags and nothing else (no profile, no parsers).
BARE = []


# ------------------------------------------------------------------------------- helpers ------
def run_cli(args, env=None, timeout=20):
    """Run the emulator's command line to completion (for the ones that must fail)."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    port = free_port()
    proc = subprocess.run([sys.executable, "-m", "emulator", *args, "--port", str(port)],
                          cwd=str(ROOT), env=full_env, capture_output=True, text=True,
                          timeout=timeout)
    return proc, port


def post(url, body, headers=None, timeout=20):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers=dict({"Content-Type": "application/json"},
                                              **(headers or {})))
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read())


def http_status(url, headers=None, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def stream(url, body, timeout=30):
    """POST with stream=true; returns (list of (monotonic time, parsed chunk or '[DONE]'), error)."""
    req = urllib.request.Request(url, data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    events, error = [], None
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for line in r:
                line = line.strip()
                if not line.startswith(b"data: "):
                    continue
                payload = line[6:]
                events.append((time.monotonic(), "[DONE]" if payload == b"[DONE]"
                               else json.loads(payload)))
    except (http.client.IncompleteRead, ConnectionError, urllib.error.URLError) as exc:
        error = exc
    return events, error


def gen_body(max_new=32, text="def add(a, b):", ignore_eos=True, **kw):
    return dict({"text": text, "sampling_params": {"max_new_tokens": max_new,
                                                   "ignore_eos": ignore_eos}}, **kw)


def chat_body(max_tokens=24, **kw):
    return dict({"model": "Qwen3.6-27B", "max_tokens": max_tokens, "ignore_eos": True,
                 "messages": [{"role": "user", "content": "Write a function."}]}, **kw)


def truncated(events, err):
    """A stream cut short: an exception, or no [DONE] (urllib's line iterator treats a missing
    terminating chunk as EOF; aiohttp would raise ClientPayloadError)."""
    return err is not None or not events or events[-1][1] != "[DONE]"


def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def real_requests(stats):
    return [r for r in stats["requests"] if not r["health"]]


# --------------------------------------------------------------------- prose or code ----------
# Request tags as the bench writes them (engine.py: uuid hex, case, index); a hex run such as
# "def" between digits is not a word, so the tag never turns a prose prompt into code.
TAGS = ["1def2345-prose-0", "def01234-coding-5", "0a1b2c3d-prose-1023", "abcdefab-prose-99999"]


@pytest.mark.parametrize("tag", TAGS)
def test_a_prompt_is_prose_or_code_whatever_its_request_tag(tag):
    assert all(is_prose(prompts.tagged(tag, text)) for _, text in prompts.PROSE_PROMPTS)
    assert not any(is_prose(prompts.tagged(tag, text)) for _, text in prompts.CODING_PROMPTS)


@pytest.mark.parametrize("text,prose", [
    ("word " * 39 + "code", True),  # 40 words, one code word
    ("word " * 40, True),
    ("word " * 39, False),  # too short to tell: the coding calibration
    ("word " * 40 + "Python's def", False),
    ("word " * 40 + "python3 def2", True),  # neither is a whole word
    ("", False),
])
def test_is_prose_counts_whole_words(text, prose):
    assert is_prose(text) is prose


# --------------------------------------------------------------------- command line -----------
@pytest.mark.parametrize("extra,message", [
    (["--foo", "1"], "unrecognized arguments: --foo 1"),
    (["--mamba-scheduler-strategy", "extra_buffer"],
     "unrecognized arguments: --mamba-scheduler-strategy extra_buffer"),
    (["--mamba-radix-cache-strategy", "bogus"],
     "argument --mamba-radix-cache-strategy: invalid choice: 'bogus'"),
    (["--tool-call-parser", "qwen4"], "argument --tool-call-parser: invalid choice: 'qwen4'"),
    (["--tp-size", "two"], "argument --tp-size/--tensor-parallel-size: invalid int value: 'two'"),
])
def test_argparse_rejections(extra, message):
    proc, _ = run_cli(MODEL_ARGS + extra)
    assert proc.returncode == 2, proc.stderr
    assert "usage: sglang serve" in proc.stderr
    assert "sglang serve: error: " + message in proc.stderr


def test_model_path_required():
    proc, _ = run_cli(["--tp-size", "2"])
    assert proc.returncode == 2
    assert "the following arguments are required: --model-path/--model" in proc.stderr


@pytest.mark.parametrize("spec,exc_line", [
    (["--speculative-algorithm", "NEXTN", "--speculative-num-draft-tokens", "4"],
     "AssertionError"),
    (["--speculative-algorithm", "foo"], "ValueError: Unknown speculative algorithm name: FOO"),
    (["--served-model-name", "qwen3.6:27b"],
     "AssertionError: served_model_name cannot contain a colon (':') character."),
    (["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"],
     "TypeError: '>' not supported between instances of 'NoneType' and 'int'"),
    (["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "300",
      "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "301"],
     "AssertionError"),
])
def test_seed_failures_exit_before_binding(emulator, spec, exc_line):
    emu = emulator(spec, wait=False)
    rc = emu.proc.wait(20)
    out = emu.output()
    assert rc != 0
    assert exc_line in out.splitlines()[-1], out
    assert "Uvicorn running" not in out
    assert not port_open(emu.port)


def test_server_info_resolution(emulator):
    emu = emulator(HAND_LAUNCH_ARGS, env=FAST)
    info = emu.get("/server_info")
    assert info["version"] == "0.5.23"
    assert info["speculative_algorithm"] == "EAGLE"
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"],
            info["speculative_num_draft_tokens"]) == (1, 1, 2)
    assert info["max_running_requests"] == 48  # unset + speculation
    assert info["mamba_radix_cache_strategy"] == "extra_buffer"
    assert info["context_length"] == 262144 and info["tp_size"] == 2
    assert info["served_model_name"] == "Qwen3.6-27B"
    assert info["model_path"] == "/models/Qwen3.6-27B"
    assert 0.5 < info["mem_fraction_static"] < 0.95
    assert isinstance(info["internal_states"], list) and len(info["internal_states"]) == 1
    assert "Max running requests is reset to 48" in emu.output()
    assert emu.get("/get_server_info")["speculative_algorithm"] == "EAGLE"


def test_nextn_auto_and_topk1_forcing(emulator):
    emu = emulator(["--speculative-algorithm", "NEXTN"], env=FAST)
    info = emu.get("/server_info")
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"],
            info["speculative_num_draft_tokens"]) == (3, 1, 4)
    emu2 = emulator(["--speculative-algorithm", "nextn", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2"],
                    env=FAST)
    info2 = emu2.get("/server_info")
    assert info2["speculative_algorithm"] == "EAGLE"
    assert info2["speculative_num_draft_tokens"] == 4
    assert "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1" in \
        emu2.output()
    three = emulator("nextn_3step", env=FAST).get("/server_info")
    assert three["max_running_requests"] == 16 and three["context_length"] == 131072
    assert three["mem_fraction_static"] == 0.88 and three["mamba_full_memory_ratio"] == 0.5
    assert three["reasoning_parser"] == "qwen3" and three["tool_call_parser"] == "qwen3_coder"
    nospec = emulator(BARE, env=FAST).get("/server_info")
    # SGLang leaves it unset without speculation; the scheduler sizes it from the pools
    assert nospec["speculative_algorithm"] is None and nospec["max_running_requests"] is None
    assert nospec["internal_states"][0]["effective_max_running_requests_per_dp"] >= 1


def test_architecture_from_config_json(emulator, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    emu = emulator(["--model-path", str(tmp_path)], wait=False,
                   extra=["--mamba-radix-cache-strategy", "extra_buffer"])
    assert emu.proc.wait(20) != 0
    assert ("ValueError: --mamba-radix-cache-strategy extra_buffer needs mamba state, got "
            "LlamaForCausalLM.") in emu.output()


# ----------------------------------------------------------------------- readiness ------------
def test_readiness_sequence(emulator):
    emu = emulator("no_spec", env={"SGLEMU_LOAD_SECONDS": "1.0", "SGLEMU_WARMUP_SECONDS": "1.0"},
                   wait=False)
    seen = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(emu.url + "/health", timeout=2) as r:
                state = r.status
        except urllib.error.HTTPError as e:
            state = e.code
        except OSError:
            state = "refused"
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == 200:
            break
        time.sleep(0.05)
    assert seen == ["refused", 503, 200]
    assert http_status(emu.url + "/ready")[0] == 200
    # the banner comes from its own timer, a moment after the health state flips (poll: the
    # machine may be busy with other tests)
    deadline = time.monotonic() + 5
    while "The server is fired up and ready to roll!" not in emu.output():
        assert time.monotonic() < deadline, emu.output()[-2000:]
        time.sleep(0.05)


def test_health_generate_goes_through_scheduler(emulator):
    emu = emulator("no_spec", env=FAST)
    assert http_status(emu.url + "/health_generate")[0] == 200
    health = [r for r in emu.stats()["requests"] if r["health"]]
    assert health and health[-1]["completion_tokens"] == 1


def test_sigterm_graceful(emulator):
    emu = emulator("no_spec", env=FAST)
    t0 = time.monotonic()
    emu.proc.send_signal(signal.SIGTERM)
    assert emu.proc.wait(10) == 0
    assert time.monotonic() - t0 < 5


# ---------------------------------------------------------------------------- auth ------------
def test_api_key(emulator):
    emu = emulator("no_spec", env=FAST, extra=["--api-key", "s3cret"])
    code, body = http_status(emu.url + "/v1/models")
    assert code == 401 and json.loads(body) == {"error": "Unauthorized"}
    code, _ = http_status(emu.url + "/v1/models", {"Authorization": "Bearer wrong"})
    assert code == 401
    code, body = http_status(emu.url + "/v1/models", {"Authorization": "Bearer s3cret"})
    assert code == 200 and json.loads(body)["data"][0]["id"] == "Qwen3.6-27B"
    code, _ = http_status(emu.url + "/generate", method="POST", body=gen_body(4))
    assert code == 401
    for path in ("/health", "/health_generate", "/ready", "/_emulator/stats"):
        assert http_status(emu.url + path)[0] == 200, path
    assert http_status(emu.url + "/metrics")[0] == 404  # open, but metrics are off


# ---------------------------------------------------------------------- endpoints -------------
def test_generate_shapes_and_spec_fields(emulator):
    emu = emulator("nextn_3step", env=FAST)
    status, out = post(emu.url + "/generate", gen_body(40, rid="my-rid"))
    assert status == 200 and set(out) == {"text", "output_ids", "meta_info"}
    meta = out["meta_info"]
    assert meta["id"] == "my-rid"
    assert meta["finish_reason"] == {"type": "length", "length": 40}
    assert meta["completion_tokens"] == 40 == len(out["output_ids"])
    assert meta["reasoning_tokens"] == 12 and out["text"].startswith("<think>\n")
    assert "</think>" in out["text"]
    for key in ("prompt_tokens", "cached_tokens", "e2e_latency", "spec_verify_ct",
                "spec_accept_length", "spec_accept_rate", "spec_num_correct_drafts",
                "spec_num_proposed_drafts", "spec_correct_drafts_histogram"):
        assert key in meta, key
    assert meta["spec_accept_length"] == pytest.approx(40 / meta["spec_verify_ct"])
    assert meta["spec_num_proposed_drafts"] == 3 * meta["spec_verify_ct"]
    assert sum(meta["spec_correct_drafts_histogram"]) == meta["spec_verify_ct"]

    events, err = stream(emu.url + "/generate", gen_body(30))
    assert err is None and events[-1][1] == "[DONE]"
    chunks = [e for _, e in events[:-1]]
    assert chunks[0]["meta_info"]["completion_tokens"] == 1  # prefill emits exactly one
    for prev, cur in zip(chunks, chunks[1:]):
        assert cur["text"].startswith(prev["text"])  # cumulative
        assert cur["meta_info"]["completion_tokens"] > prev["meta_info"]["completion_tokens"]
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    assert all("spec_verify_ct" not in c["meta_info"] for c in chunks[:-1])
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "length"
    assert "spec_verify_ct" in chunks[-1]["meta_info"]
    assert len(chunks) - 1 == chunks[-1]["meta_info"]["spec_verify_ct"]  # one chunk per step
    stats = emu.stats()
    byrid = {r["rid"]: r for r in stats["requests"]}
    assert byrid["my-rid"]["completion_tokens"] == 40
    assert byrid["my-rid"]["verify_ct"] == meta["spec_verify_ct"]


def test_no_spec_has_no_spec_fields(emulator):
    emu = emulator(BARE, env=FAST)
    _, out = post(emu.url + "/generate", gen_body(8))
    assert "spec_verify_ct" not in out["meta_info"] and "<think>" not in out["text"]
    _, out = post(emu.url + "/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 5,
                                                "ignore_eos": True,
                                                "return_spec_tokens_details": True})
    assert "sglext" not in out


def test_chat_stream_reasoning_sglext_usage(emulator):
    emu = emulator("nextn_3step", env=FAST)
    body = chat_body(40, rid="chat-1", return_spec_tokens_details=True,
                     stream_options={"include_usage": True, "continuous_usage_stats": False})
    events, err = stream(emu.url + "/v1/chat/completions", body)
    assert err is None
    chunks = [e for _, e in events]
    assert chunks[-1] == "[DONE]"
    first = chunks[0]
    assert first["object"] == "chat.completion.chunk" and first["id"] == "chat-1"
    assert first["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant",
                                            "content": ""}
    deltas = [c["choices"][0]["delta"] for c in chunks[1:-1] if c["choices"]]
    kinds = ["r" if d.get("reasoning_content") else "c" if d.get("content") else "-"
             for d in deltas]
    assert "r" in kinds and "c" in kinds
    assert kinds.index("c") > max(i for i, k in enumerate(kinds) if k == "r")
    finish = [c for c in chunks[1:-1] if c["choices"] and c["choices"][0]["finish_reason"]]
    assert len(finish) == 1 and finish[0]["choices"][0]["finish_reason"] == "length"
    sglext, usage = chunks[-3], chunks[-2]
    assert sglext["choices"] == [] and "spec_tokens_details" in sglext["sglext"]
    details = sglext["sglext"]["spec_tokens_details"]
    assert details["spec_accept_length"] > 1
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 40
    assert usage["usage"]["reasoning_tokens"] == 12
    assert usage["usage"]["completion_tokens_details"] == {"reasoning_tokens": 12}
    # non-streaming chat
    _, out = post(emu.url + "/v1/chat/completions", chat_body(30, return_spec_tokens_details=True))
    msg = out["choices"][0]["message"]
    assert msg["role"] == "assistant" and msg["reasoning_content"] and msg["content"]
    assert out["usage"]["completion_tokens"] == 30 and "spec_tokens_details" in out["sglext"]
    # thinking off per request
    _, out = post(emu.url + "/v1/chat/completions",
                  chat_body(10, chat_template_kwargs={"enable_thinking": False}))
    assert out["choices"][0]["message"]["reasoning_content"] is None
    assert out["usage"]["reasoning_tokens"] == 0


def test_completions_stream_continuous_usage(emulator):
    emu = emulator(HAND_LAUNCH_ARGS, env=FAST)
    body = {"model": "anything", "prompt": "def f(", "max_tokens": 20, "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    events, err = stream(emu.url + "/v1/completions", body)
    chunks = [e for _, e in events]
    assert err is None and chunks[-1] == "[DONE]"
    text_chunks = [c for c in chunks[:-1] if c["choices"]]
    assert all(c["object"] == "text_completion" and c["model"] == "anything"
               for c in text_chunks)
    counts = [c["usage"]["completion_tokens"] for c in text_chunks]
    assert counts == sorted(counts) and counts[-1] == 20
    assert text_chunks[-1]["choices"][0]["finish_reason"] == "length"
    final = chunks[-2]
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == 20
    assert "prompt_tokens_details" not in final["usage"]  # exclude_none
    code, body = http_status(emu.url + "/v1/completions", method="POST",
                             body={"model": "other:adapter", "prompt": "x"})
    err = json.loads(body)
    assert code == 400 and err["object"] == "error" and "LoRA adapter 'adapter'" in err["message"]
    models = emu.get("/v1/models")
    assert models["object"] == "list" and models["data"][0]["max_model_len"] == 262144
    assert emu.get("/model_info")["served_model_name"] == "Qwen3.6-27B"


def test_emulated_eos_without_ignore_eos(emulator):
    emu = emulator("no_spec", env={"SGLEMU_SPEED_SCALE": "200"})
    stops = []
    for i in range(12):
        _, out = post(emu.url + "/generate", gen_body(50, text="prompt %d" % i, ignore_eos=False))
        fr = out["meta_info"]["finish_reason"]
        if fr["type"] == "stop":
            assert fr["matched"] == 248046
            assert 20 <= out["meta_info"]["completion_tokens"] <= 50
            stops.append(out["meta_info"]["completion_tokens"])
    assert 0 < len(stops) < 12
    assert min(stops) < 50


# ------------------------------------------------------------------------ metrics -------------
def test_metrics_counters_match_stats(emulator):
    emu = emulator("nextn_3step", env=FAST, extra=["--enable-metrics"])

    def scrape():
        text = urllib.request.urlopen(emu.url + "/metrics", timeout=5).read().decode()
        vals = {}
        for line in text.splitlines():
            if line.startswith("#") or not line:
                continue
            name_labels, value = line.rsplit(" ", 1)
            name = name_labels.split("{", 1)[0]
            vals[name] = vals.get(name, 0.0) + float(value)
        return text, vals

    text0, v0 = scrape()
    for name in ("sglang:generation_tokens_total", "sglang:prompt_tokens_total",
                 "sglang:spec_verify_calls_total", "sglang:num_requests_total",
                 "sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:gen_throughput",
                 "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                 "sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
                 "sglang:e2e_request_latency_seconds"):
        assert "# TYPE %s " % name in text0, name
    before = len(real_requests(emu.stats()))
    threads = [threading.Thread(target=post, args=(emu.url + "/generate", gen_body(60)))
               for _ in range(3)]
    threads.append(threading.Thread(target=stream, args=(emu.url + "/v1/chat/completions",
                                                         chat_body(50))))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text1, v1 = scrape()
    reqs = real_requests(emu.stats())[before:]
    assert len(reqs) == 4
    assert v1["sglang:generation_tokens_total"] - v0.get("sglang:generation_tokens_total", 0) \
        == sum(r["completion_tokens"] for r in reqs) == 230
    assert v1["sglang:spec_verify_calls_total"] - v0.get("sglang:spec_verify_calls_total", 0) \
        == sum(r["verify_ct"] for r in reqs)
    assert v1["sglang:prompt_tokens_total"] - v0.get("sglang:prompt_tokens_total", 0) \
        == sum(r["prompt_tokens"] for r in reqs)
    assert v1["sglang:num_requests_total"] - v0.get("sglang:num_requests_total", 0) == 4
    assert 'sglang:generation_tokens_total{engine_type="unified",model_name="Qwen3.6-27B",' \
        'is_streaming="true"}' in text1
    assert 'sglang:num_running_reqs{engine_type="unified",model_name="Qwen3.6-27B",' \
        'moe_ep_rank="0",pp_rank="0",tp_rank="0"}' in text1
    assert 'sglang:e2e_request_latency_seconds_bucket{engine_type="unified",' \
        'model_name="Qwen3.6-27B",is_streaming="false",le="+Inf"} 3.0' in text1


# ------------------------------------------------------------------------- faults -------------
def test_fault_http500_and_runtime_switch(emulator):
    emu = emulator("no_spec", env=dict(FAST, SGLEMU_FAULT_HTTP500_EVERY="2"))
    codes = [http_status(emu.url + "/generate", method="POST", body=gen_body(3))[0]
             for _ in range(4)]
    assert codes == [200, 500, 200, 500]
    code, body = http_status(emu.url + "/v1/chat/completions", method="POST", body=chat_body(3))
    assert code == 200  # 5th
    code, body = http_status(emu.url + "/v1/chat/completions", method="POST", body=chat_body(3))
    err = json.loads(body)
    assert code == 500 and err["type"] == "InternalServerError" and err["code"] == 500
    assert emu.post("/_emulator/faults", {"http500_every": 0})["http500_every"] == 0
    assert all(http_status(emu.url + "/generate", method="POST", body=gen_body(2))[0] == 200
               for _ in range(3))
    assert http_status(emu.url + "/_emulator/faults", method="POST", body={"nope": 1})[0] == 400
    faults = [r["fault"] for r in real_requests(emu.stats())]
    assert faults.count("http500") == 3


def test_fault_truncate_and_stall(emulator):
    emu = emulator("no_spec", env=dict(FAST, SGLEMU_FAULT_TRUNCATE_AFTER_TOKENS="5"))
    events, err = stream(emu.url + "/generate", gen_body(20))
    assert truncated(events, err)
    assert events and all(e != "[DONE]" for _, e in events)
    assert events[-1][1]["meta_info"]["completion_tokens"] == 5
    assert events[-1][1]["meta_info"]["finish_reason"] is None
    emu.post("/_emulator/faults", {"truncate_after_tokens": 0, "stall_after_tokens": 4,
                                   "stall_seconds": 0.6})
    events, err = stream(emu.url + "/generate", gen_body(12))
    assert err is None and events[-1][1] == "[DONE]"
    gaps = [b[0] - a[0] for a, b in zip(events, events[1:])]
    assert max(gaps) >= 0.55
    stall = real_requests(emu.stats())[-1]
    assert stall["fault"] == "stall" and stall["completion_tokens"] == 12
    assert real_requests(emu.stats())[0]["fault"] == "truncate"


def test_fault_crash_and_warmup_exemption(emulator):
    emu = emulator("no_spec", env={"SGLEMU_SPEED_SCALE": "50", "SGLEMU_WARMUP_REQUESTS": "2",
                                   "SGLEMU_FAULT_APPLY_TO_WARMUP": "0",
                                   "SGLEMU_FAULT_TRUNCATE_AFTER_TOKENS": "3",
                                   "SGLEMU_FAULT_CRASH_AFTER_REQUESTS": "2"})
    for _ in range(2):  # warmup requests: exempt from every fault
        events, err = stream(emu.url + "/generate", gen_body(6))
        assert err is None and events[-1][1] == "[DONE]"
    stats = emu.stats()
    assert [r["warmup"] for r in real_requests(stats)] == [True, True]
    events, err = stream(emu.url + "/generate", gen_body(6))  # 1st counted: truncated
    assert truncated(events, err)
    events, err = stream(emu.url + "/generate", gen_body(6))  # 2nd counted: crash
    assert truncated(events, err)
    assert emu.proc.wait(10) == 1
    assert "Scheduler hit an exception" in emu.output()


# ------------------------------------------------------------------ scheduler / speed ---------
def test_queueing_beyond_max_running_requests(emulator):
    emu = emulator("no_spec", env=FAST, extra=["--max-running-requests", "2"])
    threads = [threading.Thread(target=post, args=(emu.url + "/generate", gen_body(40)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reqs = sorted(real_requests(emu.stats()), key=lambda r: r["t_admit"])
    assert len(reqs) == 4
    first_finish = min(r["t_finish"] for r in reqs[:2])
    assert all(r["t_admit"] >= first_finish for r in reqs[2:])
    assert all(r["t_admit"] - r["t_arrival"] > 0.01 for r in reqs[2:])


def test_warmup_requests_are_slower(emulator):
    emu = emulator("no_spec", env={"SGLEMU_SPEED_SCALE": "20", "SGLEMU_WARMUP_REQUESTS": "1",
                                   "SGLEMU_WARMUP_FACTOR": "0.4"})
    for _ in range(2):
        post(emu.url + "/generate", gen_body(30))
    w, n = real_requests(emu.stats())
    assert w["warmup"] and not n["warmup"]
    assert w["decode_tok_s"] / n["decode_tok_s"] == pytest.approx(0.4, rel=0.2)


@pytest.mark.parametrize("profile,al_range,tok_s_range", [
    ("no_spec", (1.0, 1.0), (24.0, 28.0)),
    ("nextn_1step", (1.6, 1.9), (34.0, 41.0)),
    ("nextn_3step", (2.9, 3.4), (50.0, 60.0)),
])
def test_calibration_at_c1(emulator, profile, al_range, tok_s_range):
    scale = 10.0
    emu = emulator(profile, env={"SGLEMU_SPEED_SCALE": str(scale), "SGLEMU_WARMUP_REQUESTS": "0",
                                 "SGLEMU_SEED": "7"})
    for i in range(3):
        post(emu.url + "/generate", gen_body(300, text="calibrate %d" % i))
    stats = emu.stats()
    reqs = real_requests(stats)
    tokens = sum(r["completion_tokens"] for r in reqs)
    if profile == "no_spec":
        al = 1.0
    else:
        al = sum(r["completion_tokens"] - 1 for r in reqs) / sum(r["verify_ct"] for r in reqs)
    tok_s = sum(r["completion_tokens"] - 1 for r in reqs) / \
        sum(r["t_last_token"] - r["t_first_token"] for r in reqs) / scale
    assert tokens == 900
    assert al_range[0] <= al <= al_range[1], al
    assert tok_s_range[0] <= tok_s <= tok_s_range[1], tok_s
    nominal = stats["configured"]["nominal_c1_decode_tok_s"] / scale
    assert tok_s == pytest.approx(nominal, rel=0.08)


def test_long_context_lowers_acceptance(emulator):
    emu = emulator("nextn_3step", env={"SGLEMU_SPEED_SCALE": "50", "SGLEMU_WARMUP_REQUESTS": "0"})
    post(emu.url + "/generate", gen_body(300, text="short"))
    post(emu.url + "/generate", {"input_ids": [1] * 40000,
                                 "sampling_params": {"max_new_tokens": 300, "ignore_eos": True}})
    short, long_ = real_requests(emu.stats())
    assert long_["prompt_tokens"] == 40000
    assert long_["accept_length"] < short["accept_length"] - 0.4
    configured = emu.stats()["configured"]
    # the fitted curve (emulator README "Acceptance and context length"): 3.16 at an empty prompt, 2.39 at 32K
    assert configured["expected_accept_length_short_context"] == pytest.approx(3.16, abs=0.01)
    assert configured["expected_accept_length_32k_context"] == pytest.approx(2.39, abs=0.01)


def test_config_file_supplies_the_api_key_like_sglang(emulator, tmp_path):
    """SGLang's --config YAML (how the role passes the API key without putting it in argv)."""
    cfg = tmp_path / "secrets.yaml"
    cfg.write_text("api-key: from-config-file\n")
    emu = emulator("nextn_3step", extra=["--config", str(cfg)])
    import urllib.error
    import urllib.request
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(emu.url + "/v1/models", timeout=5)
    assert e.value.code == 401
    req = urllib.request.Request(emu.url + "/v1/models",
                                 headers={"Authorization": "Bearer from-config-file"})
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200
    assert "from-config-file" not in " ".join(emu.proc.args)


def test_config_file_keys_are_flags_as_written_like_sglang(emulator, tmp_path):
    """SGLang 0.5.23 makes --api_key of an api_key key, and argparse rejects it (the contract
    tier checks the same file against SGLang's own parser)."""
    cfg = tmp_path / "secrets.yaml"
    cfg.write_text("api_key: from-config-file\n")
    emu = emulator("nextn_3step", extra=["--config", str(cfg)], wait=False)
    assert emu.proc.wait(30) == 2
    assert "unrecognized arguments: --api_key from-config-file" in emu.output()
