"""Profile comparison: one server per profile, the same benchmark at several concurrency levels,
which profile is ahead at each level and where two profiles' lines cross.

    python -m bench compare --target NAME=URL [--target NAME=URL ...] --concurrency 1,4,16
        [--requests N] [--max-tokens T] [--warmup W] [--api-key K] [--out DIR]
        [--sizes FILE ...] [--no-roofline]
    python -m bench compare-report ROWS_JSON --out DIR [--sizes FILE ...] [--no-roofline]

At concurrency C each target gets max(N, 2 x C) measured requests (N = --requests), so that
every level runs at least two full waves of C streams and the aggregate is measured at full
concurrency. A point that cannot be measured (unreachable, auth, all requests failed, bad option)
becomes an error row; the others are still measured.

Two metrics are compared: per-request decode tok/s (the median over requests: what one user
sees) and aggregate tok/s (all tokens / wall time: what the server delivers). A crossing is a
sign change of (a - b) between two consecutive levels both profiles were measured at; its
concurrency is interpolated linearly in log2(C).

The roofline column (unless --no-roofline) is capacity.roofline for the row's speculative steps
and accept length, with the per-request decode median as the measured figure; the size figures
come from bench/sizes.py (--sizes files; else the planned host's, with --plan; else the production
inventory's server).

Writes OUT/compare.md, compare.csv, compare.json and compare.png. `compare-report` writes the
same four files from a JSON list of rows as `sweep` returns them (or a compare.json).

Exit status: 0 written, 2 bad input or nothing measurable, with a one-line reason on stderr.
"""
from __future__ import annotations

import csv
import datetime
import io
import itertools
import json
import math
import os
import sys
from pathlib import Path

from sglang_perf.plan import capacity, comparison
from sglang_perf.measure import config, engine
from sglang_perf.judge import verdict
from sglang_perf.measure.client import ConfigError, MeasureError

from bench import common
from bench.common import EXIT_BAD_INPUT, EXIT_OK, progress_printer
from bench.compare_answer import COMPARED_METRICS
from bench.paths import ROOT
from bench import sizes

COMPARE_OUT = ROOT / "out" / "compare"

# the CSV's columns: a row's flat ones (comparison.ROW_KEYS; its slowdowns are in compare.json
# and compare.md)
CSV_ROW_KEYS = tuple(k for k in comparison.ROW_KEYS if k != "slowdowns")
NUMERIC_KEYS = ("decode_tok_s_median", "decode_tok_s_min", "decode_tok_s_max", "aggregate_tok_s",
                "accept_len", "ttft_p50_s")
FILES = ("compare.md", "compare.csv", "compare.json", "compare.png")


def requests_at(level, requests):
    """Measured requests at concurrency ``level``: at least two full waves."""
    return max(int(requests), 2 * int(level))


def _fmt(value, spec=".1f"):
    return "-" if value is None else format(value, spec)


def describe(row):
    """One line for a progress report."""
    if row["error"] is not None:
        return "ERROR %s" % row["error"]
    return "%s tok/s per request (median), %s tok/s aggregate, accept length %s, %s errors" % (
        _fmt(row["decode_tok_s_median"]), _fmt(row["aggregate_tok_s"]),
        _fmt(row["accept_len"], ".2f"), row["errors"])


def sweep(targets, levels, options, progress=None, meter=None):
    """Benchmark every (profile, url) in ``targets`` at every concurrency in ``levels``.

    ``options`` are engine options (api_key, max_tokens, warmup, requests, ...); url, concurrency
    and requests are set per point, requests = max(options["requests"], 2 x C). A point that
    raises MeasureError or ConfigError becomes a row with ``error`` set (its figures None).
    ``progress(message)`` gets a line before and after every point, ``meter`` (bench/progress.py)
    every request. Returns the rows, target order then level order."""
    base = {k: v for k, v in dict(options).items() if v is not None}
    n = base.get("requests") or config.DEFAULTS["requests"]
    rows = []
    for profile, url in targets:
        for level in levels:
            reqs = requests_at(level, n)
            if progress:
                progress("%s C=%d: %d requests ..." % (profile, level, reqs))
            opts = dict(base, url=url, concurrency=level, requests=reqs)
            try:
                result = engine.run(opts, progress=meter, judge=verdict.judge_case)
                row = comparison.row(profile, url, level, reqs, result)
            except ConfigError as e:
                row = comparison.row(profile, url, level, reqs,
                           error="invalid option %s: %s" % (e.option, e.message))
            except MeasureError as e:
                row = comparison.row(profile, url, level, reqs, error=str(e) or e.__class__.__name__)
            rows.append(row)
            if progress:
                progress("%s C=%d: %s" % (profile, level, describe(row)))
    return rows


