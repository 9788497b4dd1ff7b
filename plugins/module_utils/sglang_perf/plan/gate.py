# -*- coding: utf-8 -*-
"""The gate plan: named cases (a prompt source, concurrency, requests, max tokens), each with
thresholds per profile and each judged on its own, after a check of what the running server can
hold (``/server_info``: its context, KV pool and running-request limit) against what the profile
promises and the cases need. The sglang_gate role (through the sglang_bench module), its preflight
(the sglang_gate filter) and ``python -m bench gate`` all go through this file; the plan's verdict
and the lines and table that say it are verdict.py's, the thresholds calibration proposes
calibration.py's.

Standard library only, Python 3.9+ (runs on the target host through AnsiballZ)."""
from __future__ import annotations

import re
import time

from ..judge import quality
from ..measure import config, engine
from ..judge import decision, verdict
from .. import engines
from ..record import history
from ..record import fingerprint as hostprint
from ..measure import prompts as promptset
from ..measure.client import ConfigError, MeasureError
from ..measure.stats import min_sample, summarize

# The variables a user sets, as error messages name them.
NAMES = {"plan": "sglang_gate_plan", "thresholds": "sglang_gate_thresholds",
         "calibrated": "sglang_gate_calibrated", "confidence": "sglang_gate_confidence"}

CASE_KEYS = ("description", "prompts", "prompt_tokens", "concurrency", "requests", "max_requests",
             "max_tokens", "thinking", "report_only", "check")
# A quality check's case (``check``: quality.CHECKS) takes these keys, no prompt source.
CHECK_CASE_KEYS = ("description", "check", "concurrency", "requests", "max_requests", "max_tokens",
                   "thinking", "report_only", "kv_usage", "when")

SPEED_THRESHOLDS = config.THRESHOLDS
THRESHOLD_KEYS = config.THRESHOLDS + quality.QUALITY_THRESHOLDS
# The engine options a resolved case sets (its options and thresholds) and its baseline: the rest
# of config.DEFAULTS is common to every case of a plan run (run_cases's ``common``).
CASE_OPTIONS = ("case", "prompts", "prompt_tokens", "concurrency", "requests", "max_requests", "max_tokens",
                "thinking", "check", "kv_usage", "when")
PER_CASE = CASE_OPTIONS + ("baseline",) + THRESHOLD_KEYS
_CASE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int_at_least(errors, where, value, minimum):
    if not (_is_number(value) and float(value) == int(value) and value >= minimum):
        errors.append("%s must be an integer >= %d, got %r" % (where, minimum, value))


def _size_problems(errors, where, case):
    """A case's sample: concurrency, requests, max_tokens required; max_requests at least requests."""
    for key, minimum in (("concurrency", 1), ("requests", 1), ("max_tokens", 2)):
        if key not in case:
            errors.append("%s.%s is required" % (where, key))
        else:
            _int_at_least(errors, "%s.%s" % (where, key), case[key], minimum)
    if case.get("max_requests") is not None:
        requests = case.get("requests")
        _int_at_least(errors, where + ".max_requests", case["max_requests"],
                      int(requests) if _is_number(requests) and requests >= 1 else 1)


def check_of(case):
    """The quality check a plan case runs (quality.CHECKS), or None for a speed case."""
    return case.get("check") if isinstance(case, dict) else None


def _check_case_problems(errors, where, case):
    check = case["check"]
    if check not in quality.CHECKS:
        errors.append("%s.check must be one of %s, got %r" % (where, ", ".join(quality.CHECKS), check))
        return
    only = {k for opts in quality.CHECK_OPTIONS.values() for k in opts} \
        - set(quality.CHECK_OPTIONS.get(check, {}))
    unknown = sorted(set(case) - set(CHECK_CASE_KEYS) | (set(case) & only))
    if unknown:
        errors.append("%s (check %s) has key(s) %s that a quality check does not take (known: %s)"
                      % (where, check, ", ".join(unknown), ", ".join(CHECK_CASE_KEYS)))
    _size_problems(errors, where, case)
    for key in ("report_only", "thinking"):
        if not isinstance(case.get(key, False), bool):
            errors.append("%s.%s must be true or false, got %r" % (where, key, case[key]))
    if case.get("description") is not None and not isinstance(case["description"], str):
        errors.append("%s.description must be a string" % where)
    if "kv_usage" in case and not (_is_number(case["kv_usage"]) and 0 < case["kv_usage"] < 1):
        errors.append("%s.kv_usage must be a share of the KV pool between 0 and 1 (0.6 = 60%%), got %r"
                      % (where, case["kv_usage"]))
    if "when" in case and case["when"] not in quality.WHEN:
        errors.append("%s.when must be one of %s, got %r" % (where, ", ".join(quality.WHEN), case["when"]))


