"""What `python -m bench tune` writes: tune.md (the answer first, why every other setting lost,
then every launch), tune.json (every launch's argv, figures and verdicts; ``winner.argv``),
tune.png (each launch's objective figure on its interval) and tuned.yml (the winner as a named
profile over its base, thresholds from its own figures, ``sglang_profile`` set to it)."""
from __future__ import annotations

import datetime
import json

from sglang_perf.judge import calibration, selection, setting, tune

from bench import common

# Thresholds of the winner: this far beyond its own figures' interval bounds (calibration.propose's
# margin). More than bench calibrate's 0.1 under the lowest of 3 runs' medians: one launch's
# figures stand for them, and the gate's own lower bound must then clear the threshold. How far
# that bound falls under the median grows with the spread of single requests and shrinks with
# the plan's requests. On the local container (stdev over mean of the gate's requests): 3-step MTP
# 5-8%; a 16-token drafter 15-24% at 96 tokens a request, 10% at 256. A plan of few short requests
# can leave a drafter inconclusive at its own threshold; the role's plan runs up to 48 of 192.
MARGIN = 0.15


def _fmt_iv(o):
    iv = tune.interval(o)
    return "-" if iv is None else "%.1f [%.1f, %.1f]" % iv


def gain(a, b):
    """(estimate, lower, upper) in percent of a over b, the bounds from the two intervals."""
    x, y = tune.interval(a), tune.interval(b)
    if x is None or y is None or min(y) <= 0:
        return None
    return 100 * (x[0] / y[0] - 1), 100 * (x[1] / y[2] - 1), 100 * (x[2] / y[1] - 1)


def _gain_text(g):
    return "-" if g is None else "%+.1f%% [%+.1f, %+.1f]" % g


def winner_results(records, key):
    for r in reversed(records):
        if tuple(r["key"]) == tuple(key) and r.get("results"):
            return r["results"]
    return []


def _at_bounds(result):
    """A plan result whose figures are their intervals' bounds on the side a threshold holds
    (lower for speed and accept length, upper for TTFT): one run of the tuner stands for the
    spread bench calibrate reads from several."""
    cases = []
    for r in result.get("cases") or []:
        iv = r.get("intervals") or {}
        cases.append(dict(r, decode_tok_s={"median": _bound(iv, "decode_tok_s", "lower",
                                                             (r.get("decode_tok_s") or {}).get("median"))},
                          accept_len=_bound(iv, "accept_len", "lower", r.get("accept_len")),
                          aggregate_tok_s=_bound(iv, "aggregate_tok_s", "lower", r.get("aggregate_tok_s")),
                          ttft_s={"p50": _bound(iv, "ttft_s", "upper", (r.get("ttft_s") or {}).get("p50"))}))
    return dict(result, cases=cases)


def _bound(intervals, name, side, fallback):
    """The ``side`` bound of a figure's interval, else ``fallback`` (its point figure)."""
    value = (intervals.get(name) or {}).get(side)
    return fallback if value is None else value


def thresholds_for(records, key, host):
    """{case: thresholds} of the winner: per threshold the stricter of the service bars it was
    judged by and its own figures MARGIN beyond their intervals' bounds (calibration.propose, as bench
    calibrate; tune.winner_bars), for the cases of the plan."""
    proposed = calibration.propose([_at_bounds(r) for r in winner_results(records, key)], MARGIN)
    bars = tune.winner_bars(host.service_bars(), {case: p["thresholds"] for case, p in proposed.items()
                                                  if p.get("thresholds")})
    return {case: bars[case] for case in (host.v.get("sglang_gate_plan") or {}) if case in bars}


def tuned_vars(host, answer, records):
    """The host's host_vars file: sglang_profile set to the winner, the winner under
    sglang_host_profiles (its base one of the inventory's profiles: merged by name over them, the
    inventory's own kept whole) and its bars under sglang_gate_host_thresholds - a winner that is
    one of the host's profiles (--profiles) is named, not written again; sglang_profile alone when
    the current profile is kept."""
    winner = answer["winner"]
    if winner is None or not answer["beats_current"]:
        return {"sglang_profile": host.current}, None
    name, entry, _ = host.setting(winner)
    thresholds = dict(host.v.get("sglang_gate_host_thresholds") or {},
                      **{name: thresholds_for(records, winner, host)})
    if isinstance(winner, setting.Named):  # one of the host's profiles (--profiles): named, not written again
        return {"sglang_profile": name, "sglang_gate_host_thresholds": thresholds}, name
    # the host's own from before (a winner's base may be one of them) beside the new one
    profiles = dict(host.v.get("sglang_host_profiles") or {}, **{name: entry})
    return {"sglang_profile": name, "sglang_host_profiles": profiles,
            "sglang_gate_host_thresholds": thresholds}, name


