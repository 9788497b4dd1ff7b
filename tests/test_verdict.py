"""The gate's verdict: intervals (order statistics for medians, bootstrap for ratios), the
three-way judgement of each threshold, and its error rates against the emulator's own model of
per-request jitter (acceptance drawn per verify step, GPU clock jitter on step time)."""
import math
import random

import pytest

from bench.verdict_rates import CASE, URL, judge, rates
from bench.verdict_rates import record as _rec
from sglang_perf.measure import config, stats




def test_order_statistics_interval_ranks_and_coverage():
    assert [stats.min_sample(level) for level in (0.90, 0.95, 0.99)] == [5, 6, 8]
    iv = stats.median_interval([5, 1, 4, 2, 6, 3], 0.95)  # [min, max] of 6: 1 - 2/64
    assert (iv["lower"], iv["upper"], iv["estimate"]) == (1, 6, 3.5)
    assert iv["coverage"] == pytest.approx(1 - 2 / 64)
    assert stats.median_interval([1, 2, 3, 4, 5], 0.95)["lower"] is None  # too few for 95%
    iv = stats.median_interval(range(40), 0.95)
    assert (iv["lower"], iv["upper"]) == (13, 26) and iv["coverage"] >= 0.95
    # the stated coverage holds: 2,000 samples of 9 from a skewed distribution
    rng = random.Random(5)
    true_median = math.log(2)  # of an exponential(1)
    hits = 0
    for _ in range(2000):
        iv = stats.median_interval([rng.expovariate(1.0) for _ in range(9)], 0.95)
        hits += iv["lower"] <= true_median <= iv["upper"]
    assert hits / 2000.0 >= 0.95 - 0.015


def test_bootstrap_ratio_of_sums_is_reproducible_and_brackets_the_estimate():
    pairs = [(192, 57), (192, 55), (192, 60), (192, 58), (192, 54), (192, 59)]
    a = stats.ratio_interval(pairs, 0.95)
    assert a == stats.ratio_interval(pairs, 0.95)  # fixed seed: same requests, same interval
    assert a["estimate"] == pytest.approx(192 * 6 / 343.0)
    assert a["lower"] < a["estimate"] < a["upper"]
    assert stats.ratio_interval(pairs[:1], 0.95)["lower"] is None
    wide = stats.ratio_interval(pairs, 0.99)
    assert wide["lower"] <= a["lower"] and wide["upper"] >= a["upper"]


@pytest.mark.parametrize("n", [1, 6, 7, 100, 1023, 1024, 1025, 10_000, 100_000])
def test_the_median_interval_holds_for_any_number_of_requests(n):
    """2.0 ** n overflowed a float from n = 1,024 (a 1,024-request load run measured every
    request, then died): the order statistics are right at every size."""
    from fractions import Fraction
    iv = stats.median_interval(range(n), 0.95)
    k = stats.median_rank(n, 0.95)
    if n < 6:
        assert k == 0 and iv["lower"] is None and iv["estimate"] == (n - 1) / 2.0
        return
    assert (iv["lower"], iv["upper"]) == (k - 1, n - k) and iv["lower"] <= iv["estimate"] <= iv["upper"]
    assert 0.95 <= iv["coverage"] < 1.0
    # exact arithmetic says the same: k is the largest rank whose coverage clears 95%
    if n <= 1025:
        def cdf(j):
            return Fraction(sum(math.comb(n, i) for i in range(j + 1)), 2 ** n)
        assert 1 - 2 * cdf(k - 1) >= Fraction(95, 100) > 1 - 2 * cdf(k)
        assert iv["coverage"] == pytest.approx(float(1 - 2 * cdf(k - 1)), abs=1e-12)
    else:  # the normal approximation of the rank: n/2 - 1.96 sqrt(n)/2
        assert abs(k - (n / 2.0 - 1.959964 * math.sqrt(n) / 2.0)) < 2


@pytest.mark.parametrize("n", [30, 1024])
def test_the_median_interval_covers_the_true_median_as_stated(n):
    rng = random.Random(n)
    true_median = math.log(2)  # of an exponential(1)
    trials = 800 if n > 100 else 2000
    hits = 0
    for _ in range(trials):
        iv = stats.median_interval([rng.expovariate(1.0) for _ in range(n)], 0.95)
        hits += iv["lower"] <= true_median <= iv["upper"]
    assert hits / float(trials) >= 0.95 - 0.025


