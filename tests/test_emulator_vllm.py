"""The vLLM 0.33.0 side of the emulator (emulator/vllm), in-process and over real HTTP."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from bench.launch import EmulatorProcess
from conftest import ROOT, free_port

pytestmark = pytest.mark.timeout(120)

CONTRACT_ARGV = [
    "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.9", "--max-model-len", "131072",
    "--max-num-seqs", "8", "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}',
    "--enable-prefix-caching", "--mamba-cache-mode", "align", "--reasoning-parser", "qwen3",
    "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder", "--language-model-only",
    "--served-model-name", "Qwen3.6-27B", "--trust-remote-code",
    "--per-request-spec-decode-metrics", "summary"]
MODEL = "/models/Qwen3.6-27B"
FAST = {"SGLEMU_SPEED_SCALE": "50", "SGLEMU_WARMUP_REQUESTS": "0", "SGLEMU_SEED": "7"}


def spec(n):
    return json.dumps({"method": "mtp", "num_speculative_tokens": n})


# ------------------------------------------------------------------------------- helpers ------
def run_cli(args, env=None, timeout=20):
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "emulator.vllm", *args], cwd=str(ROOT),
                          env=full, capture_output=True, text=True, timeout=timeout)


class Vllm(EmulatorProcess):
    """bench.launch's emulator subprocess, on either engine's module."""

    def __init__(self, args, env=None, engine="vllm"):
        port = free_port()
        self.log = open("/tmp/i15emu-test-%d.log" % port, "w+")
        module = "emulator.vllm" if engine == "vllm" else "emulator"
        # vLLM's arguments after `serve MODEL`, or a whole `serve MODEL ...` argv
        argv = list(args) if engine != "vllm" or list(args[:1]) == ["serve"] else ["serve", MODEL, *args]
        super().__init__(argv, self.log, dict(FAST, **(env or {})), port, module)

    def wait(self, timeout=30):
        try:
            self.wait_ready(timeout=timeout)
        except RuntimeError as exc:
            raise AssertionError("%s: %s" % (exc, self.output())) from None
        return self

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        super().stop()
        self.log.close()
        os.unlink(self.log.name)


@pytest.fixture
def vllm():
    started = []

    def start(args=CONTRACT_ARGV, env=None, engine="vllm", wait=True):
        emu = Vllm(args, env, engine)
        started.append(emu)
        return emu.wait() if wait else emu

    yield start
    for emu in started:
        emu.stop()


def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def post(url, body, headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=dict(
        {"Content-Type": "application/json"}, **(headers or {})))
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def sse(url, body):
    req = urllib.request.Request(url, data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    out = []
    with urllib.request.urlopen(req, timeout=60) as r:
        for line in r:
            line = line.strip()
            if line.startswith(b"data: "):
                out.append("[DONE]" if line[6:] == b"[DONE]" else json.loads(line[6:]))
    return out


def metrics(url):
    vals = {}
    for line in get(url + "/metrics")[1].decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            vals[name] = float(value)
    return vals


def chat(max_tokens=64, **kw):
    return dict({"model": "Qwen3.6-27B", "max_tokens": max_tokens, "ignore_eos": True,
                 "messages": [{"role": "user", "content": "Write a function."}]}, **kw)


# --------------------------------------------------------------------- command line -----------
@pytest.mark.parametrize("extra,where,message", [
    (["--foo", "1"], "main.py: error: ", "unrecognized arguments: --foo 1"),
    (["--mamba-cache-mode", "all"], "main.py serve: error: ",
     "argument --mamba-cache-mode: invalid choice: 'all'"),
    (["--per-request-spec-decode-metrics", "full"], "main.py serve: error: ",
     "argument --per-request-spec-decode-metrics: invalid choice: 'full'"),
    (["--max-model-len", "1.5K"], "main.py serve: error: ",
     "argument --max-model-len: Decimals are not allowed with binary suffixes like K. Did you mean "
     "to use 1.5k instead?"),
    (["-tp", "two"], "main.py serve: error: ",
     "argument --tensor-parallel-size/-tp: invalid int value: 'two'"),
    (["--speculative-config", "{bad"], "main.py serve: error: ",
     "argument --speculative-config: Value {bad cannot be converted to <function loads"),
])
def test_argparse_rejections_exit_2(extra, where, message):
    proc = run_cli(["serve", MODEL, *extra])
    assert proc.returncode == 2, proc.stderr
    assert where + message in proc.stderr


def test_accepted_spellings_and_defaults():
    from emulator.vllm.args import parse, resolve

    cfg = resolve(parse(["serve", MODEL, "-tp", "2", "--max_num_seqs", "4", "--max-model-len",
                         "128K", "--no-enable-prefix-caching"]), "Qwen3_5ForConditionalGeneration")
    assert (cfg["tp_size"], cfg["max_num_seqs"], cfg["max_model_len"]) == (2, 4, 131072)
    assert cfg["gpu_memory_utilization"] == 0.92 and cfg["speculative_algorithm"] is None
    assert cfg["resolved_mamba_cache_mode"] == "none"
    assert resolve(parse(["serve", MODEL, "--max-model-len", "25.6k"]), "x")["max_model_len"] == 25600
    cfg = resolve(parse(["serve", MODEL, "--max-model-len", "auto", "--disable-prefix-caching"]),
                  "Qwen3_5ForConditionalGeneration")
    assert cfg["max_model_len"] == 262144 and cfg["enable_prefix_caching"] is False
    cfg = resolve(parse(["serve", MODEL]), "Qwen3_5ForConditionalGeneration")
    assert cfg["resolved_mamba_cache_mode"] == "align" and cfg["max_num_seqs"] == 256
    assert cfg["served_model_names"] == [MODEL] and cfg["port"] == 8000


@pytest.mark.parametrize("alias", ["qwen3_next_mtp", "qwen3_5_mtp", "mtp"])
def test_mtp_aliases_rewritten(alias, caplog):
    from emulator.vllm.args import parse, resolve

    cfg = resolve(parse(["serve", MODEL, "--speculative-config",
                         json.dumps({"method": alias, "num_speculative_tokens": 2})]), "x")
    assert cfg["speculative_config"]["method"] == "mtp"
    assert (cfg["speculative_num_steps"], cfg["speculative_num_draft_tokens"]) == (2, 3)
    assert ("method `%s` is deprecated and replaced with mtp." % alias in caplog.text) \
        == (alias != "mtp")


@pytest.mark.parametrize("extra,exc,message", [
    (["--enable-auto-tool-choice"], TypeError,
     "Error: --enable-auto-tool-choice requires --tool-call-parser"),
    (["--per-request-spec-decode-metrics", "summary"], ValueError,
     "--per-request-spec-decode-metrics requires speculative decoding to be enabled (via "
     "--speculative-config)."),
    (["--enable-auto-tool-choice", "--tool-call-parser", "qwen4"], KeyError,
     "invalid tool call parser: qwen4 (chose from { apertus,beam,"),
    (["--reasoning-parser", "qwen4"], KeyError, "invalid reasoning parser: qwen4 (chose from {"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}'],
     NotImplementedError,
     "vllm emulator: speculative method 'ngram' is a valid vLLM 0.33 method but is not"),
    (["--speculative-config", '{"method": "nextn", "num_speculative_tokens": 3}'], ValueError,
     "1 validation error for SpeculativeConfig\nmethod\n  Input should be 'ngram', "),
    (["--speculative-config", '{"method": "mtp"}'], ValueError,
     "num_speculative_tokens must be provided with speculative model unless the draft model "
     "config contains an n_predict parameter."),
    # pydantic's Field(gt=0) refuses it before SpeculativeConfig._verify_args could
    (["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 0}'], ValueError,
     "1 validation error for SpeculativeConfig\nnum_speculative_tokens\n  Input should be greater "
     "than 0 [type=greater_than, input_value=0, input_type=int]"),
    (["--max-model-len", "300000"], ValueError,
     "User-specified max_model_len (300000) is greater than the derived max_model_len "
     "(max_position_embeddings=262144"),
])
def test_vllm_validation_refusals(extra, exc, message):
    from emulator.vllm.args import parse, resolve

    with pytest.raises(exc) as info:
        resolve(parse(["serve", MODEL, *extra]), "Qwen3_5ForConditionalGeneration")
    text = info.value.args[0]
    assert text.startswith(message), text


def test_tool_parser_without_auto_tool_choice_is_accepted():
    """vLLM validates --tool-call-parser only with --enable-auto-tool-choice."""
    from emulator.vllm.args import parse, resolve

    assert resolve(parse(["serve", MODEL, "--tool-call-parser", "qwen4"]), "x")["tool_call_parser"] \
        == "qwen4"


@pytest.mark.parametrize("extra,message", [
    (["--gpu-memory-utilization", "0.99"],
     "Free memory on device cuda:0 (47.09/47.99 GiB) on startup is less than desired GPU memory "
     "utilization (0.99, 47.51 GiB)."),
    (["--gpu-memory-utilization", "0.55"], "No available memory for the cache blocks."),
    (["--gpu-memory-utilization", "0.64"],
     "To serve at least one request with the model's max seq len (262144), "),
])
def test_capacity_refusals(extra, message):
    from emulator.vllm import capacity
    from emulator.vllm.args import parse, resolve
    from emulator.vllm.cli import vllm_knobs

    cfg = resolve(parse(["serve", MODEL, "-tp", "2", "--speculative-config", spec(3), *extra]),
                  "Qwen3_5ForConditionalGeneration")
    knobs, mem = vllm_knobs({})
    with pytest.raises(capacity.CapacityError) as info:
        capacity.compute(cfg, knobs.gpu_memory_mib, **mem)
    assert str(info.value).startswith(message), str(info.value)


def test_refusal_exits_1_before_binding():
    proc = run_cli(["serve", MODEL, "--enable-auto-tool-choice"])
    assert proc.returncode == 1
    assert "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser" in proc.stderr


# ------------------------------------------------------------------- capacity (as vLLM) ------
def test_contract_launch_capacity():
    from emulator.vllm import capacity
    from emulator.vllm.args import parse, resolve
    from emulator.vllm.cli import vllm_knobs

    cfg = resolve(parse(["serve", MODEL, *CONTRACT_ARGV]), "Qwen3_5ForConditionalGeneration")
    knobs, mem = vllm_knobs({})
    cap = capacity.compute(cfg, knobs.gpu_memory_mib, **mem)
    # GDN state at TP 2, k = 3: conv (3 + 3) x 5120 x 2 B + SSM 24 x 128 x 128 x 4 B
    assert cap.mamba_state_bytes == 61440 + 1572864
    assert cap.attn_page_bytes_per_token == 2048 and cap.block_size == 800
    assert (cap.attention_layers, cap.mamba_layers, cap.group_size, cap.num_groups) == (17, 48, 17, 4)
    assert cap.mamba_cache_mode == "align" and cap.mamba_blocks_per_request == 3 * 5
    assert cap.num_gpu_blocks == 587 and cap.blocks_per_max_len_request == 164 + 15
    assert cap.kv_cache_size_tokens == 429828 and round(cap.max_concurrency, 2) == 3.28
    assert round(cap.available_kv_cache_memory_gib, 2) == 15.23


# ----------------------------------------------------------------------- readiness ------------
def test_readiness_port_closed_while_loading(vllm):
    emu = vllm(env={"SGLEMU_LOAD_SECONDS": "1.5"}, wait=False)
    time.sleep(0.5)
    with socket.socket() as s:
        s.settimeout(0.3)
        assert s.connect_ex(("127.0.0.1", emu.port)) != 0  # bound, not listening
    emu.wait()
    assert get(emu.url + "/health") == (200, b"")
    status, body = get(emu.url + "/v1/models")
    card = json.loads(body)["data"][0]
    assert (card["id"], card["max_model_len"], card["owned_by"]) == ("Qwen3.6-27B", 131072, "vllm")
    assert json.loads(get(emu.url + "/version")[1]) == {"version": "0.33.0"}
    assert get(emu.url + "/server_info")[0] == 404 and get(emu.url + "/health_generate")[0] == 404
    log = emu.output()
    assert "GPU KV cache size: 429,828 tokens, Maximum concurrency for 131,072 tokens per " \
           "request: 3.28x" in log
    assert "--mamba-cache-mode is deprecated" in log


def test_api_key_from_config_file_and_env(vllm, tmp_path):
    cfgfile = tmp_path / "secrets.yaml"
    cfgfile.write_text("api-key: sekrit\n")
    emu = vllm(["--config", str(cfgfile), "--served-model-name", "Qwen3.6-27B", "-tp", "2"],
               env={"VLLM_API_KEY": "other"})
    assert get(emu.url + "/v1/models")[0] == 401
    assert json.loads(get(emu.url + "/v1/models")[1]) == {"error": "Unauthorized"}
    assert get(emu.url + "/v1/models", {"Authorization": "Bearer other"})[0] == 401
    assert get(emu.url + "/v1/models", {"Authorization": "Bearer sekrit"})[0] == 200
    assert get(emu.url + "/health")[0] == 200 and get(emu.url + "/metrics")[0] == 200
    assert "sekrit" not in " ".join(emu.proc.args)
    emu2 = vllm(["--served-model-name", "Qwen3.6-27B", "-tp", "2"],
                env={"VLLM_API_KEY": "envkey"})
    assert get(emu2.url + "/v1/models", {"Authorization": "Bearer envkey"})[0] == 200
    assert get(emu2.url + "/v1/models")[0] == 401


# ------------------------------------------------------------------------- shapes -------------
SPEC_KEYS = ["mean_acceptance_length", "draft_acceptance_rate", "acceptance_histogram",
             "num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens"]


def check_spec(spec_m, k):
    assert list(spec_m) == SPEC_KEYS  # RequestSpecDecodeMetrics.to_dict, summary level
    hist = spec_m["acceptance_histogram"]
    assert len(hist) == k + 1 and sum(hist) == spec_m["num_spec_steps"]
    accepted = sum(j * c for j, c in enumerate(hist))
    assert spec_m["num_accepted_draft_tokens"] == accepted
    assert spec_m["num_draft_tokens"] == k * spec_m["num_spec_steps"]
    assert spec_m["mean_acceptance_length"] == pytest.approx(1 + accepted / sum(hist))
    assert spec_m["draft_acceptance_rate"] == pytest.approx(accepted / (k * sum(hist)))


def test_chat_stream_shapes_and_final_usage_chunk(vllm):
    emu = vllm()
    events = sse(emu.url + "/v1/chat/completions",
                 chat(40, stream_options={"include_usage": True}))
    assert events[-1] == "[DONE]"
    first, last = events[0], events[-2]
    assert first["object"] == "chat.completion.chunk" and first["id"].startswith("chatcmpl-")
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "usage" not in first
    body = events[1:-2]
    assert all("usage" not in c for c in body)
    deltas = [c["choices"][0]["delta"] for c in body]
    assert any("reasoning" in d for d in deltas) and any("content" in d for d in deltas)
    assert body[-1]["choices"][0]["finish_reason"] == "length"
    assert list(last) == ["id", "object", "created", "model", "choices", "usage", "metrics"]
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 40
    assert last["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    check_spec(last["metrics"]["speculative_decoding"], 3)
    # continuous usage: on every chunk, counting up
    events = sse(emu.url + "/v1/chat/completions", chat(
        20, stream_options={"include_usage": True, "continuous_usage_stats": True}))
    counts = [c["usage"]["completion_tokens"] for c in events[:-2]]
    assert counts[0] == 0 and counts == sorted(counts) and counts[-1] == 20
    # without include_usage no usage chunk at all (continuous alone is ignored)
    events = sse(emu.url + "/v1/chat/completions", chat(
        10, stream_options={"continuous_usage_stats": True}))
    assert all(c == "[DONE]" or (c["choices"] and "usage" not in c) for c in events)


def test_completions_and_non_streamed_shapes(vllm):
    emu = vllm()
    events = sse(emu.url + "/v1/completions", {"prompt": "def f(x):", "max_tokens": 30,
                                               "ignore_eos": True,
                                               "stream_options": {"include_usage": True}})
    assert events[0]["object"] == "text_completion" and events[0]["id"].startswith("cmpl-")
    assert list(events[0]["choices"][0]) == ["index", "text", "logprobs", "finish_reason",
                                             "stop_reason", "prompt_token_ids", "token_ids",
                                             "weight_versions"]
    last = events[-2]
    assert list(last["usage"]) == ["prompt_tokens", "total_tokens", "completion_tokens"]
    assert last["usage"]["completion_tokens"] == 30
    check_spec(last["metrics"]["speculative_decoding"], 3)
    status, raw = post(emu.url + "/v1/chat/completions", chat(25))
    body = json.loads(raw)
    assert status == 200 and body["object"] == "chat.completion"
    assert body["usage"]["completion_tokens"] == 25 and body["usage"]["prompt_tokens_details"] is None
    sd = body["metrics"]["speculative_decoding"]
    assert sd["per_step_accepted"] is None
    check_spec({k: sd[k] for k in SPEC_KEYS}, 3)
    # a default completions request: 16 tokens; a wrong model name: 404
    body = json.loads(post(emu.url + "/v1/completions", {"prompt": "x", "ignore_eos": True})[1])
    assert body["usage"]["completion_tokens"] == 16
    status, raw = post(emu.url + "/v1/completions", {"prompt": "x", "model": "nope"})
    assert status == 404 and json.loads(raw)["error"] == {
        "message": "The model `nope` does not exist. Valid aliases: Qwen3.6-27B.",
        "type": "NotFoundError", "param": "model", "code": 404}


def test_over_long_prompt_refused_with_vllms_400(vllm):
    emu = vllm()
    for stream in (False, True):
        status, raw = post(emu.url + "/v1/completions",
                           {"prompt": [1] * 131073, "max_tokens": 4, "stream": stream})
        assert status == 400
        assert json.loads(raw) == {"error": {
            "message": "This model's maximum context length is 131072 tokens. However, your "
                       "prompt contains 131073 input tokens, which exceeds this limit even "
                       "without any output tokens. Please reduce the length of the input prompt.",
            "type": "BadRequestError", "param": "input_tokens", "code": 400}}
    status, raw = post(emu.url + "/v1/completions", {"prompt": "x", "max_tokens": 200000})
    assert status == 400 and json.loads(raw)["error"]["message"].startswith(
        "max_tokens=200000 cannot be greater than max_model_len=131072.")
    # a prompt that fits gets max_tokens clamped to max_model_len - prompt (get_max_tokens)
    body = json.loads(post(emu.url + "/v1/completions",
                           {"prompt": [1] * 131068, "max_tokens": 50, "ignore_eos": True})[1])
    assert body["usage"]["completion_tokens"] == 4
    stats = json.loads(get(emu.url + "/_emulator/stats?requests=0")[1])
    assert stats["totals"]["refused_requests"] == 2


def test_histograms_match_metrics_deltas(vllm):
    emu = vllm(["--served-model-name", "Qwen3.6-27B", "-tp", "2", "--speculative-config", spec(4),
                "--per-request-spec-decode-metrics", "summary", "--max-num-seqs", "4"])
    before = metrics(emu.url)
    hist = [0] * 5
    completion = 0
    for i in range(6):
        ev = sse(emu.url + "/v1/chat/completions",
                 chat(50 + 7 * i, stream_options={"include_usage": True}))
        hist = [a + b for a, b in zip(hist, ev[-2]["metrics"]["speculative_decoding"]
                                      ["acceptance_histogram"])]
        completion += ev[-2]["usage"]["completion_tokens"]
    after = metrics(emu.url)
    lab = '{model_name="Qwen3.6-27B",engine="0"}'

    def delta(name, labels=lab):
        return after[name + labels] - before.get(name + labels, 0.0)

    steps = sum(hist)
    assert delta("vllm:spec_decode_num_drafts_total") == steps
    assert delta("vllm:spec_decode_num_draft_tokens_total") == 4 * steps
    assert delta("vllm:spec_decode_num_accepted_tokens_total") == sum(
        j * c for j, c in enumerate(hist))
    for pos in range(4):
        labels = '{model_name="Qwen3.6-27B",engine="0",position="%d"}' % pos
        assert delta("vllm:spec_decode_num_accepted_tokens_per_pos_total", labels) \
            == sum(hist[pos + 1:])
    assert delta("vllm:generation_tokens_total") == completion
    stats = json.loads(get(emu.url + "/_emulator/stats")[1])
    assert sum(r["verify_ct"] for r in stats["requests"]) == steps
    assert sum(r["completion_tokens"] for r in stats["requests"]) == completion
    assert after['vllm:num_requests_running' + lab] == 0
    info = [k for k in after if k.startswith("vllm:cache_config_info")][0]
    assert 'num_gpu_blocks="' in info and 'block_size="' in info and 'engine="0"' in info


# ------------------------------------------------------------------------ calibration ---------
# Unconditional per-position acceptance P(>= i drafts accepted), short prompt. vLLM:
# club-3090#74 at n=3 (0.80 / 0.52 / 0.35), positions 4-5 continuing the repeated-MTP chain.
# SGLang NEXTN: p = 0.75 (+ the 0..128-token ramp and the context factor: 0.7523 at 4 tokens) x 0.96 x 0.96
# x 0.40 x 0.35 (emulator/knobs.py).
VLLM_POS = [0.80, 0.52, 0.35, 0.231, 0.150]
SGL_POS = [0.7523, 0.7220, 0.6929, 0.2771, 0.0970]
# C=1 decode tok/s (model, SPEED_SCALE 1): cycle 37.45 + 4.0 + 5.2 n ms, AL = 1 + sum(P(i))
VLLM_TOK_S = {1: 38.6, 2: 44.7, 3: 46.8, 4: 46.6, 5: 45.2}
SGL_TOK_S = {1: 37.6, 2: 47.7, 3: 55.5, 4: 55.3, 5: 52.5}
TOKENS = 2400


def measure(emu, engine):
    if engine == "vllm":
        post(emu.url + "/v1/completions", {"prompt": "def add(a, b):", "max_tokens": TOKENS,
                                           "ignore_eos": True})
    else:
        post(emu.url + "/generate", {"text": "def add(a, b):", "sampling_params": {
            "max_new_tokens": TOKENS, "ignore_eos": True}})
    req = [r for r in json.loads(get(emu.url + "/_emulator/stats")[1])["requests"]
           if not r["health"]][-1]
    hist = req["correct_drafts_histogram"]
    steps = sum(hist)
    pos = [sum(hist[i:]) / steps for i in range(1, len(hist))]
    return pos, req["decode_tok_s"] / float(FAST["SGLEMU_SPEED_SCALE"]), req


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_per_position_calibration(vllm, engine, n):
    if engine == "vllm":
        emu = vllm(["--served-model-name", "Qwen3.6-27B", "-tp", "2", "--speculative-config",
                    spec(n)])
        expected, tok_s = VLLM_POS[:n], VLLM_TOK_S[n]
    else:
        emu = vllm(["--model-path", MODEL, "--tp-size", "2", "--speculative-algorithm", "NEXTN",
                    "--speculative-num-steps", str(n), "--speculative-eagle-topk", "1",
                    "--speculative-num-draft-tokens", str(n + 1), "--max-running-requests", "4"],
                   engine="sglang")
        expected, tok_s = SGL_POS[:n], SGL_TOK_S[n]
    pos, measured, req = measure(emu, engine)
    # the histogram's last bucket can miss a little on SGLang (emitted tokens, cut at the end)
    while len(pos) < n:
        pos.append(0.0)
    assert pos == pytest.approx(expected, abs=0.045), (pos, expected)
    stats = json.loads(get(emu.url + "/_emulator/stats?requests=0")[1])["configured"]
    assert stats["nominal_c1_decode_tok_s"] / stats["speed_scale"] == pytest.approx(tok_s, rel=0.02)
    assert measured == pytest.approx(tok_s, rel=0.10), (measured, tok_s)


def test_one_more_step_stops_paying_at_3_to_4():
    from emulator.knobs import DEFAULT_ACCEPT_PROBS, parse_probs
    from emulator.vllm.cli import VLLM_ACCEPT_PROBS

    def tok_s(probs, n, p1=None):
        probs = list(probs[:n])
        if p1 is not None:
            probs[0] = p1
        al, acc = 1.0, 1.0
        for p in probs:
            acc *= p
            al += acc
        return al / (37.45 + 4.0 + 5.2 * n) * 1000

    for p1 in (None, 0.83):  # empty prompt, coding prompt (the 128-token ramp)
        s = [tok_s(parse_probs(DEFAULT_ACCEPT_PROBS), n, p1) for n in range(1, 6)]
        assert s[0] < s[1] < s[2]           # 1 -> 3 steps pays
        assert abs(s[3] - s[2]) / s[2] < 0.01  # the 4th step about breaks even
        assert s[4] < s[3]                  # the 5th loses
    assert 1.74 < 1 + 0.75 < 1.76
    v = [tok_s(parse_probs(VLLM_ACCEPT_PROBS), n) for n in range(1, 6)]
    assert max(v) == v[2] and v[4] < v[3]