def _case_problems(errors, where, case):
    if not isinstance(case, dict):
        errors.append("%s must be a mapping of %s, got %r" % (where, ", ".join(CASE_KEYS), case))
        return
    if "check" in case:
        _check_case_problems(errors, where, case)
        return
    unknown = sorted(set(case) - set(CASE_KEYS))
    if unknown:
        errors.append("%s has unknown key(s) %s (known: %s)"
                      % (where, ", ".join(unknown), ", ".join(CASE_KEYS)))
    source = case.get("prompts", "coding")
    if source not in promptset.PROMPT_SOURCES:
        errors.append("%s.prompts must be one of %s, got %r"
                      % (where, ", ".join(promptset.PROMPT_SOURCES), source))
    if source == "long_context":
        tokens = case.get("prompt_tokens")
        _int_at_least(errors, where + ".prompt_tokens", tokens, config.MIN_LONG_PROMPT_TOKENS)
        if _is_number(tokens) and tokens >= config.MIN_LONG_PROMPT_TOKENS:
            try:
                promptset.long_context_prompt(int(tokens), promptset.DEFAULT_CHARS_PER_TOKEN, 0, "x")
            except ValueError as e:
                errors.append("%s.prompt_tokens = %s is more than the long-context corpus holds: %s"
                              % (where, tokens, e))
    elif case.get("prompt_tokens") is not None:
        errors.append("%s.prompt_tokens is only for prompts: long_context (this case sends the "
                      "%s prompts)" % (where, source))
    if not isinstance(case.get("report_only", False), bool):
        errors.append("%s.report_only must be true or false, got %r" % (where, case["report_only"]))
    if not isinstance(case.get("thinking", False), bool):
        errors.append("%s.thinking must be true or false, got %r" % (where, case["thinking"]))
    _size_problems(errors, where, case)
    if case.get("description") is not None and not isinstance(case["description"], str):
        errors.append("%s.description must be a string" % where)


def _threshold_problems(errors, where, values, check=None):
    known = quality.CHECK_THRESHOLDS.get(check, ()) if check else SPEED_THRESHOLDS
    kind = "check %s" % check if check else "a speed case"
    if not isinstance(values, dict):
        errors.append("%s must be a mapping of %s to numbers ({} measures the case without "
                      "thresholds), got %r" % (where, ", ".join(known) or "no threshold", values))
        return
    unknown = sorted(set(values) - set(known))
    if unknown:
        errors.append("%s has unknown threshold(s) %s (known: %s)"
                      % (where, ", ".join(unknown), ", ".join(known) if known else
                         "none: every reply of %s must pass, give {}" % kind))
    for key in sorted(set(values) & set(known)):
        value = values[key]
        if value is None:
            continue
        if not _is_number(value) or value < 0:
            errors.append("%s.%s must be a number >= 0, got %r" % (where, key, value))
        elif key == "min_accept_len" and 0 < value < 1:
            errors.append("%s.min_accept_len = %s: an accept length counts the bonus token, so it "
                          "is at least 1.0 when speculation runs" % (where, value))
        elif key in ("max_errors", "min_facts") and float(value) != int(value):
            errors.append("%s.%s must be an integer, got %r" % (where, key, value))
        elif key in quality.QUALITY_THRESHOLDS and value > 1:
            errors.append("%s.%s must be a share from 0 to 1 (0.8 = 80%%), got %r" % (where, key, value))