def measurable(row):
    return row.get("error") is None and any(row.get(key) is not None
                                            for key, _ in COMPARED_METRICS.values())


def _roofline(row, model, hardware):
    r = capacity.roofline(model, hardware, row.get("spec_steps") or 0, row.get("accept_len"),
                          row.get("decode_tok_s_median"))
    return {k: r[k] for k in ("ceiling_tok_s", "share_pct", "accept_len", "spec_steps",
                              "bytes_per_cycle_gb", "formula", "note")}


def _crossings(metric, a, b, va, vb, common):
    """Sign changes of va - vb between consecutive non-tied levels (a tie at a level in between
    is the crossing point itself)."""
    diffs = [(c, va[c] - vb[c]) for c in common]
    nonzero = [(c, d) for c, d in diffs if d != 0]
    out = []
    for (c1, d1), (c2, d2) in zip(nonzero, nonzero[1:]):
        if (d1 > 0) == (d2 > 0):
            continue
        ties = [c for c, d in diffs if c1 < c < c2 and d == 0]
        if ties:
            at = float(ties[0])
        else:
            x1, x2 = math.log2(c1), math.log2(c2)
            at = 2.0 ** (x1 + d1 / (d1 - d2) * (x2 - x1))
        out.append({"metric": metric, "a": a, "b": b, "between": [c1, c2], "at_c": at,
                    "ahead_below": a if d1 > 0 else b, "ahead_above": a if d2 > 0 else b})
    return out


def _beats(label, a, b, va, vb, common):
    """Sentences "X beats Y at C=1 by 48%, at C=4 by 45% per-request decode", one per run of
    consecutive levels with the same leader (or tied)."""
    groups = []  # [winner or None for a tie, [levels]]
    for c in common:
        d = va[c] - vb[c]
        w = a if d > 0 else b if d < 0 else None
        if groups and groups[-1][0] == w:
            groups[-1][1].append(c)
        else:
            groups.append([w, [c]])
    out = []
    for w, cs in groups:
        if w is None:
            out.append("%s and %s tie at %s on %s" % (
                a, b, ", ".join("C=%d (%s)" % (c, _fmt(va[c])) for c in cs), label))
            continue
        loser = b if w == a else a
        vw, vl = (va, vb) if w == a else (vb, va)
        out.append("%s beats %s %s %s" % (w, loser, ", ".join(
            "at C=%d by %s" % (c, "%.0f%%" % ((vw[c] / vl[c] - 1.0) * 100.0) if vl[c] > 0
                                else "an unbounded margin") for c in cs), label))
    return out


def add_roofline(row, model, hardware):
    """Set row["roofline"] (None unless both size dicts are given and the row was measured);
    returns why the size figures cannot give it (capacity.CapacityError, e.g. no MTP figures for
    a speculative row), else None."""
    row["roofline"] = None
    if model and hardware and measurable(row):
        try:
            row["roofline"] = _roofline(row, model, hardware)
        except capacity.CapacityError as e:
            return str(e)
    return None


