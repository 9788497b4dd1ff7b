"""An independent client cross-check: SGLang's own benchmark client against ours, same emulator.

    python -m bench.crosscheck [--max-tokens 256] [--input-len 128] [--requests N]
        [--concurrency 1,4] [--warmup 1] [--oai-backend sglang-oai-chat] [--out out/crosscheck]

One emulator (the 3-step NEXTN profile, --enable-metrics, --model-path = a tokenizer directory
made here without any download) serves every run. For each concurrency C it runs, one after the
other, with the emulator's counters reset before and read after each run:

  bench_serving/sglang   python -m sglang.benchmark.serving --backend sglang (native /generate)
  bench_serving/<oai>    the same with an OpenAI backend (default sglang-oai-chat)
  bench run/chat         python -m bench run (our CLI, /v1/chat/completions)
  bench run/native       python -m bench run --api native (/generate)

SGLang's client runs under the contract venv's Python (scripts/contract-venv.sh), ours under this
Python. The table puts each tool's figure beside the emulator's exact figure for the same measured
requests (its /_emulator/stats records; warmup requests left out) and the difference in %. Written
to OUT/crosscheck.md and OUT/crosscheck.json, with every tool's own output file and log in OUT.

Exit status: 0 everything ran; 2 a step failed (the tool's name and the tail of its output on
stderr; the table so far is still written).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sglang_perf.measure.prompts import CODING_PROMPTS, long_context_prompt

from bench.launch import EmulatorProcess
from bench.paths import ROOT
from bench.profiles import MODEL_ARGS, PROFILE_ARGS

CROSSCHECK_OUT = ROOT / "out" / "crosscheck"
# The steps under the contract venv's Python, which has nothing of this repository installed: run
# as a module from ROOT (run_logged's cwd), so bench.sglang_stubs imports; the tokenizer's texts
# come in a file (tokenizer_corpus).
CONTRACT_MODULE = "bench.crosscheck_contract"
CONTRACT_VENV = ROOT / "scripts" / "contract-venv.sh"
OAI_BACKENDS = ("sglang-oai-chat", "sglang-oai")
# Nothing may be downloaded: the hub libraries fail fast instead of trying the network.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}
TAIL_LINES = 25

FIGURE_COLUMNS = (
    # key, column title, format
    ("out_tok_s", "output tok/s", ".1f"),
    ("decode_tok_s", "decode tok/s median", ".1f"),
    ("ttft_ms", "TTFT ms median", ".1f"),
    ("accept_len", "accept length", ".2f"),
    ("duration_s", "duration s", ".2f"),
)


class StepFailed(Exception):
    """A step (a tool run, the tokenizer, the emulator) failed; ``tail`` is its output's end."""

    def __init__(self, step, message, tail=""):
        Exception.__init__(self, "%s: %s" % (step, message))
        self.step, self.message, self.tail = step, message, tail


# ------------------------------------------------------------------------------------------
# arithmetic
# ------------------------------------------------------------------------------------------
def pct_diff(value, reference):
    """(value - reference) / reference in %; None when either is missing or the reference is 0."""
    if value is None or reference is None or reference == 0:
        return None
    return (float(value) - float(reference)) / float(reference) * 100.0


def fmt_pct(p):
    return "-" if p is None else "%+.1f%%" % p


