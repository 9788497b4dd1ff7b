"""The gate's error rates against the emulator's per-request jitter, in virtual time.

    python -m bench.verdict_rates [--runs 200] [--bar 45] [--margins -5,-3,-2,-1,0,1,2,3,5]

For each true speed (the bar times 1 + margin %), ``runs`` seeded runs of the production coding
case (roles/sglang_gate/defaults/main.yml: 6 requests, then one at a time up to 48, 192 tokens)
drawn from the emulator's own model of the 3-step profile (emulator/: acceptance per verify
step, GPU clock jitter on step time; Scheduler.simulate_decode), judged by the engine's own
intervals and verdict.evaluate(); prints the share passed and the mean requests used. The table in
roles/sglang_gate/README.md is its output at --runs 200; tests/test_verdict.py holds the 5% points.
"""
from __future__ import annotations

import argparse
import sys

from sglang_perf.measure import config, engine
from sglang_perf.judge import decision, verdict

from bench.cli import default_case
from emulator.cli import offline_scheduler
from bench.profiles import MODEL_ARGS, PROFILE_ARGS

URL = "http://127.0.0.1:1"
# the production coding case (bench run's default, read from the role)
CASE = {k: default_case()[k] for k in ("requests", "max_requests", "max_tokens")}
PROMPT_TOKENS = 150  # the coding prompts as the chat template counts them


def record(i, decode_s, tokens, verify, ttft=0.05, start=0.0):
    """A finished request as the engine records it."""
    r = engine._Request("r%d" % i, "measure", "coding")
    r.t_send, r.t_first = start, start + ttft
    r.t_last = r.t_end = start + ttft + decode_s
    r.completion_tokens, r.verify_ct, r.done = tokens, verify, True
    return r


def judge(recs, cfg, final):
    """What the engine's measure() decides at a look: its intervals and evaluate()."""
    wall = sum(r.t_end - r.t_send for r in recs)  # C=1: one request after the other
    result = {"intervals": engine._intervals(cfg, recs, recs, wall), "errors": 0,
              "error_kinds": {}, "metrics": None, "prompt_tokens": {"target": None},
              "requests": len(recs), "engine_accept_len": None}
    verdict.evaluate(result, cfg, final)
    return result


def emulated(seed, speed_scale, case=CASE):
    """The 3-step profile's requests as the emulator draws them, seed by seed."""
    sched = offline_scheduler(MODEL_ARGS + PROFILE_ARGS["nextn_3step"],
                              {"SGLEMU_SEED": str(seed), "SGLEMU_SPEED_SCALE": repr(speed_scale)})
    i = 0
    while True:
        d = sched.simulate_decode(PROMPT_TOKENS, case["max_tokens"])
        yield record(i, d["decode_s"], d["completion_tokens"], d["verify_ct"])
        i += 1


def sequential(seed, speed_scale, cfg):
    """measure()'s rule at C=1: the first verdict after ``requests``, then one per request, until
    it is no longer undecided or ``max_requests`` ran. (verdict, requests used)."""
    recs, draw = [], emulated(seed, speed_scale, cfg)
    while True:
        recs.append(next(draw))
        if len(recs) < cfg["requests"]:
            continue
        r = judge(recs, cfg, final=len(recs) >= cfg["max_requests"])
        if r["verdict"] != verdict.UNDECIDED:
            return r["verdict"], len(recs)


def true_median():
    """The emulator's median per-request decode tok/s for the case (2,001 requests)."""
    draw = emulated(10 ** 6, 1.0)
    speeds = sorted(next(draw).decode_tok_s() for _ in range(2001))
    return speeds[1000]


def rates(margin_pct, runs, bar, median=None):
    cfg = config.validate(dict(CASE, url=URL, min_tok_s=bar))
    scale = (1 + margin_pct / 100.0) * bar / (median or true_median())
    out = [sequential(seed, scale, cfg) for seed in range(runs)]
    return {"passed": sum(v == decision.PASS for v, _ in out),
            "failed": sum(v == decision.FAIL for v, _ in out),
            "inconclusive": sum(v == decision.INCONCLUSIVE_VERDICT for v, _ in out),
            "mean_requests": sum(n for _, n in out) / float(runs), "max_requests": max(n for _, n in out)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--bar", type=float, default=45.0)
    ap.add_argument("--margins", default="-5,-3,-2,-1,0,1,2,3,5")
    a = ap.parse_args(argv)
    median = true_median()
    print("emulated 3-step median %.2f tok/s; %d runs per point, bar %g tok/s" % (median, a.runs, a.bar))
    print("%8s %8s %8s %13s %14s" % ("margin", "passed", "failed", "inconclusive", "mean requests"))
    for m in [float(x) for x in a.margins.split(",")]:
        r = rates(m, a.runs, a.bar, median)
        print("%+7g%% %7.1f%% %7.1f%% %12.1f%% %14.1f" % (
            m, 100.0 * r["passed"] / a.runs, 100.0 * r["failed"] / a.runs,
            100.0 * r["inconclusive"] / a.runs, r["mean_requests"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
