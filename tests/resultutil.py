"""A case of a plan result as the engine returns it (engine.measure: the figures from its
samples), for the tests of what reads results (the textfile, the history and its report)."""
from __future__ import annotations

from sglang_perf.measure import stats


def case_result(name, speeds, accept_len, by_position, ttft, concurrency=1, aggregate=None,
                thresholds=None, passed=True, failure=None, verdict=None, intervals=None, **more):
    """The case ``name`` measured at per-request decode ``speeds`` (tok/s) and TTFTs ``ttft`` (s);
    ``failure`` the one failure when not ``passed``; ``more`` other figures of the result."""
    thresholds = dict(thresholds or {})
    out = {"case": name, "description": "the %s case" % name, "prompts": "coding",
           "concurrency": concurrency, "requests": len(speeds), "max_tokens": 512,
           "decode_tok_s": stats.summarize(speeds), "accept_len": accept_len,
           "accept_by_position": by_position, "aggregate_tok_s": aggregate,
           "ttft_s": stats.latency_summary(ttft), "errors": 0, "error_kinds": {},
           "thresholds": thresholds, "threshold_source": {k: "thresholds" for k in thresholds},
           "passed": passed, "failures": [] if passed else [failure]}
    out.update(more)
    if verdict is not None:
        out["verdict"] = verdict
    if intervals is not None:
        out["intervals"] = intervals
    return out