def cell(value, truth, spec):
    """'tool / truth (diff)' for one metric of one row."""
    def f(v):
        return "-" if v is None else format(v, spec)
    return "%s / %s (%s)" % (f(value), f(truth), fmt_pct(pct_diff(value, truth)))


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def truth_of(records):
    """The emulator's exact figures for a set of its per-request records (the measured ones)."""
    done = [r for r in records if r.get("t_first_token") is not None]
    if not done:
        return {"n": 0, "tokens": 0, "out_tok_s": None, "decode_tok_s": None, "ttft_ms": None,
                "accept_len": None, "duration_s": None, "verify_ct": 0, "prompt_tokens": None}
    tokens = sum(r["completion_tokens"] for r in done)
    verify = sum(r["verify_ct"] or 0 for r in done)
    t0 = min(r["t_arrival"] for r in done)
    t1 = max(r["t_last_token"] for r in done)
    window = t1 - t0
    return {
        "n": len(done),
        "tokens": tokens,
        "verify_ct": verify,
        "out_tok_s": tokens / window if window > 0 else None,
        "decode_tok_s": median([r["decode_tok_s"] for r in done]),
        "ttft_ms": median([(r["t_first_token"] - r["t_arrival"]) * 1000.0 for r in done]),
        "accept_len": tokens / float(verify) if verify else None,
        "duration_s": window,
        "finish_reasons": sorted(set(str(r.get("finish_reason")) for r in done)),
        # the emulator's own count (text prompts: chars / 4, chat + template framing): its
        # prefill time is prompt_tokens / SGLEMU_PREFILL_TOK_S, part of every TTFT
        "prompt_tokens": statistics.mean(r["prompt_tokens"] for r in done)
        if all("prompt_tokens" in r for r in done) else None,
        "prompt_tokens_range": [min(r.get("prompt_tokens") or 0 for r in done),
                                max(r.get("prompt_tokens") or 0 for r in done)],
    }


def since_start_accept_len(records):
    """What SGLang's cumulative avg_spec_accept_length counts: decode (verify-step) tokens over
    verify steps of every request since start; the prefill token of each request is not a
    verify-step token. (The server refreshes its figure every decode-log-interval steps, so it
    lags this by up to that many steps.)"""
    gen = [r for r in records if not r.get("health") and r.get("verify_ct")]
    verify = sum(r["verify_ct"] for r in gen)
    if not verify:
        return None
    return sum(r["completion_tokens"] - 1 for r in gen) / float(verify)


def tool_vs_tool(a, b):
    """Per metric: % difference of tool a from tool b; of run a's truth from run b's truth (the
    runs themselves differ: prompts, acceptance draws); and net = how much more a overstates its
    own truth than b does, (a_tool / a_truth) / (b_tool / b_truth) - 1: the tools' disagreement
    with the runs' difference taken out."""
    out = {}
    for key, _, _ in FIGURE_COLUMNS:
        at, bt = a["tool"].get(key), b["tool"].get(key)
        ae, be = a["truth"].get(key), b["truth"].get(key)
        net = None
        if None not in (at, bt, ae, be) and 0 not in (bt, ae, be):
            net = pct_diff(float(at) / ae, float(bt) / be)
        out[key] = {"tool": pct_diff(at, bt), "truth": pct_diff(ae, be), "net": net}
    return out


# ------------------------------------------------------------------------------------------
# processes
# ------------------------------------------------------------------------------------------
def tail(path, lines=TAIL_LINES):
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def run_logged(step, argv, log_path, env=None, timeout=1800):
    """Run argv with stdout+stderr to log_path; StepFailed (with the log's tail) on failure."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    with open(log_path, "w") as log:
        log.write("$ %s\n" % " ".join(str(a) for a in argv))
        log.flush()
        try:
            rc = subprocess.call([str(a) for a in argv], cwd=str(ROOT), env=full_env, stdout=log,
                                 stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise StepFailed(step, "no result within %ds" % timeout, tail(log_path))
        except OSError as e:
            raise StepFailed(step, "cannot start %s: %s" % (argv[0], e))
    if rc != 0:
        raise StepFailed(step, "exit status %d (log: %s)" % (rc, log_path), tail(log_path))


def contract_python(log_path):
    """Build or reuse the contract venv; its Python's path."""
    run_logged("scripts/contract-venv.sh", ["bash", CONTRACT_VENV], log_path, timeout=3600)
    m = re.search(r"^CONTRACT_PYTHON=(.+)$", Path(log_path).read_text(), re.M)
    if not m or not Path(m.group(1).strip()).exists():
        raise StepFailed("scripts/contract-venv.sh", "printed no usable CONTRACT_PYTHON",
                         tail(log_path))
    return m.group(1).strip()


