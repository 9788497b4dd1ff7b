"""The answer to "more MTP steps, or the other engine?" from the rows of a plan comparison
(``python -m bench compare --plan``): one row per (setting, case of the measured plan). Pure: no I/O.

A row has: profile, engine, spec_steps, case, concurrency, requests, decode_tok_s_median / _min /
_max, aggregate_tok_s, accept_len, accept_by_position (P(i) = share of verify steps that accepted
at least i drafts), errors, prompt_tokens, context_tokens, thinking, drafter (DFLASH, EAGLE3: the
profile loads a drafter of its own; spec_steps is then the tokens it drafts per verify), setting
(the profile as judge/setting.py reads it: what it costs in a tie), report_only, error; what the
gate makes
of it (bench/compare_plan.py): intervals (the case result's, engine._intervals: the gate's own
intervals at its confidence), judged (the gate judges the case: a case of the gate plan, not
report_only, as plan.resolve resolves it), thresholds (the profile's resolved thresholds in a
judged case; None when the gate cannot judge the profile, gate_problem says why); and, after
compare.analyse_plan, roofline.

The metric of a case: per-request decode (the median's interval, order statistics) at C=1, the
aggregate (the bootstrap over requests) at C>1. Two settings differ in a case only when their
intervals do not overlap; overlapping intervals are a tie; a row whose interval has no bounds
(fewer requests than the level takes: 6 at 95%) decides nothing.

The winner (docs/compare.md, "Who wins") is decided on the judged cases only. A setting can win
when it has an interval in every judged case and fails none of its thresholds there (judged on
those intervals by the gate's own code, verdict.verdict_entries); of those, the winner is behind
no other in any judged case. Several such (tied in every judged case) go to the host's profile,
else the cheaper (judge/selection.py cost, the tuner's order: no drafter before a drafter, fewer
draft tokens, adaptive off, the lower memory fraction), then the first measured; none (a
trade-off between cases): no winner.
Context depths and report-only cases inform - their best setting, where one more step stops
paying - and cast no vote. A drafter setting is set beside the best MTP depth of its engine in
every case (drafter_answers): whether it beats MTP there, and by how much, on the intervals - per
context depth and with thinking on, where public reports say a drafter may not pay.
"""
from __future__ import annotations

import itertools

from sglang_perf.measure import config
from sglang_perf.judge import decision, selection, setting
from sglang_perf import engines
from sglang_perf.judge import verdict as gate
from sglang_perf.measure.stats import min_sample

# What a comparison ranks by: metric -> (row key, words used in the statements); metric_of says
# which one a case is judged on, INTERVAL_OF which of the case result's intervals bounds it.
COMPARED_METRICS = {
    "decode": ("decode_tok_s_median", "per-request decode"),
    "aggregate": ("aggregate_tok_s", "aggregate"),
}
INTERVAL_OF = {"decode": "decode_tok_s", "aggregate": "aggregate_tok_s"}
AHEAD, BEHIND, TIE = "ahead", "behind", "tie"
# One more step, from the deeper setting's interval against the shallower one's.
PAYS, COSTS, NO_DIFFERENCE, TOO_FEW = "pays", "costs", "no difference shown", "not enough requests"
OUTCOMES = {AHEAD: PAYS, BEHIND: COSTS, TIE: NO_DIFFERENCE, None: TOO_FEW}
RULE = ("decided on the judged cases only, on the gate's %g%% intervals: a setting that fails a "
        "judged case's thresholds, or has no interval there, cannot win; the winner is behind no "
        "other setting in any judged case (intervals apart); overlapping intervals are a tie, which "
        "goes to a setting without a drafter, then to fewer draft steps, then the host's profile")


def metric_of(row):
    """("decode", key) for a C=1 case, ("aggregate", key) for a case at C>1."""
    metric = "aggregate" if int(row.get("concurrency") or 1) > 1 else "decode"
    return metric, COMPARED_METRICS[metric][0]


def interval(row):
    """The gate's interval of the row's metric ({"estimate", "lower", "upper", "n", ...}) or None."""
    return (row.get("intervals") or {}).get(INTERVAL_OF[metric_of(row)[0]])


def _bounded(iv):
    return bool(iv) and iv.get("lower") is not None and iv.get("upper") is not None


def level_of(rows):
    """The level of the rows' intervals (the gate's confidence they were measured at); 0.95 without."""
    levels = [(r.get("intervals") or {}).get("level") for r in rows]
    return next((float(v) for v in levels if v), 0.95)


