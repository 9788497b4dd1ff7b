"""The gate history of one host, as a table, a chart and a page.

    python -m bench history HOST_OR_FILE [--dir DIR] [--png FILE] [--html FILE [--compare FILE]]
        [--last N]

HOST_OR_FILE is a history file (JSON lines, one gate run per line, as the sglang_gate role
appends them) or an inventory host name, read from DIR/<host>.jsonl (DIR default: history/ under
the repository). One table row per run in file (append) order, oldest first: the figures, the
change against the previous *passing* run of the same profile, passed/FAILED and what the gate
did. A ``*`` before the profile marks a run whose profile differs from the run before it. Lines
that are not a JSON object with a readable ``time`` are skipped with a warning naming the line
number.

--html FILE writes one self-contained page (bench/report.py: inline CSS and SVG, no script, no
external URL): per case of the gate plan decode tok/s and accept length over the runs with their
intervals and thresholds, profile and release changes marked, the latest acceptance by draft
position, the roofline share, the latest comparison (--compare FILE; default for a host name:
out/compare/HOST/compare.json when it exists) and a table of every run.

Exit status: 0 shown, 2 the file is missing, unreadable or holds no run (or --compare names a
file that is not a readable compare.json, or a file cannot be written).
"""
from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

from sglang_perf.record import history as shared
from sglang_perf import engines
from sglang_perf.record import fingerprint
from sglang_perf.judge import verdict

from bench import report
from bench.common import EXIT_BAD_INPUT, EXIT_OK
from bench.paths import ROOT

DEFAULT_DIR = ROOT / "history"


class HistoryError(Exception):
    """A one-line reason the history cannot be shown (exit 2)."""


def add_parser(sub):
    p = sub.add_parser("history", help="a host's gate history: table (and --png chart) of every "
                                       "run, change vs the previous passing run of its profile")
    p.add_argument("target", metavar="HOST_OR_FILE",
                   help="a history file (JSON lines) or an inventory host name (DIR/HOST.jsonl)")
    p.add_argument("--dir", default=str(DEFAULT_DIR),
                   help="where the per-host copies live (default: %s)" % DEFAULT_DIR)
    p.add_argument("--png", metavar="FILE", help="also draw decode tok/s and accept length over time")
    p.add_argument("--html", metavar="FILE", help="also write one self-contained HTML page: charts "
                                                  "per case, intervals, changes, comparison, every run")
    p.add_argument("--compare", metavar="FILE",
                   help="with --html: the comparison to show (a compare.json; default for a host name: "
                        "out/compare/HOST/compare.json)")
    p.add_argument("--last", type=int, metavar="N", help="only the last N runs (the changes are "
                                                         "still computed over the whole history)")
    p.set_defaults(func=cmd_history)


def is_host(target):
    """Whether HOST_OR_FILE names a host (not an existing or path-looking file)."""
    return not (Path(target).is_file() or "/" in target or target.endswith((".jsonl", ".json")))


def resolve(target, directory):
    """The history file for HOST_OR_FILE: an existing path, a path-looking argument, else
    DIR/<host>.jsonl."""
    return Path(directory) / (target + ".jsonl") if is_host(target) else Path(target)


