# -*- coding: utf-8 -*-
"""playbooks/compare.yml's decisions (the sglang_compare_plan action runs ``make`` on the
controller): which profiles it runs, the plan each is measured with (the gate plan at the context
depths, or one case per concurrency level), the options each is measured with (the tuner's
``--cases``), the report's arguments, and every refusal of compare's inputs; ``row`` is one row of
a comparison and ``sweep_rows`` turns the concurrency sweep's plan results into the rows ``bench
compare-report`` reads. The playbook only orchestrates.

Standard library only."""
from __future__ import annotations

from ..measure import config
from . import gate as plan
from ..measure.client import ConfigError

# What the module gets besides the cases; the sweep takes the engine's defaults and compare_warmup.
BENCH_OPTIONS = ("api", "confidence", "warmup", "first_token_timeout", "stall_timeout", "run_timeout")


def engine_list(engines):
    """compare_engines as a list: 'sglang,vllm' or [sglang, vllm]; '' or [] - none."""
    if engines is None:
        return []
    if isinstance(engines, str):
        return [e.strip() for e in engines.split(",") if e.strip()]
    return [str(e).strip() for e in engines]


def _int_list(values):
    return isinstance(values, list) and all(
        isinstance(v, int) and not isinstance(v, bool) or isinstance(v, str) and v.strip().isdigit()
        for v in values)


def sweep_cases(levels, requests, max_tokens):
    """The concurrency sweep as a plan: case c<C> per level, coding prompts, max(requests, 2 x C)
    measured requests (at least two full waves), ``max_tokens`` each."""
    return {"c%d" % int(c): {"description": "coding prompts at %d concurrent stream(s)" % int(c),
                             "prompts": "coding", "concurrency": int(c),
                             "requests": max(int(requests), 2 * int(c)), "max_tokens": int(max_tokens)}
            for c in levels}


def measure_only(cases_plan, confidence=0.95):
    """The resolved cases of ``cases_plan`` with no thresholds: every case measured, none judged
    (the answer judges on the gate's own thresholds, bench/compare_answer.py)."""
    return plan.resolve(cases_plan, {"": {c: {} for c in cases_plan}}, "", confidence=confidence)


def make(a):
    """The comparison of one host from its inputs ``a`` (the action's arguments): {"problems":
    [...]} when it cannot run, else {"problems": [], "by_plan", "engines", "profiles", "plan" (the
    measured plan, raw, for the report's vars), "cases" (resolved, measure-only), "bench" (the
    module's other options), "report" (what the tuner writes from its results: {"by": "plan" or
    "sweep", "current": the host's profile when compared, else None})}."""
    problems = []
    topo = a.get("topology") or {}
    host = a.get("host") or "this host"
    if topo.get("enabled"):
        problems.append(
            "%s is node %s of multi-node deployment %s: playbooks/compare.yml switches one host's "
            "profile at a time, which would break the deployment; compare profiles with deploy.yml "
            "-e sglang_profile=... and `python -m bench compare` against rank 0 instead"
            % (host, topo.get("node_rank"), topo.get("group")))
    table = a.get("engine_profiles") or {}
    engines = engine_list(a.get("engines"))
    by_plan = bool(engines)
    unknown = [e for e in engines if e not in table]
    if unknown:
        problems.append("compare_engines (%s) must name engines of sglang_gate_compare_profiles (%s)"
                        % (", ".join(engines), ", ".join(table) or "none"))
    if a.get("deploy_best") and not by_plan:
        problems.append("compare_deploy_best needs compare_engines (the winner comes from the gate "
                        "plan's cases)")
    profiles = a.get("profiles")
    if profiles is None:
        profiles = [p for e in engines if e in table for p in table[e]] if by_plan \
            else list(a.get("sweep_profiles") or [])
    if not isinstance(profiles, list) or not profiles:
        problems.append("compare_profiles (%r) must be a non-empty list of profiles" % (profiles,))
        profiles = []
    known = a.get("known_profiles")
    missing = [p for p in profiles if known is not None and p not in known]
    if missing:
        problems.append("compare_profiles: no such profile %s in sglang_profiles (known: %s)"
                        % (", ".join(map(str, missing)), ", ".join(known)))
    out = {"problems": problems, "by_plan": by_plan, "engines": engines, "profiles": profiles}
    if by_plan:
        try:
            measured = plan.context_plan(a.get("gate_plan") or {}, a.get("context_tokens"),
                                         a.get("context_requests"))
        except ConfigError as e:
            problems.append(str(e))
            return out
        if not measured:
            problems.append("sglang_gate_plan: the comparison has no case to measure")
            return out
        if a.get("gate") is None:  # measured as the gate measures, not by a plan that lacks it
            problems.append("the gate's options are not planned (the sglang_gate role's part of "
                            "sglang_deploy_plan): compare_engines measures as the gate does")
            return out
        bench = {k: a["gate"].get(k, config.DEFAULTS[k]) for k in BENCH_OPTIONS}
    else:
        levels, requests, max_tokens = a.get("levels"), a.get("requests"), a.get("max_tokens")
        if not _int_list(levels) or not levels or any(int(c) < 1 for c in levels):
            problems.append("compare_levels (%r) must be a non-empty list of concurrency levels, each >= 1"
                            % (levels,))
        if not isinstance(requests, int) or requests < 1:
            problems.append("compare_requests must be an integer >= 1, got %r" % (requests,))
        if not isinstance(max_tokens, int) or max_tokens < 2:
            problems.append("compare_max_tokens must be an integer >= 2, got %r" % (max_tokens,))
        if problems:
            return out
        measured = sweep_cases(levels, requests, max_tokens)
        bench = {k: config.DEFAULTS[k] for k in BENCH_OPTIONS}
        bench["warmup"] = a.get("warmup", config.DEFAULTS["warmup"])
    try:
        cases = measure_only(measured, bench["confidence"])
    except ConfigError as e:
        problems.append(e.message)
        return out
    current = a.get("current")
    out.update(plan=measured, cases=cases, bench=bench,
               report={"by": "plan" if by_plan else "sweep",
                       "current": current if by_plan and current in profiles else None})
    return out


