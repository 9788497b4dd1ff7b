"""The gate history of one host as one self-contained HTML page (``bench history --html``).

The page is plain HTML with inline CSS and inline SVG drawn here: no script, no external URL,
system fonts, so it opens from a file, a mail attachment or an artifact store as it is. It shows:

- the host, how many runs, their time span and the latest run's profile, release, engine and
  verdicts (the gate's decision and, where the record has one, the plan's pass/fail/inconclusive);
- per case of the gate plan: decode tok/s, accept length (and aggregate tok/s for a case run at
  C>1, the figure such a case is judged on) over the runs, each point coloured and shaped by the
  case's verdict, its interval as an error bar when the record carries one, the case's threshold
  as a dashed line, and a marked line where the profile or the release changed from the run
  before; the latest run's acceptance by draft position;
- the headline case's share of its roofline ceiling per run;
- the latest comparison (compare.json of ``bench compare-report``): its answer or statements and
  its rows;
- a table of every run.

Records of every age render: without ``intervals`` a point has no bar, without ``cases`` the
record's top-level figures are the headline case, without ``release`` the release is "-". Every
string taken from a record or a comparison is HTML-escaped.
"""
from __future__ import annotations

import datetime
import html
import json
import math
from pathlib import Path

from bench import compare
from sglang_perf import engines
from sglang_perf.record import history as shared
from sglang_perf.record import fingerprint
from sglang_perf.judge import verdict
from sglang_perf.judge.decision import VERDICTS

# verdict -> (colour, marker, legend label); "unknown": a record that names no verdict
STYLE = {"pass": ("#1a9850", "circle", "pass"), "fail": ("#d73027", "cross", "fail"),
         "inconclusive": ("#e08a00", "diamond", "inconclusive"),
         "unknown": ("#7f7f7f", "square", "not judged")}
PROFILE_COLOUR, RELEASE_COLOUR = "#6a3d9a", "#1f78b4"
# figure -> (chart title, unit, threshold key, number format)
CHART_FIGURES = {
    "decode_tok_s": ("decode tok/s (per-request median)", "tok/s", "min_tok_s", ".1f"),
    "accept_len": ("accept length", "", "min_accept_len", ".2f"),
    "aggregate_tok_s": ("aggregate tok/s", "tok/s", "min_aggregate_tok_s", ".1f"),
}
HEADLINE_CASE = "headline"  # the case name of records from before the gate plan when no record names one
NO_COMPARISON = "no comparison yet: playbooks/compare.yml writes one"


class ReportError(Exception):
    """A one-line reason the page cannot be written."""


def esc(value):
    return html.escape("" if value is None else str(value), quote=True)


