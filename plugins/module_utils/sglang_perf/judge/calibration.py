# -*- coding: utf-8 -*-
"""Calibration: a host's own thresholds from several gate plan results of one server (propose:
a margin below the lowest figures measured, above the highest TTFT) and the host_vars file that
carries them (text, ``sglang_gate_calibrated``). playbooks/calibrate.yml (through the
sglang_gate filters), ``python -m bench calibrate`` and the tuner's winner bars use it.

Standard library only, Python 3.9+."""
from __future__ import annotations

from ..measure.client import ConfigError


def _floor(value, digits):
    scale = 10 ** digits
    return int(value * scale) / float(scale)


def _ceil(value, digits):
    scale = 10 ** digits
    return -int(-value * scale) / float(scale)


def propose(runs, margin):
    """Thresholds per case from several plan results of one server: ``margin`` (a fraction) below
    the lowest measured median decode tok/s, accept length and aggregate tok/s (aggregate only
    for a case at C > 1), and above the highest median TTFT of a long-context case.

    Returns {case: {"thresholds": {...}, "measured": {figure: [values]}}}, cases in plan order; a
    case no run could measure is left out."""
    if not 0 <= margin < 1:
        raise ConfigError("margin", "must be a fraction from 0 to 1 (0.1 = 10%% below), got %r" % (margin,))
    out = {}
    for result in runs:
        for r in result.get("cases") or []:
            if r.get("unmeasured") or r.get("report_only"):
                continue
            m = out.setdefault(r["case"], {"measured": {}})["measured"]
            if r.get("check"):
                if r.get("check") == "answers" and r.get("accuracy"):
                    m.setdefault("accuracy", []).append(r["accuracy"]["estimate"])
                continue
            long_case = r.get("prompts") == "long_context"
            figures = {"decode_tok_s": (r.get("decode_tok_s") or {}).get("median"),
                       "accept_len": r.get("accept_len"),
                       "aggregate_tok_s": r.get("aggregate_tok_s") if r.get("concurrency", 1) > 1 else None,
                       "ttft_s": (r.get("ttft_s") or {}).get("p50") if long_case else None}
            for key, value in figures.items():
                if value is not None:
                    m.setdefault(key, []).append(value)
    proposals = {}
    for name, entry in out.items():
        m, t = entry["measured"], {}
        if m.get("decode_tok_s"):
            t["min_tok_s"] = _floor(min(m["decode_tok_s"]) * (1 - margin), 1)
        if m.get("accept_len"):
            t["min_accept_len"] = max(1.0, _floor(min(m["accept_len"]) * (1 - margin), 2))
        if m.get("aggregate_tok_s"):
            t["min_aggregate_tok_s"] = _floor(min(m["aggregate_tok_s"]) * (1 - margin), 1)
        if m.get("ttft_s"):
            t["max_ttft_s"] = _ceil(max(m["ttft_s"]) * (1 + margin), 1)
        if m.get("accuracy"):
            t["min_accuracy"] = _floor(min(m["accuracy"]) * (1 - margin), 2)
        if not t and not m:
            continue  # a check without a figure to calibrate (tool calls, reasoning, agreement)
        proposals[name] = {"thresholds": t, "measured": m}
    return proposals


def _flow(mapping):
    return "{" + ", ".join("%s: %s" % (k, mapping[k]) for k in mapping) + "}"


def text(proposals, profile, margin, runs, host, when, existing=None):
    """The host_vars file that playbooks/calibrate.yml and ``bench calibrate`` write: the
    variable ``sglang_gate_calibrated`` with this profile's proposals (other profiles' entries of
    ``existing`` kept), and comments saying how each figure was obtained."""
    merged = dict(existing or {})
    merged[profile] = {name: p["thresholds"] for name, p in proposals.items()}
    lines = ["---",
             "# Written by playbooks/calibrate.yml / python -m bench calibrate: the gate plan ran %d"
             " times on %s" % (runs, host),
             "# at %s (profile %s). Each minimum is %g%% below the lowest figure measured, each"
             % (when, profile, 100 * margin),
             "# maximum %g%% above the highest. sglang_gate_calibrated wins over sglang_gate_thresholds"
             % (100 * margin),
             "# key by key (roles/sglang_gate). Measured (lowest-highest over the runs):"]
    labels = {"decode_tok_s": "decode tok/s", "accept_len": "accept length",
              "aggregate_tok_s": "aggregate tok/s", "ttft_s": "TTFT p50 s", "accuracy": "accuracy"}
    for name, p in proposals.items():
        parts = ["%s %s-%s" % (labels[k], format(min(v), ".2f"), format(max(v), ".2f"))
                 for k, v in p["measured"].items()]
        lines.append("#   %s: %s" % (name, ", ".join(parts)))
    lines.append("sglang_gate_calibrated:")
    for prof in merged:
        lines.append("  %s:" % prof)
        for name, t in (merged[prof] or {}).items():
            lines.append("    %s: %s" % (name, _flow(t)))
    return "\n".join(lines) + "\n"
