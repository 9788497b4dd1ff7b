# -*- coding: utf-8 -*-
"""The verdicts and what says them. A case (one run) against its thresholds: the change from the
baseline, each threshold judged on its interval (passed, failed or undecided while the interval
straddles it), the verdict (pass, fail, undecided while more can be measured, inconclusive at the
last request) and its lines. A gate plan from its cases and the capacity check: its verdict, the
one-line summary and failure message, the table. engine.py measures; this judges what it measured.

Standard library only, Python 3.9+ (runs on the target host through AnsiballZ)."""
from __future__ import annotations

from . import attribution
from ..record import history
from . import quality
from ..record import fingerprint as hostprint
from ..measure.config import THRESHOLDS
from .decision import FAIL, INCONCLUSIVE_VERDICT, PASS
from ..engines.settings import is_num

UNDECIDED = "undecided"  # a threshold's state (and an interim look's verdict) while an interval straddles it
# The accept length's convention (engine.ACCEPT_LEN_CONVENTION) in a message.
CONVENTION_SHORT = "completion tokens / verify steps"
# A long-context case whose prompts the server counted below this share of the target did not
# measure what it promised (the corpus or the characters-per-token estimate fell short).
PROMPT_TOKENS_TOLERANCE = 0.9


# ------------------------------------------------------------------------------- a case ------
def judge_case(result, cfg, final=True):
    """``result`` judged in place against cfg's thresholds: its change from cfg["baseline"]
    (compare) when there is one, then evaluate(). Whether the verdict is decided (pass or fail):
    engine.measure's ``judge``, which measures no more once a look is decided."""
    if cfg["baseline"]:
        compare(result, cfg)
    evaluate(result, cfg, final)
    return result["verdict"] in (PASS, FAIL)


def compare(result, cfg):
    """``result``'s change from cfg["baseline"] (history.baseline): "regression" (the changes in
    percent) and "attribution" (split into its causes, each run's noise its own intervals, with
    what it is measured against: ``against``; None without both speeds)."""
    b = cfg["baseline"]
    result["regression"] = {
        "baseline": b,
        "decode_tok_s_pct": history.change_pct(result["decode_tok_s"]["median"], b.get("decode_tok_s")),
        "accept_len_pct": history.change_pct(result["accept_len"], b.get("accept_len")),
        "max_regression_pct": cfg["max_regression_pct"],
    }
    a = attribution.split(
        {"tok_s": result["decode_tok_s"]["median"], "accept_len": result["accept_len"],
         "intervals": result.get("intervals")},
        {"tok_s": b.get("decode_tok_s"), "accept_len": b.get("accept_len"), "intervals": b.get("intervals")})
    if a:
        a["against"] = attribution.against(b)
    result["attribution"] = a


def fmt_interval(iv, spec=".1f"):
    """ "54.6 [53.9, 55.2]" ('-' without a figure; no brackets without bounds)."""
    if not iv or iv.get("estimate") is None:
        return "-"
    text = format(iv["estimate"], spec)
    if iv.get("lower") is not None and iv.get("upper") is not None:
        text += " [%s, %s]" % (format(iv["lower"], spec), format(iv["upper"], spec))
    return text


def _bounded(entries, name, label, iv, required, unit, spec, at_least=True):
    """One threshold judged on its interval: passed when the bound on its side clears it, failed
    when the other bound is past it, undecided in between (or without bounds yet)."""
    if required is None:
        return
    entry = {"threshold": name, "required": required,
             "measured": None if not iv else iv.get("estimate"),
             "lower": None if not iv else iv.get("lower"), "upper": None if not iv else iv.get("upper")}
    if entry["measured"] is None:
        entry.update(state=FAIL, message="%s could not be measured (required %s %g%s)"
                     % (label, ">=" if at_least else "<=", required, unit))
        entries.append(entry)
        return
    lo, hi = entry["lower"], entry["upper"]
    shown = fmt_interval(iv, spec) + unit
    if lo is None or hi is None:
        state = UNDECIDED
    elif at_least:
        state = PASS if lo >= required else FAIL if hi < required else UNDECIDED
    else:
        state = PASS if hi <= required else FAIL if lo > required else UNDECIDED
    if state == FAIL:
        message = "%s %s %s required %s%s" % (label, shown, "<" if at_least else ">",
                                              format(required, spec), unit)
    else:
        message = "%s %s %s the %s %s%s bar" % (
            label, shown, "clears" if state == PASS else "straddles",
            "minimum" if at_least else "maximum", format(required, spec), unit)
    entry.update(state=state, message=message)
    entries.append(entry)