def contract_argv(python, *args):
    """bench/crosscheck_contract.py with ``args`` under the contract venv's ``python`` (cwd: ROOT)."""
    return [python, "-m", CONTRACT_MODULE] + list(args)


def tokenizer_corpus():
    """What the tokenizer is trained on: the repo's coding prompts and a long-context prompt of
    about 2,000 tokens (the long-context corpus, sglang_perf/measure/corpus.json)."""
    return [text for _, text in CODING_PROMPTS] + [long_context_prompt(2000, 4.0, 0, "tokenizer")]


def make_tokenizer(python, out_dir, log_path):
    """Run bench/crosscheck_contract.py tokenizer under ``python``; its JSON summary."""
    corpus = Path(log_path).with_name("tokenizer-corpus.json")
    corpus.write_text(json.dumps(tokenizer_corpus()))
    run_logged("tokenizer", contract_argv(python, "tokenizer", out_dir, "--corpus", corpus), log_path,
               env=OFFLINE_ENV, timeout=300)
    for line in reversed(Path(log_path).read_text().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise StepFailed("tokenizer", "no JSON summary line", tail(log_path))


def http_json(url, data=None, timeout=30):
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(),
                                 headers={"Content-Type": "application/json"} if data is not None
                                 else {}, method="POST" if data is not None else "GET")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def emulator_args(model_dir):
    args = list(MODEL_ARGS)
    args[args.index("--model-path") + 1] = str(model_dir)
    return args + PROFILE_ARGS["nextn_3step"] + ["--enable-metrics"]


# ------------------------------------------------------------------------------------------
# one client run
# ------------------------------------------------------------------------------------------
def run_bench_serving(ctx, backend, conc, requests, tag):
    out_file = ctx["out"] / ("%s.json" % tag)
    if out_file.exists():
        out_file.unlink()  # it appends a JSON line
    argv = contract_argv(
        ctx["python"], "serving", "--", "--backend", backend,
        "--base-url", ctx["url"], "--dataset-name", "random-ids",
        "--random-input-len", ctx["args"].input_len,
        "--random-output-len", ctx["args"].max_tokens, "--random-range-ratio", "1.0",
        "--num-prompts", requests, "--max-concurrency", conc,
        # --model is only used client-side (check_chat_template loads it); requests carry
        # --served-model-name.
        "--model", ctx["tokdir"], "--served-model-name", ctx["served"],
        "--tokenizer", ctx["tokdir"], "--warmup-requests", ctx["args"].warmup,
        "--output-file", out_file, "--output-details", "--disable-tqdm",
        "--ready-check-timeout-sec", "10", "--seed", "42")
    run_logged("sglang.benchmark.serving --backend %s (C=%d)" % (backend, conc), argv,
               ctx["out"] / ("%s.log" % tag), env=OFFLINE_ENV)
    lines = [ln for ln in out_file.read_text().splitlines() if ln.strip()] \
        if out_file.exists() else []
    if not lines:
        raise StepFailed("sglang.benchmark.serving --backend %s" % backend,
                         "wrote no result to %s" % out_file, tail(ctx["out"] / ("%s.log" % tag)))
    res = json.loads(lines[-1])
    tpot = res.get("median_tpot_ms")
    tool = {
        "out_tok_s": res.get("output_throughput"),
        "decode_tok_s": 1000.0 / tpot if tpot else None,
        "ttft_ms": res.get("median_ttft_ms"),
        "accept_len": res.get("accept_length"),
        "duration_s": res.get("duration"),
        "completed": res.get("completed"),
        "total_output_tokens": res.get("total_output_tokens"),
        "total_output_tokens_retokenized": res.get("total_output_tokens_retokenized"),
        "median_tpot_ms": tpot,
    }
    errors = [e for e in res.get("errors") or [] if e]
    return tool, res, errors