def write(out_dir, host, tuner, records, cases, args, seconds, identity=None):
    import yaml
    answer = tuner.answer()
    when = datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z"
    outcomes = {tuple(k): o for k, o in tuner.launches}
    winner, cur = answer["winner"], tuner.current
    wo, co = outcomes.get(winner), outcomes.get(cur)
    host_name = args.host  # None: a host of --vars files only
    title = host_name or "the host of %s" % ", ".join(args.vars or ())
    lines = ["# Tuning %s (profile %s)" % (title, host.current), "", "## The answer", ""]
    if winner is None:
        headline = "no setting passed the gate plan: nothing to deploy (the launches below say why)"
    elif not answer["beats_current"]:
        best = answer["runner_up"]  # the fastest other that passed
        headline = "nothing beats the current profile %s (%s tok/s) beyond the intervals: it is kept%s" % (
            host.current, _fmt_iv(co),
            "; the best other, %s, %s tok/s (%s)" % (setting.key_label(best), _fmt_iv(outcomes[best]),
                                                     _gain_text(gain(outcomes[best], co))) if best else "")
    else:
        # a setting's label and the profile name tuned.yml gives it; one of the host's profiles
        # (--profiles) is named in its label already
        named = "" if isinstance(winner, setting.Named) else " (`%s`)" % host.setting(winner)[0]
        headline = "the winner is %s%s: %s tok/s on %s at C=1, accept length %s; against the current " \
                   "profile %s (%s tok/s): %s" % (
                       setting.key_label(winner), named, _fmt_iv(wo), args.objective,
                       "%.2f" % wo["accept_len"] if wo.get("accept_len") else "-", host.current, _fmt_iv(co),
                       _gain_text(gain(wo, co)))
    lines.append(headline + ".")
    if answer["runner_up"] is not None and winner is not None:
        ru = answer["runner_up"]
        lines += ["", "Runner-up: %s, %s tok/s; the winner against it: %s." % (
            setting.key_label(ru), _fmt_iv(outcomes[ru]), _gain_text(gain(wo, outcomes[ru])))]
    grid = len(tuner.keys) - len(tuner.refused)
    mean = sum(r.get("seconds", 0) for r in records) / float(len(records)) if records else 0.0
    lines += ["", "%d launches of a budget of %d in %.1f min (%s); the %d settings the preflight accepts "
              "would take %d launches, about %.0f min at this run's %.0f s a launch." % (
                  len(records), tuner.budget, seconds / 60.0,
                  "the search ended" if tuner.left() > 0 and not tuner.notes else "; ".join(tuner.notes) or
                  "the budget was spent", grid, grid, grid * mean / 60.0, mean)]
    lines += [line for o in tuner.observations for line in ("", "Note: %s." % o)]
    lines += ["", "Intervals at the gate's level; ties (overlapping intervals) go to the cheaper setting: no "
              "drafter before a drafter, fewer draft tokens, adaptive off, the lower memory fraction.", "",
              "## Why each other setting lost", "", "| setting | why |", "|---|---|"]
    order = sorted(answer["reasons"],
                   key=lambda k: (k not in outcomes, k in tuner.refused, selection.cost(k)))
    for k in order:
        lines.append("| %s | %s |" % (setting.key_label(k), answer["reasons"][k].replace("|", "\\|")))
    lines += finalists_section(records, args.objective)
    held = [(i, r) for i, r in enumerate(records, 1) if r.get("slowdowns")]
    if held:
        lines += ["", "## GPU clocks held down during a launch", "",
                  "A launch's figures are its GPUs' at the clocks they ran: a slowdown (thermal, power "
                  "cap, a locked clock) that held them for a share of its measurement (read at its start "
                  "and end: the driver's clock-event counters, else the active reasons sampled) makes it "
                  "slower than the setting is.", ""]
        lines += ["- launch %d, %s: %s" % (i, r["label"], "; ".join(r["slowdowns"])) for i, r in held]
    lines += ["", "## Launches", "", "| # | setting | ready (s) | %s tok/s | accept length | capacity | "
              "verdict | clocks held down | seconds |" % args.objective, "|---" * 9 + "|"]
    for i, r in enumerate(records, 1):
        o = r["outcome"]
        cap = o.get("capacity") or {}
        lines.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            i, r["label"], r.get("ready_s", "-"), _fmt_iv(o),
            "%.2f" % o["accept_len"] if o.get("accept_len") else "-",
            "context %s, %s running" % (cap.get("effective_context"), cap.get("max_running_requests"))
            if cap else "-", _verdict(o), _clocks(r), r.get("seconds", "-")))
    common.replace_text(out_dir / "tune.md", "\n".join(lines) + "\n")
    tuned, tuned_name = tuned_vars(host, answer, records)
    who = host_name or "HOST"
    header = "# python -m bench tune, %s: %s\n# the host's own variables: copy it to the inventory's " \
             "host_vars/%s/tuned.yml and deploy (ansible-playbook deploy.yml --limit %s), or once: " \
             "ansible-playbook deploy.yml --limit %s -e @%s\n" % (
        when, headline.replace("\n", " ")[:300], who, who, who, out_dir / "tuned.yml")
    common.replace_text(out_dir / "tuned.yml",
                        header + yaml.safe_dump(tuned, sort_keys=False, default_flow_style=False))
    data = {"complete": True, "identity": identity,
            "host": host_name, "profile": host.current, "time": when, "seconds": round(seconds, 1),
            "objective": args.objective, "budget_launches": tuner.budget, "cases": [c["case"] for c in cases],
            "settings": len(tuner.keys),
            "refused": {setting.key_name(k): v for k, v in tuner.refused.items()},
            "launches": records, "notes": tuner.notes, "observations": tuner.observations,
            "headline": headline,
            "winner": {"key": list(winner), "name": host.setting(winner)[0],
                       "label": setting.key_label(winner),
                       "argv": next((r["argv"] for r in reversed(records) if tuple(r["key"]) == winner),
                                    None),
                       "tok_s": (wo or {}).get("tok_s"), "beats_current": answer["beats_current"],
                       "profile": tuned_name} if winner else None,
            "runner_up": setting.key_name(answer["runner_up"]) if answer["runner_up"] else None,
            "reasons": {setting.key_name(k): v for k, v in answer["reasons"].items()}}
    common.replace_text(out_dir / "tune.json", json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    chart(out_dir / "tune.png", records, winner, args.objective)
    return {"answer": answer, "headline": headline}


def finalists_section(records, objective):
    """tune.md's finalists: each launched again at the end (the winner, the runner-up, the current
    profile last), its two objective figures and every report-only case of its second launch
    (thinking, prose: measured, never judged)."""
    finals = [r for r in records if r.get("phase") == "finalists"]
    if not finals:
        return []
    lines = ["", "## Finalists, launched again", "",
             "The verdict uses both launches of each (a setting passes when both pass; its interval "
             "spans both). Report-only cases ran on the second launch.", "",
             "| setting | %s tok/s, first | second | report-only cases (decode tok/s, accept length) |"
             % objective, "|---|---|---|---|"]
    for r in finals:
        first = next((x for x in records if x["key"] == r["key"] and x.get("phase") != "finalists"), None)
        extra = []
        for res in r.get("results") or []:
            for c in res.get("cases") or []:
                if c.get("report_only"):
                    extra.append("%s %s, %s" % (
                        c.get("case"), "%.1f" % (c.get("decode_tok_s") or {}).get("median")
                        if (c.get("decode_tok_s") or {}).get("median") is not None else "-",
                        "%.2f" % c["accept_len"] if c.get("accept_len") is not None else "-"))
        lines.append("| %s | %s | %s | %s |" % (
            r["label"], _fmt_iv(first["outcome"]) if first else "-",
            _fmt_iv(r["outcome"]) if r["outcome"].get("passed") else _verdict(r["outcome"]),
            "; ".join(extra) or "none in the plan"))
    return lines


def _clocks(record):
    """A launch's clocks cell: its slowdowns, "none" when watched and free, else why not watched."""
    if record.get("slowdowns"):
        return "; ".join(record["slowdowns"]).replace("|", "\\|")
    clocks = record.get("clocks") or {}
    if clocks.get("how"):
        return "none"
    why = record.get("clocks_why")
    return "not read (%s)" % why.split(":")[0] if why else "not read"


def _verdict(o):
    if o.get("cut"):
        return (o.get("error") or "cut by the budget").replace("|", "\\|")
    if not o.get("started", True):
        return "did not start: %s" % (o.get("error") or "")[:120].replace("|", "\\|")
    if o.get("stopped"):
        return "slower (stopped after the objective)"
    return "passed" if o.get("passed") else "failed: %s" % ", ".join(o.get("failed_cases") or ())


def chart(path, records, winner, objective):
    """Each launch's objective figure on its interval, in launch order; the winner marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 0.45 * max(len(records), 3) + 1.2))
    for i, r in enumerate(records):
        iv = tune.interval(r["outcome"])
        y = len(records) - i
        if iv is None:
            ax.text(0, y, "  did not start", va="center", fontsize=8, color="#a33")
            continue
        colour = "#2a7" if r["outcome"].get("passed") else "#999"
        if tuple(r["key"]) == winner:
            colour = "#16c"
        ax.plot([iv[1], iv[2]], [y, y], color=colour, lw=3)
        ax.plot([iv[0]], [y], "o", color=colour)
    ax.set_yticks([len(records) - i for i in range(len(records))])
    ax.set_yticklabels([r["label"] for r in records], fontsize=8)
    ax.set_xlabel("%s decode tok/s at C=1 (interval); blue: the answer, green: passed, grey: did not pass"
                  % objective, fontsize=8)
    ax.set_xlim(left=0)
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)