def verdict_entries(result, cfg):
    """Every threshold of ``cfg`` judged on ``result``'s intervals, and the checks that need no
    interval (prompt length, metrics, errors): [{"threshold", "state", "message", ...}]."""
    entries = []
    iv = result.get("intervals") or {}
    _bounded(entries, "min_tok_s", "decode tok/s (per-request median)", iv.get("decode_tok_s"),
             cfg["min_tok_s"], "", ".1f")
    _bounded(entries, "min_accept_len", "accept length", iv.get("accept_len"), cfg["min_accept_len"],
             "", ".2f")
    own = result.get("engine_accept_len")
    if own is not None and entries and entries[-1]["threshold"] == "min_accept_len" \
            and entries[-1]["state"] == FAIL:
        entries[-1]["message"] += " (%s; vLLM's own 1 + accepted / drafts is %.2f)" % (CONVENTION_SHORT, own)
    _bounded(entries, "min_aggregate_tok_s", "aggregate tok/s at C=%d" % cfg["concurrency"],
             iv.get("aggregate_tok_s"), cfg["min_aggregate_tok_s"], "", ".1f")
    _bounded(entries, "max_ttft_s", "time to first token (median)", iv.get("ttft_s"), cfg["max_ttft_s"],
             "s", ".2f", at_least=False)
    reg = result.get("regression")
    if reg and cfg["max_regression_pct"] is not None:
        keep = 1 - cfg["max_regression_pct"] / 100.0
        for key, label, spec in (("decode_tok_s", "decode tok/s", ".1f"),
                                 ("accept_len", "accept length", ".2f")):
            before = reg["baseline"].get(key)
            if not before or iv.get(key) is None:
                continue
            _bounded(entries, "max_regression_pct", label, iv[key], before * keep, "", spec)
            e = entries[-1]
            e["measured_pct"] = reg[key + "_pct"]
            was = "the last-known-good %s (%s)" % (format(before, ".2f"),
                                                   reg["baseline"].get("time") or "baseline")
            shown = fmt_interval(iv[key], spec)
            if e["state"] == FAIL:
                e["message"] = "%s %s dropped %.1f%% from %s (allowed %g%%: at least %s)" % (
                    label, shown, -(reg[key + "_pct"] or 0), was, cfg["max_regression_pct"],
                    format(before * keep, spec))
            else:
                e["message"] = "%s %s %s the allowed %g%% drop from %s (at least %s)" % (
                    label, shown, "is within" if e["state"] == PASS else "straddles",
                    cfg["max_regression_pct"], was, format(before * keep, spec))
    facts = result.get("facts")
    # judged on the chat API only: the others send the prompt, its request to state the notes
    # included, without the chat template (the count is reported all the same)
    if cfg["min_facts"] is not None and facts and cfg["api"] == "chat":
        ok = facts["median"] is not None and facts["median"] >= cfg["min_facts"]
        miss = facts.get("missed")
        entries.append({
            "threshold": "min_facts", "measured": facts["median"], "required": cfg["min_facts"],
            "state": PASS if ok else FAIL,
            "message": "facts planted in the long prompt and stated in the reply: median %s of %d (per "
                       "reply %s) %s required %d%s" % (
                           "-" if facts["median"] is None else "%g" % facts["median"], facts["planted"],
                           ", ".join(str(n) for n in facts["stated"]), ">=" if ok else "<", cfg["min_facts"],
                           "; first missed: the %s (%s, at %d%% of the prompt)" % (
                               miss["what"], miss["value"], 100 * miss["depth"]) if miss else "")})
    pt = result.get("prompt_tokens") or {"target": None}
    if pt["target"] and (pt["median"] is None or pt["median"] < PROMPT_TOKENS_TOLERANCE * pt["target"]):
        entries.append({
            "threshold": "prompt_tokens", "measured": pt["median"], "required": pt["target"], "state": FAIL,
            "message": "the server counted %s prompt tokens, the case asks for about %d: it did not "
                       "measure the context it promises" % (
                           "no" if pt["median"] is None else "%d" % pt["median"], pt["target"])})
    if cfg["metrics"] == "always" and result["metrics"] is None:
        entries.append({"threshold": "metrics", "measured": None, "required": "always", "state": FAIL,
                        "message": "metrics=always but the server exposes no /metrics "
                                   "(SGLang needs --enable-metrics)"})
    if result["errors"] > cfg["max_errors"]:
        entries.append({
            "threshold": "max_errors", "measured": result["errors"], "required": cfg["max_errors"],
            "state": FAIL,
            "message": "%d request(s) failed (allowed %d): %s" % (
                result["errors"], cfg["max_errors"],
                ", ".join("%d x %s" % (n, k) for k, n in sorted(result["error_kinds"].items())))})
    return entries