def run_ours(ctx, api, conc, requests, tag):
    json_path = ctx["out"] / ("%s.json" % tag)
    argv = [sys.executable, "-m", "bench", "run", "--url", ctx["url"], "--api", api,
            "--concurrency", conc, "--requests", requests, "--max-tokens", ctx["args"].max_tokens,
            "--warmup", ctx["args"].warmup, "--json", json_path, "--quiet", "--no-roofline"]
    run_logged("bench run --api %s (C=%d)" % (api, conc), argv, ctx["out"] / ("%s.log" % tag))
    res = json.loads(json_path.read_text())
    measured = [r for r in res["per_request"] if r["phase"] == "measure"]
    tool = {
        "out_tok_s": res["aggregate_tok_s"],
        "decode_tok_s": res["decode_tok_s"]["median"],
        "ttft_ms": res["ttft_s"]["p50"] * 1000.0 if res["ttft_s"]["p50"] is not None else None,
        "accept_len": res["accept_len"],
        "duration_s": res["wall_s"],
        "completed": sum(1 for r in measured if r["error"] is None),
        "total_output_tokens": res["completion_tokens"],
    }
    errors = [d["message"] for d in res["error_details"]]
    return tool, res, errors, {r["rid"] for r in measured}


def measured_records(records, rids=None, warmup=0):
    """The emulator's records of the measured requests: by request id when the tool sends one
    (ours), else all but the first ``warmup`` generation requests in arrival order (SGLang's client
    sends no rid; its warmup requests finish before the measured ones start)."""
    gen = [r for r in records if not r.get("health")]
    if rids is not None:
        return [r for r in gen if r["rid"] in rids], []
    gen.sort(key=lambda r: r["t_arrival"])
    return gen[warmup:], gen[:warmup]


RECORD_KEYS = ("rid", "endpoint", "prompt_tokens", "completion_tokens", "reasoning_tokens", "verify_ct",
               "t_arrival", "t_admit", "t_first_token", "t_last_token", "decode_tok_s",
               "finish_reason")

CLIENTS = (
    # tool, backend ("oai": --oai-backend)
    ("bench_serving", "sglang"),
    ("bench_serving", "oai"),
    ("bench run", "chat"),
    ("bench run", "native"),
)


def one_run(ctx, tool, label, conc, requests):
    backend = ctx["args"].oai_backend if label == "oai" else label
    tag = "%s-%s-c%d" % ("bench_serving" if tool == "bench_serving" else "bench_run", backend, conc)
    http_json(ctx["url"] + "/_emulator/reset", {})
    t0 = time.monotonic()
    if tool == "bench_serving":
        tool_fig, raw, errors = run_bench_serving(ctx, backend, conc, requests, tag)
        stats = http_json(ctx["url"] + "/_emulator/stats")
        meas, warm = measured_records(stats["requests"], warmup=ctx["args"].warmup)
        # its warmup requests ask for min(output_len, 32) tokens (serving.py benchmark())
        want = min(ctx["args"].max_tokens, 32)
        if any(r["max_tokens"] != want for r in warm) or \
                any(r["max_tokens"] != ctx["args"].max_tokens for r in meas):
            raise StepFailed("crosscheck", "cannot tell %s's warmup from its measured requests in "
                             "the emulator's records (max_tokens %s)" % (
                                 tag, [r["max_tokens"] for r in warm + meas]))
        al_source = ("/server_info internal_states[0].avg_spec_accept_length: cumulative since "
                     "server start, every request (warmups, other runs) included")
    else:
        tool_fig, raw, errors, rids = run_ours(ctx, backend, conc, requests, tag)
        stats = http_json(ctx["url"] + "/_emulator/stats")
        meas, _ = measured_records(stats["requests"], rids=rids)
        warm = [r for r in stats["requests"] if r["rid"] not in rids and not r.get("health")]
        al_source = "per-request spec_verify_ct of the measured requests (sum tokens / sum verify)"
    ctx["all_records"].extend(r for r in stats["requests"] if not r.get("health"))
    endpoint = {"sglang": "/generate", "native": "/generate", "chat": "/v1/chat/completions",
                "sglang-oai-chat": "/v1/chat/completions",
                "sglang-oai": "/v1/completions"}[backend]
    row = {
        "tool": tool, "backend": backend, "endpoint": endpoint, "concurrency": conc,
        "requests": requests, "tool_fig": tool_fig, "truth": truth_of(meas),
        "accept_len_source": al_source,
        "server_since_start_accept_len": since_start_accept_len(ctx["all_records"]),
        "warmup_records": [{"rid": r["rid"], "max_tokens": r["max_tokens"],
                            "completion_tokens": r["completion_tokens"]} for r in warm],
        "errors": errors, "seconds": time.monotonic() - t0,
        "emulator_endpoints": sorted(set(r["endpoint"] for r in meas)),
        "emulator_records": [{k: r.get(k) for k in RECORD_KEYS} for r in meas],
        "raw": raw,
    }
    return row


