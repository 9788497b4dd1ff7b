"""``python -m bench compare --plan``: the gate plan against several settings, and the answer.

    python -m bench compare --plan [-i INVENTORY --host NAME] [--vars FILE ...] --target NAME=URL
        [--target NAME=URL ...] [--current NAME] [--api-key K] [--model M] [--out DIR]
        [--sizes FILE ...] [--no-roofline]

The plan is the one ``bench gate`` runs (the planner's, bench/gate.py host_of: with -i INVENTORY
--host NAME the host's variables as Ansible sees them, else the role defaults under the --vars
files; by default the production group_vars), run through the same code (gate.run_plan,
plan.run_cases) against each target without thresholds: this measures, it does not gate. NAME is a
profile of ``sglang_profiles``; its engine (the profile's ``engine``, else ``sglang_engine``, else
sglang) and its speculative steps come from the profile. One row per (target, case).

The report opens with the answer (bench/compare_answer.py): the winner, decided like the gate on
the cases the gate judges (the gate plan's, not report_only) with the gate's intervals and each
profile's thresholds (summary["winner"] = {"profile", "engine", "decided_by", "reason", "voted",
"informed", "excluded", ...} in compare.json), which cases voted and which only informed (the
context depths, report-only cases), per case the best setting, per engine whether one more MTP
step pays, each setting's share of the roofline; then the table, compare.csv, compare.json and
compare.png (one bar group per case).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NamedTuple

from bench import common, compare, compare_answer, gate
from bench.common import PlanError
from sglang_perf.plan import comparison, deploy as deploy_plan, inherit, gate as plan, profile
from sglang_perf import engines
from sglang_perf.record import fingerprint
from sglang_perf.judge import quality, setting
from sglang_perf.measure.client import ConfigError, MeasureError

PLAN_ROW_KEYS = ("profile", "engine", "spec_steps", "case", "url", "concurrency", "requests",
                 "max_tokens", "prompt_tokens", "decode_tok_s_median", "decode_tok_s_min",
                 "decode_tok_s_max", "aggregate_tok_s", "accept_len", "accept_by_position",
                 "ttft_p50_s", "errors", "error", "context_tokens", "thinking", "drafter", "report_only",
                 "judged", "gate_problem", "thresholds", "intervals", "setting", "slowdowns",
                 # a quality check's row (docs/quality.md): the check, its line, what it found
                 "check", "quality", "accuracy", "quality_failures")
# the CSV's columns: the flat ones (the intervals and thresholds are in compare.json)
CSV_KEYS = tuple(k for k in PLAN_ROW_KEYS if k not in ("thresholds", "intervals", "setting", "slowdowns"))
SWEEP_ONLY = ("concurrency", "requests", "max_tokens", "warmup", "warmup_max_tokens", "api")


class Facts(NamedTuple):
    """What a compared profile is: its engine, its speculative steps (a drafter's: the tokens it
    drafts per verify), its drafter's algorithm (None for MTP or none) and its setting
    (judge/setting.py: what it costs in a tie, the tuner's order)."""
    engine: str
    steps: int
    drafter: str | None
    setting: tuple


def profile_facts(v, name):
    """The Facts of profile ``name`` in the vars ``v`` (its bases resolved, the host's own profiles
    over the inventory's); InputError if unknown. A profile that loads a drafter of its own
    (draft_model: DFLASH, EAGLE3) has the drafter's algorithm as ``drafter`` and, as its steps, the
    tokens it drafts per verify (its accept ceiling less one: a block of 16 drafts 15); MTP depths
    have their steps and no drafter."""
    profiles, _, problems = inherit.of_vars(v, model_dir=False)
    if name not in profiles:
        raise compare.InputError("--target %s: %s" % (name, "; ".join(problems) if problems else
                                                       "no such profile in sglang_profiles (known: %s)"
                                                       % ", ".join(profiles)))
    p = profiles[name]
    key = setting.of_profile(p, v.get("sglang_engine"), v.get("sglang_memory_default_fraction"))
    if p.get("speculative_algorithm") and isinstance(p.get("draft_model"), dict):
        return Facts(key.engine, profile.accept_ceiling(p, key.engine) - 1,
                     str(p["speculative_algorithm"]).upper(), key)
    steps = int(p.get("speculative_num_steps") or 0) if p.get("speculative_algorithm") else 0
    return Facts(key.engine, steps, None, key)


def measured_plan(v):
    """The plan the comparison measures: ``compare_plan`` (the gate plan at the context depths,
    plan.context_plan) when ``v`` has one, else the gate plan itself."""
    return v.get("compare_plan") or v.get("sglang_gate_plan") or {}


def measure_only(v):
    """The measured plan's resolved cases with no thresholds (comparison.measure_only): the plan
    measures, never fails (the gate's verdict is the answer's, on the gate's own thresholds)."""
    return comparison.measure_only(measured_plan(v), v.get("sglang_gate_confidence", 0.95))


def gate_view(v, name):
    """What the gate judges of profile ``name``, as plan.resolve resolves the gate plan of ``v``
    (its thresholds, calibrated over them, at its confidence): ({judged case: thresholds}, None),
    or ({judged case: None}, why the gate cannot judge the profile)."""
    gate_plan, level = v.get("sglang_gate_plan") or {}, v.get("sglang_gate_confidence", 0.95)
    thresholds = inherit.with_host(None, v.get("sglang_gate_thresholds"), None,
                                   v.get("sglang_gate_host_thresholds"))[1]
    calibrated = v.get("sglang_gate_calibrated")
    try:
        cases = plan.resolve(gate_plan, thresholds, name, calibrated, confidence=level)
        return {c["case"]: c["thresholds"] for c in cases if not c["report_only"]}, None
    except ConfigError as e:
        why = e.message
    try:
        cases = plan.resolve(gate_plan, {name: {c: {} for c in gate_plan}}, name)
    except ConfigError:
        return {}, why
    return {c["case"]: None for c in cases if not c["report_only"]}, why


def not_run(v):
    """The gate's judged cases the measured plan does not have (replaced by the context depths)."""
    judged, _ = gate_view(dict(v, sglang_gate_thresholds={}), "")
    return [c for c in judged if c not in measured_plan(v)]


def _plan_row(name, facts, url, case, result=None, error=None, gate=({}, None)):
    level, reqs = case.get("concurrency"), case.get("requests")
    row = comparison.row(name, url, level, reqs, result, error)
    judged, problem = gate
    row.update(engine=facts.engine, spec_steps=facts.steps, drafter=facts.drafter,
               setting=list(facts.setting), thinking=case.get("thinking") is True, case=case["case"],
               max_tokens=case.get("max_tokens"),
               prompt_tokens=((result or {}).get("prompt_tokens") or {}).get("median"),
               # the context depth a long-context case stands for (the answer's by-context line)
               context_tokens=case.get("prompt_tokens") if case.get("prompts") == "long_context" else None,
               report_only=case.get("report_only") is True, judged=case["case"] in judged,
               thresholds=judged.get(case["case"]), gate_problem=problem if case["case"] in judged else None,
               intervals=(result or {}).get("intervals"))
    if case.get("check"):
        row.update(check=case["check"], quality=quality.line(result) if result else None,
                   accuracy=(result or {}).get("accuracy"),
                   quality_failures=[f["message"] for f in (result or {}).get("failures") or []])
    return {k: row.get(k) for k in PLAN_ROW_KEYS}


def plan_rows(name, facts, url, cases, result, error=None, gate=({}, None)):
    """The rows of one target (``facts``: profile_facts' of its profile): a row per case of
    ``cases`` from the plan ``result`` (gate.run_plan's, or the sglang_bench module's), or ``error``
    in every row when there is no result; ``gate``: gate_view's of the target's profile."""
    by_case = {r["case"]: r for r in (result or {}).get("cases") or []}
    return [_plan_row(name, facts, url, c, by_case.get(c["case"]),
                      None if c["case"] in by_case else error if result is None else "not in the plan result",
                      gate)
            for c in cases]


def rows_from_results(path, v):
    """Plan rows from a JSON file of the tuner's results (rows_of)."""
    return rows_of(compare.load_json_list(path), v, path)


def rows_of(results, v, where="the results"):
    """Plan rows from a list of {"profile", "url", "result", "error", "slowdowns"} (the tuner's
    over a compared list, bench tune --cases: one plan result per profile, and what held its GPUs'
    clocks down while measured), the cases from ``v``'s measured plan."""
    cases = [dict(c, case=n) for n, c in measured_plan(v).items()]
    rows = []
    for i, item in enumerate(results):
        if not isinstance(item, dict) or not isinstance(item.get("profile"), str):
            raise compare.InputError("%s: entry %d is not {profile, url, result, error}" % (where, i))
        facts = profile_facts(v, item["profile"])
        result = item.get("result") if isinstance(item.get("result"), dict) else None
        held = [str(x) for x in item.get("slowdowns") or []]
        rows += [dict(r, slowdowns=held) for r in plan_rows(
            item["profile"], facts, item.get("url"), cases, result,
            item.get("error") or ("no result" if result is None else None), gate_view(v, item["profile"]))]
    return rows


def sweep_plan(targets, v, gate_part, api_key=None, model=None, quiet=False, progress=None):
    """The measured plan of ``v`` against each (name, url), measured as the host's plan's gate
    part (``gate_part``: its options and known answers) says: rows in target order, then plan
    order. A target that cannot be measured at all gets an error row per case."""
    cases = [dict(c, case=n) for n, c in measured_plan(v).items()]
    rows = []
    for name, url in targets:
        facts = profile_facts(v, name)
        engine, steps, drafter, _ = facts
        if progress:
            progress("%s (%s, %s) at %s: plan %s ..." % (
                name, engine, "%s, %d drafts" % (drafter, steps) if drafter else "%d steps" % steps, url,
                ", ".join(c["case"] for c in cases)))
        ns = argparse.Namespace(url=url, api_key=api_key, model=model, quiet=quiet)
        error = None
        try:
            settings = v["sglang_profiles"][name]
            result = gate.run_plan(ns, gate_part, measure_only(v), name, deploy_plan.promise_of(settings),
                                   {"profile": name, "profile_sha256": fingerprint.settings_sha256(settings)})
        except ConfigError as e:
            result, error = None, "invalid %s: %s" % (e.option, e.message)
        except MeasureError as e:
            result, error = None, str(e) or e.__class__.__name__
        for row in plan_rows(name, facts, url, cases, result, error, gate_view(v, name)):
            rows.append(row)
            if progress:
                progress("%s %s: %s" % (name, row["case"], compare.describe(row)))
        if result is not None and not result["capacity"]["passed"] and progress:
            progress("%s: %s" % (name, "; ".join(f["message"] for f in result["capacity"]["failures"])))
    return rows


def analyse_plan(rows, model=None, hardware=None, current=None, unrun=()):
    """Per-row roofline (as compare.analyse) and the summary: the answer's keys (winner at the
    top level), "profiles", "plan_cases", "statements" (the rows not measured, roofline problems),
    "slowdowns" ({profile: what held its GPUs' clocks down while it was measured});
    ``unrun``: not_run's."""
    seen, statements = set(), []
    for row in rows:
        key = (row["profile"], row["case"])
        if key in seen:
            raise ValueError("two rows for profile %s in case %s" % key)
        seen.add(key)
        problem = compare.add_roofline(row, model, hardware)
        if problem:
            statements.append("no roofline for %s in %s: %s" % (row["profile"], row["case"], problem))
    for row in rows:
        if row.get("error") is not None:
            statements.append("%s in %s not measured: %s" % (row["profile"], row["case"], row["error"]))
    summary = compare_answer.answer(rows, current, unrun)
    # what held a profile's GPUs down while it was measured: its figures are the clocks', too
    held = {}
    for row in rows:
        if row.get("slowdowns"):
            held.setdefault(row["profile"], row["slowdowns"])
    summary.update(profiles=list(dict.fromkeys(r["profile"] for r in rows)),
                   plan_cases=list(dict.fromkeys(r["case"] for r in rows)), statements=statements,
                   slowdowns=held)
    return summary


def markdown_table(rows):
    head = ("profile", "engine", "steps", "case", "C", "requests", "decode tok/s median (min-max)",
            "aggregate tok/s", "accept length", "accepted by draft position", "TTFT p50 s",
            "roofline ceiling tok/s (share)", "errors", "quality")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lead = [r["profile"], r.get("engine"), r.get("spec_steps"), r["case"], r.get("concurrency"),
                compare._fmt(r.get("requests"), "d")]
        if r.get("error") is not None:
            cells = lead + ["-"] * 6 + ["not measured: " + compare._md(r["error"]), "-"]
        elif r.get("check"):
            said = compare_answer.quality_check(r)
            verdict = "FAILED" if said["failed"] else "passed"
            cells = lead + ["-"] * 6 + [compare._fmt(r.get("errors"), "d"), compare._md(
                "%s: %s" % (verdict, "; ".join(said["failed"]) or r["quality"]))]
        else:
            cells = lead + compare.figure_cells(r) + ["-"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def markdown(rows, summary, created=None):
    out = ["# Settings compared on the gate plan", "",
           "## The answer", ""]
    out += ["- " + compare._md(line) for line in summary["lines"]]
    out += ["", "%s; cases %s; per-request decode = median over a case's requests, aggregate = all "
            "tokens / wall time; a C=1 case is compared on per-request decode, a C>1 case on the "
            "aggregate, each on the gate's interval [lower, upper]." % (
                created or compare._now(), ", ".join(summary["plan_cases"])), "",
            markdown_table(rows), ""]
    if summary.get("slowdowns"):
        out += ["## GPU clocks held down during a measurement", "",
                "A profile's figures are its GPUs' at the clocks they ran: a slowdown (thermal, power "
                "cap, a locked clock) that held them for a share of its measurement makes it slower "
                "than the setting is; measure it again before its figures decide.", ""]
        out += ["- %s: %s" % (p, compare._md("; ".join(held))) for p, held in summary["slowdowns"].items()]
        out.append("")
    if summary["statements"]:
        out += ["## Not measured", ""] + ["- " + compare._md(s) for s in summary["statements"]]
    return "\n".join(out) + "\n"


def plot(rows, summary, path):
    """One panel per case: a bar per setting (the case's metric), labelled with its accept length."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    checks = {r["case"] for r in rows if r.get("check")}
    cases = [c for c in summary["plan_cases"] if c not in checks]  # a quality check has no bar
    fig, axes = plt.subplots(1, len(cases), figsize=(4.5 * len(cases), 4.5), squeeze=False)
    for ax, case in zip(axes[0], cases):
        got = [r for r in rows if r["case"] == case and compare_answer._ok(r)]
        if not got:
            ax.set_title("%s: not measured" % case)
            continue
        metric, key = compare_answer.metric_of(got[0])
        names = [r["profile"] for r in got]
        bars = ax.bar(range(len(got)), [r[key] for r in got],
                      color=["C0" if r.get("engine") in (None, engines.DEFAULT) else "C1" for r in got])
        for b, r in zip(bars, got):
            if r.get("accept_len") is not None:
                ax.annotate("AL %.2f" % r["accept_len"], (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", textcoords="offset points", xytext=(0, 3), fontsize=8)
        ax.set_xticks(range(len(got)))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("%s tok/s" % compare_answer.COMPARED_METRICS[metric][1])
        ax.set_title("%s (C=%s)" % (case, got[0].get("concurrency")))
        ax.set_ylim(0, max(r[key] for r in got) * 1.15)
        ax.grid(alpha=0.3, axis="y")
    w = summary["winner"]
    fig.suptitle("winner: %s (%s)" % (w["profile"], w["engine"]) if w["profile"] else "no winner")
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)


def write_reports(rows, summary, out_dir, created=None):
    """OUT/compare.md, .csv, .json, .png of a plan comparison (compare.write_reports)."""
    return compare.write_reports(rows, summary, out_dir, created, CSV_KEYS, markdown, plot, "plan_cases")


def with_contexts(gate_plan, spec):
    """The plan at the context depths of --context-tokens (plan.context_plan; None: its default,
    '': none)."""
    tokens = None
    if spec is not None:
        try:
            tokens = [int(t) for t in spec.split(",") if t.strip()]
        except ValueError:
            raise compare.InputError("--context-tokens wants token counts such as 1024,8192,32768, got %r"
                                     % spec) from None
    try:
        return plan.context_plan(gate_plan, tokens, names=("--context-tokens", "--context-requests"))
    except ConfigError as e:
        raise compare.InputError(str(e)) from e


def _named(args, host):
    """``host`` where the command named one (-i INVENTORY --host, or --inputs): the roofline
    takes its figures; None for the host of no inventory (sizes' default, the production's)."""
    return host if getattr(args, "inventory", None) or getattr(args, "inputs", None) else None


def cmd_compare_plan(args):
    try:
        given = [k for k in SWEEP_ONLY if getattr(args, k) is not None]
        if given:
            raise compare.InputError("--plan runs the gate plan's cases: %s %s set by the plan (give a "
                                     "--vars file), not on the command line" % (
                                         ", ".join("--" + k.replace("_", "-") for k in given),
                                         "is" if len(given) == 1 else "are"))
        targets = compare.parse_targets(args.target)
        try:
            host = gate.host_of(args)
            v = gate.flat(host.values())
            for name, _url in targets:
                profile_facts(v, name)
            gate_part = gate.plan_of(args, host)["gate"]
        except PlanError as e:
            raise compare.InputError(str(e))
        v = dict(v, compare_plan=with_contexts(v.get("sglang_gate_plan") or {}, args.context_tokens))
        if args.current is not None and args.current not in dict(targets):
            raise compare.InputError("--current %s is not one of the targets (%s)"
                                     % (args.current, ", ".join(n for n, _ in targets)))
        try:
            measure_only(v)
        except ConfigError as e:
            raise compare.InputError(e.message)
        model, hardware = compare._sizes(args, _named(args, host))
        compare._need_matplotlib()

        def progress(message):
            sys.stderr.write("compare: %s\n" % message)
            sys.stderr.flush()

        rows = sweep_plan(targets, v, gate_part, args.api_key, args.model, args.quiet,
                          None if args.quiet else progress)
        return report_rows(rows, args.out, args.current, model, hardware, "bench compare", not_run(v))
    except compare.InputError as e:
        sys.stderr.write("bench compare: %s\n" % e)
        return compare.EXIT_BAD_INPUT


def report_rows(rows, out, current, model, hardware, prog, unrun=()):
    """Analyse ``rows``, write the four reports to ``out``, print the answer and the table."""
    if not any(compare.measurable(r) for r in rows):
        raise compare.InputError("nothing measurable: %d row(s), none measured; first: %s %s: %s"
                                 % (len(rows), rows[0]["profile"], rows[0]["case"], rows[0]["error"]))
    summary = analyse_plan(rows, model, hardware, current, unrun)
    try:
        paths = write_reports(rows, summary, out)
    except OSError as e:
        raise compare.InputError("cannot write the reports to %s: %s" % (out, e.strerror or e))
    print("\n".join("- " + line for line in summary["lines"]))
    print()
    print(markdown_table(rows))
    for s in summary["statements"]:
        sys.stderr.write("%s: warning: %s\n" % (prog, s))
    sys.stderr.write("%s: wrote %s\n" % (prog, ", ".join(str(p) for p in paths)))
    return compare.EXIT_OK


def host_vars(host):
    """The planner Host's values with its profiles resolved (gate.flat) and the measured plan
    (the gate plan at the context depths) compare.yml wrote beside its inputs; InputError naming
    what does not resolve."""
    try:
        v = gate.flat(host.values())
    except PlanError as e:
        raise compare.InputError(str(e))
    v["compare_plan"] = v.get("compare_plan") or host.template("compare_plan")
    return v


def reporter(host, report, cases):
    """What ``bench tune --cases`` writes after measuring a list (playbooks/compare.yml's): the
    comparison's reports from the tuner's results, as ``bench compare-report`` writes them.
    ``report`` (the --cases file's): {"by": "plan", "current": NAME or null} - a row per profile
    and case of the host's measured plan (its compare_plan), judged on the gate's thresholds - or
    {"by": "sweep"} - a row per profile and concurrency level of ``cases``, kept as rows.json
    beside the reports. Returns a function of (results, out_dir) that writes them and prints the
    answer; made before anything is launched, it raises InputError for a report it could not
    write (no measured plan, the host's size figures, matplotlib)."""
    model, hardware = compare.size_figures(host=host)
    compare._need_matplotlib()
    if report["by"] == "sweep":
        def write_sweep(results, out):
            rows = comparison.sweep_rows(results, cases)
            Path(out).mkdir(parents=True, exist_ok=True)
            common.replace_text(Path(out) / "rows.json", json.dumps(rows, indent=2, default=str) + "\n")
            return compare.finish(rows, out, model, hardware, "bench tune")
        return write_sweep
    v = host_vars(host)
    if not isinstance(v.get("compare_plan"), dict) or not v["compare_plan"]:
        raise compare.InputError("a report by the plan needs the measured plan, compare_plan, among the "
                                 "host's inputs (playbooks/compare.yml writes it into --inputs)")
    unrun = not_run(v)

    def write_plan(results, out):
        return report_rows(rows_of(results, v), out, report.get("current"), model, hardware, "bench tune",
                           unrun)
    return write_plan


def cmd_report_plan(args):
    """``bench compare-report --plan RESULTS_JSON``: the plan comparison's reports from the plan
    results a playbook gathered (rows_from_results)."""
    try:
        try:
            host = gate.host_of(args)
        except PlanError as e:
            raise compare.InputError(str(e))
        v = host_vars(host)
        rows = rows_from_results(args.rows, v)
        if args.current is not None and args.current not in {r["profile"] for r in rows}:
            raise compare.InputError("--current %s is not one of the compared profiles" % args.current)
        model, hardware = compare._sizes(args, _named(args, host))
        compare._need_matplotlib()
        return report_rows(rows, args.out, args.current, model, hardware, "bench compare-report", not_run(v))
    except compare.InputError as e:
        sys.stderr.write("bench compare-report: %s\n" % e)
        return compare.EXIT_BAD_INPUT