def next_step(cfg):
    """What to do about an inconclusive threshold, for its message."""
    return ("measure more (max_requests %d; the band narrows about as 1/sqrt(requests)) or set the "
            "threshold from this host's own figures (playbooks/calibrate.yml)" % cfg["max_requests"])


# The thresholds a change of decode speed explains: the first of a case's failures among them
# carries the cause against the baseline (attribution.py).
EXPLAINED = ("min_tok_s", "min_accept_len", "min_aggregate_tok_s", "max_regression_pct")


def evaluate(result, cfg, final=True):
    """The verdict from the intervals: "fail" as soon as a threshold fails, "pass" once every one
    is cleared, "undecided" in between while more can be measured and "inconclusive" at the last
    request (``final``). Sets result['verdict'], ['thresholds'], ['failures'], ['inconclusive'],
    ['judged'] and ['passed'] (an inconclusive verdict passes only with inconclusive: pass);
    the first failure of EXPLAINED names the cause against the baseline; returns the failures."""
    entries = verdict_entries(result, cfg)
    failures = [e for e in entries if e["state"] == FAIL]
    open_ = [e for e in entries if e["state"] == UNDECIDED]
    if failures:
        verdict = FAIL
    elif open_:
        verdict = INCONCLUSIVE_VERDICT if final else UNDECIDED
    else:
        verdict = PASS
    inconclusive = []
    if verdict == INCONCLUSIVE_VERDICT:
        for e in open_:
            e.update(state=INCONCLUSIVE_VERDICT,
                     message="inconclusive after %d requests: %s; %s"
                             % (result["requests"], e["message"], next_step(cfg)))
            inconclusive.append(e)
        if cfg["inconclusive"] == "fail":
            failures = inconclusive
    why = result.get("attribution")
    failed = next((e for e in failures if e["threshold"] in EXPLAINED), None)
    if why and failed:  # the case's cause, once, whether the regression check is on or not
        failed["message"] += "; %s: %s" % (why.get("against") or "against the baseline", why["text"])
    result["verdict"] = verdict
    result["judged"] = entries
    result["thresholds"] = {k: cfg[k] for k in THRESHOLDS}
    result["failures"] = failures
    result["inconclusive"] = inconclusive
    result["passed"] = not failures
    return failures


def context_line(result):
    """vLLM's own accept length beside ours (naming both conventions), the roofline share and the
    change from the baseline, for one-line summaries ('' without them)."""
    parts = []
    own = result.get("engine_accept_len")
    if own is not None:
        parts.append("accept length %s = %s; vLLM's own 1 + accepted / drafts %.2f" % (
            "-" if result.get("accept_len") is None else "%.2f" % result["accept_len"],
            CONVENTION_SHORT, own))
    r = result.get("roofline")
    if r:
        parts.append("roofline %.1f tok/s%s" % (r["ceiling_tok_s"], "" if r["share_pct"] is None
                                                 else " (measured %.0f%% of it)" % r["share_pct"]))
    g = result.get("regression")
    if g:
        parts.append("vs last-known-good%s: decode %s, accept length %s" % (
            " (%s)" % g["baseline"]["time"] if g["baseline"].get("time") else "",
            "n/a" if g["decode_tok_s_pct"] is None else "%+.1f%%" % g["decode_tok_s_pct"],
            "n/a" if g["accept_len_pct"] is None else "%+.1f%%" % g["accept_len_pct"]))
    return "; ".join(parts)


def case_failure_message(result):
    """One line naming every failed threshold of a case, measured vs required."""
    ctx = context_line(result)
    return "gate failed: " + "; ".join(f["message"] for f in result["failures"]) + (
        " [%s]" % ctx if ctx else "")


# ------------------------------------------------------------------------------- a plan ------
HEADLINE = ("decode_tok_s", "accept_len", "accept_by_position", "aggregate_tok_s", "ttft_s",
            "itl_ms", "roofline", "regression", "concurrency", "requests", "max_tokens",
            "accept_len_convention", "engine_accept_len", "engine_accept_len_convention", "intervals",
            "attribution")


def plan_verdict(capacity_passed, results):
    """fail when capacity or a case failed, else inconclusive when a case is, else pass."""
    verdicts = [r.get("verdict") for r in results]
    if not capacity_passed or FAIL in verdicts:
        return FAIL
    return INCONCLUSIVE_VERDICT if INCONCLUSIVE_VERDICT in verdicts else PASS