def relation(a, b):
    """Row a against row b on their metric's intervals: AHEAD (a's lower bound above b's upper),
    BEHIND, TIE (they overlap) or None (either has no bounds)."""
    ia, ib = interval(a), interval(b)
    if not (_bounded(ia) and _bounded(ib)):
        return None
    if ia["lower"] > ib["upper"]:
        return AHEAD
    return BEHIND if ia["upper"] < ib["lower"] else TIE


def _pct(a, b):
    """a over b in % (a / b - 1); None when b is not positive."""
    return None if not b or b <= 0 else 100.0 * (float(a) / float(b) - 1.0)


def _ok(row):
    return row.get("error") is None and row.get(metric_of(row)[1]) is not None


def _engine(row):
    return row.get("engine") or engines.DEFAULT


def _label(engine):
    eng = engines.find(engine)
    return eng.label if eng else engine


def _f(value, spec=".1f"):
    return "-" if value is None else format(value, spec)


def shown(row):
    """The row's metric with its interval, '58.0 [56.8, 59.2]', or '58.0 (no interval)'."""
    iv = interval(row)
    if _bounded(iv):
        return gate.fmt_interval(iv)
    return "%s (no interval)" % _f(row.get(metric_of(row)[1]))


def _few(row, level):
    """'4; a 95% interval takes at least 6': why a row's interval has no bounds."""
    n = (interval(row) or {}).get("n") or row.get("requests")
    return "%s; a %g%% interval takes at least %d" % ("?" if n is None else int(n), 100 * level,
                                                      min_sample(level))


def _cases(rows):
    """{case: {profile: row}} of the measured rows, cases and profiles in row order."""
    out = {}
    for r in rows:
        if _ok(r):
            out.setdefault(r["case"], {}).setdefault(r["profile"], r)
    return out


def gate_check(row):
    """The gate's judgement of a judged row against its profile's thresholds, on the row's
    intervals, by the gate's own code (verdict.verdict_entries): {"failed": [messages],
    "straddled": [messages]}; None for a row the gate does not judge or cannot (no thresholds)."""
    if not row.get("judged") or row.get("thresholds") is None:
        return None
    cfg = dict(config.DEFAULTS, **row["thresholds"])
    cfg["concurrency"] = int(row.get("concurrency") or 1)
    result = {"intervals": row.get("intervals") or {}, "errors": int(row.get("errors") or 0),
              "error_kinds": {}, "metrics": None,
              "prompt_tokens": {"target": row.get("context_tokens"), "median": row.get("prompt_tokens")}}
    entries = gate.verdict_entries(result, cfg)
    return {"failed": [e["message"] for e in entries if e["state"] == decision.FAIL],
            "straddled": [e["message"] for e in entries if e["state"] == gate.UNDECIDED]}


def quality_check(row):
    """A quality check's row judged as the gate judges it: {"failed": [messages], "straddled":
    [messages]}. Its run measured without thresholds (compare measures, the answer judges): a
    failure that needs no threshold (a call left in the content, reasoning in the content, no
    reply) stands; ``min_accuracy`` of the gate's thresholds is judged on the row's Wilson
    interval (quality.py's rule: failed when its upper bound is under the bar)."""
    failed = [m for m in row.get("quality_failures") or []]
    straddled = []
    need = (row.get("thresholds") or {}).get("min_accuracy") if row.get("judged") else None
    iv = row.get("accuracy") or {}
    if need is not None and iv.get("upper") is not None:
        shown = "accuracy %.2f [%.2f, %.2f]" % (iv["estimate"], iv["lower"], iv["upper"])
        if iv["upper"] < need:
            failed.append("%s: %s < required %.2f" % (row["case"], shown, need))
        elif iv["lower"] < need:
            straddled.append("%s: %s straddles the minimum %.2f" % (row["case"], shown, need))
    return {"failed": failed, "straddled": straddled}


def _role(row):
    return "judged: votes" if row.get("judged") else "informs only"