def analyse(rows, model=None, hardware=None):
    """Per-row roofline (row["roofline"], when both size dicts are given) and the summary:
    {"leaders": {metric: {C: profile}}, "crossings": [...], "statements": [...],
    "profiles": [...], "levels": [...], "slowdowns": {profile: what held its GPUs down}}. Raises
    ValueError on two rows for one profile and C; a row whose roofline the size figures cannot
    give (capacity.CapacityError) gets none and a statement saying why."""
    seen, roof_problems = set(), {}
    for row in rows:
        key = (row["profile"], row["concurrency"])
        if key in seen:
            raise ValueError("two rows for profile %s at C=%d" % key)
        seen.add(key)
        problem = add_roofline(row, model, hardware)
        if problem:
            roof_problems.setdefault(problem, []).append(key)
    profiles = list(dict.fromkeys(r["profile"] for r in rows))
    levels = sorted(set(r["concurrency"] for r in rows))
    values = {m: {p: {} for p in profiles} for m in COMPARED_METRICS}
    for row in rows:
        if row.get("error") is not None:
            continue
        for m, (key, _label) in COMPARED_METRICS.items():
            if row.get(key) is not None:
                values[m][row["profile"]][row["concurrency"]] = float(row[key])
    leaders, crossings, statements = {}, [], []
    for m, (_key, label) in COMPARED_METRICS.items():
        leaders[m] = {}
        for c in levels:
            at_c = [(v[c], p) for p, v in values[m].items() if c in v]
            if at_c:
                leaders[m][c] = max(at_c, key=lambda t: t[0])[1]
        if leaders[m]:
            names = set(leaders[m].values())
            statements.append(
                "%s leader: %s at every measured C (%s)" % (
                    label, names.pop(), ", ".join(str(c) for c in leaders[m]))
                if len(names) == 1 else "%s leader by C: %s" % (
                    label, ", ".join("C=%d %s" % kv for kv in leaders[m].items())))
        for a, b in itertools.combinations(profiles, 2):
            va, vb = values[m][a], values[m][b]
            common = [c for c in levels if c in va and c in vb]
            if not common:
                statements.append("%s and %s: no level measured for both (%s)" % (a, b, label))
                continue
            if va[common[0]] < vb[common[0]]:  # name the one ahead at the lowest level first
                a, b, va, vb = b, a, vb, va
            statements.extend(_beats(label, a, b, va, vb, common))
            found = _crossings(m, a, b, va, vb, common)
            crossings.extend(found)
            for x in found:
                statements.append(
                    "%s and %s cross at C=%.1f (interpolated in log2 C between C=%d and C=%d, %s): "
                    "%s ahead below, %s ahead above" % (a, b, x["at_c"], x["between"][0],
                                                       x["between"][1], label, x["ahead_below"],
                                                       x["ahead_above"]))
            if not found:
                statements.append("no crossing between %s and %s in C=%s (%s)" % (
                    a, b, "%d..%d" % (common[0], common[-1]) if len(common) > 1
                    else "%d (the only level measured for both)" % common[0], label))
    for problem, keys in roof_problems.items():
        statements.append("no roofline for %s: %s" % (
            ", ".join("%s at C=%d" % k for k in keys), problem))
    for row in rows:
        if row.get("error") is not None:
            statements.append("%s at C=%d not measured: %s" % (row["profile"], row["concurrency"],
                                                                row["error"]))
    held = {}  # what held a profile's GPUs down while it was measured: its figures are the clocks', too
    for row in rows:
        if row.get("slowdowns"):
            held.setdefault(row["profile"], row["slowdowns"])
    statements += ["%s: GPU clocks held down while it was measured (%s): its figures are the GPUs' at "
                   "those clocks, not the setting's alone" % (p, "; ".join(h)) for p, h in held.items()]
    return {"leaders": leaders, "crossings": crossings, "statements": statements,
            "profiles": profiles, "levels": levels, "slowdowns": held}


def _md(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows):
    head = ("profile", "C", "requests", "decode tok/s median (min-max)", "aggregate tok/s",
            "accept length", "accepted by draft position", "TTFT p50 s",
            "roofline ceiling tok/s (share)", "errors")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.get("error") is not None:
            cells = [r["profile"], r["concurrency"], _fmt(r.get("requests"), "d"), "-", "-", "-",
                     "-", "-", "-", "not measured: " + _md(r["error"])]
        else:
            cells = [r["profile"], r["concurrency"], _fmt(r.get("requests"), "d")] + figure_cells(r)
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def figure_cells(r):
    """A measured row's cells from decode to errors (both comparison tables)."""
    roof = r.get("roofline")
    decode = _fmt(r.get("decode_tok_s_median"))
    if r.get("decode_tok_s_min") is not None and r.get("decode_tok_s_max") is not None:
        decode += " (%.1f-%.1f)" % (r["decode_tok_s_min"], r["decode_tok_s_max"])
    return [decode, _fmt(r.get("aggregate_tok_s")), _fmt(r.get("accept_len"), ".2f"),
            verdict.positions(r.get("accept_by_position")), _fmt(r.get("ttft_p50_s"), ".3f"),
            "-" if not roof else "%.1f (%s)" % (
                roof["ceiling_tok_s"], "-" if roof["share_pct"] is None else "%.1f%%" % roof["share_pct"]),
            _fmt(r.get("errors"), "d")]


