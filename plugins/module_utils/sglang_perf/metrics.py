# -*- coding: utf-8 -*-
"""Reading an engine's Prometheus ``/metrics`` (SGLang's or vLLM's: one parser, one table of names
per engine) and turning two scrapes into window deltas."""
from __future__ import annotations

import re

# What the window reads, per engine: figure -> counter (as scraped, with ``_total``).
# vLLM: vllm/v1/metrics/loggers.py (tokens, requests) and vllm/v1/spec_decode/metrics.py (one
# ``drafts`` count per verify step of a request that had drafts, i.e. vLLM's num_spec_steps).
ENGINE_COUNTERS = {
    "sglang": {
        "generation_tokens": "sglang:generation_tokens_total",
        "prompt_tokens": "sglang:prompt_tokens_total",
        "verify_calls": "sglang:spec_verify_calls_total",
        "requests": "sglang:num_requests_total",
    },
    "vllm": {
        "generation_tokens": "vllm:generation_tokens_total",
        "prompt_tokens": "vllm:prompt_tokens_total",
        "verify_calls": "vllm:spec_decode_num_drafts_total",
        "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
        "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
        "requests": "vllm:request_success_total",
    },
}
# Counters kept per value of one label (vLLM's acceptance per draft position, positions 0..k-1).
BY_LABEL = {"vllm:spec_decode_num_accepted_tokens_per_pos_total": "position"}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# Info gauges (value 1): their labels are the figures (vLLM's CacheConfig as strings).
INFO = ("vllm:cache_config_info",)
COUNTERS = tuple(name for table in ENGINE_COUNTERS.values() for name in table.values())
# The requests each engine runs and queues, as its scheduler last set them (SGLang: while it
# decodes, and every 30 s once idle; the watch, sglang_perf/watch.py, reports the running count).
ENGINE_GAUGES = {
    "sglang": {"running": "sglang:num_running_reqs", "queued": "sglang:num_queue_reqs"},
    "vllm": {"running": "vllm:num_requests_running", "queued": "vllm:num_requests_waiting"},
}
GAUGES = ("sglang:spec_accept_length",) + tuple(name for table in ENGINE_GAUGES.values()
                                                for name in table.values())
# Each engine's inter-token latency histogram, observed while requests stream, and what one of
# its observations covers (ITL_OBSERVES): SGLang's one token (observe_inter_token_latency spreads
# an output chunk's interval over the chunk's tokens); vLLM's one engine step of one request
# (v1/metrics/stats.py: engine_core_timestamp - last_token_ts, whatever the step emitted: 1 +
# its accepted drafts with speculation). A window's delta of _count over _sum is tokens per
# second (SGLang), or steps per second (vLLM: times the window's tokens per step, 1 + accepted /
# drafts of its spec-decode counters, 1 without). Read as the two totals.
INTER_TOKEN_LATENCY = {"sglang": "sglang:inter_token_latency_seconds",
                       "vllm": "vllm:inter_token_latency_seconds"}
ITL_OBSERVES = {"sglang": "token", "vllm": "step"}
# The mean time per output token an engine observes once per finished request (vLLM: decode time
# / (generated tokens - 1), v1/metrics/stats.py update_from_finished_request; 0 for a 1-token
# request): a window's _count over _sum is its finished requests' decode speed.
TIME_PER_OUTPUT_TOKEN = {"vllm": "vllm:request_time_per_output_token_seconds"}
# The prompt tokens an engine observes once per finished request (vLLM: num_prompt_tokens,
# loggers.py histogram_num_prompt_tokens_request): a window's _sum over _count is its finished
# requests' mean prompt. SGLang needs none: its prompt and request counters both count a request
# when it finishes.
REQUEST_PROMPT_TOKENS = {"vllm": "vllm:request_prompt_tokens"}
HISTOGRAM_TOTALS = tuple(name + part for table in (INTER_TOKEN_LATENCY, TIME_PER_OUTPUT_TOKEN,
                                                   REQUEST_PROMPT_TOKENS)
                         for name in table.values() for part in ("_sum", "_count"))

# Both engines' accept length in the window: generated tokens / verify steps (the prefill's token
# of each request included), as the per-request figure; vLLM's own is 1 + accepted / drafts.
WINDOW_ACCEPT_LEN_CONVENTION = "generation tokens / verify steps (as the per-request accept length)"
VLLM_WINDOW_ACCEPT_LEN_CONVENTION = "vLLM's 1 + accepted draft tokens / drafts (no prefill token)"

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _sample(line):
    """(name, labels, value) of one exposition line, or None."""
    m = _NAME.match(line)
    if not m:
        return None
    name, pos, labels = m.group(0), m.end(), {}
    if line.startswith("{", pos):
        pos += 1
        while True:
            lm = _LABEL.match(line, pos)
            if not lm:
                break
            labels[lm.group(1)] = re.sub(r'\\[\\"n]', lambda e: _ESCAPES[e.group(0)], lm.group(2))
            pos = lm.end()
        pos = len(line) - len(line[pos:].lstrip())
        if not line.startswith("}", pos):
            return None
        pos += 1
    rest = line[pos:].split()
    try:
        return name, labels, float(rest[0])
    except (IndexError, ValueError):
        return None