def case_answers(rows, current=None):
    """Per case: the best setting (highest estimate), the runner-up and whether their intervals
    are apart, the settings tied with the best (overlapping intervals), those without an
    interval, and the margin over ``current`` (the host's profile) when it was measured."""
    out = []
    level = level_of(rows)
    for case, by in _cases(rows).items():
        first = next(iter(by.values()))
        metric, key = metric_of(first)
        ranked = sorted(by.values(), key=lambda r: -float(r[key]))  # stable: row order on ties
        best = ranked[0]
        a = {"case": case, "metric": metric, "concurrency": best.get("concurrency"),
             "judged": bool(best.get("judged")), "best": best["profile"], "engine": _engine(best),
             "value": best[key], "shown": shown(best), "runner_up": None, "runner_up_value": None,
             "runner_up_shown": None, "margin_pct": None, "apart": None, "tied": [best["profile"]],
             "no_interval": [] if _bounded(interval(best)) else [best["profile"]],
             "current": None, "current_value": None, "current_shown": None, "current_apart": None,
             "vs_current_pct": None, "level": level}
        for r in ranked[1:]:
            rel = relation(best, r)
            if not _bounded(interval(r)):
                a["no_interval"].append(r["profile"])
            elif rel == TIE:
                a["tied"].append(r["profile"])
        if len(ranked) > 1:
            second = ranked[1]
            rel = relation(best, second)
            a.update(runner_up=second["profile"], runner_up_value=second[key], runner_up_shown=shown(second),
                     margin_pct=_pct(best[key], second[key]), apart=None if rel is None else rel == AHEAD)
        if current is not None and current in by:
            a.update(current=current, current_value=by[current][key], current_shown=shown(by[current]),
                     vs_current_pct=_pct(best[key], by[current][key]),
                     current_apart=None if relation(best, by[current]) is None
                     else relation(best, by[current]) == AHEAD)
        a["sentence"] = _case_sentence(a, _role(best))
        out.append(a)
    return out


def _apart(apart, level):
    if apart is None:
        return "no interval to tell"
    return "apart at %g%%" % (100 * level) if apart else "a tie, the intervals overlap"


def _case_sentence(a, role):
    s = "%s (C=%s, %s; %s): best %s at %s tok/s" % (
        a["case"], a["concurrency"], COMPARED_METRICS[a["metric"]][1], role, a["best"], a["shown"])
    if a["runner_up"] is not None:
        s += ", %s%% over %s (%s tok/s: %s)" % (_f(a["margin_pct"], "+.1f"), a["runner_up"],
                                                a["runner_up_shown"], _apart(a["apart"], a["level"]))
    if len(a["tied"]) > 1:
        s += "; tied with the best: %s" % ", ".join(a["tied"][1:])
    if a["no_interval"]:
        s += "; no interval (too few requests): %s" % ", ".join(a["no_interval"])
    if a["current"] is not None:
        behind = "is behind: %s%% over it (%s tok/s: %s)" % (
            _f(a["vs_current_pct"], "+.1f"), a["current_shown"], _apart(a["current_apart"], a["level"]))
        s += "; the current profile %s %s" % (a["current"],
                                              "is the best" if a["current"] == a["best"] else behind)
    return s


def cycle_share(from_row, to_row):
    """The extra draft steps' share of the deeper setting's verify cycle, from measured speeds.

    A verify cycle yields accept length L tokens, so at per-request decode speed v it lasts
    t = L / v seconds. From k to k' steps the cycle grows by t_k' - t_k, whose share of the
    k'-step cycle is

        s = (t_k' - t_k) / t_k' = 1 - (L_k * v_k') / (L_k' * v_k)

    (L = 1 without speculation). The deeper setting is faster exactly when the accepted drafts
    it adds per cycle, P(k+1) + ... + P(k') = L_k' - L_k, exceed the break-even

        P* = L_k * s / (1 - s)

    (from L_k' * (1 - s) > L_k). Returns (s, P*), or (None, None) without the figures."""
    lk, lk2 = from_row.get("accept_len") or 1.0, to_row.get("accept_len") or 1.0
    vk, vk2 = from_row.get("decode_tok_s_median"), to_row.get("decode_tok_s_median")
    if not vk or not vk2:
        return None, None
    s = 1.0 - (float(lk) * float(vk2)) / (float(lk2) * float(vk))
    return s, (float(lk) * s / (1.0 - s) if s < 1.0 else None)


