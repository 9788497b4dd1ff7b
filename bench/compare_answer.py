"""The answer to "more MTP steps, or the other engine?" from the rows of a plan comparison
(``python -m bench compare --plan``): one row per (setting, case of the gate plan). Pure: no I/O.

A row has: profile, engine, spec_steps, case, concurrency, decode_tok_s_median / _min / _max
(per-request decode tok/s over the case's requests), aggregate_tok_s, accept_len,
accept_by_position (P(i) = share of verify steps that accepted at least i drafts), error and,
after compare.analyse_plan, roofline (capacity.roofline of the row, or None).

The metric of a case: per-request decode (median) for a case at C=1, aggregate tok/s for a case
at C>1 (the concurrent case).

Noise: a row's measured spread is (max - min) / median of its per-request decode tok/s, in %
(stats.summarize's spread_pct). Two settings differ in a case only when the relative difference
of the case's metric is larger than the larger spread of the two rows; otherwise they are "within
noise". A row measured with one request has a spread of 0: every difference then counts.
"""
from __future__ import annotations

import itertools

from sglang_perf.deploy_plan import ENGINE_LABELS

# What a comparison ranks by: metric -> (row key, words used in the statements); metric_of says
# which one a case is judged on.
COMPARED_METRICS = {
    "decode": ("decode_tok_s_median", "per-request decode"),
    "aggregate": ("aggregate_tok_s", "aggregate"),
}
TIE_CASE = "long_context"


def metric_of(row):
    """("decode", key) for a C=1 case, ("aggregate", key) for a case at C>1."""
    metric = "aggregate" if int(row.get("concurrency") or 1) > 1 else "decode"
    return metric, COMPARED_METRICS[metric][0]


def spread_pct(row):
    """(max - min) / median of the row's per-request decode tok/s, in % (0 when unknown)."""
    med, lo, hi = row.get("decode_tok_s_median"), row.get("decode_tok_s_min"), row.get("decode_tok_s_max")
    if not med or lo is None or hi is None:
        return 0.0
    return 100.0 * (float(hi) - float(lo)) / float(med)


def _pct(a, b):
    """a over b in % (a / b - 1); None when b is not positive."""
    return None if not b or b <= 0 else 100.0 * (float(a) / float(b) - 1.0)


def _ok(row):
    return row.get("error") is None and row.get(metric_of(row)[1]) is not None


def _engine(row):
    return row.get("engine") or "sglang"


def _label(engine):
    return ENGINE_LABELS.get(engine, engine)


def _f(value, spec=".1f"):
    return "-" if value is None else format(value, spec)


def _cases(rows):
    """{case: {profile: row}} of the measured rows, cases and profiles in row order."""
    out = {}
    for r in rows:
        if _ok(r):
            out.setdefault(r["case"], {}).setdefault(r["profile"], r)
    return out


def _within(a, b, key):
    """(difference of a over b in %, the noise in %, whether the difference is within it)."""
    d = _pct(a[key], b[key])
    noise = max(spread_pct(a), spread_pct(b))
    return d, noise, d is None or abs(d) <= noise


def case_answers(rows, current=None):
    """Per case: the best setting, the runner-up, the margin and the settings within noise of
    the best; and the margin over ``current`` (the host's profile) when it was measured."""
    out = []
    for case, by in _cases(rows).items():
        first = next(iter(by.values()))
        metric, key = metric_of(first)
        ranked = sorted(by.values(), key=lambda r: -float(r[key]))  # stable: row order on ties
        best = ranked[0]
        a = {"case": case, "metric": metric, "concurrency": best.get("concurrency"),
             "best": best["profile"], "engine": _engine(best), "value": best[key],
             "runner_up": None, "runner_up_value": None, "margin_pct": None, "noise_pct": None,
             "beyond_noise": None, "within_noise": [best["profile"]],
             "current": None, "current_value": None, "vs_current_pct": None}
        for r in ranked[1:]:
            if _within(best, r, key)[2]:
                a["within_noise"].append(r["profile"])
        if len(ranked) > 1:
            second = ranked[1]
            d, noise, within = _within(best, second, key)
            a.update(runner_up=second["profile"], runner_up_value=second[key], margin_pct=d,
                     noise_pct=noise, beyond_noise=not within)
        if current is not None and current in by:
            a.update(current=current, current_value=by[current][key],
                     vs_current_pct=_pct(best[key], by[current][key]))
        a["sentence"] = _case_sentence(a)
        out.append(a)
    return out


