# -*- coding: utf-8 -*-
"""What the server says: the gate plan's quality checks, each a case of the plan judged like the
speed cases (a verdict, failures naming the check, the inconclusive policy).

- ``answers``: known answers (answers.py: the built-in set or a host's file), greedy, thinking off
  unless a row says otherwise; accuracy judged on its Wilson interval against ``min_accuracy``,
  asking more rows while the interval straddles the bar.
- ``tool_calls``: each tool row asked streamed and not; the reply must carry exactly the row's
  call in the engine's parsed ``tool_calls`` (arguments valid JSON, equal to the row's), never as
  markup in the content. Every row must pass.
- ``reasoning``: known-answer rows asked with thinking on (streamed and not) and off: with it on
  the thinking arrives in the engine's reasoning field (engines/<engine>.py reasoning_field) and
  none of it in the content; with it off there is none. Every row must pass.
- ``agreement``: greedy replies to fixed prompts, their first tokens kept with the run; compared
  with the last-known-good's (same model, engine and release: judged on ``min_agreement``;
  otherwise reported), naming the first prompt and token that differ.

Standard library only, Python 3.9+ (runs on the target host through AnsiballZ)."""
from __future__ import annotations

import json
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from .. import engines
from ..measure import answers as known
from ..measure import metrics as prom
from ..measure import prompts
from ..measure.client import ConfigError, RequestError, SSEStream
from ..measure.stats import wilson_interval
from .decision import FAIL, PASS
from .decision import INCONCLUSIVE_VERDICT as INCONCLUSIVE

CHECKS = ("answers", "tool_calls", "reasoning", "agreement", "pressure")
# The thresholds each check takes ({} for the checks every row of which must pass).
CHECK_THRESHOLDS = {"answers": ("min_accuracy",), "tool_calls": (), "reasoning": (),
                    "agreement": ("min_agreement",), "pressure": ("min_accuracy",)}
# Options only some checks take: the pressure check's share of the KV pool to hold, and when it runs.
CHECK_OPTIONS = {"pressure": {"kv_usage": 0.6, "when": "changed"}}
QUALITY_THRESHOLDS = ("min_accuracy", "min_agreement")
# Markup a reply's content must never carry: a tool call or thinking the engine did not parse.
CALL_MARKUP = ("<tool_call>", "<function=", "</tool_call>")
THINK_MARKUP = ("<think>", "</think>")
# How many wrong replies a result keeps (the first, in the order asked).
KEEP_WRONG = 5
_CHARS_SHOWN = 80


def _engine(server):
    return engines.find((server or {}).get("kind")) or engines.get(engines.DEFAULT)


def _clip(text):
    text = " ".join(str(text or "").split())
    return text if len(text) <= _CHARS_SHOWN else text[:_CHARS_SHOWN] + "..."


# ------------------------------------------------------------------------------- requests ----
class Reply(object):
    """One chat reply as a client reads it: content, the reasoning field, the parsed tool calls
    ([{"name", "arguments" (the JSON string as sent)}]), finish reason, the first tokens (from
    logprobs) and an error (a string) when there was no reply."""

    __slots__ = ("content", "reasoning", "calls", "finish", "tokens", "error", "stream")

    def __init__(self, stream):
        self.content, self.reasoning, self.calls = "", "", []
        self.finish, self.tokens, self.error, self.stream = None, None, None, stream

    def how(self):
        return "streamed" if self.stream else "not streamed"


def request_body(model, row, max_tokens, thinking, stream, tools=None, logprobs=False):
    """The chat request of one row: the prompt verbatim as the user message (a row's system
    message first), greedy, thinking stated."""
    messages = ([{"role": "system", "content": row["system"]}] if row.get("system") else []) \
        + [{"role": "user", "content": row["prompt"]}]
    body = {"model": model, "messages": messages, "max_tokens": int(max_tokens), "temperature": 0,
            "stream": bool(stream), "chat_template_kwargs": {"enable_thinking": bool(thinking)}}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = tools
    if logprobs:
        body["logprobs"] = True
    return body


def _read_message(reply, message, field):
    reply.content = message.get("content") or ""
    reply.reasoning = message.get(field) or ""
    for call in message.get("tool_calls") or []:
        fn = (call or {}).get("function") or {}
        reply.calls.append({"name": fn.get("name"), "arguments": fn.get("arguments")})