def judge_plan(results, capacity, server, profile, model, url, seconds, notes=()):
    """The plan's verdict from its cases' results: every case judged on its own, plus capacity.
    The first case's figures are the headline (one-line summaries, the rollout table)."""
    failures = list(capacity["failures"])
    judged = [r for r in results if not r.get("report_only")]
    for r in judged:
        for f in r["failures"]:
            failures.append(dict(f, case=r["case"], message="%s: %s" % (r["case"], f["message"])))
    out = {"passed": not failures, "profile": profile, "model": model, "url": url,
           "server": server, "capacity": capacity, "cases": results, "failures": failures,
           "failed_cases": (["capacity"] if capacity["failures"] else [])
           + [r["case"] for r in judged if not r["passed"]],
           "verdict": plan_verdict(not capacity["failures"], judged),
           "inconclusive_cases": [r["case"] for r in judged
                                  if r.get("verdict") == INCONCLUSIVE_VERDICT],
           "time_to_verdict_s": seconds, "headline": None,
           "errors": sum(r["errors"] for r in results),
           "notes": list(notes) + capacity["notes"]}
    head = next((r for r in results if not r.get("check")), None)
    if head is not None:
        out["headline"] = head["case"]
        for key in HEADLINE:
            out[key] = head.get(key)
    return out


# ------------------------------------------------------------------------------ reports ------
def _f(value, spec=".1f"):
    return "-" if value is None else format(value, spec)


def positions(by_position):
    """Per-position acceptance (share of verify steps that accepted at least 1, 2, ... drafts) as
    '93/84/71%' ('-' without it); the one formatting every report uses."""
    if not isinstance(by_position, list) or not by_position:
        return "-"
    return "/".join("%.0f" % (100 * p) for p in by_position if is_num(p)) + "%"


def case_summary(r):
    """The few figures of a case result that summaries show (the rollout table, bench compare);
    a quality check's carry its line (``quality``) and None for the speed figures."""
    if r.get("check"):
        return dict({k: None for k in ("concurrency", "requests", "max_tokens", "prompt_tokens",
                                      "decode_tok_s", "accept_len", "accept_by_position",
                                      "aggregate_tok_s", "ttft_s", "intervals", "attribution")},
                    case=r.get("case"), check=r["check"], passed=r.get("passed"),
                    verdict=r.get("verdict"), quality=quality.line(r))
    pt = r.get("prompt_tokens") or {}
    return {"case": r.get("case"), "concurrency": r.get("concurrency"), "requests": r.get("requests"),
            "max_tokens": r.get("max_tokens"), "prompt_tokens": pt.get("median"),
            "decode_tok_s": (r.get("decode_tok_s") or {}).get("median"),
            "accept_len": r.get("accept_len"), "accept_by_position": r.get("accept_by_position"),
            "aggregate_tok_s": r.get("aggregate_tok_s"),
            "ttft_s": (r.get("ttft_s") or {}).get("p50"), "passed": r.get("passed"),
            "verdict": r.get("verdict"), "intervals": r.get("intervals"),
            "attribution": r.get("attribution")}


def shown(r, key, spec=".1f"):
    """A case figure with its interval when the result has one: '54.6 [53.9, 55.2]'."""
    iv = (r.get("intervals") or {}).get(key)
    if iv:
        return fmt_interval(iv, spec)
    value = r.get(key)
    return _f(value.get("median") if isinstance(value, dict) else value, spec)


def verdict_word(r):
    if r.get("report_only"):
        return "reported"
    v = r.get("verdict") or ("pass" if r.get("passed") else "fail")
    return {"pass": "passed", "fail": "FAILED", "inconclusive": "INCONCLUSIVE"}.get(v, v)


def requests_done(r):
    """'9 of 6-48' for a sequential case, '8' for a fixed one."""
    seq = r.get("sequential") or {}
    if seq.get("max_requests") and seq["max_requests"] != seq.get("min_requests"):
        return "%d of %d-%d" % (r["requests"], seq["min_requests"], seq["max_requests"])
    return "%d" % r["requests"]


