"""Prometheus exposition with SGLang 0.5.23's metric names, label sets and buckets.

From srt/observability/metrics_collector.py: scheduler gauges carry model_name, engine_type,
tp_rank, pp_rank, moe_ep_rank; tokenizer counters/histograms carry model_name, engine_type (plus
is_streaming where SGLang adds it). Like SGLang, the request counters move when a request
*finishes* (TokenizerMetricsCollector.observe_one_finished_request), health checks are not
counted (log_metrics=False), and SGLang's multiprocess registry prints "Multiprocess metric" as
the help text.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600,
               1200, 1800, 2400]
ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
               0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000,
               8.000]


def _fmt(v: float) -> str:
    if v == float("inf"):
        return "+Inf"
    return repr(float(v))


def _labels(pairs: List[Tuple[str, str]]) -> str:
    return "{" + ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"'))
                          for k, v in pairs) + "}"


class Histogram:
    __slots__ = ("bounds", "buckets", "sum")

    def __init__(self, bounds):
        self.bounds = list(bounds)
        self.buckets = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float, count: int = 1, total: float = None) -> None:
        self.sum += value * count if total is None else total
        for i, b in enumerate(self.bounds):
            if value <= b:
                self.buckets[i] += count
                return
        self.buckets[-1] += count

    def lines(self, name: str, labels: List[Tuple[str, str]]) -> List[str]:
        out, acc = [], 0
        for b, c in zip(self.bounds + [float("inf")], self.buckets):
            acc += c
            out.append("%s_bucket%s %s" % (name, _labels(labels + [("le", _fmt(b))]), _fmt(acc)))
        out.append("%s_count%s %s" % (name, _labels(labels), _fmt(acc)))
        out.append("%s_sum%s %s" % (name, _labels(labels), _fmt(self.sum)))
        return out


class Metrics:
    def __init__(self, served_model_name: str, enabled: bool):
        self.enabled = enabled
        self.tok_labels = [("engine_type", "unified"), ("model_name", served_model_name)]
        self.sched_labels = [("engine_type", "unified"), ("model_name", served_model_name),
                             ("moe_ep_rank", "0"), ("pp_rank", "0"), ("tp_rank", "0")]
        # counters keyed by is_streaming
        self.prompt_tokens: Dict[str, int] = {}
        self.generation_tokens: Dict[str, int] = {}
        self.num_requests: Dict[str, int] = {}
        self.spec_verify_calls = 0
        self.ttft: Dict[str, Histogram] = {}
        self.e2e: Dict[str, Histogram] = {}
        self.itl = Histogram(ITL_BUCKETS)
        # gauges
        self.num_running_reqs = 0
        self.num_queue_reqs = 0
        self.token_usage = 0.0
        self.full_token_usage = 0.0
        self.mamba_usage = 0.0
        self.gen_throughput = 0.0
        self.spec_accept_length = 0.0
        self.spec_accept_rate = 0.0
        # the draft worker's active steps and draft tokens (an adaptive server's move), set with
        # each decode log line of a speculative server (metrics_reporter.py report_decode_stats)
        self.spec_num_steps = 0
        self.spec_num_draft_tokens = 0
        self.spec = False

    # -- observations (called by the scheduler) ----------------------------------------------
    def observe_ttft(self, value: float, stream: bool) -> None:
        key = "true" if stream else "false"
        h = self.ttft.get(key)
        if h is None:
            h = self.ttft[key] = Histogram(TTFT_BUCKETS)
        h.observe(value)

    def observe_itl(self, interval: float, num_new_tokens: int) -> None:
        if num_new_tokens <= 0:
            return
        # TokenizerMetricsCollector.observe_inter_token_latency's fast path
        self.itl.observe(interval / num_new_tokens, count=num_new_tokens, total=interval)

    def observe_finished(self, req, t: float) -> None:
        key = "true" if req.stream else "false"
        self.prompt_tokens[key] = self.prompt_tokens.get(key, 0) + req.prompt_tokens
        self.generation_tokens[key] = self.generation_tokens.get(key, 0) + req.produced
        self.num_requests[key] = self.num_requests.get(key, 0) + 1
        self.spec_verify_calls += req.verify_ct
        h = self.e2e.get(key)
        if h is None:
            h = self.e2e[key] = Histogram(E2E_BUCKETS)
        h.observe(t - req.t_arrival)

    def set_scheduler_gauges(self, sched) -> None:
        self.num_running_reqs = len(sched.running)
        self.num_queue_reqs = len(sched.waiting)
        self.full_token_usage = sched.token_usage()
        self.mamba_usage = (round(sched.mamba_used() / float(sched.mamba_slots), 2)
                            if sched.mamba_slots else 0.0)
        # scheduler_metrics_mixin.py: token_usage = round(max(full, mamba), 2) ("FIXME:
        # misleadingly named"); full_token_usage is the KV pool's alone
        self.token_usage = max(self.full_token_usage, self.mamba_usage)
        self.spec = sched.spec

    def counter_totals(self) -> Dict[str, int]:
        return {
            "generation_tokens_total": sum(self.generation_tokens.values()),
            "prompt_tokens_total": sum(self.prompt_tokens.values()),
            "num_requests_total": sum(self.num_requests.values()),
            "spec_verify_calls_total": self.spec_verify_calls,
        }

    # -- exposition --------------------------------------------------------------------------
    def render(self) -> str:
        out: List[str] = []

        def family(name: str, kind: str) -> None:
            out.append("# HELP %s Multiprocess metric" % name)
            out.append("# TYPE %s %s" % (name, kind))

        def gauge(name: str, value: float) -> None:
            family(name, "gauge")
            out.append("%s%s %s" % (name, _labels(self.sched_labels), _fmt(value)))

        gauge("sglang:num_running_reqs", self.num_running_reqs)
        gauge("sglang:num_queue_reqs", self.num_queue_reqs)
        gauge("sglang:gen_throughput", self.gen_throughput)
        gauge("sglang:token_usage", self.token_usage)
        gauge("sglang:full_token_usage", self.full_token_usage)
        gauge("sglang:mamba_usage", self.mamba_usage)
        gauge("sglang:spec_accept_length", self.spec_accept_length)
        gauge("sglang:spec_accept_rate", self.spec_accept_rate)
        gauge("sglang:spec_num_steps", self.spec_num_steps)
        gauge("sglang:spec_num_draft_tokens", self.spec_num_draft_tokens)
        for name, values in (("sglang:prompt_tokens_total", self.prompt_tokens),
                             ("sglang:generation_tokens_total", self.generation_tokens),
                             ("sglang:num_requests_total", self.num_requests)):
            family(name, "counter")
            for key in sorted(values):
                out.append("%s%s %s" % (name, _labels(self.tok_labels + [("is_streaming", key)]),
                                        _fmt(values[key])))
        family("sglang:spec_verify_calls_total", "counter")
        if self.spec_verify_calls:
            out.append("sglang:spec_verify_calls_total%s %s"
                       % (_labels(self.tok_labels), _fmt(self.spec_verify_calls)))
        family("sglang:time_to_first_token_seconds", "histogram")
        for key in sorted(self.ttft):
            out.extend(self.ttft[key].lines("sglang:time_to_first_token_seconds",
                                            self.tok_labels + [("is_streaming", key)]))
        family("sglang:inter_token_latency_seconds", "histogram")
        if sum(self.itl.buckets):
            out.extend(self.itl.lines("sglang:inter_token_latency_seconds", self.tok_labels))
        family("sglang:e2e_request_latency_seconds", "histogram")
        for key in sorted(self.e2e):
            out.extend(self.e2e[key].lines("sglang:e2e_request_latency_seconds",
                                           self.tok_labels + [("is_streaming", key)]))
        return "\n".join(out) + "\n"
