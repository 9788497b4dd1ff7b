"""Prometheus exposition with vLLM 0.33.0's names and label sets.

v1/metrics/loggers.py PrometheusStatLogger: labels model_name (the first served name) and engine
("0"); gauges vllm:num_requests_running / _waiting / vllm:kv_cache_usage_perc; counters
vllm:prompt_tokens, vllm:generation_tokens (per engine step, not at finish), vllm:request_success
{finished_reason}; log_metrics_info("cache_config"): vllm:cache_config_info, a gauge at 1 whose
labels are every CacheConfig field (str(value)) plus engine. v1/spec_decode/metrics.py
SpecDecodingProm (only with a speculative config): vllm:spec_decode_num_drafts,
_num_draft_tokens, _num_accepted_tokens and _num_accepted_tokens_per_pos{position="0".."k-1"}.
Histograms (loggers.py, buckets.py): vllm:inter_token_latency_seconds once per engine step of a
request after its first (stats.py IterationStats.update_from_output: the time since the request's
previous step, however many tokens the step emitted), and per finished request
vllm:request_time_per_output_token_seconds (decode time / (generated tokens - 1), 0 for one
token), vllm:request_decode_time_seconds (last token - first token),
vllm:request_generation_tokens and vllm:request_prompt_tokens (each finished request's counts).
prometheus_client adds `_total` to counters and a `_created` sample per counter.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List

from ..metrics import Histogram, _fmt, _labels

# v1/metrics/loggers.py histogram buckets (the ones the emulator serves)
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
E2E_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
               120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
INTER_TOKEN_LATENCY_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                               2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
FINISH_REASONS = ["stop", "length", "abort", "error", "repetition"]


def request_tokens_buckets(max_model_len: int) -> List[float]:
    """buckets.py build_1_2_5_buckets(max_model_len): 1, 2, 5, 10, 20, 50, ... up to it."""
    out, scale = [], 1
    while True:
        for m in (1, 2, 5):
            if m * scale > max_model_len:
                return out
            out.append(m * scale)
        scale *= 10


def cache_config_labels(cfg: Dict[str, Any], cap) -> List[tuple]:
    """CacheConfig.metrics_info(): {field: str(value)} in field order (config/cache.py)."""
    fields = [
        ("block_size", cap.block_size), ("user_specified_block_size", False),
        ("kv_cache_layout", None), ("prefix_match_unit", None),
        ("gpu_memory_utilization", cfg["gpu_memory_utilization"]), ("cache_dtype", "auto"),
        ("is_attention_free", False), ("num_gpu_blocks_override", None),
        ("sliding_window", None), ("enable_prefix_caching", cfg["enable_prefix_caching"]),
        ("prefix_caching_hash_algo", "sha256"), ("prefix_cache_retention_interval", 0),
        ("kv_cache_dtype_skip_layers", []),
        ("mamba_page_size_padded", cap.block_size * cap.attn_page_bytes_per_token
         if cap.mamba_state_bytes else None), ("skip_page_size_padded", None),
        ("mamba_block_size", cap.block_size if cap.mamba_cache_mode == "align"
         else cfg["max_model_len"]),
        ("mamba_cache_dtype", "auto"), ("mamba_ssm_cache_dtype", "float32"),
        ("mamba_cache_mode", cap.mamba_cache_mode),
        ("enable_mamba_shared_prefix_checkpoint", False), ("replayssm_buffer_len", 16),
        ("use_replayssm", False), ("use_kda_recoverssm", False),
        ("num_gpu_blocks", cap.num_gpu_blocks), ("num_cpu_blocks", None),
        ("simple_cpu_offload_num_blocks", None),
        ("effective_attention_block_size", cap.block_size),
        ("kv_cache_size_tokens", cap.kv_cache_size_tokens),
        ("kv_cache_max_concurrency", cap.max_concurrency),
        ("hash_block_size", cap.block_size), ("cache_hit_alignment_tokens", cap.block_size),
        ("kv_sharing_fast_prefill", False), ("swa_bounded_replay", True),
        ("kv_cache_memory_bytes", None), ("kv_offloading_size", None),
        ("kv_offloading_backend", "native"), ("_block_size_resolved", True),
    ]
    return [(k, str(v)) for k, v in fields] + [("engine", "0")]


class VllmMetrics:
    """Same observer interface as ..metrics.Metrics (the shared scheduler calls it)."""

    def __init__(self, cfg: Dict[str, Any]):
        self.labels = [("model_name", cfg["served_model_name"]), ("engine", "0")]
        # SpecDecodingStats.new(num_spec_tokens): positions 0..k-1 of every method (mtp, dflash's
        # block of k drafts after the anchor, eagle3's chain). args.resolve names k
        # num_speculative_tokens (for dflash its speculative_num_steps is SGLang's 1); a config
        # without it is an MTP one, whose steps are k.
        self.num_spec = int(cfg.get("num_speculative_tokens", cfg.get("speculative_num_steps"))
                            or 0)
        self.created = time.time()
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success: Dict[str, int] = {r: 0 for r in FINISH_REASONS}
        self.num_drafts = 0
        self.num_draft_tokens = 0
        self.num_accepted = 0
        self.per_pos = [0] * self.num_spec
        self.ttft = Histogram(TTFT_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.itl = Histogram(INTER_TOKEN_LATENCY_BUCKETS)
        self.tpot = Histogram(INTER_TOKEN_LATENCY_BUCKETS)
        self.decode_time = Histogram(E2E_BUCKETS)
        self.generation_tokens_request = Histogram(request_tokens_buckets(int(cfg["max_model_len"])))
        self.prompt_tokens_request = Histogram(request_tokens_buckets(int(cfg["max_model_len"])))
        self.running = 0
        self.waiting = 0
        self.kv_usage = 0.0
        self.cache_info: List[tuple] = []

    # -- the scheduler's calls ----------------------------------------------------------------
    def observe_ttft(self, value: float, stream: bool) -> None:
        self.ttft.observe(value)

    def observe_itl(self, interval: float, num_new_tokens: int) -> None:
        """One engine step of one request: vLLM observes the interval once, not per token."""
        self.itl.observe(interval)

    def observe_finished(self, req, t: float) -> None:
        fr = req.finish["type"] if req.finish else "abort"
        self.success[fr if fr in self.success else "abort"] += 1
        self.e2e.observe(t - req.t_arrival)
        decode = req.t_last - req.t_first if req.t_first is not None else 0.0
        self.decode_time.observe(decode)
        self.generation_tokens_request.observe(req.produced)
        self.prompt_tokens_request.observe(req.prompt_tokens)
        self.tpot.observe(decode / (req.produced - 1) if req.produced > 1 else 0.0)

    def set_scheduler_gauges(self, sched) -> None:
        self.running = len(sched.running)
        self.waiting = len(sched.waiting)
        self.kv_usage = min(1.0, sched.kv_used() / float(max(1, sched.max_total_tokens)))

    # -- vLLM's per-step accounting -------------------------------------------------------------
    def observe_step_tokens(self, prompt: int, generated: int) -> None:
        self.prompt_tokens += prompt
        self.generation_tokens += generated

    def observe_draft(self, accepted: int) -> None:
        """SpecDecodingStats.observe_draft for one request's verify step."""
        self.num_drafts += 1
        self.num_draft_tokens += self.num_spec
        self.num_accepted += accepted
        for i in range(accepted):
            self.per_pos[i] += 1

    def counter_totals(self) -> Dict[str, Any]:
        return {"prompt_tokens_total": self.prompt_tokens,
                "generation_tokens_total": self.generation_tokens,
                "request_success_total": sum(self.success.values()),
                "spec_decode_num_drafts_total": self.num_drafts,
                "spec_decode_num_draft_tokens_total": self.num_draft_tokens,
                "spec_decode_num_accepted_tokens_total": self.num_accepted,
                "spec_decode_num_accepted_tokens_per_pos_total": list(self.per_pos)}

    # -- exposition -------------------------------------------------------------------------------
    def render(self) -> str:
        out: List[str] = []
        lab = self.labels

        def family(name: str, kind: str, doc: str) -> None:
            out.append("# HELP %s %s" % (name, doc))
            out.append("# TYPE %s %s" % (name, kind))

        def counter(name: str, doc: str, samples) -> None:
            family(name, "counter", doc)
            for labels, value in samples:
                out.append("%s_total%s %s" % (name, _labels(labels), _fmt(value)))
            for labels, _ in samples:
                out.append("%s_created%s %s" % (name, _labels(labels), _fmt(self.created)))

        for name, doc, value in (
                ("vllm:num_requests_running", "Number of requests in model execution batches.",
                 self.running),
                ("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                 self.waiting),
                ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                 self.kv_usage)):
            family(name, "gauge", doc)
            out.append("%s%s %s" % (name, _labels(lab), _fmt(value)))
        if self.cache_info:
            family("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
            out.append("vllm:cache_config_info%s 1.0" % _labels(self.cache_info))
        counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                [(lab, self.prompt_tokens)])
        counter("vllm:generation_tokens", "Number of generation tokens processed.",
                [(lab, self.generation_tokens)])
        counter("vllm:request_success", "Count of successfully processed requests.",
                [(lab + [("finished_reason", r)], n) for r, n in self.success.items()])
        if self.num_spec:
            counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
                    [(lab, self.num_drafts)])
            counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
                    [(lab, self.num_draft_tokens)])
            counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                    [(lab, self.num_accepted)])
            counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                    "Accepted tokens per draft position.",
                    [(lab + [("position", str(i))], n) for i, n in enumerate(self.per_pos)])
        for name, doc, h in (
                ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                 self.ttft),
                ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                 self.itl),
                ("vllm:request_time_per_output_token_seconds",
                 "Histogram of time_per_output_token_seconds per request.", self.tpot),
                ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                 self.e2e),
                ("vllm:request_decode_time_seconds",
                 "Histogram of time spent in DECODE phase for request.", self.decode_time),
                ("vllm:request_generation_tokens", "Number of generation tokens processed.",
                 self.generation_tokens_request),
                ("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
                 self.prompt_tokens_request)):
            family(name, "histogram", doc)
            out.extend(h.lines(name, lab))
        return "\n".join(out) + "\n"