def case_line(r):
    """One case's figures in one line (messages, logs)."""
    if r.get("check"):
        return quality.line(r) + (" reported" if r.get("report_only") else "")
    pt = r.get("prompt_tokens") or {}
    ctx = context_line(r)
    level = (r.get("intervals") or {}).get("level")
    return "%s (C=%d, %s x %d tok%s): decode %s tok/s median, accept length %s (by position %s), " \
           "aggregate %s tok/s, TTFT p50 %ss%s%s%s%s" % (
               r["case"], r["concurrency"], requests_done(r), r["max_tokens"],
               ", prompt %s tok" % _f(pt.get("median"), ".0f") if pt.get("target") else "",
               shown(r, "decode_tok_s"), shown(r, "accept_len", ".2f"),
               positions(r.get("accept_by_position")), shown(r, "aggregate_tok_s"),
               shown(r, "ttft_s", ".2f"), " (%g%% intervals)" % (100 * level) if level else "",
               "; " + ctx if ctx else "",
               "; facts stated %s of %d" % (_f(r["facts"].get("median"), "g"), r["facts"]["planted"])
               if r.get("facts") else "",
               "" if r.get("verdict", "pass") == "pass" and r["passed"] and not r.get("report_only")
               else " " + verdict_word(r)) + (
               "; vs the last-known-good: %s" % r["attribution"]["text"] if r.get("attribution") else "")


def host_changes(result):
    """'host changed since the last-known-good: ...; ' when the fingerprints differ, then each
    slowdown that held the GPUs during the run and is not such a change; '' for neither."""
    said = [hostprint.text(result.get("fingerprint_changes") or [])] + list(result.get("slowdowns") or [])
    return "".join(s + "; " for s in said if s)


def failure_message(result):
    """One line naming what changed on the host first, then every failed case and threshold,
    measured vs required."""
    return "gate failed (%s): %s%s" % (", ".join(result["failed_cases"]), host_changes(result),
                                       "; ".join(f["message"] for f in result["failures"]))


def summary(result):
    """The passing verdict in one line, what changed on the host first."""
    return "passed in %.0fs: %s%s" % (result["time_to_verdict_s"], host_changes(result),
                                      "; ".join(case_line(r) for r in result["cases"]))


TABLE_HEAD = ("case", "C", "requests x tok", "prompt tok", "decode tok/s", "accept", "by position",
              "aggregate", "TTFT p50", "verdict", "in")


def table_rows(result):
    rows = []
    for r in result["cases"]:
        if r.get("check"):
            continue  # a line of its own under the table (table())
        pt = r.get("prompt_tokens") or {}
        rows.append((r["case"], str(r["concurrency"]), "%s x %d" % (requests_done(r), r["max_tokens"]),
                     _f(pt.get("median"), ".0f"), shown(r, "decode_tok_s"),
                     shown(r, "accept_len", ".2f"), positions(r.get("accept_by_position")),
                     shown(r, "aggregate_tok_s"), shown(r, "ttft_s", ".2f"), verdict_word(r),
                     "%ss" % _f(r.get("time_to_verdict_s"), ".0f")))
    return rows


def table(result):
    """The plan's summary table, one row per case, then capacity, failures and the verdict."""
    rows = [TABLE_HEAD] + table_rows(result)
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_HEAD))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    f = result["capacity"]["figures"]
    lines.append("capacity: context %s tokens (context_length %s, KV pool %s), %s running requests%s"
                 % (_f(f["effective_context"], ",.0f"), _f(f["context_length"], ",.0f"),
                    _f(f["max_total_num_tokens"], ",.0f"),
                    "? (not exposed)" if any(u["what"] == "running requests"
                                             for u in result["capacity"].get("unverified") or [])
                    else _f(f["max_running_requests"], ".0f"),
                    "" if result["capacity"]["passed"] else "  FAILED"))
    for r in result["cases"]:
        if r.get("check"):
            lines.append("quality %s (%ss)" % (case_line(r), _f(r.get("time_to_verdict_s"), ".0f")))
            if r.get("note"):
                lines.append("  " + r["note"])
    if result.get("fingerprint_changes"):
        lines.append(hostprint.text(result["fingerprint_changes"]))
    lines.extend(result.get("slowdowns") or [])
    for note in result.get("notes") or []:
        lines.append("note: " + note)
    for fail in result["failures"]:
        lines.append("FAILED " + fail["message"])
    levels = sorted({(r.get("intervals") or {}).get("level") for r in result["cases"]
                     if not r.get("check")} - {None})
    if levels:
        lines.append("[lower, upper]: %s intervals (decode and TTFT: order statistics of the median; "
                     "accept length and aggregate: bootstrap over requests)"
                     % ", ".join("%g%%" % (100 * v) for v in levels))
    lines.append("gate %s in %.1fs%s" % ("PASSED" if result["passed"] else "FAILED",
                                         result["time_to_verdict_s"],
                                         " (inconclusive: %s)" % ", ".join(result["inconclusive_cases"])
                                         if result.get("inconclusive_cases") else ""))
    return "\n".join(lines)
