# -*- coding: utf-8 -*-
"""Why a figure moved. Decode tok/s = accept length / verify-step time (a verify step yields
accept-length tokens), so a change of decode speed against a baseline splits exactly into an
acceptance part (prompts, context, drafts) and a step-time part (GPU clocks, power, PCIe, the
engine release):

    tok_s_now / tok_s_before = (accept_now / accept_before) / (step_now / step_before)

``split`` gives the three changes in percent, each with its interval over both runs' noise, and
names the cause: ``acceptance`` or ``system`` when only that part moved the speed the way it went,
``both``, or ``none``. A change is outside the noise when its interval excludes 0. The interval of
a change combines this run's interval of the figure with the baseline's (the one its history
record keeps) by MOVER on the log scale (Zou & Donner 2008: each side's distance from its estimate
to its bound, added in quadrature): two runs of one server, each as noisy as its own requests say,
differ by up to that much. A cause is named only when the decode change is outside the noise; then
a part is a cause when its change is outside the noise and moved the speed the way it went: a
slower server's lower accept length or longer step, a faster one's higher or shorter. (A 1-step
profile against a 3-step baseline: accept length -46%, but a verify step 17-22% shorter; the cause
of the drop is acceptance.) No fixed floor: the baseline's own interval holds the noise a floor
stood in for. Standard library only."""
from __future__ import annotations

import math
from statistics import NormalDist

from ..measure import stats

CAUSES = ("acceptance", "system", "both", "none")
# (figure in a run's "intervals", name of the change in the split)
PARTS = (("decode_tok_s", "tok_s"), ("accept_len", "accept_len"), ("step_time_s", "step_time"))


def _pct(now, before):
    if now is None or not before:
        return None
    return 100.0 * (float(now) / float(before) - 1.0)


def _num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _spread(iv, scale=1.0):
    """(below, above): the log distances from an interval's estimate to its bounds, times
    ``scale``; None without bounds (fewer requests than an interval takes); below is infinite for
    a lower bound at or below 0 (a normal approximation over a few very uneven requests)."""
    if not isinstance(iv, dict) or not all(_num(iv.get(k)) for k in ("estimate", "upper")) \
            or not isinstance(iv.get("lower"), (int, float)) or isinstance(iv["lower"], bool):
        return None
    est, lower = float(iv["estimate"]), float(iv["lower"])
    below = math.log(est / lower) if lower > 0 else math.inf
    return (scale * max(0.0, below), scale * max(0.0, math.log(iv["upper"] / est)))


def _z(level):
    return NormalDist().inv_cdf(0.5 + float(level) / 2.0)


def change_interval(pct, now_iv, before_iv, scale=1.0):
    """[lower, upper] in percent around the change ``pct``: MOVER on the log scale, this run's
    spread on one side and the baseline's (times ``scale``: its level to this run's) on the other;
    a baseline that recorded no interval is taken to be as noisy as this run. None when ``pct``
    or this run's interval is missing, or either is unbounded."""
    now = _spread(now_iv)
    if pct is None or now is None:
        return None
    before = _spread(before_iv, scale) or now
    c = math.log1p(pct / 100.0)
    below, above = math.hypot(now[0], before[1]), math.hypot(now[1], before[0])
    if math.isinf(below + above):
        return None  # unbounded: the change cannot be told from noise
    return [100.0 * math.expm1(c - below), 100.0 * math.expm1(c + above)]


def _outside(iv):
    return iv is not None and (iv[0] > 0 or iv[1] < 0)