def parse_time(value):
    """The gate's ``time`` ("2026-11-30T06:01:02.123456Z", UTC) as a naive UTC datetime."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("no time")
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1]
        if text.endswith("+00:00"):  # an aware isoformat() with a Z appended
            text = text[:-6]
    t = datetime.datetime.fromisoformat(text)
    if t.tzinfo is not None:
        t = t.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return t


def _num(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def read(path, warn=None):
    """The runs in ``path``, file order, each a dict with the figures the table needs plus the
    original record under "raw". ``warn(message)`` gets one message per skipped line (not a JSON
    object, or no readable ``time``: the chart's axis)."""
    path = Path(path)
    if not path.is_file():
        raise HistoryError("no history file %s" % path)
    try:
        with open(str(path), encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError as e:
        raise HistoryError("cannot read %s: %s" % (path, e.strerror or e))
    runs = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
            t = parse_time(raw.get("time"))
        except ValueError as e:  # json.JSONDecodeError is a ValueError
            if warn:
                warn("%s line %d skipped: %s" % (path, lineno, " ".join(str(e).split())[:160]))
            continue
        decode = raw.get("decode_tok_s") if isinstance(raw.get("decode_tok_s"), dict) else {}
        roof = raw.get("roofline") if isinstance(raw.get("roofline"), dict) else {}
        thresholds = raw.get("thresholds") if isinstance(raw.get("thresholds"), dict) else {}
        runs.append({
            "line": lineno, "time": t, "profile": str(raw.get("profile") or "?"),
            "release": str(raw.get("release") or "-"),
            "version": ("%s %s" % (raw["engine"], raw.get("sglang_version") or "-")) if raw.get("engine")
            not in (None, engines.DEFAULT) else str(raw.get("sglang_version") or "-"),
            "decode": _num(shared.median_of(raw)), "decode_min": _num(decode.get("min")),
            "decode_max": _num(decode.get("max")), "accept_len": _num(raw.get("accept_len")),
            "aggregate": _num(raw.get("aggregate_tok_s")), "share_pct": _num(roof.get("share_pct")),
            "passed": shared.passed(raw),
            # the decision's reason; records before the decision module kept it in "action"
            "action": str(raw.get("reason") or raw.get("action") or "-"),
            "by_position": raw.get("accept_by_position"),
            "cases": [c for c in raw.get("cases") or [] if isinstance(c, dict)],
            # what changed on the host since the gate's last-known-good (sglang_perf/record/fingerprint.py)
            "host_changes": [str(x) for x in raw.get("fingerprint_changes") or []
                             if isinstance(raw.get("fingerprint_changes"), list)],
            # what held the GPUs' clocks down during the run (and is no such change)
            "slowdowns": [str(x) for x in raw.get("slowdowns") or []
                          if isinstance(raw.get("slowdowns"), list)],
            "min_tok_s": _num(thresholds.get("min_tok_s")
                              or ((raw.get("cases") or [{}])[0].get("thresholds") or {}).get("min_tok_s")),
            "raw": raw,
        })
    if not runs:
        raise HistoryError("%s holds no gate run (%s)" % (
            path, "empty file" if not any(x.strip() for x in lines) else "no valid line"))
    return runs


def annotate(runs):
    """Adds, in place: ``index`` (1 = the oldest), ``changed`` (profile differs from the previous
    run), ``release_changed`` (likewise the release, where both name one), ``baseline`` (the
    previous passing run of the same profile or None), ``decode_pct`` / ``accept_pct``."""
    last_pass = {}
    prev_profile = prev_release = None
    for i, r in enumerate(runs, 1):
        r["index"] = i
        r["changed"] = prev_profile is not None and r["profile"] != prev_profile
        r["release_changed"] = prev_release not in (None, "-") and r["release"] not in ("-", prev_release)
        prev_release = r["release"]
        base = last_pass.get(r["profile"])
        r["baseline"] = base
        r["decode_pct"] = shared.change_pct(r["decode"], base["decode"]) if base else None
        r["accept_pct"] = shared.change_pct(r["accept_len"], base["accept_len"]) if base else None
        if r["passed"] and r["decode"] is not None:
            last_pass[r["profile"]] = r
        prev_profile = r["profile"]
    return runs


def _f(value, spec=".1f", suffix=""):
    return "-" if value is None else format(value, spec) + suffix


def case_line(c):
    """One case of a run: its figures, per-position acceptance and verdict."""
    d = c.get("decode_tok_s") if isinstance(c.get("decode_tok_s"), dict) else {}
    pt = c.get("prompt_tokens") if isinstance(c.get("prompt_tokens"), dict) else {}
    change = c.get("attribution") if isinstance(c.get("attribution"), dict) else {}
    return "%-14s C=%-2s decode %s tok/s  accept %s  by position %s  aggregate %s%s%s  %s%s" % (
        c.get("case"), c.get("concurrency"), _f(_num(d.get("median"))), _f(_num(c.get("accept_len")), ".2f"),
        verdict.positions(c.get("accept_by_position")), _f(_num(c.get("aggregate_tok_s"))),
        "  prompt %s tok" % _f(_num(pt.get("median")), ".0f") if pt.get("target") else "",
        # which prompts the figures came from (source@hash of their texts)
        "  prompts %s" % c["prompt_set"] if c.get("prompt_set") else "",
        "reported" if c.get("report_only") is True else "passed" if c.get("passed") is True else "FAILED",
        # the gate's own split against the last-known-good run (sglang_perf/judge/attribution.py)
        "  vs last-known-good: %s" % change["text"] if change.get("text") else "")


def table(runs):
    head = ("time (UTC)", "profile", "version", "decode tok/s", "accept", "aggregate",
            "roofline", "decode vs prev", "AL vs prev", "gate", "action")
    rows = [head]
    for r in runs:
        rows.append((
            r["time"].strftime("%Y-%m-%d %H:%M:%S"),
            ("* " if r["changed"] else "  ") + r["profile"],
            r["version"], _f(r["decode"]), _f(r["accept_len"], ".2f"), _f(r["aggregate"]),
            _f(r["share_pct"], ".1f", "%"), _f(r["decode_pct"], "+.1f", "%"),
            _f(r["accept_pct"], "+.1f", "%"), "passed" if r["passed"] else "FAILED", r["action"]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    lines = []
    for row, run in zip(rows, [None] + list(runs)):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
        if (run or {}).get("host_changes"):
            lines.append("    " + fingerprint.text(run["host_changes"]))
        lines.extend("    " + said for said in (run or {}).get("slowdowns") or [])
        for c in (run or {}).get("cases") or []:
            lines.append("    " + case_line(c))
    lines.append("* the profile changed from the run before; vs prev = change against the "
                 "previous passing run of the same profile; roofline = share of the decode ceiling; "
                 "indented: each case of the gate plan, by position = share of verify steps that "
                 "accepted at least 1, 2, ... draft tokens")
    return "\n".join(lines)


def plot(runs, path, title):
    """Two stacked panels sharing the time axis: decode tok/s (median, min-max bars) and accept
    length; passed runs as dots, failed as red x; a dashed line and a label at each profile
    change."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(11, 7))
    for ok, style in ((True, dict(fmt="o", color="tab:blue", label="passed")),
                      (False, dict(fmt="x", color="red", markersize=9, label="FAILED"))):
        pts = [r for r in runs if r["passed"] is ok and r["decode"] is not None]
        if pts:
            have = [r["decode_min"] is not None and r["decode_max"] is not None for r in pts]
            yerr = [[r["decode"] - r["decode_min"] if h else 0 for r, h in zip(pts, have)],
                    [r["decode_max"] - r["decode"] if h else 0 for r, h in zip(pts, have)]]
            ax1.errorbar([r["time"] for r in pts], [r["decode"] for r in pts], yerr=yerr,
                         capsize=3, linestyle="none", **style)
        pts = [r for r in runs if r["passed"] is ok and r["accept_len"] is not None]
        if pts:
            ax2.plot([r["time"] for r in pts], [r["accept_len"] for r in pts],
                     "o" if ok else "x", color=style["color"], markersize=style.get("markersize", 6),
                     linestyle="none", label=style["label"])
    blind = [r for r in runs if not r["passed"] and r["decode"] is None]
    if blind:  # failed before anything was measured: a red x on the time axis
        for ax in (ax1, ax2):
            ax.plot([r["time"] for r in blind], [0.03] * len(blind), "x", color="red",
                    markersize=9, transform=ax.get_xaxis_transform(), clip_on=False)
    thr = [r for r in runs if r["min_tok_s"] is not None]
    if thr:
        ax1.plot([r["time"] for r in thr], [r["min_tok_s"] for r in thr], "_", color="grey",
                 markersize=14, linestyle="none", label="threshold")
    for r in runs:
        if r["changed"]:
            for ax in (ax1, ax2):
                ax.axvline(r["time"], color="grey", linestyle="--", linewidth=1)
            ax1.annotate(r["profile"], xy=(r["time"], 1.0), xycoords=("data", "axes fraction"),
                         xytext=(3, -3), textcoords="offset points", rotation=90, va="top",
                         fontsize=8, color="dimgrey")
    ax1.set_ylabel("decode tok/s (median, min-max)")
    ax2.set_ylabel("accept length")
    ax1.set_title(title)
    ax1.grid(alpha=0.3)
    ax2.grid(alpha=0.3)
    ax1.legend(loc="lower left", fontsize=8)
    ax2.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax2.xaxis.get_major_locator()))
    ax2.set_xlabel("time (UTC)")
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)


def cmd_history(args):
    path = resolve(args.target, args.dir)

    def warn(message):
        sys.stderr.write("bench history: warning: %s\n" % message)

    try:
        if args.last is not None and args.last < 1:
            raise HistoryError("--last must be 1 or more, got %d" % args.last)
        if args.png:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                raise HistoryError("matplotlib is needed for --png: run it with the repository's "
                                   ".venv/bin/python (make venv)")
        runs = annotate(read(path, warn))
        if args.compare and not args.html:
            raise HistoryError("--compare is for --html")
        comp = None
        if args.compare:
            comp = report.load_compare(args.compare, required=True)
        elif args.html and is_host(args.target):
            comp = report.load_compare(report.default_compare(args.target, ROOT), required=False)
    except (HistoryError, report.ReportError) as e:
        sys.stderr.write("bench history: %s\n" % e)
        return EXIT_BAD_INPUT
    shown = runs[-args.last:] if args.last else runs
    hosts = sorted(set(str(r["raw"].get("host")) for r in runs if r["raw"].get("host")))
    print("gate history of %s: %s (%d runs%s)" % (", ".join(hosts) or "?", path, len(runs),
                                                  ", last %d shown" % len(shown)
                                                  if len(shown) < len(runs) else ""))
    print(table(shown))
    if args.png:
        try:
            Path(args.png).parent.mkdir(parents=True, exist_ok=True)
            plot(shown, args.png, "gate history: %s" % (", ".join(hosts) or path.name))
        except OSError as e:
            sys.stderr.write("bench history: cannot write %s: %s\n" % (args.png, e.strerror or e))
            return EXIT_BAD_INPUT
        sys.stderr.write("bench history: wrote %s\n" % args.png)
    if args.html:
        try:
            report.write(args.html, shown, len(runs), ", ".join(hosts) or path.stem, str(path), comp)
        except report.ReportError as e:
            sys.stderr.write("bench history: %s\n" % e)
            return EXIT_BAD_INPUT
        sys.stderr.write("bench history: wrote %s\n" % args.html)
    return EXIT_OK