def _sample_problems(errors, n, plan, thresholds, calibrated, profile, confidence):
    """A case whose profile thresholds need a median's interval, with fewer requests than one
    takes at ``confidence``."""
    fewest = min_sample(confidence)
    for name, case in plan.items():
        if not isinstance(case, dict) or _report_only(case) or check_of(case):
            continue
        limits = dict(((thresholds or {}).get(profile) or {}).get(name) or {})
        limits.update(((calibrated or {}).get(profile) or {}).get(name) or {})
        judged = [k for k in config.MEDIAN_THRESHOLDS if limits.get(k) is not None]
        most = case.get("max_requests") or case.get("requests")
        if judged and _is_number(most) and most < fewest:
            errors.append("%s.%s.max_requests: %s request(s) cannot bound a median at %g%% (%s of %s "
                          "needs an interval; it takes at least %d requests, %s %g)"
                          % (n["plan"], name, most, 100 * confidence, ", ".join(judged), profile,
                             fewest, n["confidence"], confidence))


def _report_only(case):
    """A case measured and recorded but never judged (``report_only: true``): it takes no
    thresholds, and neither its figures nor its errors fail the gate."""
    return isinstance(case, dict) and case.get("report_only") is True


def problems(plan, thresholds, profile, calibrated=None, names=None, confidence=0.95):
    """Every problem of the plan and the profile's thresholds, each naming the variable; [] when
    the plan can run."""
    n = dict(NAMES, **(names or {}))
    errors = []
    if not _is_number(confidence) or not 0.5 < confidence < 1:
        return ["%s must be a level between 0.5 and 1 (0.95 = 95%%), got %r" % (n["confidence"], confidence)]
    if not isinstance(plan, dict) or not plan:
        return ["%s must be a non-empty mapping of case name -> case, got %r" % (n["plan"], plan)]
    for name, case in plan.items():
        if not isinstance(name, str) or not _CASE_NAME.match(name):
            errors.append("%s: case name %r must be lower case letters, digits and _" % (n["plan"], name))
        _case_problems(errors, "%s.%s" % (n["plan"], name), case)
    for var, table, required in ((n["thresholds"], thresholds, True),
                                 (n["calibrated"], calibrated, False)):
        if table is None and not required:
            continue
        if not isinstance(table, dict):
            errors.append("%s must be a mapping of profile -> case -> thresholds, got %r" % (var, table))
            continue
        if profile not in table:
            if required:
                errors.append("%s has no entry for profile %s (sglang_profile); add %s.%s with "
                              "thresholds for each case of %s (%s)"
                              % (var, profile, var, profile, n["plan"], ", ".join(plan)))
            continue
        entry = table[profile]
        where = "%s.%s" % (var, profile)
        if isinstance(entry, dict) and set(entry) & set(THRESHOLD_KEYS):
            errors.append("%s = %r has the one-case form (thresholds at the top); thresholds are per "
                          "case of the plan now: %s: {%s: {min_tok_s: ...}, ...}"
                          % (where, entry, profile, next(iter(plan))))
            continue
        if not isinstance(entry, dict):
            errors.append("%s must be a mapping of case -> thresholds, got %r" % (where, entry))
            continue
        for case in plan:
            if _report_only(plan[case]) and case in entry:
                given = entry[case]
                if given is not None and not (isinstance(given, dict)
                                              and all(v is None for v in given.values())):
                    errors.append("%s.%s = %r: case %s of %s is report_only, so thresholds would "
                                  "not be judged; remove them, or set %s.%s.report_only: false"
                                  % (where, case, entry[case], case, n["plan"], n["plan"], case))
            elif case in entry:
                _threshold_problems(errors, "%s.%s" % (where, case), entry[case], check_of(plan[case]))
            elif required and not _report_only(plan[case]):
                errors.append("%s has no entry for case %s of %s (cases: %s); give {} to measure "
                              "it without thresholds" % (where, case, n["plan"], ", ".join(plan)))
    if not errors:
        _sample_problems(errors, n, plan, thresholds, calibrated, profile, confidence)
    return errors