def markdown(rows, summary, created=None):
    levels = summary.get("levels") or sorted(set(r["concurrency"] for r in rows))
    out = ["# Profile comparison", "",
           "%s; C = %s; requests per point = max(N, 2 x C); per-request decode = median over "
           "requests, aggregate = all tokens / wall time." % (
               created or _now(), ", ".join(str(c) for c in levels)), "",
           markdown_table(rows), ""]
    roofs = {}
    for r in rows:
        if r.get("roofline") and r["profile"] not in roofs:
            roofs[r["profile"]] = (r["concurrency"], r["roofline"])
    if roofs:
        out.append("Roofline: the single-stream decode ceiling for the row's speculative steps and "
                   "accept length (capacity.roofline); share = per-request decode median / "
                   "ceiling. For example:")
        out.append("")
        out.extend("- %s at C=%d: %s" % (p, c, r["formula"]) for p, (c, r) in roofs.items())
        out.append("")
    out.append("## Findings")
    out.append("")
    out.extend("- " + _md(s) for s in summary["statements"])
    return "\n".join(out) + "\n"


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def plot(rows, summary, path):
    """Two panels, per-request decode tok/s and aggregate tok/s against C (log2 axis), one line
    per profile, each point labelled with its accept length ("AL 3.14"); dotted lines at crossings."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    levels = summary.get("levels") or sorted(set(r["concurrency"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, (m, (key, label)) in zip(axes, COMPARED_METRICS.items()):
        for profile in summary["profiles"]:
            pts = sorted((r["concurrency"], r[key], r.get("accept_len")) for r in rows
                         if r["profile"] == profile and r.get("error") is None
                         and r.get(key) is not None)
            if not pts:
                continue
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=profile)
            for c, v, al in pts:
                if al is not None:
                    ax.annotate("AL %.2f" % al, (c, v), textcoords="offset points", xytext=(4, 6),
                                fontsize=8, color=line.get_color())
        for x in summary["crossings"]:
            if x["metric"] == m:
                ax.axvline(x["at_c"], color="grey", linestyle=":", linewidth=1)
                ax.annotate("%s / %s\ncross C=%.1f" % (x["a"], x["b"], x["at_c"]),
                            xy=(x["at_c"], 0.02), xycoords=("data", "axes fraction"),
                            fontsize=7, color="dimgrey")
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels)
        ax.set_xticklabels([str(c) for c in levels])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("concurrency C")
        ax.set_ylabel("%s tok/s" % label)
        ax.set_title("%s tok/s vs concurrency" % label)
        top = max([r[key] for r in rows if r.get("error") is None and r.get(key) is not None]
                  or [1.0])
        ax.set_ylim(0, top * 1.12)  # room for the labels above the highest point
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)


def write_reports(rows, summary, out_dir, created=None, keys=CSV_ROW_KEYS, render=None, draw=None,
                  index="levels"):
    """OUT/compare.md, .csv, .json, .png; returns their paths (in that order). ``keys`` (the CSV
    columns before the roofline's), ``render`` (Markdown), ``draw`` (the PNG) and ``index`` (the
    summary key repeated at the top of the JSON) default to the concurrency sweep's."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    created = created or _now()
    paths = [out / name for name in FILES]
    common.replace_text(paths[0], (render or markdown)(rows, summary, created))
    table = io.StringIO()
    w = csv.writer(table)
    w.writerow(tuple(keys) + ("roofline_ceiling_tok_s", "roofline_share_pct"))
    for r in rows:
        roof = r.get("roofline") or {}
        w.writerow(["" if r.get(k) is None else r[k] for k in keys]
                   + ["" if roof.get(k) is None else roof[k] for k in ("ceiling_tok_s", "share_pct")])
    common.replace_text(paths[1], table.getvalue())
    common.replace_text(paths[2], json.dumps({"rows": rows, "summary": summary, "created": created,
                                              index: summary.get(index)}, indent=2) + "\n")
    (draw or plot)(rows, summary, paths[3])
    return paths


