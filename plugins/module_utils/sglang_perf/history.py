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


def last_passing(records, profile):
    """The newest passing record of ``profile`` (the last-known-good run of that profile)."""
    for rec in reversed(records):
        if rec.get("profile") == profile and rec.get("passed") is True and median_of(rec):
            return rec
    return None


def baseline(rec):
    """What a regression is measured against, from a history record."""
    return {"time": rec.get("time"), "profile": rec.get("profile"),
            "decode_tok_s": median_of(rec), "accept_len": rec.get("accept_len")}


def change_pct(now, before):
    if now is None or not before:
        return None
    return 100.0 * (float(now) - float(before)) / float(before)