# One row of a comparison, as bench compare-report reads it (bench/compare.py load_rows).
ROW_KEYS = ("profile", "url", "concurrency", "requests", "decode_tok_s_median", "decode_tok_s_min",
            "decode_tok_s_max", "aggregate_tok_s", "accept_len", "ttft_p50_s", "errors",
            "spec_steps", "accept_by_position", "error", "slowdowns")


def _spec_steps(server):
    server = server or {}
    return int(server.get("speculative_num_steps") or 0) if server.get("speculative_algorithm") else 0


def row(profile, url, level, requests, result=None, error=None, server=None, slowdowns=()):
    """One row (ROW_KEYS) of ``profile`` at concurrency ``level`` with ``requests``: the figures of
    ``result`` (one measured case - a plan result's case, or one engine run), the speculative steps
    ``server`` reports (default the result's own ``server``), ``error`` where it was not measured
    (a case the engine could not measure says its own), and what held its GPUs down while it was
    measured (``slowdowns``)."""
    out = dict.fromkeys(ROW_KEYS)
    out.update(profile=profile, url=url, concurrency=level, requests=requests, error=error,
               spec_steps=_spec_steps(server if server is not None else (result or {}).get("server")),
               slowdowns=[str(x) for x in slowdowns or ()])
    if result is None:
        return out
    if result.get("unmeasured"):
        out.update(errors=result.get("errors"), error=result["unmeasured"])
        return out
    d = result.get("decode_tok_s") or {}
    out.update(decode_tok_s_median=d.get("median"), decode_tok_s_min=d.get("min"),
               decode_tok_s_max=d.get("max"), aggregate_tok_s=result.get("aggregate_tok_s"),
               accept_len=result.get("accept_len"),
               ttft_p50_s=(result.get("ttft_s") or {}).get("p50"), errors=result.get("errors"),
               accept_by_position=result.get("accept_by_position"))
    return out


def sweep_rows(results, cases):
    """The concurrency sweep's rows (ROW_KEYS) from one plan result per profile ({profile, url,
    result, error, slowdowns}, the tuner's --results) and its resolved ``cases``: a row per
    (profile, level), an error row where the profile or the level could not be measured; each row
    carries what held its profile's GPUs' clocks down while it was measured."""
    rows = []
    for item in results:
        result = item.get("result") if isinstance(item.get("result"), dict) else None
        by_case = {r.get("case"): r for r in (result or {}).get("cases") or []}
        for c in cases:
            r = by_case.get(c["case"])
            rows.append(row(item.get("profile"), item.get("url"), c["options"]["concurrency"],
                            (r or {}).get("requests"), r, None if r else item.get("error") or "no result",
                            server=(result or {}).get("server") or {}, slowdowns=item.get("slowdowns")))
    return rows