# --- command line ------------------------------------------------------------------------------

class InputError(Exception):
    """Bad input: a one-line reason, exit 2."""


def parse_targets(specs):
    targets, names = [], set()
    for spec in specs or []:
        name, sep, url = spec.partition("=")
        name, url = name.strip(), url.strip()
        if not sep or not name or not url:
            raise InputError("--target wants NAME=URL, got %r" % spec)
        if name in names:
            raise InputError("--target name %s given twice" % name)
        names.add(name)
        targets.append((name, url))
    if not targets:
        raise InputError("give at least one --target NAME=URL")
    return targets


def parse_levels(text):
    try:
        levels = sorted(set(int(x) for x in text.split(",") if x.strip()))
    except ValueError:
        raise InputError("--concurrency wants integers separated by commas, got %r" % text)
    if not levels or levels[0] < 1:
        raise InputError("--concurrency wants levels of 1 or more, got %r" % text)
    return levels


def _sizes(args, host=None):
    """(model, hardware) of --sizes, else of ``host``; (None, None) with --no-roofline."""
    if args.no_roofline:
        return None, None
    try:
        return size_figures(args.sizes, host)
    except InputError as e:
        raise InputError("%s (or --no-roofline)" % e)


def size_figures(files=None, host=None):
    """(model, hardware) the roofline takes: of the YAML ``files``, else of ``host`` (a planner
    Host), else the production inventory's (sizes.default); InputError on unusable figures."""
    try:
        model, hardware = (sizes.load_sizes(files) if files else
                           sizes.of_host(host) if host is not None else sizes.default())
        capacity.roofline(model, hardware, 0)  # the figures the roofline needs are there
    except ValueError as e:  # CapacityError and PlanError are ValueErrors
        raise InputError("size figures: %s" % e)
    return model, hardware


def _add_sizes_args(p):
    p.add_argument("--sizes", nargs="+", metavar="FILE",
                   help="YAML files with sglang_model_size / sglang_hardware (or model / hardware), "
                        "later files override earlier ones (default: the host's with --plan, else the "
                        "production inventory's server, as its plays see them)")
    p.add_argument("--no-roofline", action="store_true", help="no roofline column")


def add_parser(sub, plan_commands=None):
    """The compare and compare-report commands; ``plan_commands``: the (compare, report) functions
    of their --plan mode (bench/compare_plan.py; bench/cli.py passes them)."""
    p = sub.add_parser("compare", help="benchmark several profiles (one server each) at several "
                                       "concurrency levels; who leads, where they cross")
    p.add_argument("--target", action="append", metavar="NAME=URL", required=True,
                   help="a profile's name and its server's base URL (repeat, in display order)")
    p.add_argument("--plan", action="store_true",
                   help="run the gate plan's cases (as bench gate resolves it) against each target "
                        "instead of a concurrency sweep; NAME is a profile of sglang_profiles")
    p.add_argument("--vars", metavar="FILE", action="append",
                   help="with --plan: group_vars/host_vars file or directory over the role defaults "
                        "(repeatable, later wins; default: the production group_vars)")
    common.add_inventory_args(p, "with --plan and -i: the inventory host whose variables give the plan")
    p.add_argument("--current", metavar="NAME",
                   help="with --plan: the target the host runs now (the answer gives the gain over it)")
    p.add_argument("--context-tokens", metavar="N,N,...",
                   help="with --plan: the context depths that replace the plan's long-context case "
                        "(default 1024,8192,32768, as playbooks/compare.yml; '' the plan as it is)")
    p.add_argument("--concurrency", help="levels, e.g. 1,4,16 (default)")
    p.add_argument("--requests", type=int,
                   help="measured requests per point, at least 2 x C (default %d)"
                        % config.DEFAULTS["requests"])
    p.add_argument("--max-tokens", type=int, help="default %d" % config.DEFAULTS["max_tokens"])
    p.add_argument("--warmup", type=int,
                   help="warmup requests before every point (default %d)" % config.DEFAULTS["warmup"])
    p.add_argument("--warmup-max-tokens", type=int,
                   help="default %d" % config.DEFAULTS["warmup_max_tokens"])
    p.add_argument("--api", choices=sorted(config.APIS))
    p.add_argument("--model", help="model name (default: the first one each server lists)")
    p.add_argument("--api-key", default=os.environ.get("SGLANG_API_KEY"),
                   help="API key for every target (default: $SGLANG_API_KEY; prefer the variable)")
    p.add_argument("--out", default=str(COMPARE_OUT), help="report directory (default %s)"
                                                           % COMPARE_OUT)
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    _add_sizes_args(p)
    p.set_defaults(func=cmd_compare, plan_commands=plan_commands)

    r = sub.add_parser("compare-report", help="the compare reports from a JSON list of rows "
                                              "(e.g. written by a playbook)")
    r.add_argument("rows", metavar="ROWS_JSON", help="a JSON list of rows as sweep returns them "
                                                     "(or a compare.json)")
    r.add_argument("--out", required=True, help="report directory")
    r.add_argument("--plan", action="store_true",
                   help="ROWS_JSON is a list of {profile, url, result, error}, one gate-plan result "
                        "per profile (playbooks/compare.yml); the report opens with the answer")
    r.add_argument("--vars", metavar="FILE", action="append",
                   help="with --plan: the vars the profiles and the plan come from (as bench gate)")
    r.add_argument("--inputs", metavar="FILE",
                   help="with --plan: the host's checked role inputs and the plan the play measured "
                        "(compare_plan), as playbooks/compare.yml writes them, instead of -i and --vars")
    common.add_inventory_args(r, "with --plan and -i: the inventory host whose variables give the plan")
    r.add_argument("--current", metavar="NAME", help="with --plan: the profile the host runs")
    _add_sizes_args(r)
    r.set_defaults(func=cmd_report, plan_commands=plan_commands)


