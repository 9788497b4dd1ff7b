# -*- coding: utf-8 -*-
"""Why a figure moved. Decode tok/s = accept length / verify-step time (a verify step yields
accept-length tokens), so a change of decode speed against a baseline splits exactly into an
acceptance part (prompts, context, drafts) and a step-time part (GPU clocks, power, PCIe, the
engine release):

    tok_s_now / tok_s_before = (accept_now / accept_before) / (step_now / step_before)

``split`` gives the three changes in percent and names the cause: ``acceptance`` or ``system``
when only that part moved the speed the way it went, ``both``, or ``none`` when neither did. A
part moved when the baseline's figure lies outside this run's interval of it and the change is at
least MIN_CHANGE_PCT (this run's interval holds this run's noise, not the baseline's: two runs of
the same server differ by a few percent), and it is a cause when it moved the speed the same way the speed
went: a slower server's lower accept length or longer step, a faster one's higher or shorter. (A
1-step profile against a 3-step baseline: accept length -46%, but a verify step 17-22% shorter;
the cause of the drop is acceptance.) Standard library only."""
from __future__ import annotations

CAUSES = ("acceptance", "system", "both", "none")
# A part that changed less than this (in percent) is not called a cause, inside or outside this
# run's interval: the noise between two runs of the same server. Seen: decode +4.4% between two
# passing runs of one container (docs/gate.md's table), step time +2.2% between two emulator runs
# of one profile under a loaded CI machine.
MIN_CHANGE_PCT = 5.0


def step_time_s(tok_s, accept_len):
    """Seconds per verify step: accept length / decode tok/s (1 without speculation)."""
    if not tok_s or tok_s <= 0:
        return None
    return float(accept_len or 1.0) / float(tok_s)


def _pct(now, before):
    if now is None or not before:
        return None
    return 100.0 * (float(now) / float(before) - 1.0)


def _moved(before, interval, pct):
    """Whether the part moved: a change of at least MIN_CHANGE_PCT, and the baseline outside this
    run's interval of it when there is one."""
    if pct is None or abs(pct) < MIN_CHANGE_PCT:
        return False
    lower, upper = (interval or {}).get("lower"), (interval or {}).get("upper")
    return lower is None or upper is None or not (lower <= before <= upper)


def split(now, before):
    """The change from ``before`` to ``now`` ({"tok_s", "accept_len", and optionally intervals
    "accept_len_interval", "step_time_interval" of the run now}), or None without figures to split.
    Returns {"tok_s_pct", "accept_len_pct", "step_time_pct" (a slower step is +), "step_time_s",
    "step_time_s_before", "cause", "text"}."""
    tok_now, tok_before = now.get("tok_s"), before.get("tok_s")
    if not tok_now or not tok_before:
        return None
    al_now, al_before = now.get("accept_len") or 1.0, before.get("accept_len") or 1.0
    step_now, step_before = step_time_s(tok_now, al_now), step_time_s(tok_before, al_before)
    out = {"tok_s_pct": _pct(tok_now, tok_before), "accept_len_pct": _pct(al_now, al_before),
           "step_time_pct": _pct(step_now, step_before), "step_time_s": step_now,
           "step_time_s_before": step_before}
    way = 1 if (out["tok_s_pct"] or 0) >= 0 else -1  # the way the speed went
    acceptance = _moved(al_before, now.get("accept_len_interval"), out["accept_len_pct"]) \
        and (out["accept_len_pct"] or 0) * way > 0
    system = _moved(step_before, now.get("step_time_interval"), out["step_time_pct"]) \
        and -(out["step_time_pct"] or 0) * way > 0
    out["cause"] = ("both" if acceptance and system else "acceptance" if acceptance
                    else "system" if system else "none")
    out["text"] = describe(out)
    return out


def describe(a):
    """'decode -30.1% = accept length -28.0% and step time +2.9%: cause acceptance'."""
    def pct(value):
        return "%+.1f%%" % value if value is not None else "-"
    return "decode %s = accept length %s and step time %s: cause %s" % (
        pct(a["tok_s_pct"]), pct(a["accept_len_pct"]), pct(a["step_time_pct"]), a["cause"])
