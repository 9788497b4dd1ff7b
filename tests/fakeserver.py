"""A scripted HTTP server on 127.0.0.1 for protocol edge cases the emulator does not cover
(a non-SGLang OpenAI-compatible server, odd streams). Standard library only."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sse(obj):
    return ("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()


def openai_stream(tokens=16, per_chunk=1, spec=None, usage=True, delay=0.0, model="plain-model"):
    """Chunks of an OpenAI chat stream; ``spec`` adds the sglext spec chunk SGLang sends."""
    out = [sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
    sent = 0
    while sent < tokens:
        n = min(per_chunk, tokens - sent)
        sent += n
        chunk = {"choices": [{"index": 0, "delta": {"content": "x" * n},
                              "finish_reason": "length" if sent == tokens else None}]}
        if usage:
            chunk["usage"] = {"prompt_tokens": 10, "completion_tokens": sent,
                              "total_tokens": 10 + sent}
        out.append((delay, sse(chunk)))
    if spec:
        out.append(sse({"choices": [], "sglext": {"spec_tokens_details": spec}}))
    if usage:
        out.append(sse({"choices": [], "usage": {"prompt_tokens": 10,
                                                 "completion_tokens": tokens,
                                                 "total_tokens": 10 + tokens}}))
    out.append(sse("[DONE]"))
    return out


class FakeServer(object):
    """routes: {(method, path): callable(body_dict) -> (status, list of bytes or (delay, bytes))}"""

    def __init__(self, routes):
        self.routes = routes
        self.seen = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *a):
                pass

            def _serve(self, method):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}") if length else {}
                owner.seen.append((method, self.path, dict(self.headers), body))
                route = owner.routes.get((method, self.path))
                if route is None:
                    self.send_response(404)
                    self.end_headers()
                    self.wfile.write(b'{"detail":"Not Found"}')
                    return
                status, parts = route(body)
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream" if method == "POST"
                                 else "application/json")
                self.end_headers()
                try:
                    for part in parts:
                        if isinstance(part, tuple):
                            time.sleep(part[0])
                            part = part[1]
                        self.wfile.write(part)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def fixture_of(cls):
    """A pytest fixture body: ``make(...)`` starts a ``cls(...)``; all are closed at the end."""
    def fixture():
        servers = []

        def make(*args, **kw):
            servers.append(cls(*args, **kw))
            return servers[-1]

        yield make
        for s in servers:
            s.close()
    return fixture


def options(url, **kw):
    """Engine options for a quick run against a fake."""
    base = {"url": url, "requests": 3, "warmup": 1, "max_tokens": 16, "concurrency": 1,
            "first_token_timeout": 5, "stall_timeout": 2, "run_timeout": 30}
    base.update(kw)
    return base


def models(*names):
    return lambda body: (200, [json.dumps({"object": "list", "data": [
        {"id": n, "object": "model"} for n in names]}).encode()])


# ----------------------------------------------------------------------------- vLLM 0.33 ----
# The shapes of vLLM 0.33.0, read from its source (vllm/entrypoints/openai/chat_completion/
# serving.py, completion/serving.py, generate/base/protocol.py, v1/metrics/stats.py,
# v1/metrics/loggers.py, v1/spec_decode/metrics.py, config/cache.py).
VLLM_MODEL = "Qwen3.6-27B"
# CacheConfig fields in declaration order: vllm:cache_config_info carries every one as a label
VLLM_CACHE_FIELDS = (
    "block_size", "user_specified_block_size", "kv_cache_layout", "prefix_match_unit",
    "gpu_memory_utilization", "cache_dtype", "is_attention_free", "num_gpu_blocks_override",
    "sliding_window", "enable_prefix_caching", "prefix_caching_hash_algo",
    "prefix_cache_retention_interval", "kv_cache_dtype_skip_layers", "mamba_page_size_padded",
    "skip_page_size_padded", "mamba_block_size", "mamba_cache_dtype", "mamba_ssm_cache_dtype",
    "mamba_cache_mode", "enable_mamba_shared_prefix_checkpoint", "replayssm_buffer_len",
    "use_replayssm", "use_kda_recoverssm", "num_gpu_blocks", "num_cpu_blocks",
    "simple_cpu_offload_num_blocks", "effective_attention_block_size", "kv_cache_size_tokens",
    "kv_cache_max_concurrency", "hash_block_size", "cache_hit_alignment_tokens",
    "kv_sharing_fast_prefill", "swa_bounded_replay", "kv_cache_memory_bytes", "kv_offloading_size",
    "kv_offloading_backend", "_block_size_resolved")


def vllm_steps(max_tokens, accepted):
    """The tokens of each engine step of one request: the prefill's one token, then per verify
    step the accepted drafts + the bonus token (``accepted`` cycled), the last step cut to
    ``max_tokens`` as vLLM's stop check cuts it. Returns (tokens per step, accepted per verify step)."""
    steps, verify, n, i = [1], [], 1, 0
    while n < max_tokens:
        a = accepted[i % len(accepted)] if accepted else 0
        i += 1
        if accepted:
            verify.append(a)
        take = min(a + 1, max_tokens - n)
        steps.append(take)
        n += take
    return steps, verify