def _read_delta(reply, delta, field, calls):
    reply.content += delta.get("content") or ""
    reply.reasoning += delta.get(field) or ""
    for frag in delta.get("tool_calls") or []:
        if not isinstance(frag, dict):
            continue
        index = frag.get("index") if isinstance(frag.get("index"), int) else len(calls)
        slot = calls.setdefault(index, {"name": None, "arguments": ""})
        fn = frag.get("function") or {}
        if fn.get("name"):
            slot["name"] = fn["name"]
        if fn.get("arguments"):
            slot["arguments"] += fn["arguments"]


def ask(ep, body, server, cfg):
    """Send one chat request (``body["stream"]`` says how) and read the reply as a client does."""
    field = _engine(server).reasoning_field
    reply = Reply(bool(body.get("stream")))
    timeout = cfg["first_token_timeout"] + cfg["max_tokens"] * cfg["seconds_per_token"]
    try:
        if not reply.stream:
            status, data, raw = ep.post_json("/v1/chat/completions", body, timeout)
            if status != 200 or not isinstance(data, dict) or not data.get("choices"):
                reply.error = "HTTP %d: %s" % (status, raw)
                return reply
            choice = data["choices"][0]
            _read_message(reply, choice.get("message") or {}, field)
            reply.finish = choice.get("finish_reason")
            content = (choice.get("logprobs") or {}).get("content")
            if isinstance(content, list):
                reply.tokens = [c.get("token") for c in content if isinstance(c, dict)]
            return reply
        stream = SSEStream(ep, "/v1/chat/completions", body, cfg["first_token_timeout"],
                           cfg["stall_timeout"])
        calls = {}
        try:
            stream.open()
            for _, ev in stream.events():
                if ev == "[DONE]":
                    break
                if isinstance(ev, dict) and ev.get("error"):
                    reply.error = "stream error: %s" % _clip(json.dumps(ev["error"]))
                    return reply
                stream.got_first_token()
                for ch in (ev or {}).get("choices") or []:
                    _read_delta(reply, ch.get("delta") or {}, field, calls)
                    if ch.get("finish_reason") is not None:
                        reply.finish = ch["finish_reason"]
        finally:
            stream.close()
        reply.calls = [calls[k] for k in sorted(calls)]
    except RequestError as e:
        reply.error = e.message
    return reply


def _ask_all(ep, bodies, server, cfg):
    """Every body asked, ``cfg["concurrency"]`` at a time; replies in the bodies' order."""
    workers = max(1, min(cfg["concurrency"], len(bodies)))
    if workers == 1:
        return [ask(ep, b, server, cfg) for b in bodies]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda b: ask(ep, b, server, cfg), bodies))


# ---------------------------------------------------------------------------------- judging ---
def _result(cfg, check, started):
    return {"case": cfg["case"], "check": check, "concurrency": cfg["concurrency"],
            "max_tokens": cfg["max_tokens"], "requests": 0, "errors": 0, "error_kinds": {},
            "thresholds": {k: cfg.get(k) for k in CHECK_THRESHOLDS[check] if cfg.get(k) is not None},
            "rows_from": cfg.get("rows_from") or "built-in", "started": started}


def _finish(out, entries, cfg, started):
    """Verdict, failures and time from the judged ``entries`` ({"threshold", "state",
    "message", ...}); an undecided entry at the end is inconclusive, failing under
    inconclusive: fail."""
    failures = [e for e in entries if e["state"] == FAIL]
    open_ = [e for e in entries if e["state"] == INCONCLUSIVE]
    if failures:
        verdict = FAIL
    elif open_:
        verdict = INCONCLUSIVE
        if cfg["inconclusive"] == "fail":
            failures = open_
    else:
        verdict = PASS
    out.update(verdict=verdict, judged=entries, failures=failures, passed=not failures,
               inconclusive=open_, time_to_verdict_s=time.perf_counter() - started)
    out.pop("started", None)
    return out


def _error_kind(reply):
    return (reply.error or "").split(":", 1)[0]


def _count_errors(out, replies):
    for r in replies:
        if r.error:
            out["errors"] += 1
            kind = _error_kind(r)
            out["error_kinds"][kind] = out["error_kinds"].get(kind, 0) + 1


