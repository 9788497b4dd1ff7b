"""The emulator's capacity (SGLang 0.5.23's pool sizing, emulator/memory.py), admission,
and its context-dependent acceptance and speed, over real HTTP on 127.0.0.1.

The figures below follow from memory.py's defaults (RTX A6000 49140 MiB, the original log's weights,
Qwen3.6-27B's config, SGLEMU_PRE_POOL_RESERVE_MIB 2530 fitted to the original run's 24-slot mamba pool);
emulator/README.md "Capacity" derives them step by step."""
from __future__ import annotations

import json
import threading
import urllib.request

import pytest

from conftest import PROFILE_ARGS
from bench.profiles import HAND_LAUNCH_ARGS
from test_emulator import http_status, post, real_requests, stream

pytestmark = pytest.mark.timeout(60)

FAST = {"SGLEMU_SPEED_SCALE": "50", "SGLEMU_WARMUP_REQUESTS": "0"}
# The original hand launch (bench/profiles.py: no memory settings, the model's own context).
HAND = HAND_LAUNCH_ARGS
# The memory held before the pools that leaves the hand launch one running request (the
# closest 0.5.23's sizing comes to the original 19K-token, one-request server; emulator/README.md).
ONE_REQUEST = dict(FAST, SGLEMU_PRE_POOL_RESERVE_MIB="7000")


def capacity(info):
    state = info["internal_states"][0]
    return {"context_length": info["context_length"],
            "max_total_num_tokens": info["max_total_num_tokens"],
            "max_req_input_len": info["max_req_input_len"],
            "effective_max_running_requests": state["effective_max_running_requests_per_dp"],
            "max_mamba_cache_size": state["max_mamba_cache_size"]}