def vllm_spec_metrics(verify, k):
    """SpeculativeDecodingMetrics as RequestSpecDecodeMetrics.to_dict makes it (summary level)."""
    hist = [0] * (k + 1)
    for a in verify:
        hist[a] += 1
    steps, acc = sum(hist), sum(j * c for j, c in enumerate(hist))
    return {"mean_acceptance_length": 1.0 + acc / steps if steps else 1.0,
            "draft_acceptance_rate": acc / (k * steps) if steps else 0.0,
            "acceptance_histogram": hist, "num_spec_steps": steps,
            "num_accepted_draft_tokens": acc, "num_draft_tokens": k * steps, "num_spec_tokens": k}


class FakeVllm(object):
    """A vLLM 0.33 server's HTTP surface: /health (200, empty), /version, /v1/models (the card
    with max_model_len), no /server_info (404 unless ``dev_mode``), streamed chat and completions
    with continuous usage and, with speculation and ``per_request_metrics``, the final usage
    chunk's metrics.speculative_decoding, and /metrics whose counters follow what it served.

    ``accepted``: accepted drafts per verify step (cycled), [] for no speculation; ``k``:
    num_speculative_tokens; ``reasoning``: leading tokens streamed as delta.reasoning (the qwen3
    parser), the next one (</think>) hidden, as the parser returns no delta for it."""

    def __init__(self, accepted=(2, 3, 1, 3), k=3, reasoning=4, per_request_metrics=True,
                 max_model_len=131072, cache=None, dev_mode=None, prompt_tokens=20, metrics=True,
                 extra_generated=0):
        self.accepted, self.k, self.reasoning = list(accepted), k, reasoning
        self.per_request_metrics = per_request_metrics
        self.max_model_len, self.prompt_tokens = max_model_len, prompt_tokens
        self.extra_generated = extra_generated
        self.cache = {"block_size": "1056", "gpu_memory_utilization": "0.9", "enable_prefix_caching": "True",
                      "mamba_cache_mode": "align", "num_gpu_blocks": "420", "kv_cache_size_tokens": "221760",
                      "kv_cache_max_concurrency": "1.69", "kv_cache_dtype_skip_layers": "[]"}
        self.cache.update(cache or {})
        self.counters = {"gen": 0, "prompt": 0, "success": 0, "drafts": 0, "draft_tokens": 0,
                         "accepted": 0}
        self.per_pos = [0] * k
        self.lock = threading.Lock()
        routes = {("GET", "/health"): lambda b: (200, [b""]),
                  ("GET", "/version"): lambda b: (200, [json.dumps({"version": "0.33.0"}).encode()]),
                  ("GET", "/v1/models"): self.models,
                  ("POST", "/v1/chat/completions"): lambda b: self.stream(b, chat=True),
                  ("POST", "/v1/completions"): lambda b: self.stream(b, chat=False)}
        if metrics:
            routes[("GET", "/metrics")] = self.metrics
        if dev_mode is not None:  # VLLM_SERVER_DEV_MODE: /server_info dumps the VllmConfig
            routes[("GET", "/server_info")] = lambda b: (200, [json.dumps(
                {"vllm_config": "model='...' speculative_config=...", "vllm_env": {}}).encode()])
            routes[("GET", "/server_info?config_format=json")] = lambda b: (200, [json.dumps(
                {"vllm_config": dev_mode, "vllm_env": {}, "system_env": {}}).encode()])
        self.server = FakeServer(routes)
        self.url, self.seen = self.server.url, self.server.seen

    def close(self):
        self.server.close()

    def models(self, body):
        return 200, [json.dumps({"object": "list", "data": [{
            "id": VLLM_MODEL, "object": "model", "created": 1764633600, "owned_by": "vllm",
            "root": "/opt/models/Qwen3.6-27B", "parent": None, "max_model_len": self.max_model_len,
            "permission": [{"id": "modelperm-1", "object": "model_permission", "created": 1764633600,
                            "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                            "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                            "organization": "*", "group": None, "is_blocking": False}]}]}).encode()]

    def stream(self, body, chat):
        if body.get("stream_options") and not body.get("stream"):
            return 400, [json.dumps({"error": {"message": "Stream options can only be defined when "
                                               "`stream=True`.", "type": "BadRequestError",
                                               "param": "stream_options", "code": 400}}).encode()]
        steps, verify = vllm_steps(int(body["max_tokens"]), self.accepted)
        n, p = sum(steps), self.prompt_tokens
        cont = bool((body.get("stream_options") or {}).get("include_usage")
                    and body["stream_options"].get("continuous_usage_stats"))
        rid = ("chatcmpl-" if chat else "cmpl-") + str(body.get("request_id") or "x")
        head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": 1764633600, "model": VLLM_MODEL}
        out = []
        if chat:  # the role chunk, with the first RequestOutput (the prefill's token)
            role = dict(head, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "logprobs": None, "finish_reason": None}],
                        prompt_token_ids=None, prompt_text=None)
            if cont:
                role["usage"] = {"prompt_tokens": p, "total_tokens": p, "completion_tokens": 0,
                                 "completion_tokens_details": None}
            out.append(sse(role))
        done = 0
        for i, take in enumerate(steps):
            first = done
            done += take
            last = i == len(steps) - 1
            if chat and first <= self.reasoning < done and not last and take == 1:
                continue  # </think> alone: the parser returns no delta, no chunk
            if chat:
                delta = {"reasoning": "r" * take} if done <= self.reasoning else {"content": "c" * take}
                choice = {"index": 0, "delta": delta, "logprobs": None,
                          "finish_reason": "length" if last else None, "token_ids": None}
                if last:
                    choice.update(stop_reason=None, weight_versions=None)
            else:
                choice = {"index": 0, "text": "c" * take, "logprobs": None,
                          "finish_reason": "length" if last else None, "stop_reason": None,
                          "prompt_token_ids": None, "token_ids": None, "weight_versions": None}
            chunk = dict(head, choices=[choice], kv_transfer_params=None)
            if cont:
                chunk["usage"] = {"prompt_tokens": p, "total_tokens": p + done, "completion_tokens": done}
                if chat:
                    chunk["usage"]["completion_tokens_details"] = None
            out.append((0.002, sse(chunk)))
        if (body.get("stream_options") or {}).get("include_usage"):
            final = dict(head, choices=[], usage={"prompt_tokens": p, "total_tokens": p + n,
                                                  "completion_tokens": n})
            if self.accepted and self.per_request_metrics:
                final["metrics"] = {"speculative_decoding": vllm_spec_metrics(verify, self.k)}
            out.append(sse(final))
        out.append(sse("[DONE]"))
        with self.lock:
            c = self.counters
            c["gen"] += n + self.extra_generated
            c["prompt"] += p
            c["success"] += 1
            c["drafts"] += len(verify)
            c["draft_tokens"] += self.k * len(verify)
            c["accepted"] += sum(verify)
            for a in verify:
                for pos in range(a):
                    self.per_pos[pos] += 1
        return 200, out

    def metrics(self, body):
        eng = 'model_name="%s",engine="0"' % VLLM_MODEL
        with self.lock:
            c, per_pos = dict(self.counters), list(self.per_pos)
        lines = []

        def counter(name, value, labels=eng, doc="x"):
            lines.extend(["# HELP %s_total %s" % (name, doc), "# TYPE %s_total counter" % name,
                          "%s_total{%s} %.1f" % (name, labels, value),
                          "%s_created{%s} 1.7646336e+09" % (name, labels)])

        lines += ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
                  "# TYPE vllm:num_requests_running gauge", "vllm:num_requests_running{%s} 0.0" % eng,
                  "vllm:num_requests_waiting{%s} 0.0" % eng]
        counter("vllm:prompt_tokens", c["prompt"])
        counter("vllm:generation_tokens", c["gen"])
        for reason in ("stop", "length", "abort", "error", "repetition"):
            counter("vllm:request_success", c["success"] if reason == "length" else 0,
                    '%s,finished_reason="%s"' % (eng, reason))
        if self.accepted:
            counter("vllm:spec_decode_num_drafts", c["drafts"])
            counter("vllm:spec_decode_num_draft_tokens", c["draft_tokens"])
            counter("vllm:spec_decode_num_accepted_tokens", c["accepted"])
            lines += ["# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per "
                      "draft position.", "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"]
            for pos in range(self.k):
                lines.append('vllm:spec_decode_num_accepted_tokens_per_pos_total{%s,position="%d"} %.1f'
                             % (eng, pos, per_pos[pos]))
        labels = ",".join('%s="%s"' % (f, "0" if f == "engine" else self.cache.get(f, "None"))
                          for f in VLLM_CACHE_FIELDS + ("engine",))
        lines += ["# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
                  "# TYPE vllm:cache_config_info gauge", "vllm:cache_config_info{%s} 1.0" % labels,
                  "# HELP vllm:time_to_first_token_seconds x",
                  '# TYPE vllm:time_to_first_token_seconds histogram',
                  'vllm:time_to_first_token_seconds_bucket{%s,le="0.001"} 0.0' % eng]
        return 200, [("\n".join(lines) + "\n").encode()]
