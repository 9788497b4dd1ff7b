# -*- coding: utf-8 -*-
"""Reading SGLang's Prometheus ``/metrics`` and turning two scrapes into window deltas."""
from __future__ import annotations

import re

# Counters whose deltas over the measured window cross-check the per-request figures.
COUNTERS = (
    "sglang:generation_tokens_total",
    "sglang:prompt_tokens_total",
    "sglang:spec_verify_calls_total",
    "sglang:num_requests_total",
)
GAUGES = ("sglang:spec_accept_length", "sglang:num_running_reqs", "sglang:num_queue_reqs")

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


def parse(text):
    """Sum every sample of each wanted metric name over its label sets (TP/DP ranks, models)."""
    wanted = set(COUNTERS) | set(GAUGES)
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _SAMPLE.match(line)
        if not m or m.group(1) not in wanted:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out[m.group(1)] = out.get(m.group(1), 0.0) + value
    return out


def window(before, after, client_tokens):
    """Counter deltas between two scrapes and the accept length they imply.

    ``client_tokens`` is what the engine itself counted in the same window; a difference means
    other traffic reached the server while we measured (or a counter was reset by a restart).
    """
    delta = {}
    for name in COUNTERS:
        if name in before and name in after:
            delta[name] = after[name] - before[name]
    gen = delta.get("sglang:generation_tokens_total")
    verify = delta.get("sglang:spec_verify_calls_total")
    result = {
        "generation_tokens": gen,
        "prompt_tokens": delta.get("sglang:prompt_tokens_total"),
        "verify_calls": verify,
        "requests": delta.get("sglang:num_requests_total"),
        "accept_len": (gen / verify) if gen is not None and verify else None,
        "client_tokens": client_tokens,
        "matches_client": None,
        "note": None,
    }
    if gen is None:
        result["note"] = "server exposes no sglang:generation_tokens_total"
    elif gen < 0:
        result["note"] = "counters went backwards: the server restarted during the run"
    else:
        result["matches_client"] = abs(gen - client_tokens) <= max(1.0, 0.001 * client_tokens)
        if not result["matches_client"]:
            result["note"] = ("server generated %d tokens in the window, the benchmark received %d: "
                              "other traffic, or a counter reset" % (gen, client_tokens))
    return result