def gen_ids(n, max_new=8, **kw):
    return dict({"input_ids": [7] * n,
                 "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}}, **kw)


# -------------------------------------------------------------------------- capacity --------
def test_hand_launch_capacity_as_sglang_sizes_it(emulator):
    emu = emulator(HAND, env=FAST)
    info = emu.get("/server_info")
    # computed mem_fraction_static (memory_hook.py): round((49140 - 7376) / 49140, 3) = 0.85,
    # x 0.95 x 0.9734 for the 1152-wide vision tower
    assert info["mem_fraction_static"] == pytest.approx(0.78605, abs=1e-5)
    assert info["mamba_full_memory_ratio"] == 0.9 and info["max_running_requests"] == 48
    assert info["max_mamba_cache_size"] is None  # top level: the resolved startup args
    assert capacity(info) == {"context_length": 262144, "max_total_num_tokens": 98875,
                              "max_req_input_len": 98869,  # min(262143, 98874) - 5
                              "effective_max_running_requests": 5,  # 26 mamba slots // 5
                              "max_mamba_cache_size": 26}
    usage = info["internal_states"][0]["memory_usage"]
    assert usage["token_capacity"] == 98875 and usage["weight"] == 25.64
    assert set(usage) == {"weight", "kvcache", "startup_available", "token_capacity",
                          "token_capacity_swa", "graph"}
    log = emu.output()
    assert "KV pool holds 98875 tokens, fewer than --context-length 262144." in log
    assert "max_running_requests is capped to 5 by the mamba state cache " \
           "(max_mamba_cache_size=26, 5 state slots per request)" in log
    assert "max_total_num_tokens=98875, chunked_prefill_size=4096, max_prefill_tokens=16384, " \
           "max_running_requests=5, context_len=262144, available_gpu_mem=" in log


def test_hand_launch_with_the_original_single_request(emulator):
    emu = emulator(HAND, env=ONE_REQUEST)
    cap = capacity(emu.get("/server_info"))
    assert cap["effective_max_running_requests"] == 1 and cap["max_mamba_cache_size"] == 5
    assert cap["max_total_num_tokens"] == 28363 and cap["max_req_input_len"] == 28357


def test_tuned_3step_profile_capacity(emulator):
    emu = emulator("nextn_3step", env=FAST)
    info = emu.get("/server_info")
    # extra_buffer_lazy: 4 state slots per request, not extra_buffer's 5 (memory.mamba_ratio)
    assert capacity(info) == {"context_length": 131072, "max_total_num_tokens": 219839,
                              "max_req_input_len": 131066,  # min(131071, 219838) - 5
                              "effective_max_running_requests": 5,  # 21 mamba slots // 4
                              "max_mamba_cache_size": 21}
    assert info["max_running_requests"] == 16  # what was asked; the pools allow 5
    log = emu.output()
    assert "KV pool holds" not in log
    assert "max_running_requests is capped to 5 by the mamba state cache" in log
    # a request of nearly the whole context fits the KV pool
    status, out = post(emu.url + "/generate", gen_ids(131000, 8), timeout=40)
    assert status == 200 and out["meta_info"]["completion_tokens"] == 8
    assert out["meta_info"]["prompt_tokens"] == 131000


def test_sixteen_running_requests_do_not_fit_at_mem_fraction_088(emulator):
    # 16 running x 5 slots: 81 x 73.4 MiB of state + 17 x 4 x 73.4 MiB of verify state leave
    # the KV cache nothing at mem 0.88 (SGLang's own refusal)
    emu = emulator(list(PROFILE_ARGS["nextn_3step"]) + ["--max-mamba-cache-size", "80"],
                   env=FAST, wait=False)
    assert emu.proc.wait(30) != 0
    assert "ValueError: Loaded weights leave no GPU memory for the KV cache under " \
           "--mem-fraction-static=0.88." in emu.output()


def test_original_run_002_point(emulator):
    # the original run 002 at mem 0.92 / ratio 0.4 (3 steps, extra_buffer): a 24-slot mamba
    # pool, 4 running
    emu = emulator(list(PROFILE_ARGS["nextn_3step"]) + [
        "--mem-fraction-static", "0.92", "--mamba-full-memory-ratio", "0.4",
        "--mamba-radix-cache-strategy", "extra_buffer"], env=FAST)
    cap = capacity(emu.get("/server_info"))
    assert cap["max_mamba_cache_size"] == 24 and cap["effective_max_running_requests"] == 4
    # per GPU: SSM (24 + 1) x 72 MiB, intermediate (4 + 1) x 4 x 72 MiB (the original log's 3.52 / 2.81
    # GB are twice these: both GPUs)
    assert "max_mamba_cache_size: 24, conv_state size: 0.03GB, ssm_state size: 1.76GB " \
           "intermediate_ssm_state_cache size: 1.41GB" in emu.output()


def test_gpu_memory_knob_scales_the_pools(emulator):
    emu = emulator("nextn_3step", env=dict(FAST, SGLEMU_GPU_MEMORY_MIB="81559"))  # A100 80GB
    cap = capacity(emu.get("/server_info"))
    assert cap["effective_max_running_requests"] == 16
    assert cap["max_total_num_tokens"] > 600000


# ------------------------------------------------------------------------- admission --------
LONG = 28400  # > max_req_input_len 28357 of the one-request hand launch
REFUSAL = ("Input length (28400 tokens) exceeds the maximum allowed length (28357 tokens). "
           "Use a shorter input or enable --allow-auto-truncate.")


def test_over_long_input_is_refused_like_sglang(emulator):
    emu = emulator(HAND, env=ONE_REQUEST)
    url = emu.url
    # native, not streamed: tokenizer_manager raises ValueError -> HTTP 400
    code, body = http_status(url + "/generate", method="POST", body=gen_ids(LONG))
    assert code == 400 and json.loads(body) == {"error": {"message": REFUSAL}}
    # native, streamed: HTTP 200, the abort is the last chunk, then [DONE]
    events, err = stream(url + "/generate", gen_ids(LONG))
    chunks = [e for _, e in events]
    assert err is None and chunks[-1] == "[DONE]" and len(chunks) == 2
    assert chunks[0]["text"] == "" and chunks[0]["output_ids"] == []
    assert chunks[0]["meta_info"]["finish_reason"] == {
        "type": "abort", "message": REFUSAL, "status_code": 400, "err_type": "BadRequestError"}
    # OpenAI routes, not streamed: ErrorResponse, HTTP 400
    content = "x" * (4 * (LONG - 7))  # 4 chars a token + the template's 7 tokens
    chat = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": content}]}
    code, body = http_status(url + "/v1/chat/completions", method="POST", body=chat)
    assert code == 400 and json.loads(body) == {"object": "error", "message": REFUSAL,
                                                "type": "BadRequestError", "param": None,
                                                "code": 400}
    code, body = http_status(url + "/v1/completions", method="POST",
                             body={"model": "m", "prompt": [7] * LONG, "max_tokens": 8})
    assert code == 400 and json.loads(body)["message"] == REFUSAL
    # OpenAI, streamed: the graceful-abort branch, finish_reason "abort"
    events, err = stream(url + "/v1/chat/completions", chat)
    chunks = [e for _, e in events]
    assert err is None and chunks[-1] == "[DONE]"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-2]["choices"][0]["finish_reason"] == "abort"
    # one token shorter than the limit runs
    status, out = post(url + "/generate", gen_ids(28356, 4))
    assert status == 200 and out["meta_info"]["completion_tokens"] == 4
    reqs = real_requests(emu.stats())
    refused = [r for r in reqs if r["finish_reason"] == "abort"]
    assert len(refused) == 5 and all(r["completion_tokens"] == 0 for r in refused)


def test_context_length_error_in_a_streamed_generate_is_an_sse_event(emulator):
    """The input counts the 4 output slots NEXTN 3 steps reserves for its drafts
    (managers/utils.py compute_num_reserved_tokens: max(topk x steps, draft tokens))."""
    emu = emulator("nextn_3step", env=FAST)
    events, err = stream(emu.url + "/generate", gen_ids(131068))
    chunks = [e for _, e in events]
    assert err is None and chunks[-1] == "[DONE]"
    assert chunks[0]["error"] == {
        "message": "The input (131072 tokens) is longer than the model's context length "
                   "(131072 tokens).", "type": "invalid_request_error", "code": 400,
        "retryable": False}
    # one token less passes the tokenizer's check and meets the scheduler's (max_req_input_len)
    status, body = http_status(emu.url + "/generate", method="POST", body={"input_ids": [7] * 131067})
    assert status == 400 and json.loads(body)["error"]["message"].startswith(
        "Input length (131067 tokens) exceeds the maximum allowed length (131066 tokens).")
    # without max_new_tokens only the input is checked; with it, the total counts the slots too
    status, body = http_status(emu.url + "/generate", method="POST",
                               body={"input_ids": [7] * 131000, "sampling_params": {"max_new_tokens": 69}})
    assert status == 400 and "You requested a total of 131073 tokens: 131004 tokens from the input " \
        "messages and 69 tokens for the completion." in json.loads(body)["error"]["message"]


def test_max_new_tokens_capped_by_the_kv_pool(emulator):
    # init_req_max_new_tokens: min(max_new_tokens, max_req_len - input - 1)
    emu = emulator(HAND, env=ONE_REQUEST)
    status, out = post(emu.url + "/generate", gen_ids(28000, 1000))
    assert status == 200 and out["meta_info"]["completion_tokens"] == 28362 - 28000 - 1


def test_kv_limited_admission(emulator):
    # 27575 KV tokens, 4 running allowed: two requests of 8000 + 2000 fit, the third waits
    emu = emulator(list(PROFILE_ARGS["nextn_3step"]) + [
        "--mem-fraction-static", "0.74", "--max-mamba-cache-size", "20",
        "--mamba-radix-cache-strategy", "extra_buffer"], env=FAST)
    cap = capacity(emu.get("/server_info"))
    assert cap["max_total_num_tokens"] == 27575 and cap["effective_max_running_requests"] == 4
    threads = [threading.Thread(target=post, args=(emu.url + "/generate",
                                                   gen_ids(8000, 2000, rid="kv%d" % i)))
               for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = emu.stats()
    reqs = sorted(real_requests(stats), key=lambda r: r["t_admit"])
    assert [r["completion_tokens"] for r in reqs] == [2000] * 3
    first_finish = min(r["t_finish"] for r in reqs[:2])
    assert reqs[2]["t_admit"] >= first_finish  # admitted only once KV was freed
    assert reqs[1]["t_admit"] < first_finish
    assert stats["totals"]["kv_admission_waits"] > 0


# ------------------------------------------------------------- acceptance and speed --------
def test_acceptance_and_speed_at_32k(emulator):
    emu = emulator("nextn_3step", env=FAST)
    post(emu.url + "/generate", gen_ids(1, 900))
    post(emu.url + "/generate", gen_ids(32768, 600), timeout=40)
    short, long_ = real_requests(emu.stats())
    # +-3 sigma of the sampled mean (per-step sd ~1.3)
    assert 2.93 <= short["accept_length"] <= 3.4  # 3.16
    assert 2.15 <= long_["accept_length"] <= 2.65  # fitted: 2.39
    # fewer tokens per cycle and a longer cycle (the 32K context's KV read): ~41 vs ~55 tok/s
    assert long_["decode_tok_s"] < 0.85 * short["decode_tok_s"]
    configured = emu.stats()["configured"]
    assert configured["nominal_c1_decode_tok_s_32k_context"] / 50 == pytest.approx(40.7, abs=0.5)


def test_collapse_knob(emulator):
    env = dict(FAST, SGLEMU_SEED="11")
    healthy = emulator("nextn_3step", env=env)
    broken = emulator("nextn_3step", env=dict(env, SGLEMU_LONGCTX_COLLAPSE_TOKENS="16384"))
    for emu in (healthy, broken):
        post(emu.url + "/generate", gen_ids(8000, 300, rid="below"))
        post(emu.url + "/generate", gen_ids(20000, 600, rid="above"), timeout=40)
    h = {r["rid"]: r for r in real_requests(healthy.stats())}
    b = {r["rid"]: r for r in real_requests(broken.stats())}
    # below the threshold nothing changes (same seed, same draws)
    assert b["below"]["verify_ct"] == h["below"]["verify_ct"]
    assert b["below"]["correct_drafts_histogram"] == h["below"]["correct_drafts_histogram"]
    # past it: sglang#30763's accept length ~1.57 and about half the speed
    assert 1.44 <= b["above"]["accept_length"] <= 1.71  # 1.57 +- 3 sigma
    assert h["above"]["accept_length"] > 2.2  # healthy at 20K: 2.51
    assert 22 <= b["above"]["decode_tok_s"] / 50 <= 32  # ~27 tok/s
    assert 0.4 <= b["above"]["decode_tok_s"] / h["above"]["decode_tok_s"] <= 0.75
    assert broken.stats()["configured"]["expected_accept_length_collapsed"] == \
        pytest.approx(1.573, abs=0.01)


def test_c4_aggregate_matches_the_original_c4_run(emulator):
    """8 x 1024-token streamed chat requests, 4 at a time, ~120-token coding prompts: the original
    234 tok/s aggregate (8192 tokens / 35.1 s), +-6%, at SPEED_SCALE 5 divided by 5 (the
    emulator's own arrival and finish times, so a busy client does not count)."""
    scale = 5.0
    emu = emulator("nextn_3step", env={"SGLEMU_SPEED_SCALE": str(scale),
                                       "SGLEMU_WARMUP_REQUESTS": "0", "SGLEMU_SEED": "3"})
    task = ("Write a Python module that implements a red-black tree with insert, delete and "
            "search, a pytest module for the edge cases, and explain the complexity. ")
    todo = list(range(8))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            # thinking off: the calibration's acceptance is an answer's (README "Thinking")
            body = {"model": "Qwen3.6-27B", "max_tokens": 1024, "ignore_eos": True,
                    "chat_template_kwargs": {"enable_thinking": False},
                    "messages": [{"role": "user", "content": "[%d] " % i + task * 3}]}
            stream(emu.url + "/v1/chat/completions", body, timeout=50)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reqs = real_requests(emu.stats())
    assert len(reqs) == 8 and all(r["completion_tokens"] == 1024 for r in reqs)
    assert all(100 <= r["prompt_tokens"] <= 200 for r in reqs)
    wall = max(r["t_finish"] for r in reqs) - min(r["t_arrival"] for r in reqs)
    aggregate = 8192 / wall / scale
    assert 234 * 0.94 <= aggregate <= 234 * 1.06, aggregate


def test_stats_show_the_capacity(emulator):
    emu = emulator("nextn_3step", env=FAST)
    configured = emu.stats()["configured"]
    assert configured["max_total_num_tokens"] == 219839 and configured["max_running_requests"] == 5
    assert configured["capacity"]["mamba_per_req_bytes"] == 76972032  # 73.4 MiB per slot
    assert configured["capacity"]["kv_bytes_per_token"] == 34816  # 32768 target + 2048 MTP
    with urllib.request.urlopen(emu.url + "/_emulator/stats?requests=0", timeout=5) as r:
        assert "requests" not in json.loads(r.read())