def _need_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("matplotlib is needed for compare.png: run it with the repository's "
                         ".venv/bin/python (make venv)")


def finish(rows, out, model, hardware, name):
    """Analyse the sweep's ``rows``, write the four reports to ``out``, print the table and the
    statements; InputError when nothing was measured or the reports cannot be written."""
    bad = [r for r in rows if r.get("error") is not None]
    if not any(measurable(r) for r in rows):
        first = bad[0] if bad else rows[0] if rows else None
        raise InputError("nothing measurable: %s" % (
            "no rows" if first is None else "%d point(s), none measured; first: %s C=%s: %s"
            % (len(rows), first["profile"], first["concurrency"],
               first.get("error") or "no figures")))
    _need_matplotlib()
    try:
        summary = analyse(rows, model, hardware)
    except ValueError as e:
        raise InputError(str(e))
    try:
        paths = write_reports(rows, summary, out)
    except OSError as e:
        raise InputError("cannot write the reports to %s: %s" % (out, e.strerror or e))
    print(markdown_table(rows))
    print()
    print("\n".join("- " + s for s in summary["statements"]))
    for r in bad:
        sys.stderr.write("bench %s: warning: %s at C=%d not measured: %s\n"
                         % (name, r["profile"], r["concurrency"], r["error"]))
    sys.stderr.write("bench %s: wrote %s\n" % (name, ", ".join(str(p) for p in paths)))
    return EXIT_OK


SWEEP_DEFAULTS = {"concurrency": "1,4,16", "requests": config.DEFAULTS["requests"],
                  "max_tokens": config.DEFAULTS["max_tokens"], "warmup": config.DEFAULTS["warmup"],
                  "warmup_max_tokens": config.DEFAULTS["warmup_max_tokens"], "api": config.DEFAULTS["api"]}