@pytest.mark.parametrize("n", [2, 6, 1024, 2001, 100_000])
def test_the_ratio_interval_holds_for_any_number_of_requests(n):
    rng = random.Random(7)
    pairs = [(rng.gauss(192.0, 8.0), rng.gauss(57.0, 3.0)) for _ in range(n)]
    iv = stats.ratio_interval(pairs, 0.95)
    assert iv["n"] == n and iv["lower"] < iv["estimate"] < iv["upper"]
    assert iv["method"] == (stats.RATIO_METHOD if n <= stats.BOOTSTRAP_MAX_N else stats.RATIO_NORMAL_METHOD)
    assert iv["estimate"] == pytest.approx(sum(a for a, _ in pairs) / sum(b for _, b in pairs))
    if n >= 1024:  # both methods agree where both are cheap: the bootstrap and the delta method
        normal = stats.ratio_normal_interval(pairs[:2000], 0.95)
        boot = stats.ratio_interval(pairs[:2000], 0.95)
        width = boot["upper"] - boot["lower"]
        assert abs(normal["lower"] - boot["lower"]) < 0.15 * width
        assert abs(normal["upper"] - boot["upper"]) < 0.15 * width


def test_the_normal_ratio_interval_covers_the_true_ratio_as_stated():
    rng = random.Random(11)
    hits, trials = 0, 400
    for _ in range(trials):  # true ratio 192 / 57
        pairs = [(rng.gauss(192.0, 20.0), rng.gauss(57.0, 4.0)) for _ in range(3000)]
        iv = stats.ratio_interval(pairs, 0.95)
        hits += iv["lower"] <= 192.0 / 57.0 <= iv["upper"]
    assert hits / float(trials) >= 0.95 - 0.03


def _cfg(**kw):
    return config.validate(dict(CASE, url=URL, **kw))


def test_each_threshold_passes_fails_or_waits_on_its_interval():
    recs = [_rec(i, 191 / s, 192, 57) for i, s in enumerate([56, 57, 58, 59, 60, 61])]
    r = judge(recs, _cfg(min_tok_s=45, min_accept_len=2.8), final=False)
    assert r["verdict"] == "pass" and r["passed"]
    assert [e["state"] for e in r["judged"]] == ["pass", "pass"]
    assert r["judged"][0]["message"] == \
        "decode tok/s (per-request median) 58.5 [56.0, 61.0] clears the minimum 45.0 bar"
    r = judge(recs, _cfg(min_tok_s=62), final=False)
    assert r["verdict"] == "fail" and r["failures"][0]["message"] == \
        "decode tok/s (per-request median) 58.5 [56.0, 61.0] < required 62.0"
    r = judge(recs, _cfg(min_tok_s=58), final=False)
    assert r["verdict"] == "undecided" and not r["failures"]
    r = judge(recs, _cfg(min_tok_s=58), final=True)
    assert r["verdict"] == "inconclusive" and not r["passed"]
    msg = r["failures"][0]["message"]
    assert msg.startswith("inconclusive after 6 requests: decode tok/s (per-request median) 58.5 "
                          "[56.0, 61.0] straddles the minimum 58.0 bar; measure more (max_requests 48")
    assert "playbooks/calibrate.yml" in msg
    r = judge(recs, _cfg(min_tok_s=58, inconclusive="pass"), final=True)
    assert r["verdict"] == "inconclusive" and r["passed"] and r["inconclusive"]
    # a maximum (TTFT) is cleared by its upper bound and failed by its lower one
    assert judge(recs, _cfg(max_ttft_s=0.06), final=False)["verdict"] == "pass"
    assert judge(recs, _cfg(max_ttft_s=0.04), final=False)["verdict"] == "fail"
    # fewer requests than the interval needs: undecided, never passed on a point figure
    assert judge(recs[:5], _cfg(min_tok_s=45), final=False)["verdict"] == "undecided"


def test_too_few_requests_for_an_interval_are_refused_naming_the_option():
    with pytest.raises(config.ConfigError) as e:
        config.validate({"url": URL, "requests": 4, "min_tok_s": 45})
    assert e.value.option == "max_requests" and "at least 6 requests" in str(e.value)
    assert config.validate({"url": URL, "requests": 4, "max_requests": 6, "min_tok_s": 45})
    assert config.validate({"url": URL, "requests": 2})  # nothing judged: any count
    with pytest.raises(config.ConfigError, match="max_requests"):
        config.validate({"url": URL, "requests": 8, "max_requests": 4})
    with pytest.raises(config.ConfigError, match="inconclusive"):
        config.validate({"url": URL, "inconclusive": "warn"})


@pytest.mark.parametrize("margin, expected", [(5, "pass"), (-5, "fail")])
def test_error_rates_at_five_percent_from_the_threshold(margin, expected):
    """The production coding case (6 requests, then one at a time up to 48, 192 tokens) against
    the emulator's own per-request jitter: at a true speed 5% above the threshold the gate passes
    at least 99 of 100 seeded runs; 5% below it fails at least 99 of 100 (inconclusive counts as
    not passed)."""
    r = rates(margin, 100, 45.0)
    right = r["passed"] if expected == "pass" else 100 - r["passed"]
    assert right >= 99, r
    assert r["max_requests"] <= CASE["max_requests"]
