"""Benchmark of the benchmark: the engine against the emulator at high speed.

    python -m bench selfcheck [--levels 1,16,64,256] [--max-tokens 512] [--speed-scale 4]

For each concurrency level it starts nothing new: one emulator process (a separate process, as
a real server would be) runs with max-running-requests 256 and no batch slowdown, so every stream
decodes at the configured speed. The engine runs in this process; the table compares the engine's
per-request median decode tok/s and its aggregate with the emulator's own exact counters (matched
by request id), and prints the client's CPU seconds (user + system, all threads).
"""
from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import urllib.request
from pathlib import Path

from bench.launch import EmulatorProcess
from sglang_perf.measure import config, engine
from sglang_perf.measure.stats import percentile


def emulator_args():
    """The 3-step profile with room for 256 running requests (argparse: the last value wins).
    Imported here: bench.profiles reads the role defaults through the planner (Ansible's), which
    the stdlib-only Python the other commands run under does not have."""
    from bench.profiles import MODEL_ARGS, PROFILE_ARGS
    return MODEL_ARGS + PROFILE_ARGS["nextn_3step"] + ["--max-running-requests", "256", "--enable-metrics"]


def add_parser(sub):
    p = sub.add_parser("selfcheck", help="benchmark the engine against the emulator (prints a "
                                         "table: configured vs measured, error %%, client CPU)")
    p.add_argument("--levels", default="1,16,64,256", help="concurrency levels (default 1,16,64,256)")
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--speed-scale", type=float, default=4.0,
                   help="emulator speed multiplier (default 4: ~220 tok/s per stream)")
    p.add_argument("--requests-per-stream", type=int, default=2,
                   help="measured requests = level x this (default 2)")
    p.add_argument("--api", choices=sorted(config.APIS), default="chat")
    p.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    p.set_defaults(func=run)


def _get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def measure(url, level, args):
    requests = level * args.requests_per_stream
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    result = engine.run({"url": url, "api": args.api, "concurrency": level, "requests": requests,
                         "warmup": min(level, 4), "max_tokens": args.max_tokens,
                         "run_timeout": 900})
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    stats = _get(url + "/_emulator/stats")
    truth = {r["rid"]: r for r in stats["requests"] if r.get("rid")}
    mine = [r for r in result["per_request"] if r["phase"] == "measure" and r["decode_tok_s"]]
    server = [truth[r["rid"]] for r in mine if r["rid"] in truth]
    true_median = percentile([s["decode_tok_s"] for s in server], 50)
    t_first = min(s["t_arrival"] for s in server)
    t_last = max(s["t_last_token"] for s in server)
    true_agg = sum(s["completion_tokens"] for s in server) / (t_last - t_first)
    errors_pct = lambda got, want: abs(got - want) / want * 100.0  # noqa: E731
    return {
        "concurrency": level, "requests": requests,
        "configured_tok_s": stats["configured"]["nominal_c1_decode_tok_s"],
        "true_median_tok_s": true_median, "measured_median_tok_s": result["decode_tok_s"]["median"],
        "median_error_pct": errors_pct(result["decode_tok_s"]["median"], true_median),
        "true_aggregate_tok_s": true_agg, "measured_aggregate_tok_s": result["aggregate_tok_s"],
        "aggregate_error_pct": errors_pct(result["aggregate_tok_s"], true_agg),
        "accept_len": result["accept_len"], "errors": result["errors"],
        "client_cpu_s": cpu, "wall_s": result["wall_s"],
        "matched": len(server), "measured": len(mine),
    }


def run(args):
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    rows = []
    with tempfile.TemporaryFile() as log:
        emu = EmulatorProcess(emulator_args(), log, env={
            "SGLEMU_SPEED_SCALE": args.speed_scale, "SGLEMU_BATCH_SLOWDOWN": 0,
            "SGLEMU_WARMUP_REQUESTS": 0, "SGLEMU_PREFILL_TOK_S": 200000,
            # the engine's own limits, not a GPU's: pools that hold every stream, no compute-bound
            # slowdown (the emulator's README, capacity)
            "SGLEMU_GPU_MEMORY_MIB": 400000, "SGLEMU_COMPUTE_BOUND_TOKENS": 0})
        try:
            emu.wait_ready()
            for level in levels:
                sys.stderr.write("selfcheck: C=%d ...\n" % level)
                rows.append(measure(emu.url, level, args))
        finally:
            emu.stop()
    head = ("C", "reqs", "config", "true med", "meas med", "err %", "true agg", "meas agg", "err %",
            "AL", "errors", "client CPU s", "wall s")
    print("%4s %5s %7s %9s %9s %6s %9s %9s %6s %5s %6s %12s %7s" % head)
    for r in rows:
        print("%4d %5d %7.1f %9.1f %9.1f %6.2f %9.0f %9.0f %6.2f %5.2f %6d %12.2f %7.1f" % tuple(
            r[k] or 0 for k in ("concurrency", "requests", "configured_tok_s", "true_median_tok_s",
                                "measured_median_tok_s", "median_error_pct", "true_aggregate_tok_s",
                                "measured_aggregate_tok_s", "aggregate_error_pct", "accept_len",
                                "errors", "client_cpu_s", "wall_s")))
    print("config = the emulator's nominal per-stream decode tok/s (accept length x cycles/s); "
          "true = its exact per-request counters\n(median) and its tokens / its own window; "
          "meas = this engine; err % = |meas - true| / true")
    print("goal: error <= 1%% up to C=16 and <= 2%% at C=256 with >= 20,000 tok/s aggregate "
          "(this machine: %d cores, emulator and client on the same cores)" % os.cpu_count())
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0
