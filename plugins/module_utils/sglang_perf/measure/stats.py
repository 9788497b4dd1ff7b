# -*- coding: utf-8 -*-
"""Small, dependency-free statistics used by the engine (Python 3.9+, stdlib only)."""
from __future__ import annotations

import math
import random
from statistics import NormalDist


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


# ------------------------------------------------------------------------------ intervals ------
# The gate's confidence intervals (verdict.py judges on them). Two methods, each stated in the
# result: order statistics for a median (distribution-free, exact coverage for independent
# requests), and the percentile bootstrap for a ratio of sums resampled per request (accept
# length, throughput).
MEDIAN_METHOD = "order statistics of the median (distribution-free)"
RATIO_METHOD = "percentile bootstrap, ratio of sums resampled per request"
RATIO_NORMAL_METHOD = "normal approximation of a ratio of sums (delta method, per-request residuals)"
BOOTSTRAP_RESAMPLES = 1000
# Above this many requests the bootstrap (resamples x n draws) costs seconds and tells nothing the
# normal approximation does not: a ratio of sums over that many requests is normal to within the
# interval's own rounding. 2,000 x 1,000 draws: about 1 s here.
BOOTSTRAP_MAX_N = 2000
_LN_HALF = math.log(0.5)


def _binomial_half_cdf(n, upto=None, past=None):
    """P(B <= j) for B ~ Binomial(n, 1/2), j = 0..upto (default n), stopping after the first value
    above ``past`` when given; in log space, exact to float precision for any n (2.0 ** n
    overflows a float from n = 1,024)."""
    top = n if upto is None else min(n, upto)
    out, acc = [], 0.0
    lg = math.lgamma(n + 1)
    for j in range(top + 1):
        acc += math.exp(lg - math.lgamma(j + 1) - math.lgamma(n - j + 1) + n * _LN_HALF)
        out.append(min(acc, 1.0))
        if past is not None and acc > past:
            break
    return out


def median_rank(n, level):
    """The k of the interval [x_(k), x_(n+1-k)] (1-based order statistics): the largest k whose
    coverage 1 - 2 P(B <= k - 1) is at least ``level``; 0 when n is too small for it."""
    alpha = (1.0 - level) / 2.0
    cdf = _binomial_half_cdf(n, past=alpha + 1e-12)
    k = 0
    while k < len(cdf) and k < n and cdf[k] <= alpha + 1e-12:
        k += 1
    return k if k <= (n + 1) // 2 else 0


def min_sample(level):
    """The fewest requests whose extreme order statistics make an interval at ``level`` (6 at
    95%: [min, max] of 6 covers the median with probability 1 - 2/64 = 96.9%)."""
    n = 1
    while median_rank(n, level) < 1:
        n += 1
    return n


def median_interval(values, level):
    """{"estimate", "lower", "upper", "n", "coverage", "method"} for the median of ``values``;
    lower/upper None below min_sample(level) requests; None without values."""
    data = sorted(float(v) for v in values)
    n = len(data)
    if not n:
        return None
    k = median_rank(n, level)
    out = {"estimate": percentile(data, 50), "lower": None, "upper": None, "n": n,
           "coverage": None, "method": MEDIAN_METHOD}
    if k:
        out.update(lower=data[k - 1], upper=data[n - k],
                   coverage=1.0 - 2.0 * _binomial_half_cdf(n, k - 1)[k - 1])
    return out


def ratio_interval(pairs, level, scale=1.0, resamples=BOOTSTRAP_RESAMPLES, seed=0):
    """{"estimate", "lower", "upper", "n", "method"} for scale x sum(num) / sum(den) over the
    (num, den) pairs of the requests, the requests resampled with replacement (a fixed seed: the
    same requests give the same interval); above BOOTSTRAP_MAX_N requests the normal approximation
    (ratio_normal_interval). lower/upper None for fewer than 2 requests."""
    pairs = [(float(a), float(b)) for a, b in pairs if b]
    n = len(pairs)
    if not n:
        return None
    if n > BOOTSTRAP_MAX_N:
        return ratio_normal_interval(pairs, level, scale)
    est = scale * sum(a for a, _ in pairs) / sum(b for _, b in pairs)
    out = {"estimate": est, "lower": None, "upper": None, "n": n, "method": RATIO_METHOD}
    if n < 2:
        return out
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        num = den = 0.0
        for _ in range(n):
            a, b = pairs[int(rng.random() * n)]
            num += a
            den += b
        draws.append(scale * num / den)
    alpha = (1.0 - level) / 2.0
    out.update(lower=percentile(draws, 100 * alpha), upper=percentile(draws, 100 * (1 - alpha)))
    return out


def ratio_normal_interval(pairs, level, scale=1.0):
    """ratio_interval by the delta method: R = sum(num) / sum(den), its standard error from the
    per-request residuals num - R den, sqrt(n / (n - 1) x sum(residual^2)) / sum(den)."""
    pairs = [(float(a), float(b)) for a, b in pairs if b]
    n = len(pairs)
    if not n:
        return None
    num, den = sum(a for a, _ in pairs), sum(b for _, b in pairs)
    ratio = num / den
    out = {"estimate": scale * ratio, "lower": None, "upper": None, "n": n, "method": RATIO_NORMAL_METHOD}
    if n < 2:
        return out
    se = math.sqrt(n / (n - 1.0) * sum((a - ratio * b) ** 2 for a, b in pairs)) / abs(den)
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    out.update(lower=scale * (ratio - z * se), upper=scale * (ratio + z * se))
    return out


def wilson_interval(successes, n, level):
    """The Wilson score interval of a binomial share (``successes`` of ``n``) at two-sided
    ``level``: [lower, upper], inside [0, 1] at every n (a share of 0 or 1 included, where the
    normal approximation collapses to a point). None for n = 0."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError("successes must be between 0 and n, got %r of %r" % (successes, n))
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    p = float(successes) / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)) / denom
    return [max(0.0, centre - half), min(1.0, centre + half)]


def step_time_s(tok_s, accept_len):
    """Seconds per verify step: accept length / decode tok/s (1 without speculation)."""
    if not tok_s or tok_s <= 0:
        return None
    return float(accept_len or 1.0) / float(tok_s)