def parse(text):
    """Sum every sample of each wanted metric name over its label sets (TP/DP ranks, engines,
    models, finish reasons; a histogram's _sum and _count too); a BY_LABEL counter as {label
    value: sum}; an INFO gauge as the labels of its first sample (engine 0)."""
    wanted = set(COUNTERS) | set(GAUGES) | set(HISTOGRAM_TOTALS)
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        s = _sample(line)
        if s is None:
            continue
        name, labels, value = s
        if name in wanted:
            out[name] = out.get(name, 0.0) + value
        elif name in BY_LABEL:
            key = labels.get(BY_LABEL[name])
            by = out.setdefault(name, {})
            by[key] = by.get(key, 0.0) + value
        elif name in INFO and name not in out:
            out[name] = labels
    return out


def kind_of(scrape):
    """The engine whose counters a scrape holds, or None."""
    for kind, table in ENGINE_COUNTERS.items():
        if table["generation_tokens"] in (scrape or {}):
            return kind
    return None


def positions(per_pos):
    """A BY_LABEL position counter as a list by position (0, 1, ...), or None."""
    if not isinstance(per_pos, dict) or not per_pos:
        return None
    try:
        keys = sorted(int(k) for k in per_pos)
    except (TypeError, ValueError):
        return None
    return [per_pos.get(str(k), 0.0) for k in range(keys[-1] + 1)] if keys[0] >= 0 else None


def window(before, after, client_tokens, client_verify_steps=None):
    """Counter deltas between two scrapes and the accept length they imply.

    ``client_tokens`` is what the engine itself counted in the same window; a difference means
    other traffic reached the server while we measured (or a counter was reset by a restart).
    ``client_verify_steps`` (the measured requests' verify steps) is compared with vLLM's drafts,
    which count the same steps.
    """
    kind = kind_of(after) or "sglang"
    table = ENGINE_COUNTERS[kind]
    delta = {}
    for figure, name in table.items():
        if name in before and name in after:
            delta[figure] = after[name] - before[name]
    gen = delta.get("generation_tokens")
    verify = delta.get("verify_calls")
    accepted = delta.get("accepted_tokens")
    drafts = delta.get("draft_tokens")
    by_position = None
    pos_before, pos_after = positions(before.get(PER_POSITION)), positions(after.get(PER_POSITION))
    if kind == "vllm" and verify and pos_after and pos_before and len(pos_before) == len(pos_after):
        # per_pos[i] / drafts: the share of verify steps that accepted at least i + 1 drafts
        by_position = [(a - b) / verify for a, b in zip(pos_after, pos_before)]
    result = {
        "kind": kind,
        "generation_tokens": gen,
        "prompt_tokens": delta.get("prompt_tokens"),
        "verify_calls": verify,
        "requests": delta.get("requests"),
        "accept_len": (gen / verify) if gen is not None and verify else None,
        "accept_len_convention": WINDOW_ACCEPT_LEN_CONVENTION,
        "draft_tokens": drafts,
        "accepted_tokens": accepted,
        "engine_accept_len": (1.0 + accepted / verify) if accepted is not None and verify else None,
        "engine_accept_len_convention": VLLM_WINDOW_ACCEPT_LEN_CONVENTION if kind == "vllm" else None,
        "acceptance_rate": (accepted / drafts) if accepted is not None and drafts else None,
        "by_position": by_position,
        "client_tokens": client_tokens,
        "matches_client": None,
        "client_verify_steps": client_verify_steps if kind == "vllm" else None,
        "matches_client_verify": None,
        "note": None,
    }
    if kind == "vllm" and verify is not None and client_verify_steps is not None:
        result["matches_client_verify"] = verify == client_verify_steps
    if gen is None:
        result["note"] = "server exposes no %s" % table["generation_tokens"]
    elif gen < 0:
        result["note"] = "counters went backwards: the server restarted during the run"
    else:
        result["matches_client"] = abs(gen - client_tokens) <= max(1.0, 0.001 * client_tokens)
        if not result["matches_client"]:
            result["note"] = ("server generated %d tokens in the window, the benchmark received %d: "
                              "other traffic, or a counter reset" % (gen, client_tokens))
    return result
