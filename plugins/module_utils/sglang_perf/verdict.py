# -*- coding: utf-8 -*-
"""The verdict of one run (a case) against its thresholds: the change from the baseline, each
threshold judged on its interval (passed, failed or undecided while the interval straddles it),
the verdict (pass, fail, undecided while more can be measured, inconclusive at the last request)
and the lines that say so. engine.py measures; this judges what it measured.

Standard library only, Python 3.9+ (runs on the target host through AnsiballZ)."""
from __future__ import annotations

from . import attribution, history
from .config import THRESHOLDS
from .decision import FAIL, INCONCLUSIVE_VERDICT, PASS

UNDECIDED = "undecided"  # a threshold's state (and an interim look's verdict) while an interval straddles it
# The accept length's convention (engine.ACCEPT_LEN_CONVENTION) in a message.
CONVENTION_SHORT = "completion tokens / verify steps"
# A long-context case whose prompts the server counted below this share of the target did not
# measure what it promised (the corpus or the characters-per-token estimate fell short).
PROMPT_TOKENS_TOLERANCE = 0.9


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


def failure_message(result):
    """One line naming every failed threshold, measured vs required."""
    ctx = context_line(result)
    return "gate failed: " + "; ".join(f["message"] for f in result["failures"]) + (
        " [%s]" % ctx if ctx else "")