def split(now, before):
    """The change from ``before`` to ``now``, each {"tok_s", "accept_len", "intervals" (a run's
    intervals as engine.py gives them and a history record keeps them: "decode_tok_s",
    "accept_len", "step_time_s", "level"; optional for the baseline)}; None without both speeds.
    Returns {"tok_s_pct", "accept_len_pct", "step_time_pct" (a slower step is +), each with its
    "..._pct_interval" ([lower, upper], None without this run's interval), "step_time_s",
    "step_time_s_before", "moved" (the decode change is outside both runs' noise),
    "baseline_noise" ("recorded" or "assumed": as this run's, the baseline kept no interval),
    "cause", "note" (why no cause, '' otherwise), "text"}."""
    tok_now, tok_before = now.get("tok_s"), before.get("tok_s")
    if not tok_now or not tok_before:
        return None
    al_now, al_before = now.get("accept_len") or 1.0, before.get("accept_len") or 1.0
    step_now, step_before = stats.step_time_s(tok_now, al_now), stats.step_time_s(tok_before, al_before)
    out = {"tok_s_pct": _pct(tok_now, tok_before), "accept_len_pct": _pct(al_now, al_before),
           "step_time_pct": _pct(step_now, step_before), "step_time_s": step_now,
           "step_time_s_before": step_before}
    iv_now, iv_before = (run.get("intervals") if isinstance(run.get("intervals"), dict) else {}
                         for run in (now, before))
    levels = iv_now.get("level"), iv_before.get("level")
    scale = _z(levels[0]) / _z(levels[1]) if all(isinstance(v, float) and 0 < v < 1 for v in levels) \
        else 1.0
    for key, name in PARTS:
        out[name + "_pct_interval"] = change_interval(out[name + "_pct"], iv_now.get(key),
                                                      iv_before.get(key), scale)
    out["baseline_noise"] = "recorded" if _spread(iv_before.get("decode_tok_s")) else "assumed"
    out["moved"] = _outside(out["tok_s_pct_interval"])
    way = 1 if out["tok_s_pct"] >= 0 else -1  # the way the speed went
    acceptance = out["moved"] and _outside(out["accept_len_pct_interval"]) and out["accept_len_pct"] * way > 0
    system = out["moved"] and _outside(out["step_time_pct_interval"]) and -out["step_time_pct"] * way > 0
    out["cause"] = ("both" if acceptance and system else "acceptance" if acceptance
                    else "system" if system else "none")
    out["note"] = "" if out["cause"] != "none" else (
        "no bounded interval of the decode change: too few requests" if out["tok_s_pct_interval"] is None
        else "decode within both runs' noise" if not out["moved"]
        else "neither part alone outside both runs' noise")
    out["text"] = describe(out)
    return out


def describe(a):
    """'decode -30.1% [-33.0, -27.1] = accept length -28.0% [-30.2, -25.7] and step time +2.9%
    [-1.0, +7.0]: cause acceptance' (a note on why no cause in brackets after it)."""
    def pct(name):
        value, iv = a.get(name + "_pct"), a.get(name + "_pct_interval")
        if value is None:
            return "-"
        return "%+.1f%%" % value + (" [%+.1f, %+.1f]" % tuple(iv) if iv else "")
    note = [a["note"]] if a.get("note") else []
    if a.get("baseline_noise") == "assumed" and a.get("tok_s_pct_interval"):
        note.append("the baseline's noise taken as this run's")
    return "decode %s = accept length %s and step time %s: cause %s%s" % (
        pct("tok_s"), pct("accept_len"), pct("step_time"), a["cause"],
        " (%s)" % "; ".join(note) if note else "")


def against(baseline):
    """What a change is measured against, named for what it is: "against nextn_3step's last pass,
    2026-12-03T14:20:00Z", or, for a profile with no passing run of its own (``for_profile``, the
    profile judged, differs), "against the host's last-known-good, nextn_3step's last pass at
    ...: nextn_1step has none"."""
    b = baseline or {}
    what = "%s's last pass" % b["profile"] if b.get("profile") else "the baseline"
    when = ", %s" % b["time"] if b.get("time") else ""
    judged = b.get("for_profile")
    if judged and b.get("profile") and judged != b["profile"]:
        return "against the host's last-known-good, %s%s (%s has no passing run)" % (what, when, judged)
    return "against %s%s" % (what, when)
