# -*- coding: utf-8 -*-
"""Small, dependency-free statistics used by the engine (Python 3.9+, stdlib only)."""
from __future__ import annotations

import math


def percentile(values, pct):
    """Linear-interpolated percentile (the 'linear' method of numpy), ``pct`` in 0..100.

    Returns None for an empty sequence so that callers report "no data" instead of 0.
    """
    data = sorted(values)
    if not data:
        return None
    if len(data) == 1:
        return float(data[0])
    rank = (len(data) - 1) * (float(pct) / 100.0)
    lo = int(math.floor(rank))
    hi = min(lo + 1, len(data) - 1)
    frac = rank - lo
    return float(data[lo] + (data[hi] - data[lo]) * frac)


def summarize(values):
    """median/min/max/mean/stdev/spread of a sample; ``spread_pct`` = (max - min) / median * 100."""
    data = [float(v) for v in values]
    n = len(data)
    if n == 0:
        return {"n": 0, "median": None, "min": None, "max": None, "mean": None,
                "stdev": None, "spread_pct": None, "p10": None, "p90": None}
    mean = sum(data) / n
    stdev = math.sqrt(sum((x - mean) ** 2 for x in data) / (n - 1)) if n > 1 else 0.0
    med = percentile(data, 50)
    return {
        "n": n,
        "median": med,
        "min": min(data),
        "max": max(data),
        "mean": mean,
        "stdev": stdev,
        "spread_pct": ((max(data) - min(data)) / med * 100.0) if med else None,
        "p10": percentile(data, 10),
        "p90": percentile(data, 90),
    }


def latency_summary(values, scale=1.0):
    """p50/p90/p99/max of a latency sample, multiplied by ``scale`` (e.g. 1000 for ms)."""
    data = [float(v) * scale for v in values]
    return {
        "n": len(data),
        "p50": percentile(data, 50),
        "p90": percentile(data, 90),
        "p99": percentile(data, 99),
        "max": max(data) if data else None,
    }


def weighted_samples(pairs):
    """Expand (value, weight) pairs with integer weights into a flat list (for token-weighted ITL)."""
    out = []
    for value, weight in pairs:
        out.extend([value] * int(weight))
    return out