def depth_answers(rows):
    """Per engine and case, each pair of adjacent measured depths k -> k' (speculative steps):
    the metric's change and its outcome on the two rows' intervals - PAYS (the deeper one's interval
    above), COSTS (below), NO_DIFFERENCE (they overlap), TOO_FEW (either has no interval) - and
    the deeper row's added per-position acceptance P(k+1..k') against cycle_share's break-even."""
    out = []
    level = level_of(rows)
    for case, by in _cases(rows).items():
        engines = {}
        for r in by.values():
            if r.get("drafter"):
                continue  # a drafter's drafts are no MTP depth: drafter_answers sets it beside them
            depths = engines.setdefault(_engine(r), {})
            depths.setdefault(int(r.get("spec_steps") or 0), r)  # the first row of a depth
        for engine, depths in engines.items():
            ks = sorted(depths)
            for k, k2 in zip(ks, ks[1:]):
                lo, hi = depths[k], depths[k2]
                metric, key = metric_of(hi)
                outcome = OUTCOMES[relation(hi, lo)]
                share, break_even = cycle_share(lo, hi)
                pos = list(hi.get("accept_by_position") or [])[k:k2]
                added = sum(pos) if len(pos) == k2 - k else None
                p = {"engine": engine, "case": case, "metric": metric, "judged": bool(hi.get("judged")),
                     "from": lo["profile"], "to": hi["profile"], "from_steps": k, "to_steps": k2,
                     "from_value": lo[key], "to_value": hi[key], "from_shown": shown(lo),
                     "to_shown": shown(hi), "change_tok_s": float(hi[key]) - float(lo[key]),
                     "change_pct": _pct(hi[key], lo[key]), "outcome": outcome, "pays": outcome == PAYS,
                     "level": level, "too_few": None if outcome != TOO_FEW
                     else _few(hi if _bounded(interval(lo)) else lo, level),
                     "marginal_positions": pos or None, "marginal_accept": added,
                     "step_cost_share": share, "break_even_accept": break_even}
                p["sentence"] = _depth_sentence(p)
                out.append(p)
    return out


def _positions(p):
    ks = range(p["from_steps"] + 1, p["to_steps"] + 1)
    name = "P(%d)" % ks[0] if len(ks) == 1 else "P(%d..%d)" % (ks[0], ks[-1])
    if p["marginal_accept"] is None:
        return "%s not measured" % name
    if len(ks) == 1:
        return "%s = %.2f" % (name, p["marginal_accept"])
    return "%s = %s = %.2f" % (name, " + ".join("%.2f" % x for x in p["marginal_positions"]),
                               p["marginal_accept"])


def _outcome_words(p):
    if p["outcome"] == TOO_FEW:
        return "%s (%s)" % (TOO_FEW, p["too_few"])
    return "%s at %g%%" % (p["outcome"], 100 * p["level"])


def _depth_sentence(p):
    steps = p["to_steps"] - p["from_steps"]
    s = "%s %d -> %d steps, %s (%s; %s): %s -> %s tok/s (%s%%): %s" % (
        _label(p["engine"]), p["from_steps"], p["to_steps"], p["case"], COMPARED_METRICS[p["metric"]][1],
        "judged" if p["judged"] else "informs only", p["from_shown"], p["to_shown"],
        _f(p["change_pct"], "+.1f"), _outcome_words(p))
    if p["step_cost_share"] is not None:
        s += "; %s against a break-even of %s: the %s take%s %.1f%% of a %d-step verify cycle" % (
            _positions(p), _f(p["break_even_accept"], ".2f"),
            "extra step" if steps == 1 else "%d extra steps" % steps, "s" if steps == 1 else "",
            100.0 * p["step_cost_share"], p["to_steps"])
    return s


def depth_verdicts(pairs):
    """Per engine and pair of depths over the judged cases (the ones that vote): their common
    outcome, or "mixed" naming each case's."""
    out = []
    judged = [p for p in pairs if p["judged"]]
    for (engine, k, k2), group in itertools.groupby(
            sorted(judged, key=lambda p: (p["engine"], p["from_steps"], p["to_steps"])),
            key=lambda p: (p["engine"], p["from_steps"], p["to_steps"])):
        outcomes = {p["case"]: p["outcome"] for p in group}
        kinds = list(dict.fromkeys(outcomes.values()))
        verdict = kinds[0] if len(kinds) == 1 else "mixed"
        said = "%s (in %s)" % (verdict, ", ".join(outcomes)) if verdict != "mixed" else "; ".join(
            "%s in %s" % (o, ", ".join(c for c in outcomes if outcomes[c] == o)) for o in kinds)
        out.append({"engine": engine, "from_steps": k, "to_steps": k2, "verdict": verdict,
                    "pays_in": [c for c in outcomes if outcomes[c] == PAYS], "cases": list(outcomes),
                    "sentence": "%s %d -> %d steps (judged cases): %s: %s" % (
                        _label(engine), k, k2, "one more step" if k2 == k + 1 else "%d more steps" % (k2 - k),
                        said)})
    return out


