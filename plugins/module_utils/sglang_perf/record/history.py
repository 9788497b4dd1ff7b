"""The gate history: one JSON object per gate run, one per line (written by the sglang_gate role,
copied to the controller). Reading it is shared by the module (baseline on the host) and the
``bench history`` CLI (tables and plots on the controller)."""
from __future__ import annotations

import json


def read(path, warn=None):
    """Records of a history file, oldest first; malformed lines are skipped (reported to
    ``warn(line_number, reason)`` when given)."""
    records = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                if warn:
                    warn(number, "not JSON (%s)" % e)
                continue
            if not isinstance(rec, dict):
                if warn:
                    warn(number, "not a JSON object")
                continue
            records.append(rec)
    return records


def median_of(rec):
    d = rec.get("decode_tok_s")
    return d.get("median") if isinstance(d, dict) else d


def passed(rec):
    """Whether a history record is a passing gate run: the one definition (records written before
    the verdict field carry ``passed``, once as a string)."""
    verdict = rec.get("verdict")
    if verdict is not None:
        return verdict == "pass"
    value = rec.get("passed")
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return value is True


def last_passing(records, profile):
    """The newest passing record of ``profile`` (the last-known-good run of that profile)."""
    for rec in reversed(records):
        if rec.get("profile") == profile and passed(rec) and median_of(rec):
            return rec
    return None


def last_known_good(records, profile):
    """What a run of ``profile`` is compared with: the newest passing run of that profile, else
    the host's last-known-good run of any profile (a profile deployed for the first time is
    compared with what served before it: the change is reported and split into its causes, and
    sglang_gate_max_regression_pct judges only a run against its own profile's)."""
    return last_passing(records, profile) or next(
        (rec for rec in reversed(records) if passed(rec) and median_of(rec)), None)


def case_of(rec, name):
    """The figures of case ``name`` in a record (None when the record has no such case)."""
    for case in rec.get("cases") or []:
        if isinstance(case, dict) and case.get("case") == name:
            return case
    return None


def baseline(rec, case=None, first=True, profile=None):
    """What a regression is measured against, from a history record: its case ``case``; a record
    written before the gate plan had one case, which is the plan's first (headline) case. With its
    intervals (the run's noise, for attribution.py; None in records older than them) and
    ``for_profile``: the profile judged against it (``profile``; another than the record's when
    that profile has no passing run of its own)."""
    src = case_of(rec, case) if case else None
    if src is None:
        if case and not first:
            return None
        src = rec
    return {"time": rec.get("time"), "profile": rec.get("profile"), "for_profile": profile,
            "decode_tok_s": median_of(src), "accept_len": src.get("accept_len"),
            "intervals": src.get("intervals") if isinstance(src.get("intervals"), dict) else None}


def change_pct(now, before):
    if now is None or not before:
        return None
    return 100.0 * (float(now) - float(before)) / float(before)


# The figures of each case a history record keeps (the full result stays in the play's output).
CASE_FIGURES = ("case", "description", "prompts", "concurrency", "requests", "max_tokens",
                "prompt_tokens", "decode_tok_s", "accept_len", "accept_by_position",
                "aggregate_tok_s", "ttft_s", "errors", "error_kinds", "thresholds",
                "threshold_source", "regression", "roofline", "passed", "failures", "unmeasured",
                "intervals", "verdict", "sequential", "time_to_verdict_s", "attribution",
                "prompt_set", "report_only", "facts",
                # a quality check's (quality.py): what it asked and found, the agreement's tokens
                "check", "accuracy", "right", "wrong", "problems", "problem_kinds", "rows_from",
                "parser", "field", "tokens", "unit", "agreement", "compared", "differ", "same_build",
                "note", "skipped", "kv_usage")


def record(result, decision, context):
    """The history record of one gate run: ``context`` (time, host, profile, sglang_version,
    unit_sha256, env_sha256, multinode, max_regression_pct), the verdict and action of
    ``decision`` (decision.py), and the plan result's figures per case."""
    result = result or {}
    rec = dict(context)
    rec.update({
        "verdict": decision["verdict"], "passed": decision["verdict"] == "pass",
        "action": decision["action"], "reason": decision["reason"],
        "msg": result.get("msg", ""),
        "time_to_verdict_s": result.get("time_to_verdict_s"),
        # the plan's own verdict (pass / fail / inconclusive) beside the gate's decision
        "plan_verdict": result.get("verdict"),
        "inconclusive_cases": result.get("inconclusive_cases") or [],
        "capacity": result.get("capacity"),
        "failed_cases": result.get("failed_cases") or [],
        "failures": [f.get("message") for f in result.get("failures") or []],
        "cases": [{k: c.get(k) for k in CASE_FIGURES if k in c} for c in result.get("cases") or []],
        # the host's fingerprint (fingerprint.py) and what changed since the baseline's
        "fingerprint": result.get("fingerprint"),
        "fingerprint_changes": result.get("fingerprint_changes") or [],
        # what held the GPUs' clocks down during the run and is no such change (plan.run_cases)
        "slowdowns": result.get("slowdowns") or [],
    })
    # the headline (first) case at the top, as one-case records had it
    for key in ("decode_tok_s", "accept_len", "accept_by_position", "aggregate_tok_s", "ttft_s",
                "errors", "roofline", "regression", "attribution", "concurrency", "requests", "max_tokens",
                "intervals"):
        rec[key] = result.get(key)
    return rec