# ------------------------------------------------------------------------------------------
# report
# ------------------------------------------------------------------------------------------
def row_name(row):
    return "%s %s (%s)" % (row["tool"], row["backend"], row["endpoint"])


def table(rows):
    head = ["tool backend (endpoint)", "C", "completed / truth n", "prompt tok"] + \
        ["%s: tool / truth (diff)" % title for _, title, _ in FIGURE_COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        t, e = r["tool_fig"], r["truth"]
        cells = [row_name(r), str(r["concurrency"]), "%s / %s" % (t.get("completed"), e["n"]),
                 "%s (%s-%s)" % ((_f(e.get("prompt_tokens"), ".0f"),) + tuple(e.get("prompt_tokens_range")
                                                                              or ("-", "-")))]
        cells += [cell(t.get(k), e.get(k), spec) for k, _, spec in FIGURE_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


PAIRS = (
    # (a, b): same endpoint family, SGLang's client vs ours
    (("bench_serving", "sglang"), ("bench run", "native")),
    (("bench_serving", "oai"), ("bench run", "chat")),
)


def pair_rows(rows, oai_backend):
    by = {}
    for r in rows:
        label = "oai" if r["backend"] == oai_backend else r["backend"]
        by[(r["tool"], label, r["concurrency"])] = r
    out = []
    for conc in sorted(set(r["concurrency"] for r in rows)):
        for a, b in PAIRS:
            ra, rb = by.get(a + (conc,)), by.get(b + (conc,))
            if ra and rb:
                out.append((conc, ra, rb, tool_vs_tool({"tool": ra["tool_fig"], "truth": ra["truth"]},
                                                       {"tool": rb["tool_fig"], "truth": rb["truth"]})))
    return out


def pairs_table(pairs):
    head = ["C", "SGLang's client vs ours"] + \
        ["%s: tools / truths / net" % title for _, title, _ in FIGURE_COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for conc, ra, rb, d in pairs:
        cells = [str(conc), "%s vs %s" % (row_name(ra), row_name(rb))]
        cells += ["%s / %s / %s" % (fmt_pct(d[k]["tool"]), fmt_pct(d[k]["truth"]), fmt_pct(d[k]["net"]))
                  for k, _, _ in FIGURE_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def notes(rows, ctx):
    out = [
        "- truth = the emulator's /_emulator/stats records of the measured requests of that run "
        "(reset before it; warmup requests left out): output tok/s = tokens / (last token - first "
        "arrival); decode = median of (tokens - 1) / (last token - first token); TTFT = median of "
        "first token - arrival (server side); accept length = tokens / verify steps; duration = "
        "last token - first arrival.",
        "- prompt tok = mean (min-max) prompt tokens as the emulator counted them (text: chars / 4; chat: "
        "+ template framing); its prefill (prompt / 3000 tok/s) is part of every TTFT.",
        "- bench_serving decode tok/s = 1000 / median TPOT ms (TPOT = (latency - ttft) / "
        "(output_len - 1) per request); bench run decode tok/s = its per-request median.",
        "- accept length sources: bench_serving reads /server_info internal_states[0]."
        "avg_spec_accept_length once after the run (cumulative since server start, warmups and "
        "all earlier runs included, prefill tokens not counted); bench run = sum completion tokens "
        "/ sum spec_verify_ct of its measured requests (meta_info on /generate, "
        "sglext.spec_tokens_details on the OpenAI routes).",
    ]
    for r in rows:
        if r["tool"] == "bench_serving":
            out.append("- %s C=%d: accept length %s from /server_info; the emulator's since-start "
                       "figure (decode tokens / verify steps of every request so far) %s; "
                       "measured-window truth %s; retokenized output tokens %s vs %s counted"
                       % (row_name(r), r["concurrency"], _f(r["tool_fig"].get("accept_len")),
                          _f(r["server_since_start_accept_len"]), _f(r["truth"]["accept_len"]),
                          r["tool_fig"].get("total_output_tokens_retokenized"),
                          r["tool_fig"].get("total_output_tokens")))
    return "\n".join(out)


def _f(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def report(rows, ctx, elapsed):
    a = ctx["args"]
    head = ("Cross-check: SGLang %s's sglang.benchmark.serving vs bench run, one emulator "
            "(nextn_3step, seed %s), %d output tokens, bench_serving input %d tokens (random-ids), "
            "warmup %d per run; %.0f s" % ((ctx.get("tokenizer") or {}).get("sglang_version", "?"),
                                           ctx.get("seed"),
                                           a.max_tokens, a.input_len, a.warmup, elapsed))
    parts = [head, "", table(rows)]
    pairs = pair_rows(rows, a.oai_backend)
    if pairs:
        parts += ["", "Between the tools (same endpoint family): SGLang's client vs ours; "
                      "truths = the same for the emulator's figures of the two runs; net = "
                      "(a tool / a truth) / (b tool / b truth) - 1, the tools' own disagreement:",
                  "", pairs_table(pairs)]
    parts += ["", notes(rows, ctx)]
    return "\n".join(parts) + "\n"


# ------------------------------------------------------------------------------------------
def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.crosscheck", description=__doc__.split("\n\n")[0])
    p.add_argument("--max-tokens", type=int, default=256, help="output tokens per request (256)")
    p.add_argument("--input-len", type=int, default=128,
                   help="bench_serving random-ids prompt tokens (128; ours sends its coding prompts)")
    p.add_argument("--requests", type=int, default=None,
                   help="measured requests per run (default max(4, 2 x C))")
    p.add_argument("--concurrency", default="1,4", help="levels, comma separated (1,4)")
    p.add_argument("--warmup", type=int, default=1, help="warmup requests per run, both tools (1)")
    p.add_argument("--oai-backend", choices=OAI_BACKENDS, default="sglang-oai-chat",
                   help="bench_serving's OpenAI backend (sglang-oai-chat)")
    p.add_argument("--out", default=str(CROSSCHECK_OUT), help="output directory (out/crosscheck)")
    args = p.parse_args(argv)
    try:
        args.levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    except ValueError:
        p.error("--concurrency: comma-separated integers, got %r" % args.concurrency)
    if not args.levels or min(args.levels) < 1 or args.max_tokens < 2 or args.input_len < 1 \
            or args.warmup < 1 or (args.requests is not None and args.requests < 1):
        p.error("need concurrency >= 1, --max-tokens >= 2, --input-len >= 1, --warmup >= 1 "
                "(bench_serving's warmup marks the split), --requests >= 1")
    return args


def prime(url, n):
    """The emulator decodes its first SGLEMU_WARMUP_REQUESTS requests slowly (a real server's
    JIT/CUDA-graph warmup); spend them here so no tool's run gets them."""
    for _ in range(n):
        http_json(url + "/generate", {"text": "prime", "sampling_params": {
            "max_new_tokens": 8, "ignore_eos": True}}, timeout=60)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    ctx = {"args": args, "out": out, "all_records": [], "served": None}
    rows, failure = [], None
    emu = None
    log = open(out / "emulator.log", "w")
    try:
        sys.stderr.write("crosscheck: contract venv (scripts/contract-venv.sh) ...\n")
        ctx["python"] = contract_python(out / "contract-venv.log")
        tokdir = out / "tokenizer"
        ctx["tokenizer"] = make_tokenizer(ctx["python"], tokdir, out / "tokenizer.log")
        ctx["tokdir"] = tokdir
        emu = EmulatorProcess(emulator_args(tokdir), log)
        try:
            emu.wait_ready()
        except RuntimeError as e:
            raise StepFailed("emulator", str(e), tail(out / "emulator.log"))
        ctx["url"] = emu.url
        info = http_json(emu.url + "/server_info")
        stats = http_json(emu.url + "/_emulator/stats?requests=0")
        ctx["served"] = info["served_model_name"]
        ctx["emulated_version"] = info.get("version")
        ctx["seed"] = stats["configured"]["seed"]
        ctx["configured"] = stats["configured"]
        prime(emu.url, int(stats["configured"]["knobs"]["warmup_requests"]))
        ctx["all_records"].extend(r for r in http_json(emu.url + "/_emulator/stats")["requests"]
                                  if not r.get("health"))
        for conc in args.levels:
            requests = args.requests or max(4, 2 * conc)
            for tool, label in CLIENTS:
                sys.stderr.write("crosscheck: C=%d %s %s (%d requests) ...\n"
                                 % (conc, tool, args.oai_backend if label == "oai" else label,
                                    requests))
                row = one_run(ctx, tool, label, conc, requests)
                rows.append(row)
                if row["errors"] or row["tool_fig"].get("completed") != requests:
                    raise StepFailed("%s (C=%d)" % (row_name(row), conc),
                                     "%s of %d requests completed; errors: %s"
                                     % (row["tool_fig"].get("completed"), requests,
                                        "; ".join(str(e)[:300] for e in row["errors"][:3])))
    except StepFailed as e:
        failure = e
    except (OSError, ValueError, KeyError) as e:
        failure = StepFailed("crosscheck", "%s: %s" % (type(e).__name__, e))
    finally:
        if emu is not None:
            emu.stop()
        log.close()
    elapsed = time.monotonic() - t_start
    text = report(rows, ctx, elapsed) if rows else ""
    if rows:
        (out / "crosscheck.md").write_text(text)
        print(text, end="")
    doc = {"args": {k: v for k, v in vars(args).items()}, "elapsed_s": elapsed,
           "tokenizer": ctx.get("tokenizer"), "emulator_configured": ctx.get("configured"),
           "contract_python": ctx.get("python"), "rows": rows,
           "pairs": [{"concurrency": c, "a": row_name(a), "b": row_name(b), "diff_pct": d}
                     for c, a, b, d in pair_rows(rows, args.oai_backend)],
           "failure": None if failure is None else {"step": failure.step,
                                                    "message": failure.message,
                                                    "tail": failure.tail}}
    (out / "crosscheck.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    if failure is not None:
        sys.stderr.write("crosscheck: FAILED at %s: %s\n" % (failure.step, failure.message))
        if failure.tail:
            sys.stderr.write("---- last lines of its output ----\n%s\n----\n" % failure.tail)
        return 2
    sys.stderr.write("crosscheck: wrote %s and %s (%.0f s)\n"
                     % (out / "crosscheck.md", out / "crosscheck.json", elapsed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