def resolve(plan, thresholds, profile, calibrated=None, names=None, confidence=0.95):
    """The plan's cases in order: [{"case", "options" (engine options), "thresholds", "source"}];
    raises ConfigError naming every problem. ``calibrated`` (a host's measured thresholds,
    playbooks/calibrate.yml) wins over ``thresholds`` key by key."""
    errors = problems(plan, thresholds, profile, calibrated, names, confidence)
    if errors:
        raise ConfigError((names or NAMES).get("plan", NAMES["plan"]), "; ".join(errors))
    cases = []
    for name, case in plan.items():
        limits = {} if _report_only(case) else dict(thresholds[profile][name] or {})
        source = {k: "thresholds" for k in limits}
        mine = {} if _report_only(case) else ((calibrated or {}).get(profile) or {}).get(name) or {}
        limits.update(mine)
        source.update({k: "calibrated" for k in mine})
        options = {"case": name, "concurrency": int(case["concurrency"]), "requests": int(case["requests"]),
                   "max_requests": int(case.get("max_requests") or case["requests"]),
                   "max_tokens": int(case["max_tokens"]), "thinking": case.get("thinking") is True}
        if check_of(case):
            options["check"] = case["check"]
            options.update({k: case.get(k, default) for k, default in
                            quality.CHECK_OPTIONS.get(case["check"], {}).items()})
        else:
            options.update(prompts=case.get("prompts", "coding"), prompt_tokens=case.get("prompt_tokens"))
        cases.append({"case": name, "description": case.get("description") or "",
                      "options": options, "report_only": _report_only(case),
                      "thresholds": {k: v for k, v in limits.items() if v is not None},
                      "source": source})
    return cases


# The comparison's context depths (playbooks/compare.yml, bench compare --plan): each a case of
# the long-context prompts at about this many tokens, in place of the gate plan's long-context
# case(s), measured with COMPARE_CONTEXT_REQUESTS requests: the fewest whose median has a 95%
# interval, on which the comparison says whether one more step pays at each depth.
COMPARE_CONTEXT_TOKENS = (1024, 8192, 32768)
COMPARE_CONTEXT_REQUESTS = min_sample(0.95)


