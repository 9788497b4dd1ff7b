# -*- coding: utf-8 -*-
"""The benchmark: warmup, N streamed requests at concurrency C, per-request decode speed and
speculative accept length from SGLang's own per-request counters, aggregate throughput, latency
percentiles and the intervals the verdict is judged on, optional /metrics cross-check. It measures
what config.py's options ask for; verdict.py judges it (a caller hands its judge to measure() and
run()).

Standard library only, Python 3.9+ (runs on the target host through AnsiballZ)."""
from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, deque

from ..plan import capacity
from . import config
from .. import engines
from ..engines import common
from . import metrics as prom
from .client import Endpoint, MeasureError, RequestError, SSEStream
from . import prompts as promptset
from . import stats
from .stats import latency_summary, percentile, summarize, weighted_samples

# One accept length for both engines (result["accept_len"], the thresholds, history, roofline).
ACCEPT_LEN_CONVENTION = ("completion tokens / verify steps (SGLang's spec_verify_ct, vLLM's "
                         "num_spec_steps); the token of each request's prefill counted")
# vLLM's own, reported beside it as engine_accept_len.
VLLM_ACCEPT_LEN_CONVENTION = ("vLLM's mean_acceptance_length: 1 + accepted draft tokens / verify "
                              "steps; the prefill's token not counted")

# What a request cut by the options' ends_at says (a tuner's budget ran out under it).
BUDGET_END = "the budget ended (ends_at)"


class _Request(object):
    """What one streamed request produced, as the client saw it."""

    __slots__ = ("rid", "phase", "case", "t_send", "t_first", "t_last", "t_end", "tokens", "chunks",
                 "itl", "finish", "finish_message", "completion_tokens", "prompt_tokens", "verify_ct",
                 "histogram", "accepted", "spec_tokens", "done", "error", "counted", "text")

    def __init__(self, rid, phase, case):
        self.rid, self.phase, self.case = rid, phase, case
        self.t_send = self.t_first = self.t_last = self.t_end = None
        self.tokens = 0          # tokens seen so far (cumulative counts from the server)
        self.chunks = 0
        self.itl = []            # (seconds per token, tokens) per token-bearing chunk after the first
        self.finish = None
        self.finish_message = None
        self.completion_tokens = None
        self.prompt_tokens = None
        self.verify_ct = None
        self.histogram = None
        self.accepted = None     # accepted draft tokens (vLLM's num_accepted_draft_tokens)
        self.spec_tokens = None  # drafts per verify step configured (vLLM's num_spec_tokens)
        self.done = False
        self.error = None        # (kind, message)
        self.counted = True      # False when the server gives no per-chunk token counts
        self.text = None         # the reply's first TEXT_KEPT characters, kept when asked for (a list)

    def on_tokens(self, now, total):
        """Record a chunk that brought the cumulative token count to ``total``."""
        new = total - self.tokens
        if new <= 0:
            return
        if self.t_first is None:
            self.t_first = now
        else:
            self.itl.append(((now - self.t_last) / new, new))
        self.t_last = now
        self.tokens = total
        self.chunks += 1

    def decode_tok_s(self):
        n = self.completion_tokens
        if not n or n < 2 or self.t_first is None or self.t_last <= self.t_first:
            return None
        return (n - 1) / (self.t_last - self.t_first)

    def as_dict(self, max_tokens):
        d = self.decode_tok_s()
        return {
            "rid": self.rid, "phase": self.phase, "case": self.case,
            "ttft_s": (self.t_first - self.t_send) if self.t_first is not None else None,
            "decode_tok_s": d,
            "e2e_s": (self.t_last - self.t_send) if self.t_last is not None else None,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "verify_ct": self.verify_ct,
            "accept_len": (self.completion_tokens / self.verify_ct)
            if self.verify_ct and self.completion_tokens else None,
            "engine_accept_len": (1.0 + self.accepted / self.verify_ct)
            if self.verify_ct and self.accepted is not None else None,
            "chunks": self.chunks,
            "finish_reason": self.finish,
            "short": self.is_short(max_tokens),
            "error": ({"kind": self.error[0], "message": self.error[1]} if self.error else None),
        }

    def is_short(self, max_tokens):
        return self.error is None and (self.completion_tokens or 0) < max_tokens