def _num(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _dict(value):
    return value if isinstance(value, dict) else {}


def _f(value, spec=".1f", suffix=""):
    return "-" if value is None else format(value, spec) + suffix


def _time(t):
    return t.strftime("%Y-%m-%d %H:%M:%S")


# ----------------------------------------------------------------------------- figures ------
def case_verdict(case):
    """pass / fail / inconclusive of one case (its ``verdict``; records without one: ``passed``)."""
    v = case.get("verdict")
    if v in VERDICTS:
        return v
    if case.get("passed") is None:
        return "unknown"
    return "pass" if shared.passed({"passed": case.get("passed")}) else "fail"


def case_names(runs):
    """The plan's case names, newest record's order first, then those only older records have;
    and the name that records without ``cases`` stand for (the headline: the first case)."""
    names = []
    for r in reversed(runs):
        for c in r["cases"]:
            if isinstance(c.get("case"), str) and c["case"] not in names:
                names.append(c["case"])
        if names:
            break
    for r in runs:
        for c in r["cases"]:
            if isinstance(c.get("case"), str) and c["case"] not in names:
                names.append(c["case"])
    return (names, names[0]) if names else ([HEADLINE_CASE], HEADLINE_CASE)


def _interval(intervals, key, value):
    iv = _dict(intervals.get(key))
    estimate = _num(iv.get("estimate"))
    return {"value": value if estimate is None else estimate,
            "lower": _num(iv.get("lower")), "upper": _num(iv.get("upper")),
            "n": iv.get("n"), "method": iv.get("method"), "has_interval": bool(iv)}


def figures(run, name, headline):
    """The figures of case ``name`` in a run, or None when the run has no such case. A record
    without ``cases`` holds the headline case at its top level; one that measured nothing and
    failed counts as unmeasured in every case."""
    raw = run["raw"]
    src = next((c for c in run["cases"] if c.get("case") == name), None)
    if src is None:
        if run["cases"]:
            return None
        if name != headline and _num(shared.median_of(raw)) is not None:
            return None
        src = dict(raw, verdict=raw.get("plan_verdict") if raw.get("plan_verdict") in VERDICTS
                   else "pass" if shared.passed(raw) else "fail")
    intervals = _dict(src.get("intervals"))
    thresholds = _dict(src.get("thresholds")) or _dict(raw.get("thresholds"))
    out = {"verdict": case_verdict(src), "level": _num(intervals.get("level")),
           "description": src.get("description"), "concurrency": src.get("concurrency")}
    for key, (_title, _unit, threshold, _spec) in CHART_FIGURES.items():
        value = _num(shared.median_of(src)) if key == "decode_tok_s" else _num(src.get(key))
        out[key] = dict(_interval(intervals, key, value), threshold=_num(thresholds.get(threshold)))
    out["ttft_s"] = _interval(intervals, "ttft_s", _num(_dict(src.get("ttft_s")).get("p50")))
    roof = _dict(src.get("roofline"))
    out["share_pct"], out["ceiling_tok_s"] = _num(roof.get("share_pct")), _num(roof.get("ceiling_tok_s"))
    pos = src.get("accept_by_position")
    out["positions"] = [_num(p) for p in pos] if isinstance(pos, list) and pos else None
    out["unmeasured"] = all(out[k]["value"] is None for k in CHART_FIGURES)
    why = _dict(src.get("attribution"))  # the gate's split against the last-known-good
    out["cause"], out["cause_text"] = why.get("cause"), why.get("text")
    out["prompt_set"] = src.get("prompt_set")
    return out


def interval_text(fig, spec=".1f", unit=""):
    """A figure with its interval: "54.6 tok/s [53.9, 55.2]"; without an interval the figure alone."""
    if fig is None or fig["value"] is None:
        return "-"
    text = _f(fig["value"], spec) + (" " + unit if unit else "")
    if fig["has_interval"]:
        text += " [%s, %s]" % (_f(fig["lower"], spec), _f(fig["upper"], spec))
    return text


def interval_note(fig, level):
    """How an interval was made, for a tooltip: "95% interval, n=9: order statistics of the median"."""
    if not fig or not fig["has_interval"]:
        return ""
    parts = ["%s interval" % ("%.0f%%" % (100 * level) if level else "the")]
    if fig["n"] is not None:
        parts.append("n=%s" % fig["n"])
    note = ", ".join(parts)
    if fig["lower"] is None or fig["upper"] is None:
        note += " (a bound is missing: too few requests)"
    return note + (": %s" % fig["method"] if fig["method"] else "")


# --------------------------------------------------------------------------------- SVG ------
def nice_ticks(lo, hi, count=5):
    """Round tick values covering lo..hi (steps of 1, 2 or 5 x 10^k)."""
    if hi <= lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    t = first
    while t < hi + step * 0.999:
        ticks.append(round(t, 10))
        t += step
    return ticks


def _marker(kind, x, y, colour, size=5.0):
    if kind == "circle":
        return '<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"/>' % (x, y, size * 0.9, colour)
    if kind == "cross":
        s = size * 0.9
        return ('<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2.6"/>'
                % (x - s, y - s, x + s, y + s, x - s, y + s, x + s, y - s, colour))
    if kind == "diamond":
        s = size * 1.2
        return '<path d="M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ" fill="%s"/>' % (
            x, y - s, x + s, y, x, y + s, x - s, y, colour)
    s = size * 0.8
    return '<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>' % (
        x - s, y - s, 2 * s, 2 * s, colour)


def _short(text, chars):
    return text if len(text) <= chars else text[:max(1, chars - 1)] + "\u2026"


class Frame:
    """The axes of one chart: runs on x (one slot per run, oldest left), values on y."""

    def __init__(self, n, lo, hi, width=580, height=300, left=54, right=14, top=50, bottom=76):
        self.n, self.width, self.height = n, width, height
        self.left, self.right, self.top, self.bottom = left, right, top, bottom
        self.ticks = nice_ticks(lo, hi)
        self.lo, self.hi = self.ticks[0], self.ticks[-1]
        self.plot_w = width - left - right
        self.plot_h = height - top - bottom
        self.slot = self.plot_w / max(n, 1)

    def x(self, i):
        return self.left + (i + 0.5) * self.slot

    def y(self, v):
        return self.top + self.plot_h * (1 - (v - self.lo) / ((self.hi - self.lo) or 1))

    @property
    def bottom_y(self):
        return self.top + self.plot_h


def _axes(fr, runs, spec, unit):
    out = ['<rect class="plot-area" x="%d" y="%d" width="%.1f" height="%.1f" fill="#fbfbfd" '
           'stroke="#c8c8d0"/>' % (fr.left, fr.top, fr.plot_w, fr.plot_h)]
    for t in fr.ticks:
        y = fr.y(t)
        out.append('<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e3e3ea"/>'
                   % (fr.left, fr.left + fr.plot_w, y, y))
        out.append('<text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>'
                   % (fr.left - 5, y + 3.5, esc(format(t, spec))))
    if unit:
        mid = fr.top + fr.plot_h / 2
        out.append('<text x="12" y="%.1f" class="unit" transform="rotate(-90 12 %.1f)" '
                   'text-anchor="middle">%s</text>' % (mid, mid, esc(unit)))
    every = max(1, math.ceil(len(runs) / max(1, int(fr.plot_w // 66))))
    for i, r in enumerate(runs):
        x = fr.x(i)
        out.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#c8c8d0"/>'
                   % (x, x, fr.bottom_y, fr.bottom_y + 4))
        if i % every == 0:
            out.append('<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">#%d</text>'
                       '<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>'
                       % (x, fr.bottom_y + 15, r["index"], x, fr.bottom_y + 27,
                          esc(r["time"].strftime("%m-%d %H:%M"))))
    return out


CHAR_W = 6.0  # the width of a label character at the charts' 10.5px, near enough to lay labels out


def _changes(fr, runs):
    """A vertical line and a label at each run whose profile or release differs from the run
    before: the profile's labels on the top row, the release's on the second; a label that has
    no room to its right stands to the left of its line."""
    out = []
    kinds = (("profile", "changed", PROFILE_COLOUR, fr.top - 19, "6 3"),
             ("release", "release_changed", RELEASE_COLOUR, fr.top - 6, "2 3"))
    for kind, flag, colour, ty, dash in kinds:
        at = [i for i, r in enumerate(runs) if r.get(flag)]
        for j, i in enumerate(at):
            x = fr.x(i) - fr.slot / 2
            right = (fr.x(at[j + 1]) - fr.slot / 2 if j + 1 < len(at) else fr.left + fr.plot_w) - x - 6
            left = x - (fr.x(at[j - 1]) - fr.slot / 2 if j else fr.left) - 6
            label = runs[i][kind]
            anchor, tx, room = ("start", x + 3, right) if right >= min(left, len(label) * CHAR_W) \
                else ("end", x - 3, left)
            out.append(
                '<g class="change %s-change" data-label="%s"><title>%s changed: %s -&gt; %s</title>'
                '<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="%s" stroke-width="1.4" '
                'stroke-dasharray="%s"/><text x="%.1f" y="%d" class="change-label" fill="%s" '
                'text-anchor="%s">%s</text></g>'
                % (kind, esc(label), kind, esc(runs[i - 1][kind] if i else "-"), esc(label),
                   x, x, ty - 9, fr.bottom_y, colour, dash, tx, ty, colour, anchor,
                   esc(_short(label, max(3, int(room // CHAR_W))))))
    return out


def _legend(fr, verdicts, extra):
    """The legend under the x labels, wrapped to a second row when the first is full: the
    verdicts, then interval / threshold / profile and release change."""
    rows = (fr.height - 24, fr.height - 8)
    row, x = 0, fr.left
    out = ['<g class="legend">']
    for kind, label in [("verdict", v) for v in verdicts] + list(extra):
        width = 22 + CHAR_W * len(STYLE[label][2] if kind == "verdict" else label)
        if x + width > fr.width and row == 0:
            row, x = 1, fr.left
        y = rows[row]
        if kind == "verdict":
            colour, marker, label = STYLE[label]
            out.append(_marker(marker, x + 5, y - 4, colour, 4.2))
        elif kind == "interval":
            out.append('<path d="M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f" stroke="#444" '
                       'stroke-width="1.3"/>'
                       % (x + 5, y - 10, y + 2, x + 2, y - 10, x + 8, x + 2, y + 2, x + 8))
        elif kind == "threshold":
            out.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#333" stroke-width="1.5" '
                       'stroke-dasharray="6 4"/>' % (x - 2, x + 11, y - 4, y - 4))
        else:
            colour, dash = (PROFILE_COLOUR, "6 3") if kind == "profile" else (RELEASE_COLOUR, "2 3")
            out.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.6" '
                       'stroke-dasharray="%s"/>' % (x + 5, x + 5, y - 11, y + 3, colour, dash))
        out.append('<text x="%.1f" y="%.1f" class="legend-text">%s</text>' % (x + 14, y, esc(label)))
        x += width
    out.append("</g>")
    return out


def series_chart(runs, points, metric, case, title, spec=".1f", unit="", fixed=None):
    """One figure of one case over the runs: ``points`` aligned with ``runs`` (None: the run has
    no such case), each {"value", "lower", "upper", "has_interval", "threshold", "verdict",
    "unmeasured", "tip"}. ``fixed``: (lo, hi) of the y axis instead of the data's range."""
    values = []
    for p in points:
        if p:
            values += [v for v in (p["value"], p.get("lower"), p.get("upper"), p.get("threshold"))
                       if v is not None]
    attrs = 'class="chart" data-case="%s" data-metric="%s" role="img" aria-label="%s"' % (
        esc(case), esc(metric), esc("%s: %s" % (case, title)))
    if fixed:
        fr = Frame(len(runs), fixed[0], max([fixed[1]] + values))
    elif values:
        lo, hi = min(values), max(values)
        pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
        fr = Frame(len(runs), max(0.0, lo - pad) if lo >= 0 else lo - pad, hi + pad)
    else:
        fr = Frame(len(runs), 0.0, 1.0)
    out = ['<svg %s width="%d" height="%d" viewBox="0 0 %d %d">' % (attrs, fr.width, fr.height,
                                                                     fr.width, fr.height),
           '<text x="%d" y="15" class="chart-title">%s</text>' % (fr.left, esc(title))]
    out += _axes(fr, runs, spec, unit)
    if not values:
        out.append('<text x="%.1f" y="%.1f" class="empty" text-anchor="middle">no figures</text>'
                   % (fr.left + fr.plot_w / 2, fr.top + fr.plot_h / 2))
    out += _changes(fr, runs)
    # the threshold: a dashed step line, one flat segment per run that has one
    segs, level = [], None
    for i, p in enumerate(points):
        t = p.get("threshold") if p else None
        if t is None:
            level = None
            continue
        x0, x1 = fr.x(i) - fr.slot / 2, fr.x(i) + fr.slot / 2
        segs.append(("M%.1f %.1f" % (x0, fr.y(t)) if level is None else "V%.1f" % fr.y(t)) + "H%.1f" % x1)
        level = t
    if segs:
        last = next(p["threshold"] for p in reversed(points) if p and p.get("threshold") is not None)
        out.append('<g class="threshold"><title>threshold per run (the latest: %s)</title>'
                   '<path d="%s" fill="none" stroke="#333" stroke-width="1.5" stroke-dasharray="6 4"/>'
                   '<text x="%.1f" y="%.1f" class="threshold-label" text-anchor="end">min %s</text></g>'
                   % (esc(_f(last, spec)), "".join(segs), fr.left + fr.plot_w - 3, fr.y(last) - 4,
                      esc(_f(last, spec))))
    # the trend: a thin line through consecutive measured runs
    path, pen = [], False
    for i, p in enumerate(points):
        if p and p["value"] is not None:
            path.append("%s%.1f %.1f" % ("L" if pen else "M", fr.x(i), fr.y(p["value"])))
            pen = True
        else:
            pen = False
    if path:
        out.append('<path class="trend" d="%s" fill="none" stroke="#9aa0b4" stroke-width="1.2"/>'
                   % "".join(path))
    shown, bars = set(), set()
    for i, p in enumerate(points):
        if not p:
            continue
        colour, kind, _label = STYLE[p["verdict"]]
        shown.add(p["verdict"])
        x = fr.x(i)
        tip = esc(p.get("tip") or "")
        if p["value"] is None:
            if p.get("unmeasured") or p["verdict"] == "fail":
                out.append('<g class="point unmeasured verdict-%s"><title>%s</title>%s</g>'
                           % (p["verdict"], tip, _marker("cross", x, fr.bottom_y - 7, colour)))
            continue
        y = fr.y(p["value"])
        bar = ""
        if p.get("has_interval") and (p.get("lower") is not None or p.get("upper") is not None):
            lo = fr.y(p["lower"]) if p.get("lower") is not None else y
            hi = fr.y(p["upper"]) if p.get("upper") is not None else y
            caps = "".join("M%.1f %.1fH%.1f" % (x - 4, yy, x + 4) for yy, b in ((lo, "lower"), (hi, "upper"))
                           if p.get(b) is not None)
            bar = '<path class="interval" d="M%.1f %.1fV%.1f%s" stroke="%s" stroke-width="1.6"/>' % (
                x, lo, hi, caps, colour)
            bars.add(p.get("level"))
        out.append('<g class="point verdict-%s"><title>%s</title>%s%s</g>'
                   % (p["verdict"], tip, bar, _marker(kind, x, y, colour)))
    extra = []
    if bars:
        lv = bars.pop() if len(bars) == 1 else None
        extra.append(("interval", "%s interval" % ("%.0f%%" % (100 * lv) if lv else "the")))
    if segs:
        extra.append(("threshold", "threshold"))
    if any(r.get("changed") for r in runs):
        extra.append(("profile", "profile change"))
    if any(r.get("release_changed") for r in runs):
        extra.append(("release", "release change"))
    out += _legend(fr, [v for v in (*VERDICTS, "unknown") if v in shown or v in VERDICTS], extra)
    out.append("</svg>")
    return "\n".join(out)


def positions_chart(case, positions, when):
    """The latest run's acceptance by draft position: a bar per position 1..k, in %."""
    w, h, left, top, bottom = 300, 200, 40, 26, 34
    n = len(positions)
    plot_w, plot_h = w - left - 10, h - top - bottom
    slot = plot_w / max(n, 1)
    out = ['<svg class="chart positions" data-case="%s" data-metric="accept_by_position" role="img" '
           'aria-label="%s" width="%d" height="%d" viewBox="0 0 %d %d">'
           % (esc(case), esc("%s: acceptance by draft position" % case), w, h, w, h),
           '<text x="%d" y="14" class="chart-title">accepted by draft position (%s)</text>'
           % (left, esc(when)),
           '<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="#fbfbfd" stroke="#c8c8d0"/>'
           % (left, top, plot_w, plot_h)]
    for t in (0, 25, 50, 75, 100):
        y = top + plot_h * (1 - t / 100.0)
        out.append('<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e3e3ea"/>'
                   % (left, left + plot_w, y, y))
        out.append('<text x="%d" y="%.1f" class="tick" text-anchor="end">%d%%</text>'
                   % (left - 4, y + 3.5, t))
    for i, p in enumerate(positions):
        x = left + i * slot + slot * 0.18
        bw = slot * 0.64
        out.append('<text x="%.1f" y="%d" class="tick" text-anchor="middle">%d</text>'
                   % (x + bw / 2, top + plot_h + 14, i + 1))
        if p is None:
            continue
        pct = max(0.0, min(100.0, 100 * p))
        y = top + plot_h * (1 - pct / 100.0)
        out.append('<g class="bar"><title>position %d: %.1f%% of verify steps accepted at least %d '
                   'draft token%s</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#4c72b0"/>'
                   '<text x="%.1f" y="%.1f" class="bar-label" text-anchor="middle">%.0f%%</text></g>'
                   % (i + 1, pct, i + 1, "" if i == 0 else "s", x, y, bw, top + plot_h - y,
                      x + bw / 2, y - 3, pct))
    out.append('<text x="%.1f" y="%d" class="tick" text-anchor="middle">draft position</text>'
               % (left + plot_w / 2, h - 4))
    out.append("</svg>")
    return "\n".join(out)


# -------------------------------------------------------------------------------- page ------
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       margin: 0; padding: 18px 26px 40px; color: #1d1d24; background: #ffffff; font-size: 14px; }
h1 { font-size: 22px; margin: 0 0 10px; }
h2 { font-size: 18px; margin: 26px 0 6px; border-bottom: 1px solid #d8d8e0; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 12px 0 4px; }
.summary { display: grid; grid-template-columns: max-content 1fr max-content 1fr; gap: 3px 14px;
           background: #f4f5f9; border: 1px solid #d8d8e0; border-radius: 6px; padding: 10px 14px; }
.summary dt { color: #555; } .summary dd { margin: 0; font-weight: 600; }
.muted { color: #666; font-weight: normal; }
.badge { display: inline-block; white-space: nowrap; padding: 1px 8px; border-radius: 10px;
         color: #fff; font-weight: 600; }
.v-pass { background: #1a9850; } .v-fail { background: #d73027; } .v-inconclusive { background: #e08a00; }
.v-unknown { background: #7f7f7f; }
.charts { display: flex; flex-wrap: wrap; gap: 8px 18px; align-items: flex-start; }
figure.positions { margin: 0; width: 300px; } figure.positions figcaption { font-size: 12px; }
.latest { margin: 4px 0 8px; } .latest span { margin-right: 16px; white-space: nowrap; }
svg text { font-family: inherit; } .tick { font-size: 10.5px; fill: #444; }
.unit { font-size: 11px; fill: #444; }
.chart-title { font-size: 12.5px; font-weight: 600; fill: #222; }
.change-label { font-size: 10.5px; } .legend-text { font-size: 10.5px; fill: #333; }
.threshold-label { font-size: 10px; fill: #333; } .bar-label { font-size: 10.5px; fill: #222; }
.empty { font-size: 13px; fill: #888; }
table { border-collapse: collapse; margin-top: 6px; font-size: 12.5px; }
th, td { border: 1px solid #d8d8e0; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #eef0f6; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.wide { overflow-x: auto; } td.nowrap { white-space: nowrap; }
table.runs { font-size: 12px; } table.runs th, table.runs td { padding: 3px 5px; }
tr.changed td:first-child { border-left: 3px solid #6a3d9a; }
td.c-pass { background: #eef8f1; } td.c-fail { background: #fdeeee; }
td.c-inconclusive { background: #fff5e0; }
ul.statements li { margin: 2px 0; }
footer { margin-top: 30px; color: #666; font-size: 12px; }
"""


def _badge(verdict, text=None):
    v = verdict if verdict in STYLE else "unknown"
    return '<span class="badge v-%s">%s</span>' % (v, esc(text or verdict or "-"))


def _gate_verdict(raw):
    v = raw.get("verdict")
    if v is None and raw.get("passed") is not None:
        v = "pass" if shared.passed(raw) else "fail"
    return v


def _verdicts_html(raw):
    gate = _gate_verdict(raw)
    out = _badge(gate if gate in VERDICTS else "unknown", "gate: %s" % (gate or "-"))
    if raw.get("plan_verdict") is not None:
        out += " " + _badge(raw["plan_verdict"], "plan: %s" % raw["plan_verdict"])
    return out


def _engine(raw):
    return "%s %s" % (raw.get("engine") or engines.DEFAULT, raw.get("sglang_version") or "-")


def _span(runs):
    times = [r["time"] for r in runs]
    first, last = min(times), max(times)
    d = last - first
    days, rest = d.days, d.seconds
    length = ("%d d %d h" % (days, rest // 3600) if days
              else "%d h %d min" % (rest // 3600, rest % 3600 // 60))
    return "%s to %s UTC (%s)" % (_time(first), _time(last), length)


def header(runs, total, host, source):
    last = runs[-1]
    raw = last["raw"]
    cells = [("host", esc(host)), ("runs", "%d%s" % (total, "" if len(runs) == total
                                                      else ' <span class="muted">(the last %d shown)</span>'
                                                      % len(runs))),
             ("time span", esc(_span(runs))), ("latest run", esc(_time(last["time"])) + " UTC"),
             ("profile", esc(last["profile"])), ("release", esc(last["release"])),
             ("engine", esc(_engine(raw))), ("verdict", _verdicts_html(raw)),
             ("action", esc(raw.get("action") or "-") + ' <span class="muted">%s</span>'
              % esc(raw.get("reason") or "")),
             ("history file", '<span class="muted">%s</span>' % esc(source))]
    return ('<header><h1>Gate history: %s</h1><dl class="summary">%s</dl></header>'
            % (esc(host), "".join("<dt>%s</dt><dd>%s</dd>" % kv for kv in cells)))


def _tip(run, fig, key, spec, unit):
    head = "#%d %s UTC, %s" % (run["index"], _time(run["time"]), run["profile"])
    if fig is None:
        return head
    text = interval_text(fig[key], spec, unit) if fig[key]["value"] is not None else "not measured"
    note = interval_note(fig[key], fig["level"])
    thr = fig[key].get("threshold")
    return "%s: %s%s%s; %s" % (head, text, " (%s)" % note if note else "",
                               "; threshold %s" % _f(thr, spec) if thr is not None else "", fig["verdict"])


def case_section(runs, name, headline):
    figs = [figures(r, name, headline) for r in runs]
    latest_i = next((i for i in range(len(runs) - 1, -1, -1) if figs[i] is not None), None)
    latest = figs[latest_i] if latest_i is not None else None
    out = ['<section class="case" id="case-%s" data-case="%s">' % (esc(name), esc(name)),
           "<h2>case %s%s</h2>" % (esc(name), ' <span class="muted">%s</span>' % esc(latest["description"])
                                   if latest and latest.get("description") else "")]
    if latest is not None:
        run = runs[latest_i]
        parts = ["latest (#%d, %s UTC): %s" % (run["index"], esc(_time(run["time"])),
                                                _badge(latest["verdict"]))]
        for key, (title, unit, _thr, spec) in CHART_FIGURES.items():
            f = latest[key]
            if f["value"] is None:
                continue
            note = interval_note(f, latest["level"])
            parts.append('<span title="%s">%s <b>%s</b>%s</span>' % (
                esc(note), esc(title.split(" (")[0]), esc(interval_text(f, spec, unit)),
                " (min %s)" % esc(_f(f["threshold"], spec)) if f["threshold"] is not None else ""))
        if latest["ttft_s"]["value"] is not None:
            parts.append("<span>TTFT p50 <b>%s</b></span>" % esc(interval_text(latest["ttft_s"], ".2f", "s")))
        if latest["share_pct"] is not None:
            parts.append("<span>roofline <b>%s</b> of %s tok/s</span>" % (
                esc(_f(latest["share_pct"], ".1f", "%")), esc(_f(latest["ceiling_tok_s"]))))
        out.append('<p class="latest">%s</p>' % " ".join(parts))
    out.append('<div class="charts">')
    metrics = ["decode_tok_s", "accept_len"]
    if any(f and (_num(f.get("concurrency")) or 1) > 1 or f and f["aggregate_tok_s"]["threshold"] is not None
           for f in figs):
        metrics.append("aggregate_tok_s")
    for key in metrics:
        title, unit, _thr, spec = CHART_FIGURES[key]
        points = [None if f is None else dict(f[key], verdict=f["verdict"], level=f["level"],
                                              unmeasured=f["unmeasured"], tip=_tip(r, f, key, spec, unit))
                  for r, f in zip(runs, figs)]
        out.append(series_chart(runs, points, key, name, title, spec, unit))
    pos_i = next((i for i in range(len(runs) - 1, -1, -1) if figs[i] and figs[i]["positions"]), None)
    if pos_i is not None:
        run = runs[pos_i]
        out.append('<figure class="positions">%s<figcaption class="muted">#%d %s UTC, %s: %s of verify '
                   'steps accepted at least 1, 2, ... drafts</figcaption></figure>' % (
                       positions_chart(name, figs[pos_i]["positions"], "#%d" % run["index"]), run["index"],
                       esc(_time(run["time"])), esc(run["profile"]),
                       esc(verdict.positions(figs[pos_i]["positions"]))))
    else:
        out.append('<p class="muted">no acceptance by draft position recorded for this case</p>')
    out.append("</div></section>")
    return "\n".join(out)


def roofline_section(runs, headline):
    figs = [figures(r, headline, headline) for r in runs]
    if not any(f and f["share_pct"] is not None for f in figs):
        return ('<section id="roofline"><h2>Roofline share (%s)</h2><p class="muted">no roofline in '
                'these records (the gate computes one when the model and hardware sizes are known)</p>'
                '</section>' % esc(headline))
    points = []
    for r, f in zip(runs, figs):
        if f is None:
            points.append(None)
            continue
        tip = "#%d %s UTC, %s: %s of the %s tok/s ceiling" % (r["index"], _time(r["time"]), r["profile"],
                                                                _f(f["share_pct"], ".1f", "%"),
                                                                _f(f["ceiling_tok_s"]))
        points.append({"value": f["share_pct"], "verdict": f["verdict"], "unmeasured": f["unmeasured"],
                       "tip": tip, "has_interval": False})
    chart = series_chart(runs, points, "roofline_share_pct", headline,
                         "measured decode as %% of the roofline ceiling (%s)" % headline, ".0f", "%",
                         fixed=(0.0, 100.0))
    return ('<section id="roofline"><h2>Roofline share (%s)</h2><p class="muted">per-request decode median '
            '/ the single-stream bandwidth ceiling of the run\'s speculative steps and accept length</p>'
            '<div class="charts">%s</div></section>' % (esc(headline), chart))


def _answer_line(text):
    """An answer line of compare.json: escaped, its Markdown **bold** as <strong>."""
    parts = esc(text).split("**")
    return "".join("<strong>%s</strong>" % p if i % 2 else p for i, p in enumerate(parts))


def _compare_cells(row):
    """compare.figure_cells of a row whose figures were checked to be numbers."""
    clean = dict(row)
    for key in compare.NUMERIC_KEYS + ("errors",):
        clean[key] = _num(row.get(key))
    if clean["errors"] is not None:
        clean["errors"] = int(clean["errors"])
    roof = _dict(row.get("roofline"))
    ceiling = _num(roof.get("ceiling_tok_s"))
    clean["roofline"] = None if ceiling is None else {"ceiling_tok_s": ceiling,
                                                      "share_pct": _num(roof.get("share_pct"))}
    pos = row.get("accept_by_position")
    clean["accept_by_position"] = [p for p in pos if _num(p) is not None] if isinstance(pos, list) else None
    return compare.figure_cells(clean)


def comparison_section(comp):
    """The latest comparison: ``comp`` = {"path", "data"} or {"path", "problem"} or None."""
    out = ['<section id="comparison"><h2>Latest comparison</h2>']
    if comp is None:
        out.append('<p class="no-comparison">%s</p></section>' % esc(NO_COMPARISON))
        return "\n".join(out)
    if comp.get("problem"):
        out.append('<p class="no-comparison">cannot read %s: %s</p></section>' % (
            esc(comp["path"]), esc(comp["problem"])))
        return "\n".join(out)
    data = comp["data"]
    summary, rows = _dict(data.get("summary")), [r for r in data.get("rows") or [] if isinstance(r, dict)]
    out.append('<p class="muted">%s, created %s</p>' % (esc(comp["path"]), esc(data.get("created") or "-")))
    lines = [s for s in summary.get("lines") or [] if isinstance(s, str)]
    statements = [s for s in summary.get("statements") or [] if isinstance(s, str)]
    if lines:
        out.append('<h3>The answer</h3><ul class="statements answer">%s</ul>'
                   % "".join("<li>%s</li>" % _answer_line(s) for s in lines))
    if statements:
        out.append('<h3>%s</h3><ul class="statements">%s</ul>' % (
            "Not measured" if lines else "Findings", "".join("<li>%s</li>" % esc(s) for s in statements)))
    lead = [k for k in ("profile", "engine", "spec_steps", "case", "concurrency", "requests")
            if any(k in r for r in rows)]
    head = [{"spec_steps": "steps", "concurrency": "C"}.get(k, k) for k in lead] + [
        "decode tok/s median (min-max)", "aggregate tok/s", "accept length", "accepted by draft position",
        "TTFT p50 s", "roofline ceiling tok/s (share)", "errors"]
    body = []
    for r in rows:
        cells = ["<td>%s</td>" % esc("-" if r.get(k) is None else r[k]) for k in lead]
        if r.get("error") is not None:
            cells += ['<td class="num">-</td>'] * 6 + ["<td>not measured: %s</td>" % esc(r["error"])]
        else:
            cells += ['<td class="num">%s</td>' % esc(c) for c in _compare_cells(r)]
        body.append("<tr>%s</tr>" % "".join(cells))
    out.append('<table class="compare-rows"><thead><tr>%s</tr></thead><tbody>%s</tbody></table></section>'
               % ("".join("<th>%s</th>" % esc(h) for h in head), "".join(body)))
    return "\n".join(out)


def _host_changed(run):
    """The runs table's marker of a run whose host differs from its last-known-good's."""
    if not run.get("host_changes"):
        return ""
    said = fingerprint.text(run["host_changes"])
    return '<br><span class="host" title="%s">host changed</span>' % esc(said)


def runs_table(runs, names, headline):
    head = ['<th rowspan="2">#</th><th rowspan="2">time (UTC)</th><th rowspan="2">profile</th>'
            '<th rowspan="2">release<br>engine</th><th rowspan="2">verdict</th>'
            '<th rowspan="2" title="what the gate did; its reason is the cell\'s tooltip">action</th>'
            ] + ['<th>%s</th>' % esc(n) for n in names]
    sub = "".join("<th>decode tok/s [lower, upper]<br>accept length [lower, upper]</th>" for _ in names)
    body = []
    for r in runs:
        raw = r["raw"]
        cells = ['<td class="num">%d</td>' % r["index"],
                 '<td class="nowrap">%s</td>' % r["time"].strftime("%Y-%m-%d<br>%H:%M:%S"),
                 '<td class="nowrap">%s%s</td>' % ("* " if r["changed"] else "", esc(r["profile"])),
                 '<td class="nowrap">%s%s<br><span class="muted">%s</span></td>' % (
                     "* " if r["release_changed"] else "", esc(r["release"]), esc(_engine(raw))),
                 "<td>%s%s</td>" % (_verdicts_html(raw).replace("</span> <span", "</span><br><span"),
                                    _host_changed(r)),
                 '<td title="%s">%s</td>' % (esc(raw.get("reason") or ""), esc(raw.get("action") or "-"))]
        for n in names:
            f = figures(r, n, headline)
            if f is None:
                cells.append('<td class="num">-</td>')
                continue
            notes = [interval_note(f[k], f["level"]) for k in ("decode_tok_s", "accept_len")]
            notes += [f["cause_text"] and "vs the last-known-good: " + f["cause_text"],
                      f["prompt_set"] and "prompts " + f["prompt_set"]]
            cells.append('<td class="num c-%s" title="%s">%s<br>accept %s%s</td>' % (
                f["verdict"], esc("; ".join([f["verdict"]] + [n for n in notes if n])),
                esc(interval_text(f["decode_tok_s"], ".1f", "tok/s")),
                esc(interval_text(f["accept_len"], ".2f")),
                '<br><span class="why">why: %s</span>' % esc(f["cause"]) if f["cause"] else ""))
        body.append('<tr class="%s">%s</tr>' % ("changed" if r["changed"] or r["release_changed"] else "",
                                                "".join(cells)))
    return ('<section id="runs"><h2>Every run</h2><p class="muted">oldest first; * the profile or the '
            'release differs from the run before; a cell is coloured by the case\'s verdict; [lower, upper]: '
            'the interval the gate recorded (none in older records); why: the cause of the change from the '
            'last-known-good (acceptance, system, both, none); host changed: the GPUs, links, engine or '
            'profile differ from the last-known-good\'s (the list is its tooltip); the action\'s reason is '
            'its tooltip</p>'
            '<div class="wide"><table class="runs"><thead><tr>%s</tr><tr>%s</tr></thead><tbody>%s</tbody>'
            '</table></div></section>' % ("".join(head), sub, "".join(body)))


def page(runs, total, host, source, comp=None, created=None):
    """The whole page: ``runs`` as history.read / annotate return them (the ones to show),
    ``total`` runs in the file, ``comp`` as comparison_section takes it."""
    for i, r in enumerate(runs, 1):
        r.setdefault("index", i)
    names, headline = case_names(runs)
    created = created or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    nav = " &middot; ".join('<a href="#case-%s">%s</a>' % (esc(n), esc(n)) for n in names)
    body = [header(runs, total, host, source),
            '<nav><p class="muted">cases: %s &middot; <a href="#roofline">roofline</a> &middot; '
            '<a href="#comparison">comparison</a> &middot; <a href="#runs">every run</a></p></nav>' % nav]
    body += [case_section(runs, n, headline) for n in names]
    body += [roofline_section(runs, headline), comparison_section(comp), runs_table(runs, names, headline),
             "<footer>written by python -m bench history --html, %s</footer>" % esc(created)]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<title>Gate history: %s</title><style>%s</style></head>\n<body>\n%s\n</body></html>\n"
            % (esc(host), CSS, "\n".join(body)))


# ------------------------------------------------------------------------------- input ------
def default_compare(host, root):
    """Where playbooks/compare.yml writes a host's comparison: out/compare/<host>/compare.json."""
    return Path(root) / "out" / "compare" / host / "compare.json"


def load_compare(path, required):
    """{"path", "data"} of a compare.json. A file that is missing, cannot be read or is not one
    raises ReportError when it was asked for (``required``); otherwise a missing file gives None
    and a bad one {"path", "problem"}."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise ValueError("not a compare.json (no rows)")
    except FileNotFoundError:
        if required:
            raise ReportError("no comparison file %s" % path)
        return None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        reason = " ".join(str(getattr(e, "strerror", None) or e).split())[:200]
        if required:
            raise ReportError("cannot read the comparison %s: %s" % (path, reason))
        return {"path": str(path), "problem": reason}
    return {"path": str(path), "data": data}


def write(path, runs, total, host, source, comp=None):
    """Write the page to ``path`` (its folder is made); ReportError when it cannot be written."""
    text = page(runs, total, host, source, comp)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise ReportError("cannot write %s: %s" % (path, e.strerror or e))
    return text