def run_answers(cfg, ep, model, server, rows, progress=None):
    """Known answers, judged on the Wilson interval of the share right against min_accuracy:
    ``requests`` rows first, then ``concurrency`` more at a time while the interval straddles the
    bar, up to ``max_requests`` (or the rows there are)."""
    started = time.perf_counter()
    out = _result(cfg, "answers", started)
    rows = list(rows)[:cfg["max_requests"]]
    right, asked, wrong, level = 0, 0, [], cfg["confidence"]
    need = cfg.get("min_accuracy")
    state, iv = INCONCLUSIVE, None
    while asked < len(rows):
        take = rows[asked:asked + (cfg["requests"] if asked == 0 else cfg["concurrency"])]
        bodies = [request_body(model, r, cfg["max_tokens"], r.get("thinking", cfg["thinking"]), False)
                  for r in take]
        replies = _ask_all(ep, bodies, server, cfg)
        _count_errors(out, replies)
        for row, reply in zip(take, replies):
            ok = reply.error is None and known.correct(row["answer"], reply.content)
            right += ok
            if not ok and len(wrong) < KEEP_WRONG:
                wrong.append({"id": row["id"], "expected": row["answer"],
                              "got": reply.error or _clip(reply.content) or "(empty)"})
        asked += len(take)
        if progress:
            progress("%s: %d of %d right" % (cfg["case"], right, asked))
        lo, hi = wilson_interval(right, asked, level)
        iv = {"estimate": right / float(asked), "lower": lo, "upper": hi}
        if need is None:
            state = PASS if asked >= cfg["requests"] else INCONCLUSIVE
        else:
            state = PASS if lo >= need else FAIL if hi < need else INCONCLUSIVE
        if state != INCONCLUSIVE:
            break
    out.update(requests=asked, right=right, accuracy=iv, wrong=wrong, level=level)
    entries = []
    shown = "%d of %d known answers right, accuracy %.2f [%.2f, %.2f]" % (
        right, asked, iv["estimate"], iv["lower"], iv["upper"]) if iv else "no row asked"
    first = "; first wrong: %s (expected %s, got %r)" % (
        wrong[0]["id"], wrong[0]["expected"], wrong[0]["got"]) if wrong else ""
    if need is not None:
        message = {PASS: "%s clears the minimum %.2f" % (shown, need),
                   FAIL: "%s < required %.2f (%g%% interval)%s" % (shown, need, 100 * level, first),
                   INCONCLUSIVE: "inconclusive after %d rows: %s straddles the minimum %.2f; "
                                 "ask more (max_requests %d) or set min_accuracy from this host's "
                                 "figures (playbooks/calibrate.yml)%s"
                                 % (asked, shown, need, cfg["max_requests"], first)}[state]
        entries.append({"threshold": "min_accuracy", "state": state, "required": need,
                        "measured": iv and iv["estimate"], "lower": iv and iv["lower"],
                        "upper": iv and iv["upper"], "message": message})
    if out["errors"]:
        entries.append({"threshold": "errors", "state": FAIL, "required": 0, "measured": out["errors"],
                        "message": "%d known-answer request(s) got no reply (%s)" % (
                            out["errors"], ", ".join("%d x %s" % (n, k) for k, n in
                                                     sorted(out["error_kinds"].items())))})
    return _finish(out, entries, cfg, started)


def _call_problem(row, reply):
    """Why a reply does not carry exactly the row's call as a client reads it, or None."""
    if reply.error:
        return "error", reply.error
    if any(m in reply.content for m in CALL_MARKUP):
        return "in_content", "the call came back as markup in the content (%r), not in tool_calls" \
            % _clip(reply.content)
    if not reply.calls:
        return "missing", "no tool call (content %r, finish_reason %s)" % (_clip(reply.content), reply.finish)
    if len(reply.calls) != 1:
        return "wrong", "%d tool calls, one expected" % len(reply.calls)
    call = reply.calls[0]
    try:
        args = json.loads(call["arguments"]) if isinstance(call["arguments"], str) else None
    except ValueError:
        args = None
    if not isinstance(args, dict):
        return "arguments", "arguments of %s are not a JSON object: %r" % (call["name"], call["arguments"])
    want = row["call"]
    if call["name"] != want["name"] or args != want["arguments"]:
        return "wrong", "called %s(%s), expected %s(%s)" % (
            call["name"], json.dumps(args, sort_keys=True), want["name"],
            json.dumps(want["arguments"], sort_keys=True))
    return None