def context_case(tokens):
    """The name of the comparison's case at ``tokens`` of context: context_8k, context_1500."""
    return "context_%dk" % (tokens // 1024) if tokens % 1024 == 0 else "context_%d" % tokens


def context_plan(gate_plan, tokens=None, requests=None, names=("compare_context_tokens",
                                                               "compare_context_requests")):
    """The plan a comparison measures: ``gate_plan`` with its long-context case(s) replaced, where
    the first stood, by one case per depth of ``tokens`` (default COMPARE_CONTEXT_TOKENS) at C=1,
    ``requests`` requests each, the first long case's max_tokens (128 without one). [] keeps the
    gate plan as it is. Raises ConfigError naming ``names`` for a bad depth or count."""
    tokens = COMPARE_CONTEXT_TOKENS if tokens is None else tokens
    requests = COMPARE_CONTEXT_REQUESTS if requests is None else requests
    if not isinstance(tokens, (list, tuple)) or not all(
            _is_number(t) and int(t) == t and t >= config.MIN_LONG_PROMPT_TOKENS for t in tokens) \
            or len(set(tokens)) != len(tokens):
        raise ConfigError(names[0], "must be a list of different token counts, each an integer "
                                    ">= %d (e.g. [1024, 8192, 32768]), got %r"
                          % (config.MIN_LONG_PROMPT_TOKENS, tokens))
    if not (_is_number(requests) and int(requests) == requests and requests >= 1):
        raise ConfigError(names[1], "must be an integer >= 1, got %r" % (requests,))
    if not tokens:
        return dict(gate_plan)
    long_cases = [n for n, c in gate_plan.items()
                  if isinstance(c, dict) and c.get("prompts") == "long_context"]
    max_tokens = gate_plan[long_cases[0]].get("max_tokens", 128) if long_cases else 128
    depths = {context_case(int(t)): {
        "description": "about %s tokens of context, one stream (where acceptance falls with context)"
                       % format(int(t), ","),
        "prompts": "long_context", "prompt_tokens": int(t), "concurrency": 1,
        "requests": int(requests), "max_tokens": max_tokens} for t in sorted(tokens)}
    out = {}
    for name, case in gate_plan.items():
        if name in long_cases:
            if name == long_cases[0]:
                out.update(depths)
            continue
        out[name] = case
    if not long_cases:
        out.update(depths)
    return out


def describe(cases, confidence, inconclusive):
    """The resolved plan in one line, stated before the gate measures."""
    parts = []
    for c in cases:
        o = c["options"]
        sample = "%d" % o["requests"] if o["max_requests"] == o["requests"] else \
            "%d-%d" % (o["requests"], o["max_requests"])
        parts.append("%s (C=%d, %s x %d tokens, %s): %s" % (
            c["case"], o["concurrency"], sample, o["max_tokens"],
            "check %s" % o["check"] if o.get("check") else
            "~%d-token prompts" % o["prompt_tokens"] if o["prompts"] == "long_context"
            else o["prompts"] + " prompts",
            "reported only" if c.get("report_only") else
            ", ".join("%s %s" % kv for kv in sorted(c["thresholds"].items())) or "measured only"))
    return "gate plan, each threshold judged on its %g%% interval (inconclusive: %s), at most %d " \
           "measured requests: %s" % (100 * confidence, inconclusive,
                                      sum(c["options"]["max_requests"] for c in cases), "; ".join(parts))


def unused_thresholds(plan, thresholds, profile):
    """Threshold entries of the profile for cases the plan does not have (reported, not refused:
    a host may run a shorter plan than its group)."""
    entry = (thresholds or {}).get(profile) or {}
    return sorted(k for k in entry if isinstance(entry, dict) and k not in (plan or {}))


def plan_notes(plan, thresholds, profile):
    """What the plan result notes about the plan itself (the deploy plan's gate.notes)."""
    unused = unused_thresholds(plan, thresholds, profile)
    return ["thresholds for %s are not used: the plan has no such case" % ", ".join(unused)] if unused else []


# ----------------------------------------------------------------------------- capacity ------
def _fmt_tokens(n):
    return "{:,}".format(int(n))


def _capacity_engine(server):
    """The engine whose names a capacity message uses (engines/<engine>.py capacity_label, the
    default engine's for an unknown server)."""
    return engines.find(server.get("kind")) or engines.get(engines.DEFAULT)


def _unverified(out, server, ctx_needs, run_needs, asked):
    """What the server does not expose (``server["not_exposed"]``: vLLM's max_num_seqs, its KV
    capacity without /metrics) cannot be checked: each need it leaves unchecked is named, with
    why, in ``unverified`` and the notes, never passed in silence."""
    hidden = server.get("not_exposed") or {}
    if "max_running_requests" in hidden:
        who = ["%s %d" % (w, r) for r, w in run_needs]
        if _is_number(asked):
            who.append("the profile asks for %d" % asked)
        if who:
            out["unverified"].append({"what": "running requests", "needed_by": who,
                                      "why": hidden["max_running_requests"]})
    if "max_total_num_tokens" in hidden and ctx_needs:
        out["unverified"].append({"what": "KV capacity", "why": hidden["max_total_num_tokens"],
                                  "needed_by": ["%s %s" % (w, _fmt_tokens(t)) for t, w in ctx_needs]})
    for u in out["unverified"]:
        out["notes"].append("not verified: %s (%s): %s" % (u["what"], ", ".join(u["needed_by"]),
                                                           u["why"]))


def check_capacity(server, cases, promise=None):
    """What the running server can hold against what the profile promises (``promise``:
    context_length; its max_running_requests is a ceiling, reported when the server holds fewer)
    and what the cases need (the long prompt and its output, the concurrency)."""
    promise = promise or {}
    ctx, kv = server.get("context_length"), server.get("max_total_num_tokens")
    running = server.get("effective_max_running_requests") or server.get("max_running_requests")
    figures = {"context_length": ctx, "max_total_num_tokens": kv,
               "max_req_input_len": server.get("max_req_input_len"),
               "max_running_requests": running,
               "configured_max_running_requests": server.get("max_running_requests"),
               "max_mamba_cache_size": server.get("max_mamba_cache_size")}
    known = [v for v in (ctx, kv) if _is_number(v) and v > 0]
    figures["effective_context"] = min(known) if known else None
    for key in _capacity_engine(server).capacity_figures:
        figures[key] = server.get(key)
    out = {"figures": figures, "needs": [], "failures": [], "notes": [], "unverified": []}
    ctx_needs, run_needs = [], []
    if _is_number(promise.get("context_length")):
        ctx_needs.append((int(promise["context_length"]), "the profile promises"))
    # The profile's max_running_requests is a ceiling SGLang lowers to what its pools hold (the
    # mamba state slots of a hybrid model): below it is reported; below what a case runs fails.
    asked = promise.get("max_running_requests")
    for c in cases:
        o = c["options"]
        if o.get("check"):
            continue
        if o["prompts"] == "long_context":
            ctx_needs.append((o["prompt_tokens"] + o["max_tokens"], "case %s needs (%s prompt + %s output)"
                              % (c["case"], _fmt_tokens(o["prompt_tokens"]), _fmt_tokens(o["max_tokens"]))))
        if o["concurrency"] > 1:
            run_needs.append((o["concurrency"], "case %s runs" % c["case"]))
    out["needs"] = [{"what": "context", "tokens": t, "who": w} for t, w in ctx_needs] + \
                   [{"what": "running requests", "requests": r, "who": w} for r, w in run_needs]
    _unverified(out, server, ctx_needs, run_needs, asked)
    if figures["effective_context"] is None and running is None:
        out["notes"].append("the server reports no capacity (no SGLang /server_info): not checked")
        out["passed"] = True
        return out
    parts = []
    label = dict(engines.get(engines.DEFAULT).capacity_label(server),
                 **_capacity_engine(server).capacity_label(server))
    eff = figures["effective_context"]
    short = [(t, w) for t, w in ctx_needs if eff is not None and eff < t]
    if short:
        parts.append("it holds a %s-token context (%s %s, %s %s), "
                     "%s" % (_fmt_tokens(eff), label["context_length"],
                             "?" if ctx is None else _fmt_tokens(ctx), label["max_total_num_tokens"],
                             "?" if kv is None else _fmt_tokens(kv),
                             ", ".join("%s %s" % (w, _fmt_tokens(t)) for t, w in short)))
    if _is_number(asked) and _is_number(running) and running < asked:
        out["notes"].append(
            "the profile asks for %d running requests; the server runs at most %d at once (%s%s)"
            % (asked, running, label["fewer"], "" if figures["max_mamba_cache_size"] is None
                                       else ": %d mamba state slots" % figures["max_mamba_cache_size"]))
    few = [(r, w) for r, w in run_needs if _is_number(running) and running < r]
    if few:
        parts.append("it runs at most %d request%s at once (%s), %s"
                     % (running, "" if running == 1 else "s", label["max_running_requests"],
                        ", ".join("%s %d" % (w, r) for r, w in few)))
    if parts:
        out["failures"].append({"case": "capacity", "threshold": "capacity",
                                "measured": {"effective_context": eff, "max_running_requests": running},
                                "required": {"context": max(t for t, _ in ctx_needs) if ctx_needs else None,
                                             "running": max(r for r, _ in run_needs) if run_needs else None},
                                "message": "capacity: " + "; ".join(parts)})
    out["passed"] = not out["failures"]
    return out


# ---------------------------------------------------------------------------------- run ------
def _unmeasured(cfg, reason):
    """The result of a case none of whose requests could be measured."""
    empty = summarize([])
    return {"case": cfg["case"], "prompts": cfg["prompts"], "concurrency": cfg["concurrency"],
            "requests": cfg["requests"], "max_tokens": cfg["max_tokens"], "warmup": 0,
            "prompt_tokens": {"target": cfg["prompt_tokens"], "n": 0, "min": None, "median": None,
                              "max": None},
            "decode_tok_s": empty, "accept_len": None, "accept_len_by_prompt": {},
            "accept_by_position": None, "aggregate_tok_s": None, "completion_tokens": 0,
            "wall_s": None, "ttft_s": {"n": 0, "p50": None, "p90": None, "p99": None, "max": None},
            "itl_ms": {"n": 0, "p50": None, "p90": None, "p99": None, "max": None},
            "errors": cfg["requests"], "error_kinds": {}, "error_details": [], "excluded_short": 0,
            "metrics": None, "per_request": [], "notes": [], "unmeasured": str(reason),
            "intervals": None, "verdict": decision.FAIL, "inconclusive": [],
            "thresholds": {k: cfg[k] for k in SPEED_THRESHOLDS}, "passed": False,
            "failures": [{"threshold": "measured", "measured": None, "required": None,
                          "message": "could not be measured: %s" % reason}]}


def run(common, plan, thresholds, profile, calibrated=None, promise=None, baseline=None,
        progress=None, names=None, fingerprint=None, answers=None, clocks=None):
    """Resolve the raw plan (``bench gate``, which has no deploy plan) and run it: run_cases."""
    cases = resolve(plan, thresholds, profile, calibrated, names, common.get("confidence") or 0.95)
    return run_cases(common, cases, profile, promise, baseline, progress, fingerprint,
                     notes=plan_notes(plan, thresholds, profile), answers=answers, clocks=clocks)


RESOLVED_CASE_KEYS = ("case", "description", "options", "report_only", "thresholds", "source")


def check_cases(cases, option="cases"):
    """The resolved cases (resolve's) a caller hands over, each with its options and thresholds;
    raises ConfigError naming ``option`` and the case when one is not in resolve's shape."""
    if not isinstance(cases, list) or not cases:
        raise ConfigError(option, "must be a non-empty list of resolved cases (the deploy plan's "
                                  "gate.cases, plan.resolve), got %r" % (cases,))
    seen = set()
    for i, c in enumerate(cases):
        where = "%s[%d]" % (option, i)
        if not isinstance(c, dict) or not isinstance(c.get("case"), str):
            raise ConfigError(option, "%s must be a resolved case {%s}, got %r"
                              % (where, ", ".join(RESOLVED_CASE_KEYS), c))
        unknown = sorted(set(c) - set(RESOLVED_CASE_KEYS))
        if unknown:
            raise ConfigError(option, "%s (%s) has unknown key(s) %s (known: %s)"
                              % (where, c["case"], ", ".join(unknown), ", ".join(RESOLVED_CASE_KEYS)))
        if c["case"] in seen:
            raise ConfigError(option, "%s: case %s is given twice" % (where, c["case"]))
        seen.add(c["case"])
        opts, limits = c.get("options"), c.get("thresholds")
        if not isinstance(opts, dict) or set(opts) - set(CASE_OPTIONS):
            raise ConfigError(option, "%s (%s).options must be a mapping of %s, got %r"
                              % (where, c["case"], ", ".join(CASE_OPTIONS), opts))
        if not isinstance(limits, dict) or set(limits) - set(THRESHOLD_KEYS):
            raise ConfigError(option, "%s (%s).thresholds must be a mapping of %s, got %r"
                              % (where, c["case"], ", ".join(THRESHOLD_KEYS), limits))
        if not isinstance(c.get("report_only", False), bool):
            raise ConfigError(option, "%s (%s).report_only must be true or false" % (where, c["case"]))


# The common options a quality case takes (quality.validate), beside its own.
QUALITY_COMMON = ("confidence", "inconclusive", "first_token_timeout", "stall_timeout")


def case_configs(common, cases, profile, baseline=None):
    """Each resolved case's configuration (config.validate for a speed case, quality.validate for a
    check: every option checked before the first request), its baseline taken from the profile's
    record ``baseline``."""
    check_cases(cases)
    cfgs = []
    speed = [c for c in cases if not c["options"].get("check")]
    for c in cases:
        if c["options"].get("check"):
            opts = dict({k: common[k] for k in QUALITY_COMMON if k in common}, **c["options"])
            opts.update(c["thresholds"], case=c["case"])
            cfgs.append(quality.validate(dict({k: config.DEFAULTS[k] for k in QUALITY_COMMON}, **opts)))
            continue
        opts = dict(common, **dict(c["options"], case=c["case"], **c["thresholds"]))
        opts["warmup"] = 0  # one warmup for the whole plan, before its first case
        opts["baseline"] = history.baseline(baseline, c["case"], first=c is speed[0], profile=profile) \
            if baseline else None
        if c.get("report_only") or (baseline and baseline.get("profile") != profile):
            opts["max_regression_pct"] = None  # reported, not judged
        cfgs.append(config.validate(opts))
    return cfgs


def _fingerprint(fingerprint, server):
    """The host's fingerprint with what the server says it runs, where the caller did not know
    (bench gate)."""
    if fingerprint is None:
        return None
    fp = dict(fingerprint)
    for key, said in (("engine", server.get("kind")), ("version", server.get("version")),
                      ("served_model", server.get("served_model"))):
        if fp.get(key) is None and said not in (None, "unknown"):
            fp[key] = said
    return fp


def agreement_baseline(baseline, case, fingerprint):
    """What an agreement case compares with: the tokens its case kept in the last-known-good
    record, whether that run was the same build (quality.same_build of the fingerprints), and
    its time; None without a record or tokens."""
    kept = history.case_of(baseline, case) if baseline else None
    if not kept or not kept.get("tokens"):
        return None
    return {"tokens": kept["tokens"], "time": baseline.get("time"),
            "same_build": quality.same_build(baseline.get("fingerprint"), fingerprint)}


def run_cases(common, cases, profile, promise=None, baseline=None, progress=None, fingerprint=None,
              notes=(), answers=None, clocks=None):
    """Run the resolved ``cases`` (resolve's, e.g. the deploy plan's gate.cases) against the server
    in ``common["url"]``; the plan result.

    ``common``: engine options shared by every case (url, api_key, model, api, warmup, timeouts,
    metrics, model_size, hardware, max_regression_pct). ``baseline``: the last passing history
    record of the profile (each case is compared with its own case in it). ``fingerprint``: the
    host's (fingerprint.take), recorded with the prompt set of each case and compared with the
    baseline's; ``notes``: the plan's (plan_notes); ``answers``: a host's known-answer rows
    (answers.parse, with its ``source``) for the quality checks, else the built-in ones;
    ``clocks``: a watch on the host's clocks started with the fingerprint (fingerprint.watch),
    stopped when the cases are done (or fail): what held the clocks down is recorded in the
    fingerprint (``held_down``), compared with the baseline's and named (``slowdowns``). Raises
    ConfigError for a bad case or option and MeasureError when the server cannot be measured at
    all."""
    try:
        return _run_cases(common, cases, profile, promise, baseline, progress, fingerprint, notes,
                          answers, clocks)
    finally:
        if clocks is not None:
            clocks.stop()  # a sampler's thread ends with the run, whatever ended it


def _run_cases(common, cases, profile, promise, baseline, progress, fingerprint, notes, answers, clocks):
    started = time.perf_counter()
    base = config.validate(dict(common))
    cfgs = case_configs(common, cases, profile, baseline)
    ep = engine.endpoint(base)
    model, server = engine.discover(ep, base["model"])
    engine.check_api(base, server)
    server.setdefault("served_model", model)
    speed = [cfg for cfg in cfgs if not cfg.get("check")]
    capacity = check_capacity(server, [{"case": cfg["case"], "options": cfg} for cfg in speed], promise)
    learn = any(cfg["prompts"] == "long_context" for cfg in speed)
    warm, cpt = engine.warm_up(base, ep, model, progress, learn=learn, kind=server["kind"])
    fp = _fingerprint(fingerprint, server)
    results = []
    for i, (c, cfg) in enumerate(zip(cases, cfgs)):
        case_started = time.perf_counter()
        if cfg.get("check"):
            due = quality.pressure_due(cfg.get("when"), fp, (baseline or {}).get("fingerprint"))
            r = quality.run(cfg, ep, model, server, answers, agreement_baseline(baseline, c["case"], fp),
                            progress, due)
            r["prompt_set"] = "%s:%s" % (cfg["check"], r.get("rows_from") or "built-in")
        else:
            try:
                r = engine.measure(cfg, ep, model, server, warm if cfg is speed[0] else (), cpt, progress,
                                   judge=verdict.judge_case)
            except MeasureError as e:
                r = _unmeasured(cfg, e)
            r["prompt_set"] = promptset.set_id(cfg["prompts"])
        # the first case's time includes the plan's discovery and warmup
        r["time_to_verdict_s"] = time.perf_counter() - (started if i == 0 else case_started)
        r["description"] = c.get("description") or ""
        r["threshold_source"] = c.get("source") or {}
        r["report_only"] = c.get("report_only") is True
        results.append(r)
    out = verdict.judge_plan(results, capacity, server, profile, model, ep.url,
                             time.perf_counter() - started, list(notes or ()))
    held = clocks.stop() if clocks is not None else None
    if fp is not None:
        fp["prompts"] = {r["case"]: r["prompt_set"] for r in results}
        if held is not None:
            fp["held_down"] = held
        out["fingerprint"] = fp
        out["fingerprint_changes"] = hostprint.differences((baseline or {}).get("fingerprint"), fp)
    out["slowdowns"] = hostprint.held_text(held, ((baseline or {}).get("fingerprint") or {}).get("held_down"))
    return out