def cmd_compare(args):
    if args.plan:
        return args.plan_commands[0](args)
    for key, value in SWEEP_DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    try:
        if args.vars or args.current or args.context_tokens is not None:
            raise InputError("--vars, --current and --context-tokens are for --plan")
        if args.inventory:
            raise InputError("-i INVENTORY (the host's variables) is for --plan")
        targets = parse_targets(args.target)
        levels = parse_levels(args.concurrency)
        model, hardware = _sizes(args)  # before measuring: fail fast on bad size files
        _need_matplotlib()
        options = {"api_key": args.api_key, "model": args.model, "api": args.api,
                   "requests": args.requests, "max_tokens": args.max_tokens,
                   "warmup": args.warmup, "warmup_max_tokens": args.warmup_max_tokens}
        for name, url in targets:
            try:
                config.validate(dict(options, url=url, concurrency=levels[-1],
                                     requests=requests_at(levels[-1], args.requests)))
            except ConfigError as e:
                raise InputError("invalid %s: %s" % (
                    "URL for target %s" % name if e.option == "url" else
                    "option --%s" % e.option.replace("_", "-"), e.message))

        def progress(message):
            sys.stderr.write("compare: %s\n" % message)
            sys.stderr.flush()

        meter = None if args.quiet else progress_printer(sys.stderr)
        try:
            rows = sweep(targets, levels, options, None if args.quiet else progress, meter)
        finally:
            if meter is not None:
                meter.close()
        return finish(rows, args.out, model, hardware, "compare")
    except InputError as e:
        sys.stderr.write("bench compare: %s\n" % e)
        return EXIT_BAD_INPUT


def _number(value, where):
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InputError("%s: expected a number, got %r" % (where, value))
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError("%s: expected a number, got %r" % (where, value))
    if math.isnan(v) or math.isinf(v):
        raise InputError("%s: expected a finite number, got %r" % (where, value))
    return v


def _int(value, where, minimum=0, optional=True):
    v = _number(value, where)
    if v is None:
        if optional:
            return None
        raise InputError("%s is required" % where)
    if v != int(v) or v < minimum:
        raise InputError("%s: expected an integer >= %d, got %r" % (where, minimum, value))
    return int(v)


def load_json_list(path, key="rows"):
    """The non-empty JSON list in ``path`` (or its ``key`` member), or InputError saying why not."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError("no such file %s" % path)
    except (OSError, UnicodeDecodeError) as e:
        raise InputError("cannot read %s: %s" % (path, e))
    except ValueError as e:
        raise InputError("%s is not JSON: %s" % (path, e))
    if isinstance(data, dict) and isinstance(data.get(key), list):
        data = data[key]
    if not isinstance(data, list) or not data:
        raise InputError("%s: expected a non-empty JSON list of %s" % (path, key))
    return data


def load_rows(path):
    """Rows from a JSON file (a list of rows, or a compare.json), checked and normalised."""
    data = load_json_list(path)
    rows = []
    for i, raw in enumerate(data, 1):
        where = "%s row %d" % (path, i)
        if not isinstance(raw, dict):
            raise InputError("%s: expected an object, got %s" % (where, type(raw).__name__))
        if not isinstance(raw.get("profile"), str) or not raw["profile"].strip():
            raise InputError("%s: profile is missing" % where)
        row = dict.fromkeys(comparison.ROW_KEYS)
        row["profile"] = raw["profile"].strip()
        row["url"] = raw.get("url")
        row["concurrency"] = _int(raw.get("concurrency"), where + ": concurrency", 1, False)
        row["requests"] = _int(raw.get("requests"), where + ": requests")
        row["errors"] = _int(raw.get("errors"), where + ": errors")
        row["spec_steps"] = _int(raw.get("spec_steps"), where + ": spec_steps") or 0
        for key in NUMERIC_KEYS:
            row[key] = _number(raw.get(key), "%s: %s" % (where, key))
        pos = raw.get("accept_by_position")
        if pos not in (None, "") and (not isinstance(pos, list) or any(
                _number(v, where) is None or not 0 <= v <= 1 for v in pos)):
            raise InputError("%s: accept_by_position must be a list of shares from 0 to 1, got %r"
                             % (where, pos))
        row["accept_by_position"] = pos or None
        err = raw.get("error")
        row["error"] = None if err in (None, "", False) else str(err)
        held = raw.get("slowdowns") or []
        if not isinstance(held, list) or not all(isinstance(h, str) for h in held):
            raise InputError("%s: slowdowns must be a list of sentences, got %r" % (where, held))
        row["slowdowns"] = held
        rows.append(row)
    return rows


def cmd_report(args):
    if args.plan:
        return args.plan_commands[1](args)
    try:
        rows = load_rows(args.rows)
        model, hardware = _sizes(args)
        return finish(rows, args.out, model, hardware, "compare-report")
    except InputError as e:
        sys.stderr.write("bench compare-report: %s\n" % e)
        return EXIT_BAD_INPUT