def _case_sentence(a):
    label = COMPARED_METRICS[a["metric"]][1]
    s = "%s (C=%s, %s): best %s at %s tok/s" % (a["case"], a["concurrency"], label, a["best"],
                                               _f(a["value"]))
    if a["runner_up"] is not None:
        s += ", %s%% over %s (%s tok/s; spread %s%%: %s)" % (
            _f(a["margin_pct"], "+.1f"), a["runner_up"], _f(a["runner_up_value"]),
            _f(a["noise_pct"]), "beyond noise" if a["beyond_noise"] else "within noise")
    if len(a["within_noise"]) > 1:
        s += "; within noise of it: %s" % ", ".join(a["within_noise"][1:])
    if a["current"] is not None:
        s += "; the current profile %s %s" % (
            a["current"], "is the best" if a["current"] == a["best"] else "is behind: %s%% over it (%s tok/s)"
            % (_f(a["vs_current_pct"], "+.1f"), _f(a["current_value"])))
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
    the metric's change, whether it pays (a gain larger than the spread), the marginal
    per-position acceptance P(k+1..k') of the deeper row against the break-even of cycle_share."""
    out = []
    for case, by in _cases(rows).items():
        engines = {}
        for r in by.values():
            depths = engines.setdefault(_engine(r), {})
            depths.setdefault(int(r.get("spec_steps") or 0), r)  # the first row of a depth
        for engine, depths in engines.items():
            ks = sorted(depths)
            for k, k2 in zip(ks, ks[1:]):
                lo, hi = depths[k], depths[k2]
                metric, key = metric_of(hi)
                d, noise, _within_noise = _within(hi, lo, key)
                share, break_even = cycle_share(lo, hi)
                pos = list(hi.get("accept_by_position") or [])[k:k2]
                added = sum(pos) if len(pos) == k2 - k else None
                p = {"engine": engine, "case": case, "metric": metric, "from": lo["profile"],
                     "to": hi["profile"], "from_steps": k, "to_steps": k2,
                     "from_value": lo[key], "to_value": hi[key],
                     "change_tok_s": float(hi[key]) - float(lo[key]), "change_pct": d,
                     "noise_pct": noise, "pays": d is not None and d > noise,
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


def _depth_sentence(p):
    steps = p["to_steps"] - p["from_steps"]
    s = "%s %d -> %d steps, %s (%s): %s tok/s (%s%%, spread %s%%): %s" % (
        _label(p["engine"]), p["from_steps"], p["to_steps"], p["case"], COMPARED_METRICS[p["metric"]][1],
        _f(p["change_tok_s"], "+.1f"), _f(p["change_pct"], "+.1f"), _f(p["noise_pct"]),
        "pays" if p["pays"] else "does not pay")
    if p["step_cost_share"] is not None:
        s += "; %s against a break-even of %s: the %s take%s %.1f%% of a %d-step verify cycle" % (
            _positions(p), _f(p["break_even_accept"], ".2f"),
            "extra step" if steps == 1 else "%d extra steps" % steps, "s" if steps == 1 else "",
            100.0 * p["step_cost_share"], p["to_steps"])
    return s


def depth_verdicts(pairs):
    """Per engine and pair of depths over the cases: "pays" (in every case), "does not pay" (in
    none) or "mixed" (naming the cases where it pays)."""
    out = []
    for (engine, k, k2), group in itertools.groupby(
            sorted(pairs, key=lambda p: (p["engine"], p["from_steps"], p["to_steps"])),
            key=lambda p: (p["engine"], p["from_steps"], p["to_steps"])):
        group = list(group)
        yes = [p["case"] for p in group if p["pays"]]
        verdict = "pays" if len(yes) == len(group) else "does not pay" if not yes else "mixed"
        out.append({"engine": engine, "from_steps": k, "to_steps": k2, "verdict": verdict,
                    "pays_in": yes, "cases": [p["case"] for p in group],
                    "sentence": "%s %d -> %d steps: %s %s (in %s)" % (
                        _label(engine), k, k2, "one more step" if k2 == k + 1 else "%d more steps" % (k2 - k),
                        (verdict if k2 == k + 1 else {"pays": "pay", "does not pay": "do not pay"}.get(
                            verdict, verdict)) if verdict != "mixed" else "pays in %s only" % ", ".join(yes),
                        ", ".join(p["case"] for p in group))})
    return out


def _tokens(n):
    return "%dK" % (n // 1024) if n % 1024 == 0 else format(n, ",")


def context_answers(pairs, rows):
    """Per engine, over the long-context cases in order of their depth (the rows'
    context_tokens): the deepest number of MTP steps up to which each one more step pays, and the
    pair where it stops paying - {"engine", "depths": [{"case", "tokens", "pays_up_to",
    "stops_at" (the first pair that does not pay, or None)}], "sentence"}. Engines with fewer
    than two depths measured at two contexts are left out."""
    tokens = {}
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
                           "pays_up_to": stop["from_steps"] if stop else mine[-1]["to_steps"],
                           "deepest": mine[-1]["to_steps"]})
        if len(depths) < 2:
            continue
        parts = []
        for d in depths:
            stop = d["stops_at"]
            parts.append("at %s %s" % (_tokens(d["tokens"]), (
                "pays up to %d steps, the deepest measured" % d["deepest"]) if stop is None else (
                "stops paying after %d step%s (%d -> %d: %s%%, spread %s%%)" % (
                    stop["from_steps"], "" if stop["from_steps"] == 1 else "s", stop["from_steps"],
                    stop["to_steps"], _f(stop["change_pct"], "+.1f"), _f(stop["noise_pct"])))))
        ups = [d["pays_up_to"] for d in depths]
        trend = "; it stops paying sooner as the context grows" if ups == sorted(ups, reverse=True) \
            and ups[0] > ups[-1] else ""
        out.append({"engine": engine, "depths": [{k: v for k, v in d.items() if k != "stops_at"}
                                                 for d in depths],
                    "sentence": "%s by context: one more MTP step %s%s" % (
                        _label(engine), "; ".join(parts), trend)})
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


def winner(cases, rows):
    """The setting best or within noise of the best in the most cases; a tie is broken by the
    long_context case (the higher figure there), else by the first case of the plan. decided_by:
    the tie-breaking case, or the case in which the winner is ahead of the runner-up (best or
    within noise where the runner-up is not) by the largest margin."""
    engines = {r["profile"]: _engine(r) for r in rows}
    if not cases:
        return {"profile": None, "engine": None, "decided_by": None,
                "reason": "nothing was measured"}
    score = {}
    for a in cases:
        for p in a["within_noise"]:
            score[p] = score.get(p, 0) + 1
    values = {a["case"]: {r["profile"]: r[metric_of(r)[1]] for r in _cases(rows)[a["case"]].values()}
              for a in cases}
    tie_case = TIE_CASE if TIE_CASE in values else _deepest_context(rows, values) or cases[0]["case"]
    top = max(score.values())
    tied = [p for p in score if score[p] == top]
    n = len(cases)
    if len(tied) > 1:
        ranked = sorted(tied, key=lambda p: -float(values[tie_case].get(p, float("-inf"))))
        w = ranked[0]
        return {"profile": w, "engine": engines[w], "decided_by": tie_case,
                "reason": "%s is best or within noise in %d of %d cases, tied with %s; the %s case "
                          "breaks the tie: %s tok/s against %s" % (
                              w, top, n, ", ".join(ranked[1:]), tie_case, _f(values[tie_case].get(w)),
                              ", ".join("%s %s" % (p, _f(values[tie_case].get(p))) for p in ranked[1:]))}
    w = tied[0]
    others = sorted((p for p in score if p != w), key=lambda p: (-score[p], -float(
        values[tie_case].get(p, float("-inf")))))
    if not others:
        only = len({r["profile"] for r in rows if _ok(r)}) == 1
        return {"profile": w, "engine": engines[w], "decided_by": tie_case if only else cases[0]["case"],
                "reason": ("%s is the only setting measured" % w) if only else
                          "%s is best or within noise in all %d cases, every other setting in none" % (w, n)}
    second = others[0]
    ahead = [a for a in cases if w in a["within_noise"] and second not in a["within_noise"]
             and second in values[a["case"]]]
    margin = {a["case"]: _pct(values[a["case"]][w], values[a["case"]][second]) for a in ahead}
    decided = max(ahead, key=lambda a: margin[a["case"]])["case"] if ahead else tie_case
    return {"profile": w, "engine": engines[w], "decided_by": decided,
            "reason": "%s is best or within noise in %d of %d cases, the runner-up %s in %d; %s "
                      "decided it (%s%% over %s, beyond the spread)" % (
                          w, top, n, second, score.get(second, 0), decided,
                          _f(margin.get(decided), "+.1f"), second)}


def _deepest_context(rows, values):
    """The measured case of the longest context (the comparison's context depths), or None."""
    deep = sorted(((int(r["context_tokens"]), r["case"]) for r in rows
                   if r.get("context_tokens") and r["case"] in values), reverse=True)
    return deep[0][1] if deep else None


def answer(rows, current=None):
    """The whole answer: {"cases", "depth", "depth_verdicts", "context", "roofline", "winner",
    "current", "lines"} ("lines": the report's opening, Markdown list items without the dash)."""
    cases = case_answers(rows, current)
    depth = depth_answers(rows)
    verdicts = depth_verdicts(depth)
    contexts = context_answers(depth, rows)
    roof = roofline_shares(rows)
    win = winner(cases, rows)
    lines = ["**Deploy %s (%s)**: %s. Rule: the winner is the setting best or within noise (the "
             "larger per-request spread of the two rows) in the most cases; a tie is broken by "
             "the longest context." % (win["profile"], _label(win["engine"]), win["reason"])]
    lines += [a["sentence"] for a in cases]
    lines += [v["sentence"] for v in verdicts]
    lines += [c["sentence"] for c in contexts]
    lines += [p["sentence"] for p in depth]
    lines += ["%s (%s) roofline share: %s" % (e["profile"], _label(e["engine"]), ", ".join(
        "%s %.1f%%" % kv for kv in e["shares"].items())) for e in roof]
    return {"cases": cases, "depth": depth, "depth_verdicts": verdicts, "context": contexts, "roofline": roof,
            "winner": win, "current": current, "lines": lines}