def _finish_type(reason):
    if isinstance(reason, dict):
        return reason.get("type") or str(reason)
    return reason


def _finish(rec, reason):
    rec.finish = _finish_type(reason)
    if isinstance(reason, dict) and reason.get("message"):
        rec.finish_message = str(reason["message"])


def _engine(kind):
    """The engine a server kind names; an unknown server is asked as the default engine is."""
    return engines.find(kind) or engines.get(engines.DEFAULT)


def _body(cfg, model, prompt, rid, max_tokens, kind=None):
    if cfg["api"] == "native":
        return {"text": prompt, "rid": rid, "stream": True,
                "sampling_params": {"max_new_tokens": max_tokens, "ignore_eos": True,
                                    "temperature": cfg["temperature"]}}
    body = {"model": model, "max_tokens": max_tokens, "temperature": cfg["temperature"],
            "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    # what the engine takes besides the OpenAI fields (engines/<engine>.py request_fields); the
    # fields an engine does not know it only logs as ignored
    body.update(_engine(kind).request_fields(rid))
    if cfg["api"] == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        body["chat_template_kwargs"] = {"enable_thinking": bool(cfg.get("thinking"))}
    else:
        body["prompt"] = prompt
    return body


# Where each engine puts a request's spec figures (engines/<engine>.py spec_chunk, spec_fields):
# SGLang's sglext spec_tokens_details / meta_info, vLLM 0.33's metrics.speculative_decoding.
# Each histogram[j] = verify steps that accepted exactly j drafts; verify_ct = its sum.
def _spec_from(rec, details, eng=None):
    if isinstance(details, list):
        details = details[0] if details else None
    if not isinstance(details, dict):
        return
    for attr, key in (eng or _engine(None)).spec_fields.items():
        value = details.get(key)
        if value or (attr == "accepted" and value is not None):  # no accepted draft is a figure
            setattr(rec, attr, list(value) if attr == "histogram" else int(value))


# What a long-context reply keeps of its text: the planted facts come first, if at all.
TEXT_KEPT = 4000


def _keep(rec, piece):
    if rec.text is not None and piece and sum(map(len, rec.text)) < TEXT_KEPT:
        rec.text.append(piece)


def _consume_native(rec, now, ev):
    if rec.text is not None and isinstance(ev.get("text"), str):  # cumulative text
        rec.text[:] = [ev["text"][:TEXT_KEPT]]
    meta = ev.get("meta_info") or {}
    if "completion_tokens" in meta:
        rec.on_tokens(now, int(meta["completion_tokens"]))
    if meta.get("finish_reason") is not None:
        _finish(rec, meta["finish_reason"])
        rec.completion_tokens = int(meta.get("completion_tokens", rec.tokens))
        rec.prompt_tokens = meta.get("prompt_tokens")
        _spec_from(rec, meta)


def _consume_openai(rec, now, ev):
    usage = ev.get("usage")
    choices = ev.get("choices") or []
    text = False
    for ch in choices:
        delta = ch.get("delta") or {}
        # thinking: SGLang's reasoning_content, vLLM 0.33's reasoning (DeltaMessage)
        if delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") \
                or ch.get("text"):
            text = True
            _keep(rec, delta.get("content") or ch.get("text"))
        if ch.get("finish_reason") is not None:
            _finish(rec, ch["finish_reason"])
    if rec.t_first is None and any("role" in (ch.get("delta") or {}) for ch in choices):
        # SGLang sends the role chunk when the first output (the prefill's token) arrives; under
        # a reasoning parser that token (<think>) has no visible delta, so this is its arrival.
        # vLLM 0.33 too: its role chunk goes out on the first RequestOutput, which its scheduler
        # emits only with the first new token (a chunked prefill step emits nothing).
        rec.on_tokens(now, 1)
    if usage and usage.get("completion_tokens") is not None:
        total = int(usage["completion_tokens"])
        if text or total > rec.tokens:
            rec.on_tokens(now, total)
        if not choices:  # the final usage chunk
            rec.completion_tokens = total
            rec.prompt_tokens = usage.get("prompt_tokens")
    elif text:
        # No per-chunk counts (continuous_usage_stats unsupported): count chunks, mark uncounted.
        rec.counted = False
        rec.on_tokens(now, rec.tokens + 1)
    for eng in engines.every():
        outer, inner = eng.spec_chunk
        chunk = ev.get(outer)
        if isinstance(chunk, dict) and chunk.get(inner):
            _spec_from(rec, chunk[inner], eng)


class _Run(object):
    """Shared state of one benchmark run: open streams (for aborting), progress, deadline."""

    def __init__(self, cfg, endpoint, model, progress, kind=None):
        self.cfg, self.endpoint, self.model, self.progress = cfg, endpoint, model, progress
        self.kind = kind
        self.lock = threading.Lock()
        self.active = set()
        left = cfg["run_timeout"]
        self.budget_bound = cfg.get("ends_at") is not None and cfg["ends_at"] - time.time() < left
        if self.budget_bound:
            left = max(0.0, cfg["ends_at"] - time.time())
        self.deadline = time.perf_counter() + left
        self.abort_reason = None

    def one(self, rec, prompt):
        path = config.APIS[self.cfg["api"]]
        consume = _consume_native if self.cfg["api"] == "native" else _consume_openai
        tokens = self.cfg["warmup_max_tokens" if rec.phase == "warmup" else "max_tokens"]
        body = _body(self.cfg, self.model, prompt, rec.rid, tokens, self.kind)
        stream = SSEStream(self.endpoint, path, body, self.cfg["first_token_timeout"],
                           self.cfg["stall_timeout"])
        with self.lock:
            if self.abort_reason:
                rec.error = ("aborted", self.abort_reason)
                return
            self.active.add(stream)
        try:
            rec.t_send = stream.open()
            for now, ev in stream.events():
                if ev == "[DONE]":
                    rec.done = True
                    continue
                if isinstance(ev, dict) and ev.get("error"):
                    err = ev["error"]
                    msg = err.get("message") if isinstance(err, dict) else str(err)
                    raise RequestError("server_error", "server reported an error mid-stream: %s"
                                       % msg)
                had = rec.t_first
                consume(rec, now, ev)
                if had is None and rec.t_first is not None:
                    stream.got_first_token()
            self._check_complete(rec)
        except RequestError as e:
            rec.error = (e.kind, e.message)
        finally:
            rec.t_end = time.perf_counter()
            with self.lock:
                self.active.discard(stream)
            stream.close()
            if self.progress:
                self.progress(rec)

    def _check_complete(self, rec):
        if rec.finish == "abort":
            # SGLang ends a request it refuses (an input longer than the context it holds) or
            # drops with finish_reason abort, after HTTP 200 on a stream
            raise RequestError("server_abort", "the server aborted the request (%s)" % (
                rec.finish_message or "finish_reason abort: SGLang's answer to an input longer than "
                                      "the context it holds (max_req_input_len in /server_info)"))
        if rec.finish is None or not rec.done:
            raise RequestError("truncated", "stream ended after %d tokens without %s (truncated)"
                               % (rec.tokens, "a finish reason" if rec.finish is None
                                  else "[DONE]"))
        if rec.completion_tokens is None:
            rec.completion_tokens = rec.tokens
        if rec.t_first is None:
            raise RequestError("protocol", "stream finished (%s) without any token" % rec.finish)

    def phase(self, recs, prompts):
        """Run ``recs`` (with their prompts) at the configured concurrency; respects the deadline."""
        todo = deque(range(len(recs)))
        qlock = threading.Lock()

        def worker():
            while True:
                with qlock:
                    if not todo:
                        return
                    i = todo.popleft()
                self.one(recs[i], prompts[i])

        self._workers(worker, min(self.cfg["concurrency"], len(recs)))
        for rec in recs:
            if rec.error is None and not rec.done and rec.t_send is None:
                rec.error = ("aborted", self.abort_reason or "not run")

    def _workers(self, worker, n):
        threads = [threading.Thread(target=worker, name="bench-%d" % i) for i in range(max(0, n))]
        for t in threads:
            t.daemon = True
            t.start()
        for t in threads:
            t.join(max(0.0, self.deadline - time.perf_counter()))
        if any(t.is_alive() for t in threads):
            with self.lock:
                self.abort_reason = BUDGET_END if self.budget_bound else (
                    "run timeout: the whole run exceeded %.0fs" % self.cfg["run_timeout"])
                streams = list(self.active)
            for s in streams:
                s.abort(self.abort_reason)
            for t in threads:
                t.join(5.0)


def _get_json(endpoint, path):
    """GET ``path`` as JSON: (status, object), (None, None) when the server did not answer."""
    try:
        return endpoint.get_json(path)
    except RequestError:
        return None, None


def vllm_spec_steps(server, spec_tokens):
    """An engine that drafts one token per step (vLLM's MTP): num_speculative_tokens is the draft
    steps (the roofline's ``spec_steps``). ``spec_tokens`` (a request's num_spec_tokens) fills what
    discovery lacked."""
    eng = engines.find(server.get("kind"))
    if not getattr(eng, "drafts_one_per_step", False) or not spec_tokens:
        return
    common.fill_spec_steps(eng, server, spec_tokens)


def discover(endpoint, model=None):
    """Model name from /v1/models (checking ``model`` is served) and what the engine says about
    itself: each engine module's ``discover`` in turn (SGLang's /server_info; vLLM's /version,
    model card and /metrics), the first that recognises the server.

    Raises MeasureError with a one-line reason when the server cannot be used at all."""
    try:
        status, body = endpoint.get_json("/v1/models")
    except RequestError as e:
        raise MeasureError("%s (is the server up and listening at %s?)" % (e.message, endpoint.url))
    if status in (401, 403):
        raise MeasureError("authentication failed: GET /v1/models answered HTTP %d; the API key is "
                           "%s" % (status, "wrong" if endpoint.api_key else "missing"))
    if status != 200 or not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise MeasureError("GET %s/v1/models answered HTTP %d without a model list: not an "
                           "SGLang/OpenAI-compatible server" % (endpoint.url, status))
    cards = {m["id"]: m for m in body["data"] if isinstance(m, dict) and m.get("id")}
    served = list(cards)
    if not served:
        raise MeasureError("the server lists no models at /v1/models")
    if model is None:
        model = served[0]
    elif model not in served:
        raise MeasureError("model %r is not served at %s; the server offers: %s"
                           % (model, endpoint.url, ", ".join(served)))
    answers = {}

    def get_json(path):
        # (status, JSON) of GET path, (None, None) when the server did not answer; once per path
        if path not in answers:
            try:
                answers[path] = endpoint.get_json(path)
            except RequestError:
                answers[path] = (None, None)
        return answers[path]

    for eng in engines.every():
        server = eng.discover(cards[model], get_json, lambda: _scrape(endpoint, True))
        if server is not None:
            return model, server
    return model, {"kind": "unknown", "version": None, "speculative_algorithm": None}


def probe(options):
    """Check-mode readiness probe: no generation besides SGLang's own /health."""
    cfg = config.validate(options)
    ep = Endpoint(cfg["url"], cfg["api_key"], cfg["connect_timeout"], cfg["validate_certs"])
    out = {"url": ep.url, "ready": False, "health_status": None, "model": None, "server": None}
    try:
        out["health_status"], _ = ep.get("/health", timeout=cfg["connect_timeout"] + 20)
    except RequestError as e:
        out["reason"] = e.message
        return out
    if out["health_status"] != 200:
        # SGLang answers 503 while it loads or warms up; vLLM 0.33 keeps its port closed until the
        # engine is up and answers 503 only once the engine died (EngineDeadError)
        out["reason"] = ("GET /health answered HTTP %d (SGLang: loading or warming up; vLLM: its "
                         "engine died)" % out["health_status"])
        return out
    try:
        out["model"], out["server"] = discover(ep, cfg["model"])
    except MeasureError as e:
        out["reason"] = str(e)
        return out
    out["ready"] = True
    out["reason"] = "server healthy; benchmark not run in check mode"
    return out


def _scrape(endpoint, wanted):
    if not wanted:
        return None
    try:
        status, raw = endpoint.get("/metrics")
    except RequestError:
        return None
    if status != 200:
        return None
    return prom.parse(raw.decode("utf-8", "replace"))


def _acceptance(recs):
    """Accept length = total tokens / total verify steps; per case; per draft position; vLLM's own
    1 + accepted drafts / verify steps beside it."""
    spec = [r for r in recs if r.verify_ct]
    out = {"accept_len": None, "by_prompt": {}, "by_position": None, "engine_accept_len": None}
    if not spec:
        return out
    out["accept_len"] = sum(r.completion_tokens for r in spec) / float(sum(r.verify_ct
                                                                            for r in spec))
    own = [r for r in spec if r.accepted is not None]
    if own:
        out["engine_accept_len"] = 1.0 + sum(r.accepted for r in own) / float(sum(r.verify_ct
                                                                               for r in own))
    cases = {}
    for r in spec:
        tok, ver = cases.get(r.case, (0, 0))
        cases[r.case] = (tok + r.completion_tokens, ver + r.verify_ct)
    out["by_prompt"] = {c: t / float(v) for c, (t, v) in sorted(cases.items())}
    hist = []
    for r in spec:
        for k, n in enumerate(r.histogram or []):
            if k >= len(hist):
                hist.extend([0] * (k + 1 - len(hist)))
            hist[k] += n
    steps = sum(hist)
    if steps:
        # P(draft position i accepted) = share of verify steps that accepted at least i drafts.
        out["by_position"] = [sum(hist[i:]) / float(steps) for i in range(1, len(hist))]
    return out


def endpoint(cfg):
    return Endpoint(cfg["url"], cfg["api_key"], cfg["connect_timeout"], cfg["validate_certs"])


def warm_up(cfg, ep, model, progress=None, learn=False, kind=None):
    """The warmup requests (discarded; the first decode batches are slow). Their prompts are
    WARMUP_PROMPTS and, with ``learn``, a corpus sample: the two prompt sizes the server counted
    give its characters per token for the corpus (the chat template's tokens cancel out).

    Returns (warmup records, characters per token or None)."""
    n = cfg["warmup"]
    tag = uuid.uuid4().hex[:8]
    texts = [promptset.tagged("warm-%s-%d" % (tag, i),
                              promptset.WARMUP_PROMPTS[i % len(promptset.WARMUP_PROMPTS)])
             for i in range(n)]
    if learn and n >= 2:
        texts[-1] = promptset.corpus_sample(SAMPLE_CHARS, "warm-%s-%d" % (tag, n - 1))
    recs = [_Request("bench-%s-w%d" % (tag, i), "warmup", "warmup") for i in range(n)]
    if recs:
        _Run(cfg, ep, model, progress, kind).phase(recs, texts)
    cpt = None
    if learn and n >= 2:
        a, b = recs[0], recs[-1]
        if a.error is None and b.error is None and a.prompt_tokens and b.prompt_tokens \
                and b.prompt_tokens > a.prompt_tokens:
            ratio = (len(texts[-1]) - len(texts[0])) / float(b.prompt_tokens - a.prompt_tokens)
            if 1.0 <= ratio <= 10.0:
                cpt = ratio
    return recs, cpt


# Characters of the warmup's corpus sample (about 2,000 tokens): enough that the ratio of two
# prompt sizes is within 1% of the long prompt's.
SAMPLE_CHARS = 8000


def measure(cfg, ep, model, server, warm=(), chars_per_token=None, progress=None, raw=None, judge=None):
    """The measured requests of one case, ``requests`` of them and then one at a time until the
    verdict is decided or ``max_requests`` ran; the result dict (see the module's RETURN).
    ``judge(result, cfg, final)`` judges a result in place and says whether its verdict is decided
    (verdict.judge_case): a look after each batch, then the result; without one nothing is judged
    and every request up to max_requests runs. ``raw(records)``, when given, gets every request's
    record so far (warmup and measured, as per_request holds them) after each batch, before
    anything is computed from them: a failure in the figures still leaves the measurements."""
    want_metrics = cfg["metrics"] != "never"
    tag = uuid.uuid4().hex[:8]
    cpt = cfg["chars_per_token"] or chars_per_token
    recs, texts = [], []
    for i in range(cfg["max_requests"]):  # every prompt is built before the first request
        rtag = "%s-%s-%d" % (tag, cfg["case"], i)
        if cfg["prompts"] == "long_context":
            name = cfg["case"]
            try:
                text = promptset.long_context_prompt(
                    cfg["prompt_tokens"], cpt or promptset.DEFAULT_CHARS_PER_TOKEN, i, rtag)
            except ValueError as e:
                raise MeasureError("case %s: %s" % (cfg["case"], e))
        else:
            prompt_set = promptset.PROMPT_SETS[cfg["prompts"]]
            name, body = prompt_set[i % len(prompt_set)]
            text = promptset.tagged(rtag, body)
        recs.append(_Request("bench-%s-m%d" % (tag, i), "measure", name))
        if cfg["prompts"] == "long_context":
            recs[-1].text = []  # its reply is read for the planted facts (facts_stated)
        texts.append(text)
    runner = _Run(cfg, ep, model, progress, server.get("kind"))
    if progress is not None and hasattr(progress, "start"):
        progress.start(cfg)
    before = _scrape(ep, want_metrics)
    # ``requests`` first, then one wave of ``concurrency`` requests at a time: a verdict after
    # each, with no request open (an open one would end the run below its concurrency and lower
    # the aggregate it judges)
    issued, wall, looks, size = [], 0.0, 0, cfg["requests"]
    while True:
        batch = slice(len(issued), min(len(issued) + size, cfg["max_requests"]))
        t = time.perf_counter()
        runner.phase(recs[batch], texts[batch])
        wall += time.perf_counter() - t
        issued = recs[:batch.stop]
        if raw is not None:
            raw([r.as_dict(cfg["max_tokens"]) for r in list(warm) + issued])
        if len(issued) >= cfg["max_requests"] or runner.abort_reason:
            break
        size = cfg["concurrency"]
        if judge is None:
            continue
        try:
            look = _result(cfg, ep, model, server, list(warm), issued, wall, None, None)
        except MeasureError:  # nothing measurable yet: the errors decide
            if len(issued) > cfg["max_errors"]:
                break
            continue
        looks += 1
        decided = judge(look, cfg, False)
        if progress is not None and hasattr(progress, "look"):
            progress.look(cfg, look, wall)
        if decided:
            break
    after = _scrape(ep, want_metrics and before is not None)
    result = _result(cfg, ep, model, server, list(warm), issued, wall, before, after)
    decided = judge is not None and judge(result, cfg, True)
    result["chars_per_token"] = cpt
    result["sequential"] = {"min_requests": cfg["requests"], "max_requests": cfg["max_requests"],
                            "looks": looks, "measured": len(issued),
                            "stopped": "decided" if decided and len(issued) < cfg["max_requests"]
                            else "max_requests"}
    if judge is not None and progress is not None and hasattr(progress, "look") and not looks:
        progress.look(cfg, result, wall)
    return result


def check_api(cfg, server):
    """Refuse an API the engine does not serve (before any request)."""
    eng = engines.find(server.get("kind"))
    if eng is not None and not eng.native_api and cfg["api"] == "native":
        raise MeasureError("api native is SGLang's /generate; %s %s serves no /generate: use api "
                           "chat or completions" % (eng.label, server.get("version") or ""))


def run(options, progress=None, raw=None, judge=None):
    """Benchmark the server with one case; returns the full result dict (see the module's
    RETURN). Raises ConfigError for bad options and MeasureError when nothing could be measured.
    ``raw``, ``judge``: as for measure."""
    cfg = config.validate(options)
    ep = endpoint(cfg)
    model, server = discover(ep, cfg["model"])
    check_api(cfg, server)
    learn = cfg["prompts"] == "long_context" and not cfg["chars_per_token"]
    warm, cpt = warm_up(cfg, ep, model, progress, learn=learn, kind=server["kind"])
    return measure(cfg, ep, model, server, warm, cpt, progress, raw, judge)


def _intervals(cfg, ok, full, wall):
    """Each judged figure's interval at cfg["confidence"] (stats.py): the per-request median decode
    tok/s and TTFT by order statistics; accept length (completion tokens / verify steps) and the
    aggregate by the bootstrap, requests resampled. The aggregate is per-request throughput
    (tokens / request latency) times the run's mean number of open requests (busy / wall), which
    equals total tokens / wall."""
    level = cfg["confidence"]
    spec = [r for r in ok if r.verify_ct]
    timed = [r for r in ok if r.t_end is not None and r.t_send is not None]
    busy = sum(r.t_end - r.t_send for r in timed)
    return {
        "level": level,
        "decode_tok_s": stats.median_interval([r.decode_tok_s() for r in full if r.decode_tok_s()], level),
        "accept_len": stats.ratio_interval([(r.completion_tokens, r.verify_ct) for r in spec], level),
        "aggregate_tok_s": stats.ratio_interval([(r.completion_tokens, r.t_end - r.t_send) for r in timed],
                                                level, scale=busy / wall) if wall > 0 and busy else None,
        "ttft_s": stats.median_interval([r.t_first - r.t_send for r in ok], level),
        # seconds per verify step (accept length / decode tok/s, per request), as attribution.py splits it
        "step_time_s": stats.median_interval(
            [stats.step_time_s(r.decode_tok_s(), r.completion_tokens / r.verify_ct
                                     if r.verify_ct else 1.0) for r in full if r.decode_tok_s()], level),
    }


def _result(cfg, ep, model, server, warm, meas, wall, before, after):
    ok = [r for r in meas if r.error is None]
    full = [r for r in ok if not r.is_short(cfg["max_tokens"])]
    failed = [r for r in list(warm) + list(meas) if r.error is not None]
    notes = []
    if not ok:
        lost = [r for r in meas if r.error is not None]
        kinds = Counter(r.error[0] for r in lost)
        first = lost[0].error[1] if lost else "no request was run"
        raise MeasureError("all %d measured requests failed (%s); first: %s"
                           % (len(meas), ", ".join("%d x %s" % (n, k) for k, n in kinds.items()),
                              first))
    short = [r for r in ok if r.is_short(cfg["max_tokens"])]
    if short:
        notes.append("%d request(s) stopped before max_tokens (%s) and are excluded from the "
                     "decode figures: the server ignored ignore_eos"
                     % (len(short), ", ".join(sorted(set(str(r.finish) for r in short)))))
    if any(not r.counted for r in ok):
        notes.append("the server sent no per-chunk token counts: inter-token latency is per chunk")
    acc = _acceptance(ok)
    vllm_spec_steps(server, next((r.spec_tokens for r in ok if r.spec_tokens), None))
    if acc["accept_len"] is None:
        eng = engines.find(server["kind"])
        if eng is not None and server.get("speculative_algorithm") and eng.no_spec_metrics_note(server):
            notes.append(eng.no_spec_metrics_note(server))
        elif server.get("speculative_algorithm"):
            notes.append("the server runs %s but returned no per-request spec_verify_ct"
                         % server["speculative_algorithm"])
        elif eng is not None:
            notes.append("speculative decoding is off on this server: no accept length")
        else:
            notes.append("no per-request speculative counters (spec_verify_ct): not an SGLang "
                         "server, or speculation is off")
    total_tokens = sum(r.completion_tokens for r in ok)
    ttft = [r.t_first - r.t_send for r in ok]
    itl = weighted_samples(p for r in ok for p in r.itl)
    counted = [int(r.prompt_tokens) for r in ok if isinstance(r.prompt_tokens, (int, float))]
    result = {
        "url": ep.url, "model": model, "api": cfg["api"], "case": cfg["case"],
        "prompts": cfg["prompts"],
        "concurrency": cfg["concurrency"], "requests": len(meas), "warmup": len(warm),
        "max_tokens": cfg["max_tokens"],
        "server": server,
        # the server's own count (usage.prompt_tokens), chat template included
        "prompt_tokens": {"target": cfg["prompt_tokens"], "n": len(counted),
                          "min": min(counted) if counted else None,
                          "median": percentile(counted, 50) if counted else None,
                          "max": max(counted) if counted else None},
        "decode_tok_s": summarize([r.decode_tok_s() for r in full if r.decode_tok_s()]),
        "accept_len": acc["accept_len"],
        "accept_len_convention": ACCEPT_LEN_CONVENTION,
        # vLLM's own accept length (its mean_acceptance_length), beside ours; None for SGLang,
        # whose own is accept_len
        "engine_accept_len": acc["engine_accept_len"],
        "engine_accept_len_convention": VLLM_ACCEPT_LEN_CONVENTION
        if acc["engine_accept_len"] is not None else None,
        "accept_len_by_prompt": acc["by_prompt"],
        "accept_by_position": acc["by_position"],
        "aggregate_tok_s": total_tokens / wall if wall > 0 else None,
        "wall_s": wall,
        "completion_tokens": total_tokens,
        "ttft_s": latency_summary(ttft),
        "itl_ms": latency_summary(itl, 1000.0),
        "errors": len(failed),
        "error_kinds": dict(Counter(r.error[0] for r in failed)),
        "error_details": [dict(rid=r.rid, phase=r.phase, kind=r.error[0], message=r.error[1])
                          for r in failed],
        "excluded_short": len(short),
        "metrics": prom.window(before, after, total_tokens, sum(r.verify_ct or 0 for r in ok))
        if before and after else None,
        "per_request": [r.as_dict(cfg["max_tokens"]) for r in list(warm) + list(meas)],
        "notes": notes,
        "intervals": _intervals(cfg, ok, full, wall),
    }
    if cfg["requests"] < cfg["concurrency"]:
        notes.append("requests (%d) < concurrency (%d): the aggregate is not measured at full "
                     "concurrency" % (cfg["requests"], cfg["concurrency"]))
    metrics_note = _engine(server["kind"]).metrics_note(before) if not before else None
    if metrics_note and cfg["metrics"] == "auto":
        notes.append(metrics_note)
    if cfg["model_size"] and cfg["hardware"]:
        steps = server.get("speculative_num_steps") if server.get("speculative_algorithm") else 0
        result["roofline"] = capacity.roofline(cfg["model_size"], cfg["hardware"], steps or 0,
                                               acc["accept_len"], result["decode_tok_s"]["median"])
    if cfg["prompts"] == "long_context":
        result["facts"] = facts_stated(ok)
    return result


def facts_stated(recs):
    """How many of the facts planted in each long-context prompt (prompts.long_context_facts of
    its index) its reply states, the value found in the reply's text (case-insensitive): {"planted",
    "stated" (per reply, in request order), "median", "missed" (the first fact a reply left out)}."""
    stated, missed = [], None
    for r in recs:
        index = int(r.rid.rsplit("-m", 1)[1])
        said = "".join(r.text or ()).lower()
        facts = promptset.long_context_facts(index)
        found = [value.lower() in said for _, value in facts]
        stated.append(sum(found))
        if missed is None and not all(found):
            what, value = facts[found.index(False)]
            missed = {"rid": r.rid, "what": what, "value": value,
                      "depth": promptset.FACT_DEPTHS[found.index(False)]}
    return {"planted": len(promptset.FACT_DEPTHS), "stated": stated,
            "median": percentile(stated, 50) if stated else None, "missed": missed}