_CALL_WORDS = {"in_content": "the call left as markup in the content (the server's tool-call parser "
                             "did not read the model's format: check --tool-call-parser)",
               "missing": "no tool call at all", "wrong": "a different call",
               "arguments": "arguments that are not JSON", "error": "no reply"}


def run_tool_calls(cfg, ep, model, server, rows, progress=None):
    """Every tool row asked not streamed and streamed; every reply must carry the row's call."""
    started = time.perf_counter()
    out = _result(cfg, "tool_calls", started)
    rows = list(rows)[:cfg["max_requests"]]
    bodies = [request_body(model, r, cfg["max_tokens"], r.get("thinking", cfg["thinking"]), stream,
                           tools=r["tools"]) for r in rows for stream in (False, True)]
    replies = _ask_all(ep, bodies, server, cfg)
    _count_errors(out, replies)
    problems = []
    for i, reply in enumerate(replies):
        p = _call_problem(rows[i // 2], reply)
        if p:
            problems.append({"id": rows[i // 2]["id"], "how": reply.how(), "kind": p[0], "detail": p[1]})
    out.update(parser=(server or {}).get("tool_call_parser"))
    entries = _every_reply(out, replies, problems, "tool_calls", "did not carry the expected tool call",
                           _CALL_WORDS)
    if progress:
        progress("%s: %d of %d calls as clients read them" % (cfg["case"], out["right"], len(replies)))
    return _finish(out, entries, cfg, started)


def _every_reply(out, replies, problems, threshold, what, words):
    """The result's counts and the one entry of a check every reply must pass: failed when any
    reply has a problem, naming how many, of which kinds, the server's parser and the first."""
    out.update(requests=len(replies), right=len(replies) - len(problems), problems=problems[:KEEP_WRONG],
               problem_kinds=_kinds(problems))
    if not problems:
        return []
    first = problems[0]
    return [{"threshold": threshold, "state": FAIL, "required": len(replies),
             "measured": len(replies) - len(problems),
             "message": "%d of %d replies %s: %s%s; first: %s (%s): %s"
                        % (len(problems), len(replies), what, _kind_text(problems, words),
                           " (server's parser: %s)" % out["parser"] if out.get("parser") else "",
                           first["id"], first["how"], first["detail"])}]


def _kinds(problems):
    kinds = {}
    for p in problems:
        kinds[p["kind"]] = kinds.get(p["kind"], 0) + 1
    return kinds


def _kind_text(problems, words):
    return ", ".join("%d x %s" % (n, words.get(k, k)) for k, n in sorted(_kinds(problems).items()))


def _reasoning_problem(reply, thinking, field):
    if reply.error:
        return "error", reply.error
    leaked = [m for m in THINK_MARKUP if m in reply.content]
    if leaked:
        return "in_content", "thinking markup %s in the content (%r)" % ("/".join(leaked),
                                                                         _clip(reply.content))
    if thinking and not reply.reasoning.strip():
        return "missing", "thinking on but no %s (content %r)" % (field, _clip(reply.content))
    if not thinking and reply.reasoning.strip():
        return "unasked", "thinking off but %s %r" % (field, _clip(reply.reasoning))
    return None


def run_reasoning(cfg, ep, model, server, rows, progress=None):
    """Rows asked with thinking on (not streamed and streamed) and off (not streamed): the
    thinking in the engine's reasoning field only when it is on, never in the content."""
    started = time.perf_counter()
    out = _result(cfg, "reasoning", started)
    field = _engine(server).reasoning_field
    words = {"in_content": "thinking left in the content (the server's reasoning parser did not "
                           "separate it: check --reasoning-parser)",
             "missing": "no %s with thinking on" % field,
             "unasked": "%s with thinking off" % field, "error": "no reply"}
    asks = []
    for row in list(rows)[:cfg["max_requests"]]:
        asks += [(row, True, False), (row, True, True), (row, False, False)]
    bodies = [request_body(model, r, cfg["max_tokens"], thinking, stream) for r, thinking, stream in asks]
    replies = _ask_all(ep, bodies, server, cfg)
    _count_errors(out, replies)
    problems = []
    for (row, thinking, _), reply in zip(asks, replies):
        p = _reasoning_problem(reply, thinking, field)
        if p:
            how = "thinking %s, %s" % ("on" if thinking else "off", reply.how())
            problems.append({"id": row["id"], "how": how,
                             "kind": p[0], "detail": p[1]})
    out.update(field=field, parser=(server or {}).get("reasoning_parser"))
    entries = _every_reply(out, replies, problems, "reasoning", "with the reasoning misplaced", words)
    if progress:
        progress("%s: %d of %d replies separated as clients read them" % (cfg["case"], out["right"],
                                                                           len(replies)))
    return _finish(out, entries, cfg, started)


# -------------------------------------------------------------------------------- agreement ---
AGREEMENT_PROMPTS = tuple(name for name, _ in prompts.CODING_PROMPTS)


def agreement_rows(count):
    """The fixed prompts whose greedy replies are compared run to run: the coding prompts, by
    name (never tagged, so the same text every run)."""
    table = dict(prompts.CODING_PROMPTS)
    return [{"id": name, "prompt": table[name]} for name in AGREEMENT_PROMPTS[:count]]


def _words(text):
    """A reply split where a client sees token-like pieces when the engine sends no logprobs:
    each run of non-space characters with the spaces before it."""
    return re.findall(r"\s*\S+", text or "")


def first_difference(a, b):
    """The first position where two token lists differ (the shorter's end when one is a prefix
    of the other but shorter than ``n``), or None when they agree."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _weights(fp):
    m = (fp or {}).get("model") or {}
    return (m.get("repo"), m.get("commit") or m.get("revision")) if isinstance(m, dict) else (None, None)


def same_build(a, b):
    """Whether two runs' fingerprints (fingerprint.take: engine, version, the model's repository
    and commit) are the same engine release serving the same weights: the case where the engines
    promise greedy text that agrees (docs/quality.md). Where either side does not know its
    weights (``bench gate --url``), the model name the server serves stands for them. Unknown on
    either side is not the same."""
    a, b = a or {}, b or {}
    model = (_weights(a), _weights(b))
    if (None, None) in model:
        model = (a.get("served_model"), b.get("served_model"))
    keys = [(a.get(k), b.get(k)) for k in ("engine", "version")] + [model]
    return all(x == y and x not in (None, (None, None)) for x, y in keys)


def run_agreement(cfg, ep, model, server, baseline=None, progress=None):
    """Greedy replies to the fixed prompts, the first ``max_tokens`` tokens of each kept; against
    ``baseline`` ({"tokens": {id: [...]}, "same_build": bool, "time"}): the share of prompts
    whose tokens all agree, judged on min_agreement when the baseline is the same build, else
    reported."""
    started = time.perf_counter()
    out = _result(cfg, "agreement", started)
    rows = agreement_rows(cfg["requests"])
    bodies = [request_body(model, r, cfg["max_tokens"], False, False, logprobs=True) for r in rows]
    replies = _ask_all(ep, bodies, server, cfg)
    _count_errors(out, replies)
    tokens, unit = {}, "tokens"
    for row, reply in zip(rows, replies):
        if reply.error:
            continue
        if reply.tokens is None:
            unit = "words (the server sent no logprobs)"
        got = reply.tokens if reply.tokens is not None else _words(reply.content)
        tokens[row["id"]] = got[:cfg["max_tokens"]]
    out.update(requests=len(rows), tokens=tokens, unit=unit)
    entries = []
    if out["errors"]:
        entries.append({"threshold": "errors", "state": FAIL, "required": 0, "measured": out["errors"],
                        "message": "%d request(s) got no reply" % out["errors"]})
    before = (baseline or {}).get("tokens") or {}
    common = [k for k in tokens if k in before]
    if not common:
        out["agreement"] = None
        out["note"] = "no last-known-good tokens to compare with: these are kept as the reference"
        return _finish(out, entries, cfg, started)
    diffs = []
    for k in common:
        pos = first_difference(tokens[k], before[k])
        if pos is not None:
            diffs.append({"id": k, "position": pos,
                          "was": "".join(before[k][pos:pos + 4]), "now": "".join(tokens[k][pos:pos + 4])})
    share = (len(common) - len(diffs)) / float(len(common))
    same = bool((baseline or {}).get("same_build"))
    judged = same and cfg.get("min_agreement") is not None
    out.update(agreement=share, compared=len(common), differ=diffs[:KEEP_WRONG], same_build=same,
               against=(baseline or {}).get("time"))
    first = ("; first: prompt %s differs at token %d (was %r, now %r)"
             % (diffs[0]["id"], diffs[0]["position"], diffs[0]["was"], diffs[0]["now"])) if diffs else ""
    shown = "%d of %d prompts agree with the last-known-good on their first %d %s" % (
        len(common) - len(diffs), len(common), cfg["max_tokens"], unit.split(" ")[0])
    if judged:
        need = cfg["min_agreement"]
        state = PASS if share >= need else FAIL
        entries.append({"threshold": "min_agreement", "state": state, "required": need, "measured": share,
                        "message": "%s (%.2f %s required %.2f)%s"
                                   % (shown, share, ">=" if state == PASS else "<", need, first)})
    else:
        out["note"] = "reported, not judged (%s): %s%s" % (
            "another engine, release or model revision than the last-known-good"
            if not same else "no min_agreement", shown, first)
    return _finish(out, entries, cfg, started)


# ------------------------------------------------------------------------------- pressure ----
# The pressure check: known answers asked again while long prompts hold at least ``kv_usage`` of
# the server's KV pool (sgl-project/sglang#36537: NEXTN with extra_buffer broke 92% of samples at
# a usage of 0.6 and above, none below). Fillers stream with this many tokens at most, held open
# (their KV kept) until the answers are in, then closed (the server aborts them): at ct129's 20-50
# tok/s a filler outlasts 36 answers of 384 tokens at C=2 (about 4 minutes).
FILLER_MAX_TOKENS = 16384
MAX_FILLERS = 8
# How often the server's usage is read while the answers run.
USAGE_EVERY_S = 0.5
# What a filler's budget leaves the context for its tag and its own output.
FILLER_MARGIN_TOKENS = 256
WHEN = ("changed", "always", "never")
# What a pressure run is due for: a change of any of these since the last-known-good.
CHANGED = (("engine", "engine"), ("version", "engine version"), ("release", "release"),
           ("profile", "profile"), ("profile_sha256", "profile settings"))


def pressure_due(when, fingerprint, before):
    """Whether the pressure check runs, and why: ``always``, ``never``, or ``changed`` (the
    engine, its release, the profile or the weights' revision differ from the last-known-good's
    fingerprint ``before``; no last-known-good is a change)."""
    if when == "always":
        return True, "asked (when: always)"
    if when == "never":
        return False, "not asked (when: never)"
    if not before:
        return True, "no last-known-good to compare with"
    now = fingerprint or {}
    changed = [label for key, label in CHANGED if now.get(key) != before.get(key)]
    if _weights(now) != _weights(before):
        changed.append("model revision")
    if changed:
        return True, "changed since the last-known-good: %s" % ", ".join(changed)
    return False, "nothing it guards changed since the last-known-good (engine, release, profile, weights)"


def _usage(ep, server):
    """The server's KV usage (0-1) from /metrics (engines/<engine>.py kv_usage_gauges), or None."""
    try:
        status, raw = ep.get("/metrics", timeout=5.0)
    except RequestError:
        return None
    if status != 200:
        return None
    return prom.gauge_max(raw.decode("utf-8", "replace"), _engine(server).kv_usage_gauges)


class _Filler(object):
    """One long prompt held in flight: a streamed request read in its own thread until closed."""

    def __init__(self, ep, body, cfg):
        self.stream = SSEStream(ep, "/v1/chat/completions", body, cfg["first_token_timeout"],
                                cfg["stall_timeout"])
        self.first = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            self.stream.open()
            for _, ev in self.stream.events():
                if ev == "[DONE]":
                    break
                if isinstance(ev, dict) and (ev.get("error") or any(
                        (c.get("finish_reason") not in (None, "length")) for c in ev.get("choices") or [])):
                    self.error = "ended early: %s" % _clip(json.dumps(ev))
                    break
                self.stream.got_first_token()
                self.first.set()
        except RequestError as e:
            if not self.stream.aborted:
                self.error = e.message
        finally:
            self.first.set()

    def close(self):
        self.stream.abort("the pressure check's answers are in")
        self.thread.join(10)
        self.stream.close()


def _fill_plan(cfg, server):
    """(tokens per filler, fillers) that hold ``kv_usage`` of the pool, or a reason why not."""
    pool = server.get("max_total_num_tokens")
    ctx = server.get("effective_context") or server.get("context_length") or pool
    if not pool:
        return None, "the server reports no KV capacity (SGLang /server_info max_total_num_tokens, vLLM " \
                     "vllm:cache_config_info): the cache cannot be filled to a share of it"
    want = int(cfg["kv_usage"] * pool) + FILLER_MARGIN_TOKENS
    per = max(1024, min(int(ctx), int(pool)) - FILLER_MAX_TOKENS - FILLER_MARGIN_TOKENS)
    count = -(-want // per)
    running = server.get("effective_max_running_requests") or server.get("max_running_requests")
    if count > MAX_FILLERS or (running and count + 1 > running):
        return None, "holding %.0f%% of a %s-token pool takes %d prompts of %s tokens, and the server " \
                     "runs %s requests at once" % (100 * cfg["kv_usage"], format(pool, ","), count,
                                                   format(per, ","), running or "?")
    return (-(-want // count), count), None


def run_pressure(cfg, ep, model, server, rows, progress=None, due=(True, "asked")):
    """Known answers (run_answers) while fillers hold ``kv_usage`` of the KV pool; the usage the
    server reported meanwhile is recorded; a run whose usage was not at least ``kv_usage``
    throughout is inconclusive (it did not test what it claims)."""
    started = time.perf_counter()
    if not due[0]:
        out = _result(cfg, "pressure", started)
        out.update(skipped=True, note="not run: %s" % due[1])
        return _finish(out, [], cfg, started)
    plan_, why = _fill_plan(cfg, server)
    if plan_ is None:
        out = _result(cfg, "pressure", started)
        return _finish(out, [{"threshold": "kv_usage", "state": INCONCLUSIVE, "required": cfg["kv_usage"],
                              "measured": None, "message": "not run: %s" % why}], cfg, started)
    per, count = plan_
    fillers = [_Filler(ep, dict(request_body(model, {"prompt": prompts.filler_prompt(
        per, prompts.DEFAULT_CHARS_PER_TOKEN, "pressure-%s-%d" % (uuid.uuid4().hex[:8], i))},
        FILLER_MAX_TOKENS, False, True), ignore_eos=True), cfg) for i in range(count)]
    samples, stop = [], threading.Event()
    try:
        for f in fillers:
            f.first.wait(cfg["first_token_timeout"])
        if progress:
            progress("%s: %d prompts of ~%s tokens hold the KV cache"
                     % (cfg["case"], count, format(per, ",")))
        before = _usage(ep, server)

        def watch():
            while not stop.is_set():
                u = _usage(ep, server)
                if u is not None:
                    samples.append(u)
                stop.wait(USAGE_EVERY_S)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        out = run_answers(dict(cfg, case=cfg["case"]), ep, model, server, rows, progress)
        stop.set()
        watcher.join(10)
    finally:
        stop.set()
        for f in fillers:
            f.close()
    out["check"] = "pressure"
    lowest = min(samples) if samples else before
    out["kv_usage"] = {"target": cfg["kv_usage"], "before": before, "min": lowest,
                       "max": max(samples) if samples else before, "samples": len(samples),
                       "fillers": count, "filler_tokens": per}
    out["note"] = "run: %s" % due[1]
    broken = [f.error for f in fillers if f.error]
    if lowest is None or lowest < cfg["kv_usage"] or broken:
        reason = ("the server reports no KV usage (/metrics: %s)" % ", ".join(_engine(server).kv_usage_gauges)
                  if lowest is None else "a filler %s" % broken[0] if broken and lowest >= cfg["kv_usage"]
                  else "the KV usage the server reported fell to %.2f, under %.2f"
                  % (lowest, cfg["kv_usage"]))
        entry = {"threshold": "kv_usage", "state": INCONCLUSIVE, "required": cfg["kv_usage"],
                 "measured": lowest,
                 "message": "the KV cache was not held at %.0f%% while the answers ran: %s"
                            % (100 * cfg["kv_usage"], reason)}
        return _finish(out, out["judged"] + [entry], cfg, started)
    for e in out["judged"]:
        e["message"] = "under KV usage %.2f-%.2f: %s" % (lowest, out["kv_usage"]["max"], e["message"])
    return _finish(out, out["judged"], cfg, started)


# ------------------------------------------------------------------------------ the plan's ---
def validate(options):
    """A quality case's configuration (plan.case_configs' options plus the plan's common ones);
    ConfigError names a bad option."""
    cfg = dict(options)
    check = cfg.get("check")
    if check not in CHECKS:
        raise ConfigError("check", "must be one of %s, got %r" % (", ".join(CHECKS), check))
    for key in ("requests", "max_requests", "concurrency", "max_tokens"):
        if not isinstance(cfg.get(key), int) or isinstance(cfg.get(key), bool) or cfg[key] < 1:
            raise ConfigError(key, "must be an integer >= 1, got %r" % (cfg.get(key),))
    for key in QUALITY_THRESHOLDS:
        value = cfg.get(key)
        if value is not None and not (isinstance(value, (int, float)) and 0 <= value <= 1):
            raise ConfigError(key, "must be a share from 0 to 1, got %r" % (value,))
    for key, default in CHECK_OPTIONS.get(check, {}).items():
        if cfg.get(key) is None:
            cfg[key] = default
    if check == "pressure":
        if not (isinstance(cfg["kv_usage"], (int, float)) and 0 < cfg["kv_usage"] < 1):
            raise ConfigError("kv_usage", "must be a share of the KV pool between 0 and 1, got %r"
                              % (cfg["kv_usage"],))
        if cfg["when"] not in WHEN:
            raise ConfigError("when", "must be one of %s, got %r" % (", ".join(WHEN), cfg["when"]))
    cfg.setdefault("seconds_per_token", 0.5)
    return cfg


def rows_for(check, given=None, count=0):
    """The rows a check asks: a host's file (``given``: answers.parse's) where it has rows of
    the kind, else the built-in ones; and where they came from."""
    given = given or {}
    if check == "tool_calls":
        if given.get("calls"):
            return given["calls"], given.get("source") or "sglang_gate_answers"
        return known.builtin_calls(count), "built-in"
    if given.get("answers"):
        return given["answers"], given.get("source") or "sglang_gate_answers"
    return known.builtin(count), "built-in"


def run(cfg, ep, model, server, given=None, baseline=None, progress=None, due=(True, "asked")):
    """Run one quality case (``cfg``: validate's) against the server; its result. ``baseline``:
    the agreement's (plan.agreement_baseline); ``due``: whether the pressure check runs and why
    (pressure_due)."""
    check = cfg["check"]
    if check == "agreement":
        return run_agreement(cfg, ep, model, server, baseline, progress)
    rows, source = rows_for(check, given, cfg["max_requests"])
    cfg = dict(cfg, rows_from=source)
    if check == "pressure":
        return run_pressure(cfg, ep, model, server, rows, progress, due)
    runner = {"answers": run_answers, "tool_calls": run_tool_calls, "reasoning": run_reasoning}[check]
    return runner(cfg, ep, model, server, rows, progress)


def line(r):
    """One quality case's result in one line (the gate's summary, logs)."""
    check = r.get("check")
    if r.get("skipped"):
        return "%s: %s" % (r["case"], r.get("note") or "not run")
    if check in ("answers", "pressure"):
        iv = r.get("accuracy") or {}
        shown = ", accuracy %.2f [%.2f, %.2f]" % (iv["estimate"], iv["lower"], iv["upper"]) if iv else ""
        text = "%s: %d of %d right%s" % (r["case"], r.get("right") or 0, r.get("requests") or 0, shown)
        kv = r.get("kv_usage") or {}
        if kv.get("min") is not None:
            fillers = kv.get("fillers") or 0
            text += ", KV usage %.2f-%.2f (%d prompt%s of ~%s tokens)" % (
                kv["min"], kv["max"], fillers, "" if fillers == 1 else "s",
                format(kv.get("filler_tokens") or 0, ","))
    elif check == "agreement":
        if r.get("agreement") is not None:
            text = "%s: %d of %d prompts agree with the last-known-good%s" % (
                r["case"], round(r["agreement"] * r["compared"]), r["compared"],
                "" if r.get("same_build") else " (reported)")
        else:
            text = "%s: %d prompts kept as the reference" % (r["case"], len(r.get("tokens") or {}))
    else:
        text = "%s: %d of %d replies as clients parse them" % (r["case"], r.get("right") or 0,
                                                              r.get("requests") or 0)
    word = {PASS: "", FAIL: " FAILED", INCONCLUSIVE: " INCONCLUSIVE"}.get(r.get("verdict"), "")
    return text + (" (%s)" % r["rows_from"] if r.get("rows_from") not in (None, "built-in") else "") + word
