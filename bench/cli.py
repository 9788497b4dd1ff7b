"""The human side of the measurement engine.

    python -m bench run --url URL [--api-key K] [--model M] [--concurrency C] [--requests N]
        [--warmup W] [--max-tokens T] [--min-tok-s X] [--min-accept-len Y] [--json FILE]

Exit status: 0 passed (or no thresholds), 1 a threshold failed, 2 could not measure (bad option,
unreachable, auth, all requests failed), each with a one-line reason on stderr.

The engine is the one in plugins/module_utils/sglang_perf (the Ansible module ships the same code
to the target host); this file only parses arguments, prints and writes files.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from pathlib import Path

from sglang_perf.plan import capacity
from sglang_perf.measure import config, engine
from sglang_perf.record import history
from sglang_perf.judge import verdict
from sglang_perf.measure.client import ConfigError, MeasureError

from bench import common, sizes
from bench.common import EXIT_FAILED, EXIT_PASSED, EXIT_UNMEASURED, progress_printer
from bench.paths import RUNS_DIR


def _fmt(value, spec=".1f"):
    return "-" if value is None else format(value, spec)


def table(result):
    """The readable end-of-run table."""
    d, t, i = result["decode_tok_s"], result["ttft_s"], result["itl_ms"]
    iv = result.get("intervals") or {}
    srv = result.get("server") or {}
    spec = srv.get("speculative_algorithm")
    drafts = ("num_speculative_tokens=%s" % srv["num_speculative_tokens"] if "num_speculative_tokens" in srv
              else "draft=%s" % srv.get("speculative_num_draft_tokens"))
    rows = [
        ("server", "%s %s (%s)" % (srv.get("kind"), srv.get("version") or "",
                                   "%s steps=%s %s" % (spec, srv.get("speculative_num_steps"), drafts)
                                   if spec else "no speculation")),
        ("model / api", "%s / %s" % (result["model"], result["api"])),
        ("requests", "%d measured at C=%d, %d warmup, %d tokens each"
         % (result["requests"], result["concurrency"], result["warmup"], result["max_tokens"])),
        ("prompt tokens", "median %s (the server's count; %s)" % (
            _fmt(result["prompt_tokens"]["median"], ".0f"),
            "target %d" % result["prompt_tokens"]["target"] if result["prompt_tokens"]["target"]
            else result["prompts"] + " prompts")),
        ("decode tok/s", "median %s  min %s  max %s  spread %s%%  (n=%d)"
         % (verdict.fmt_interval(iv.get("decode_tok_s")), _fmt(d["min"]), _fmt(d["max"]),
            _fmt(d["spread_pct"]), d["n"])),
        ("accept length", verdict.fmt_interval(iv.get("accept_len"), ".2f") + (
            "  by prompt: " + ", ".join("%s %.2f" % kv for kv in result["accept_len_by_prompt"].items())
            if len(result["accept_len_by_prompt"]) > 1 else "")),
    ]
    if result.get("engine_accept_len") is not None:
        rows.append(("", "= %s; vLLM's own 1 + accepted / drafts: %.2f"
                     % (verdict.CONVENTION_SHORT, result["engine_accept_len"])))
    if result.get("accept_by_position"):
        rows.append(("accepted at draft pos", "  ".join(
            "%d: %.0f%%" % (k + 1, p * 100) for k, p in enumerate(result["accept_by_position"]))))
    rows += [
        ("aggregate tok/s", "%s at C=%d (%d tokens in %.1fs)"
         % (verdict.fmt_interval(iv.get("aggregate_tok_s")), result["concurrency"],
            result["completion_tokens"], result["wall_s"])),
        ("TTFT s", "p50 %s  p90 %s  p99 %s" % (_fmt(t["p50"], ".3f"), _fmt(t["p90"], ".3f"),
                                              _fmt(t["p99"], ".3f"))),
        ("ITL ms", "p50 %s  p90 %s  p99 %s" % (_fmt(i["p50"]), _fmt(i["p90"]), _fmt(i["p99"]))),
        ("errors", "%d %s" % (result["errors"], result["error_kinds"] or "")),
    ]
    m = result.get("metrics")
    if m:
        rows.append(("/metrics window", "%s tokens, %s verify calls, accept length %s, %s"
                     % (_fmt(m["generation_tokens"], ".0f"), _fmt(m["verify_calls"], ".0f"),
                        _fmt(m["accept_len"], ".2f"),
                        "matches the client" if m["matches_client"] else (m["note"] or ""))))
        if m.get("engine_accept_len") is not None:
            rows.append(("", "vLLM's 1 + accepted / drafts %s, acceptance rate %s, by position %s" % (
                _fmt(m["engine_accept_len"], ".2f"), _fmt(m["acceptance_rate"], ".2f"),
                "/".join("%.0f%%" % (100 * p) for p in m["by_position"] or []) or "-")))
    for key, why in sorted((srv.get("not_exposed") or {}).items()):
        rows.append(("not exposed", "%s: %s" % (key, why)))
    if srv.get("cumulative_accept_len") is not None:
        rows.append(("server cumulative AL", "%.2f (since start, warmup included; not used)"
                     % srv["cumulative_accept_len"]))
    r = result.get("roofline")
    if r:
        rows.append(("roofline", capacity.roofline_line(r)))
        if r["note"]:
            rows.append(("", r["note"]))
    g = result.get("regression")
    if g:
        b = g["baseline"]
        rows.append(("vs last-known-good", "decode %s (was %s), accept length %s (was %s)%s" % (
            _fmt(g["decode_tok_s_pct"], "+.1f") + "%", _fmt(b.get("decode_tok_s")),
            _fmt(g["accept_len_pct"], "+.1f") + "%", _fmt(b.get("accept_len"), ".2f"),
            "; %s run of %s" % (b["time"], b.get("profile")) if b.get("time") else "")))
    for note in result["notes"]:
        rows.append(("note", note))
    for f in result.get("failures", []):
        rows.append(("FAILED", f["message"]))
    for f in result.get("inconclusive", []):
        if f not in result.get("failures", []):
            rows.append(("INCONCLUSIVE", f["message"]))
    seq = result.get("sequential") or {}
    if iv.get("level"):
        rows.append(("intervals", "%g%%; decode and TTFT: %s; accept length and aggregate: %s"
                     % (100 * iv["level"], engine.stats.MEDIAN_METHOD, engine.stats.RATIO_METHOD)))
    if seq:
        rows.append(("sequential", "%d measured (%d first, at most %d): %s" % (
            seq["measured"], seq["min_requests"], seq["max_requests"],
            "decided" if seq["stopped"] == "decided" else "reached max_requests")))
    rows.append(("gate", {"pass": "PASSED", "fail": "FAILED"}.get(result.get("verdict"), "INCONCLUSIVE")
                 + ("" if result["passed"] or result.get("verdict") != "inconclusive" else " (failed)")))
    width = max(len(k) for k, _ in rows)
    return "\n".join("%-*s  %s" % (width, k, v) for k, v in rows)


@functools.cache
def default_case():
    """What `bench run` measures by default: the role's coding case (bench.gate.role_case), the
    same requests, sequential bound, tokens and prompts the gate's first case runs; the engine's
    fixed-sample defaults only where Ansible is not installed (a bare Python)."""
    from bench import gate
    try:
        case = gate.role_case("coding")
    except ImportError:
        case = {}
    out = {k: case.get(k, config.DEFAULTS.get(k)) for k in ("concurrency", "requests", "max_tokens")}
    out["max_requests"] = case.get("max_requests") or out["requests"]
    out["prompts"] = case.get("prompts", "coding")
    return out


def add_run_args(p):
    p.add_argument("--url", help="base URL, e.g. http://127.0.0.1:30000 (with -i: the host's own)")
    p.add_argument("--api-key", default=os.environ.get("SGLANG_API_KEY"),
                   help="API key (default: $SGLANG_API_KEY; prefer the variable, argv is public)")
    p.add_argument("--model", help="model name (default: the first one at /v1/models)")
    p.add_argument("--api", choices=sorted(config.APIS), default=config.DEFAULTS["api"])
    p.add_argument("--concurrency", type=int, help="requests at once (default: the role's coding case's)")
    p.add_argument("--requests", type=int,
                   help="measured requests before the first verdict (default: the role's coding case's; "
                        "given alone: a fixed sample)")
    p.add_argument("--max-requests", type=int,
                   help="then one more at a time, up to this many, while a threshold is inside its "
                        "interval (default: the coding case's with its --requests, else --requests)")
    p.add_argument("--confidence", type=float, default=config.DEFAULTS["confidence"],
                   help="level of the intervals (%(default)s)")
    p.add_argument("--inconclusive", choices=config.INCONCLUSIVE, default=config.DEFAULTS["inconclusive"],
                   help="what a threshold still inside its interval at --max-requests does (%(default)s)")
    p.add_argument("--warmup", type=int, default=config.DEFAULTS["warmup"])
    p.add_argument("--max-tokens", type=int, help="tokens each request decodes (default: the coding case's)")
    p.add_argument("--warmup-max-tokens", type=int, default=config.DEFAULTS["warmup_max_tokens"])
    p.add_argument("--temperature", type=float, default=config.DEFAULTS["temperature"])
    p.add_argument("--thinking", action="store_true",
                   help="chat requests with the template's thinking on (default: off, stated in each)")
    p.add_argument("--prompts", choices=engine.promptset.PROMPT_SOURCES,
                   help="coding prompts, or a long_context repository slice of --prompt-tokens (default: "
                        "the coding case's)")
    p.add_argument("--prompt-tokens", type=int, help="prompt length of --prompts long_context")
    p.add_argument("--max-ttft-s", type=float, help="allowed median time to first token")
    for name in ("connect", "first-token", "stall", "run"):
        key = name.replace("-", "_") + "_timeout"
        p.add_argument("--%s-timeout" % name, type=float, default=config.DEFAULTS[key],
                       help="seconds (default %s)" % config.DEFAULTS[key])
    p.add_argument("--metrics", choices=config.METRICS_MODES, default="auto")
    p.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    p.add_argument("--min-tok-s", type=float, help="required per-request median decode tok/s")
    p.add_argument("--min-accept-len", type=float, help="required accept length")
    p.add_argument("--min-aggregate-tok-s", type=float, help="required aggregate tok/s")
    p.add_argument("--max-errors", type=int, default=0, help="failed requests tolerated (0)")
    p.add_argument("--min-facts", type=int,
                   help="--prompts long_context: of the facts planted in each prompt, how many each "
                        "reply must state (median; docs/quality.md)")
    p.add_argument("--sizes", metavar="FILE", action="append",
                   help="YAML with sglang_model_size / sglang_hardware for the roofline (repeatable, "
                        "later files win; default: the -i host's, else the production inventory's "
                        "server, as its plays see them)")
    p.add_argument("--no-roofline", action="store_true", help="do not compute the roofline")
    p.add_argument("--baseline-history", metavar="FILE",
                   help="a gate history (e.g. history/HOST.jsonl): compare with the newest passing "
                        "run of --profile")
    p.add_argument("--profile", help="the profile the server runs (for --baseline-history)")
    p.add_argument("--max-regression-pct", type=float,
                   help="fail when decode tok/s or accept length dropped more than this from the baseline")
    p.add_argument("--json", metavar="FILE", help="write the full result as JSON")
    p.add_argument("--raw", metavar="FILE",
                   help="every request's record as JSON lines, written after each batch and before any "
                        "figure is computed (default: out/runs/run-<UTC time>-<pid>.jsonl)")
    p.add_argument("--quiet", action="store_true", help="no progress (bar or lines) on stderr")
    common.add_inventory_args(p, "with -i: the inventory host to measure (its URL, API key and size "
                               "figures for the roofline; --url, --api-key and --sizes override them)")
    p.add_argument("--vars", metavar="FILE", action="append",
                   help="with -i: a vars file on top of the host's variables (repeatable, as -e @FILE)")


RUN_ONLY = ("validate_certs", "model_size", "hardware", "baseline", "chars_per_token", "case")


def host_sizes(args):
    """(model, hardware) for the roofline: --sizes files, else the -i host's (read by the planner,
    bench/gate.py host_of, which sets args.url and args.api_key when not given), else the
    production inventory's server; None with --no-roofline, or under a stdlib-only Python that
    cannot read an inventory (with a note)."""
    if not args.inventory and (args.host or args.vars or args.vault_password_file):
        raise ValueError("--host, --vars and --vault-password-file read an inventory: give -i INVENTORY")
    host = None
    if args.inventory:
        from bench import gate
        host = gate.host_of(args)
        gate.flat(host.values())  # its profiles and thresholds resolve
    if args.no_roofline:
        return None
    if args.sizes:
        return sizes.load_sizes(args.sizes)
    if host is not None:
        return sizes.of_host(host)
    try:
        return sizes.default()
    except ImportError:  # a stdlib-only Python (the engine runs anywhere): no planner
        sys.stderr.write("bench: Ansible is not installed (the repository's venv has it): no "
                         "roofline (--sizes FILE gives one, --no-roofline silences this)\n")
        return None


def options_from(args):
    """Engine options from the arguments; ValueError names a bad sizes or history file, or a host
    (-i --host) whose variables do not resolve."""
    host = host_sizes(args)
    if not args.url:
        raise ValueError("no server: give --url URL, or -i INVENTORY --host NAME for the host's own")
    case = default_case()
    for k in ("concurrency", "max_tokens", "prompts"):
        if getattr(args, k) is None:
            setattr(args, k, case[k])
    if args.requests is None:  # the role's coding case: its first requests, then up to its most
        args.requests = case["requests"]
        if args.max_requests is None:
            args.max_requests = case["max_requests"]
    opts = {k: getattr(args, k) for k in config.DEFAULTS if k not in RUN_ONLY and k not in config.CALLER_ONLY}
    opts["validate_certs"] = not args.insecure
    if host:
        opts["model_size"], opts["hardware"] = host
    if args.baseline_history:
        if not args.profile:
            raise ValueError("--baseline-history needs --profile (whose last passing run is the baseline)")
        try:
            rec = history.last_passing(history.read(args.baseline_history), args.profile)
        except OSError as e:
            raise ValueError("cannot read --baseline-history %s: %s" % (args.baseline_history, e))
        if rec is None:
            sys.stderr.write("bench: no passing run of %s in %s: no baseline\n"
                             % (args.profile, args.baseline_history))
        else:
            opts["baseline"] = history.baseline(rec)
    return opts


class RawRecords:
    """bench run's raw sink: every request's record so far, replaced atomically at ``path``."""

    def __init__(self, path):
        self.path, self.count = Path(path), 0

    def __call__(self, records):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        common.replace_text(self.path, "".join(json.dumps(rec, sort_keys=True) + "\n" for rec in records))
        self.count = len(records)


def raw_path(args):
    if args.raw:
        return Path(args.raw)
    import datetime
    stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    return RUNS_DIR / ("run-%s-%d.jsonl" % (stamp, os.getpid()))


def cmd_run(args):
    try:
        opts = options_from(args)
    except ValueError as e:
        sys.stderr.write("bench: %s\n" % e)
        return EXIT_UNMEASURED
    raw = RawRecords(raw_path(args))
    try:
        return _run(args, opts, raw)
    except Exception as e:  # the figures failed, not the measurement: say where it is
        if not raw.count:
            raise
        sys.stderr.write("bench: the figures could not be computed (%s: %s); the %d requests' raw "
                         "records are in %s\n" % (type(e).__name__, e, raw.count, raw.path))
        return EXIT_UNMEASURED


def _run(args, opts, raw):
    try:
        if not args.quiet:
            sys.stderr.write("benchmarking %s: %d warmup + %d requests at C=%d, %d tokens each%s\n"
                             % (args.url, args.warmup, args.requests, args.concurrency, args.max_tokens,
                                ", then up to %d" % args.max_requests
                                if args.max_requests and args.max_requests > args.requests else ""))
        progress = None if args.quiet else progress_printer(sys.stderr)
        try:
            result = engine.run(opts, progress=progress, raw=raw, judge=verdict.judge_case)
        finally:
            if progress is not None:
                progress.close()
    except ConfigError as e:
        sys.stderr.write("bench: invalid option --%s: %s\n" % (e.option.replace("_", "-"),
                                                               e.message))
        return EXIT_UNMEASURED
    except MeasureError as e:
        sys.stderr.write("bench: could not measure %s: %s\n" % (args.url, e))
        return EXIT_UNMEASURED
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(table(result))
    if not args.quiet:
        sys.stderr.write("bench: %d requests' raw records in %s\n" % (raw.count, raw.path))
    if result["passed"]:
        return EXIT_PASSED
    unmeasurable = [f for f in result["failures"] if f["measured"] is None]
    sys.stderr.write("bench: %s\n" % verdict.case_failure_message(result))
    return EXIT_UNMEASURED if unmeasurable else EXIT_FAILED


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="benchmark one server and gate on thresholds")
    add_run_args(p_run)
    p_run.set_defaults(func=cmd_run)
    from bench import selfcheck
    selfcheck.add_parser(sub)
    from bench import compare, compare_plan, gate, history, tune
    gate.add_parser(sub)
    tune.add_parser(sub)
    gate.add_calibrate_parser(sub)
    history.add_parser(sub)
    # compare --plan and compare-report --plan are compare_plan's (which builds on compare)
    compare.add_parser(sub, plan_commands=(compare_plan.cmd_compare_plan, compare_plan.cmd_report_plan))
    args = parser.parse_args(argv)
    return args.func(args)