def _tokens(n):
    return "%dK" % (n // 1024) if n % 1024 == 0 else format(n, ",")


def _context_part(d):
    stop, name = d["stops_at"], _tokens(d["tokens"])
    if stop is None:
        return "at %s pays up to %d steps, the deepest measured" % (name, d["deepest"])
    pair = "%d -> %d" % (stop["from_steps"], stop["to_steps"])
    if stop["outcome"] == TOO_FEW:
        lead = "is" if stop["from_steps"] == d["first"] else \
            "pays up to %d steps, then is" % stop["from_steps"]
        return "at %s %s not shown either way (%s: %s, %s)" % (name, lead, pair, TOO_FEW, stop["too_few"])
    return "at %s stops paying after %d step%s (%s: %s, %s against %s tok/s)" % (
        name, stop["from_steps"], "" if stop["from_steps"] == 1 else "s", pair, stop["outcome"],
        stop["to_shown"], stop["from_shown"])


def context_answers(pairs, rows):
    """Per engine, over the long-context cases in order of their depth (the rows'
    context_tokens): the deepest number of MTP steps up to which each one more step pays on the
    intervals, and the pair where it stops (no difference shown, costs, or not enough requests)
    - {"engine", "depths": [{"case", "tokens", "pays_up_to", "outcome", "deepest", "first"}],
    "sentence"}. Engines with fewer than two depths measured at two contexts are left out."""
    tokens, level = {}, level_of(rows)
    for r in rows:
        if _ok(r) and r.get("context_tokens"):
            tokens.setdefault(r["case"], int(r["context_tokens"]))
    out = []
    for engine in dict.fromkeys(p["engine"] for p in pairs):
        depths = []
        for case in sorted(tokens, key=tokens.get):
            mine = sorted((p for p in pairs if p["engine"] == engine and p["case"] == case),
                          key=lambda p: p["from_steps"])
            if not mine:
                continue
            stop = next((p for p in mine if not p["pays"]), None)
            depths.append({"case": case, "tokens": tokens[case], "stops_at": stop,
                           "judged": mine[0]["judged"], "first": mine[0]["from_steps"],
                           "outcome": PAYS if stop is None else stop["outcome"],
                           "pays_up_to": stop["from_steps"] if stop else mine[-1]["to_steps"],
                           "deepest": mine[-1]["to_steps"]})
        if len(depths) < 2:
            continue
        ups = [d["pays_up_to"] for d in depths]
        trend = "; it stops paying sooner as the context grows" if ups == sorted(ups, reverse=True) \
            and ups[0] > ups[-1] and all(d["outcome"] != TOO_FEW for d in depths) else ""
        out.append({"engine": engine, "depths": [{k: v for k, v in d.items() if k != "stops_at"}
                                                 for d in depths],
                    "sentence": "%s by context: one more MTP step %s%s (%g%% intervals%s)" % (
                        _label(engine), "; ".join(_context_part(d) for d in depths), trend, 100 * level,
                        "" if any(d["judged"] for d in depths) else "; the depths inform, they do not vote")})
    return out


def _case_place(row):
    """'at 32K', 'with thinking on (thinking)' or 'in coding': where a case sits for the drafter's
    sentence."""
    if row.get("context_tokens"):
        return "at %s" % _tokens(int(row["context_tokens"]))
    if row.get("thinking"):
        return "with thinking on (%s)" % row["case"]
    return "in %s" % row["case"]


def _case_order(row):
    """Judged cases first, then the context depths by depth, then the rest (thinking last)."""
    depth = int(row.get("context_tokens") or 0)
    return (1 if depth else 0 if row.get("judged") else 2), depth, bool(row.get("thinking"))


def drafter_answers(rows):
    """Per drafter setting (a row with ``drafter``) and case: its metric against the best MTP depth
    of its engine in that case (the highest estimate among the rows with speculation and no
    drafter) on the two rows' intervals - "beats" (its interval above), "behind" (below), "tie"
    (they overlap) or TOO_FEW - and the margin in %. {"profile", "engine", "drafter", "cases":
    [{"case", "place", "judged", "context_tokens", "thinking", "mtp", "value", "mtp_value",
    "shown", "mtp_shown", "margin_pct", "outcome"}], "sentence"}; a drafter with no MTP row to
    set it beside is left out."""
    level = level_of(rows)
    by = _cases(rows)
    out = []
    drafters = list(dict.fromkeys(r["profile"] for r in rows if r.get("drafter")))
    for name in drafters:
        parts = []
        for case, row_of in by.items():
            mine = row_of.get(name)
            if mine is None:
                continue
            mtp = [r for r in row_of.values() if not r.get("drafter") and int(r.get("spec_steps") or 0) > 0
                   and _engine(r) == _engine(mine)]
            if not mtp:
                continue
            _, key = metric_of(mine)
            best = sorted(mtp, key=lambda r: -float(r[key]))[0]
            rel = relation(mine, best)
            parts.append({"case": case, "place": _case_place(mine), "judged": bool(mine.get("judged")),
                          "context_tokens": mine.get("context_tokens"),
                          "thinking": bool(mine.get("thinking")), "mtp": best["profile"],
                          "value": mine[key], "mtp_value": best[key], "shown": shown(mine),
                          "mtp_shown": shown(best), "margin_pct": _pct(mine[key], best[key]),
                          "outcome": {AHEAD: "beats", BEHIND: "behind", TIE: "tie", None: TOO_FEW}[rel],
                          "_order": _case_order(mine)})
        if not parts:
            continue
        parts.sort(key=lambda c: c["_order"])
        for c in parts:
            del c["_order"]
        first = next(r for r in rows if r["profile"] == name)
        said = "; ".join("%s %s%% against %s (%s vs %s tok/s: %s)" % (
            c["place"], _f(c["margin_pct"], "+.1f"), c["mtp"], c["shown"], c["mtp_shown"],
            {"beats": "beats MTP, apart at %g%%" % (100 * level), "behind": "behind MTP, apart at %g%%"
             % (100 * level), "tie": "a tie, the intervals overlap", TOO_FEW: TOO_FEW}[c["outcome"]])
            for c in parts)
        out.append({"profile": name, "engine": _engine(first), "drafter": first["drafter"], "cases": parts,
                    "sentence": "%s %s (%s) against the best MTP depth of each case: %s" % (
                        _label(_engine(first)), first["drafter"], name, said)})
    return out


def roofline_shares(rows):
    """Each setting's share of the bandwidth roofline in the C=1 cases (the roofline is the
    single-stream ceiling): [{"profile", "engine", "shares": {case: pct}}]."""
    out = {}
    for r in rows:
        roof = r.get("roofline") or {}
        if _ok(r) and int(r.get("concurrency") or 1) == 1 and roof.get("share_pct") is not None:
            e = out.setdefault(r["profile"], {"profile": r["profile"], "engine": _engine(r), "shares": {}})
            e["shares"][r["case"]] = roof["share_pct"]
    return list(out.values())


def _exclusion(mine, judged, level):
    """Why a setting cannot win (``mine``: {judged case: its row or None}), the judged case that
    names it and the thresholds its intervals straddle; (None, None, straddled) when it can."""
    why, case_of, failed, straddled, few = [], None, [], [], []
    for case in judged:
        r = mine.get(case)
        if r is None or not _ok(r):
            why.append("not measured in %s: %s" % (case, "no row" if r is None else r.get("error") or
                                                   "no %s figure" % COMPARED_METRICS[metric_of(r)[0]][1]))
            case_of = case_of or case
            continue
        if r.get("thresholds") is None:
            problem = "the gate cannot judge it: %s" % (r.get("gate_problem") or "no thresholds")
            if problem not in why:
                why.append(problem)
            case_of = case_of or case
        else:
            check = gate_check(r) or {"failed": [], "straddled": []}
            if check["failed"]:
                failed.append("%s: %s" % (case, "; ".join(check["failed"])))
                case_of = case_of or case
            straddled += ["%s: %s" % (case, m) for m in check["straddled"]]
        if not _bounded(interval(r)):
            few.append("not enough requests in %s (%s)" % (case, _few(r, level)))
            case_of = case_of or case
    if failed:
        why.append("fails the gate in " + "; ".join(failed))
    why += few
    return ("; ".join(why) if why else None), case_of, straddled


def _ahead_text(w, q, cases, by, best_case):
    one = by[best_case]
    figures = "%s against %s tok/s" % (shown(one[w]), shown(one[q]))
    if len(cases) == 1:
        return "%s in %s (%s)" % (q, cases[0], figures)
    return "%s in %s (%s: %s)" % (q, ", ".join(cases), best_case, figures)


def winner(rows, current=None):
    """The setting that clears the gate in every judged case and is behind no other such setting
    in any of them (the module's rule): {"profile", "engine", "decided_by" (the judged case that
    decided it, or "tie: ..." for a tie-break), "reason", "voted" (the judged cases), "informed"
    (the others), "excluded" ({profile: why it cannot win}), "straddled" ({profile: thresholds
    its interval straddles: its own gate decides with more requests}), "tied"}; profile None when
    no setting can win or settings lead in different cases."""
    level = level_of(rows)
    # the quality checks vote by exclusion only: a setting that fails one cannot win
    checks = {r["case"] for r in rows if r.get("check")}
    judged = list(dict.fromkeys(r["case"] for r in rows if r.get("judged") and r["case"] not in checks))
    out = {"profile": None, "engine": None, "decided_by": None, "reason": None, "voted": judged,
           "informed": [c for c in dict.fromkeys(r["case"] for r in rows)
                        if c not in judged and c not in checks],
           "excluded": {}, "straddled": {}, "tied": []}
    if not judged:
        out["reason"] = "no case the gate judges was measured (context depths and report-only cases " \
                        "inform only)"
        return out
    profiles = list(dict.fromkeys(r["profile"] for r in rows))
    engines = {r["profile"]: _engine(r) for r in rows}
    steps = {r["profile"]: int(r.get("spec_steps") or 0) for r in rows}
    drafters = {r["profile"]: r.get("drafter") for r in rows}
    # each profile as a setting (compare_plan.profile_facts): the tuner's cost order
    settings = {r["profile"]: setting.as_key(r["setting"]) for r in rows}

    def shape(p):
        """'3 steps', or 'DFLASH, 15 drafts' for a drafter's."""
        if drafters[p]:
            return "%s, %d drafts" % (drafters[p], steps[p])
        return "%d step%s" % (steps[p], "" if steps[p] == 1 else "s")
    by = {c: {} for c in judged}
    for r in rows:
        if r["case"] in by:
            by[r["case"]].setdefault(r["profile"], r)
    excluded_at = {}
    for p in profiles:
        why, case, straddled = _exclusion({c: by[c].get(p) for c in judged}, judged, level)
        bad = [m for r in rows if r["profile"] == p and r.get("check") and r.get("judged")
               for m in (quality_check(r)["failed"]
                         or (["not measured: %s" % r["error"]] if r.get("error") else []))]
        if bad:
            said = "fails the quality checks (what the server says): %s" % "; ".join(bad)
            why = "%s; %s" % (why, said) if why else said
            case = case or next(r["case"] for r in rows if r["profile"] == p and r.get("check"))
        if why:
            out["excluded"][p], excluded_at[p] = why, case
        elif straddled:
            out["straddled"][p] = straddled
    eligible = [p for p in profiles if p not in out["excluded"]]
    if not eligible:
        out["reason"] = "no setting can win: " + "; ".join("%s: %s" % kv for kv in out["excluded"].items())
        return out
    beaten = {p: [(q, c) for q in eligible if q != p for c in judged if relation(by[c][q], by[c][p]) == AHEAD]
              for p in eligible}
    # the one rule (judge/selection.py): behind no other; the current profile, else the cheaper
    # (selection.cost, the tuner's order), then the first measured
    ranked = selection.ranked(eligible, lambda a, b: any(q == a for q, _ in beaten[b]),
                              lambda p: selection.cost(settings[p]), current)
    if not ranked:
        out["reason"] = ("every setting that clears the gate is behind another in a judged case (%s): a "
                         "trade-off, no winner; deploy by the case that matters: %s" % (
                             ", ".join(judged), "; ".join("%s is behind %s" % (p, " and ".join(
                                 "%s in %s" % (q, ", ".join(c for q2, c in beaten[p] if q2 == q))
                                 for q in dict.fromkeys(q for q, _ in beaten[p]))) for p in eligible)))
        return out
    w = ranked[0]
    others = [q for q in eligible if q != w]
    ahead = {q: [c for c in judged if relation(by[c][w], by[c][q]) == AHEAD] for q in others}
    gaps = {(q, c): interval(by[c][w])["lower"] / interval(by[c][q])["upper"]
            for q in others for c in ahead[q]}
    out.update(profile=w, engine=engines[w], tied=ranked[1:])
    if len(ranked) > 1:
        nxt = ranked[1]
        why = "the current profile" if w == current else selection.tie_break(settings[w], settings[nxt])
        out["decided_by"] = "tie: " + (why or "the first measured")
    elif gaps:
        out["decided_by"] = max(gaps, key=gaps.get)[1]
    elif others:
        out["decided_by"] = beaten[others[0]][0][1]
    else:
        out["decided_by"] = next((excluded_at[p] for p in profiles if p in excluded_at), judged[0])
    if not others:
        reason = "%s is the only setting %s in the judged cases (%s)" % (
            w, "that clears the gate" if out["excluded"] else "measured", ", ".join(judged))
        if out["excluded"]:
            reason += "; the others cannot win: %s" % ", ".join(out["excluded"])
    else:
        reason = "%s (%s) is behind no other setting in the judged cases (%s) at %g%% intervals" % (
            w, shape(w), ", ".join(judged), 100 * level)
        said = []
        for q in others:
            if ahead[q]:
                best = max(ahead[q], key=lambda c: gaps[(q, c)])
                said.append(_ahead_text(w, q, ahead[q], by, best))
        if said:
            reason += ": ahead of " + "; ".join(said)
        level_with = [q for q in others if not ahead[q]]
        if level_with:
            reason += "; tied with %s in every judged case" % ", ".join(
                "%s (%s)" % (q, shape(q)) for q in level_with)
        if len(ranked) > 1:
            reason += ": the tie goes to %s" % out["decided_by"][len("tie: "):]
    if w in out["straddled"]:
        reason += "; %s at this sample: its own gate measures more before it decides" % "; ".join(
            out["straddled"][w])
    out["reason"] = reason
    return out


def _informing(rows, cases):
    """'context_1k, context_8k (context depths), prose (report only)': the cases that do not vote."""
    kinds = {}
    for case in cases:
        r = next(x for x in rows if x["case"] == case)
        kind = "report only" if r.get("report_only") else "context depths" if r.get("context_tokens") \
            else "not a case of the gate plan"
        kinds.setdefault(kind, []).append(case)
    return ", ".join("%s (%s)" % (", ".join(cs), kind) for kind, cs in kinds.items())


def answer(rows, current=None, not_run=()):
    """The whole answer: {"cases", "depth", "depth_verdicts", "context", "drafters", "roofline", "winner",
    "current", "lines"} ("lines": the report's opening, Markdown list items without the dash).
    ``not_run``: the gate's judged cases the comparison did not run (replaced by its context
    depths), named in the answer."""
    cases = case_answers(rows, current)
    depth = depth_answers(rows)
    verdicts = depth_verdicts(depth)
    contexts = context_answers(depth, rows)
    drafters = drafter_answers(rows)
    roof = roofline_shares(rows)
    win = winner(rows, current)
    rule = "Rule: %s." % (RULE % (100 * level_of(rows)))
    if win["profile"] is not None:
        lines = ["**Deploy %s (%s)**: %s. %s" % (win["profile"], _label(win["engine"]), win["reason"], rule)]
    else:
        lines = ["**No winner**: %s. %s" % (win["reason"], rule)]
    voted = "Voted (the cases the gate judges): %s." % (", ".join(win["voted"]) or "none")
    checks = list(dict.fromkeys(r["case"] for r in rows if r.get("check")))
    if checks:
        voted += " Quality checks (%s): a setting that fails one cannot win." % ", ".join(checks)
    if win["informed"]:
        voted += " Informed only, no vote: %s." % _informing(rows, win["informed"])
    if not_run:
        voted += " %s (the gate's, replaced by the context depths) was not run: no vote." % ", ".join(not_run)
    lines.append(voted)
    if win["excluded"] and win["profile"] is not None:
        lines.append("Cannot win: %s." % "; ".join("%s: %s" % kv for kv in win["excluded"].items()))
    lines += [a["sentence"] for a in cases]
    lines += [v["sentence"] for v in verdicts]
    lines += [c["sentence"] for c in contexts]
    lines += [d["sentence"] for d in drafters]
    lines += [p["sentence"] for p in depth]
    lines += ["%s (%s) roofline share: %s" % (e["profile"], _label(e["engine"]), ", ".join(
        "%s %.1f%%" % kv for kv in e["shares"].items())) for e in roof]
    lines += quality_lines(rows)
    return {"cases": cases, "depth": depth, "depth_verdicts": verdicts, "context": contexts,
            "drafters": drafters, "roofline": roof, "winner": win, "current": current, "lines": lines}


def quality_lines(rows):
    """'Quality: nextn_3step passed answers, tool_calls; dflash FAILED tool_calls (...)': one line
    per setting with quality checks."""
    out = []
    for p in dict.fromkeys(r["profile"] for r in rows if r.get("check")):
        mine = [r for r in rows if r["profile"] == p and r.get("check")]
        failed = [(r["case"], quality_check(r)["failed"]) for r in mine if quality_check(r)["failed"]]
        if failed:
            out.append("Quality of %s: FAILED %s" % (p, "; ".join("%s (%s)" % (c, "; ".join(m))
                                                                  for c, m in failed)))
        else:
            out.append("Quality of %s: passed %s" % (p, ", ".join(r["case"] for r in mine
                                                                   if not r.get("error"))))
    return out
