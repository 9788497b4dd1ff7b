# -*- coding: utf-8 -*-
"""The benchmark: warmup, N streamed requests at concurrency C, per-request decode speed and
speculative accept length from SGLang's own per-request counters, aggregate throughput, latency
percentiles, optional /metrics cross-check, and threshold evaluation.

Standard library only, Python 3.9+ (runs on the target host through AnsiballZ)."""
from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, deque

from . import attribution, capacity, engines, history
from .engines import common
from .decision import FAIL, INCONCLUSIVE_VERDICT, PASS
from . import metrics as prom
from .client import ConfigError, Endpoint, MeasureError, RequestError, SSEStream
from . import prompts as promptset
from . import stats
from .stats import latency_summary, percentile, summarize, weighted_samples

APIS = {
    # api name: (path, builds the body)
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "native": "/generate",
}

METRICS_MODES = ("auto", "always", "never")

# One accept length for both engines (result["accept_len"], the thresholds, history, roofline).
ACCEPT_LEN_CONVENTION = ("completion tokens / verify steps (SGLang's spec_verify_ct, vLLM's "
                         "num_spec_steps); the token of each request's prefill counted")
CONVENTION_SHORT = "completion tokens / verify steps"
# vLLM's own, reported beside it as engine_accept_len.
VLLM_ACCEPT_LEN_CONVENTION = ("vLLM's mean_acceptance_length: 1 + accepted draft tokens / verify "
                              "steps; the prefill's token not counted")

THRESHOLDS = ("min_tok_s", "min_accept_len", "min_aggregate_tok_s", "max_ttft_s", "max_errors", "min_facts")
INCONCLUSIVE = ("fail", "pass")
# Thresholds judged on a median's interval (order statistics): min_sample(level) requests at least.
MEDIAN_THRESHOLDS = ("min_tok_s", "max_ttft_s")
UNDECIDED = "undecided"  # a threshold's state (and an interim look's verdict) while an interval straddles it

# A long-context case shorter than this is not one: about where draft acceptance starts to fall
# with context (the comparison's shallowest depth, playbooks/compare.yml).
MIN_LONG_PROMPT_TOKENS = 1024
# A long-context case whose prompts the server counted below this share of the target did not
# measure what it promised (the corpus or the characters-per-token estimate fell short).
PROMPT_TOKENS_TOLERANCE = 0.9

# What a request cut by the options' ends_at says (a tuner's budget ran out under it).
BUDGET_END = "the budget ended (ends_at)"
# Options only a caller on the controller sets (bench tune's budget): not the module's or the CLI's.
CALLER_ONLY = ("ends_at",)


DEFAULTS = {
    "url": None,
    "api_key": None,
    "model": None,
    "api": "chat",
    "concurrency": 1,
    "requests": 8,
    # Sequential measurement: after ``requests``, one more request at a time until every
    # threshold is decided by its interval or ``max_requests`` ran (None: = requests, a fixed
    # sample). The verdict logic: evaluate() and measure() below.
    "max_requests": None,
    # The intervals' level (two-sided): each threshold is cleared when the bound on its side is
    # past it, failed when the other bound is.
    "confidence": 0.95,
    # A threshold still inside the interval at max_requests: "fail" (the gate refuses what it
    # cannot confirm) or "pass" (reported, not failed).
    "inconclusive": "fail",
    "warmup": 2,
    "max_tokens": 1024,
    # The warmup only has to take the first decode batches' one-off slowness (JIT, graph
    # warmup); 32 tokens are a dozen decode steps.
    "warmup_max_tokens": 32,
    "temperature": 0.0,
    # Whether the model thinks before it answers (chat API: chat_template_kwargs.enable_thinking,
    # which Qwen3.6's template reads; it thinks unless told not to). The completions and native
    # APIs send the prompt raw, without the chat template: no thinking asked for.
    "thinking": False,
    # coding / prose: those prompts (prompts.py); long_context: a repository slice of about
    # prompt_tokens tokens (the server's count is reported; chars per token is learned in warmup
    # unless given).
    "prompts": "coding",
    "prompt_tokens": None,
    "chars_per_token": None,
    "case": None,            # a name for the run (a gate plan case); default: the prompt source
    "connect_timeout": 5.0,
    "first_token_timeout": 120.0,
    "stall_timeout": 30.0,
    "run_timeout": 1800.0,
    # An absolute end (seconds since the epoch; None: none) for every run of a plan, a tuner's
    # budget: a run stops there, whatever its run_timeout leaves, its requests aborted as BUDGET_END.
    "ends_at": None,
    "metrics": "auto",   # auto: use /metrics when exposed; always: fail without; never
    "validate_certs": True,
    "min_tok_s": None,
    # A long-context case: the planted facts (prompts.FACT_DEPTHS) each reply must state, as the
    # median over its replies (facts_stated); None: counted and reported, not judged.
    "min_facts": None,
    "min_accept_len": None,
    "min_aggregate_tok_s": None,
    "max_ttft_s": None,
    "max_errors": 0,
    # What the hardware allows (capacity.py): with both, the result carries the roofline.
    "model_size": None,
    "hardware": None,
    # Regression check: {decode_tok_s, accept_len[, time, profile]} of the last-known-good run of
    # the same profile; max_regression_pct fails the gate on a larger drop of either figure.
    "baseline": None,
    "max_regression_pct": None,
}


def _number(cfg, name, kind, minimum=None, exclusive=False, optional=False):
    value = cfg.get(name)
    if value is None:
        if optional:
            return None
        raise ConfigError(name, "is required")
    if isinstance(value, bool):
        raise ConfigError(name, "must be a number, got a boolean")
    try:
        conv = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(name, "must be %s, got %r" % ("an integer" if kind is int else "a number",
                                                       value))
    if kind is int and float(value) != conv:
        raise ConfigError(name, "must be an integer, got %r" % (value,))
    if minimum is not None:
        if exclusive and not conv > minimum:
            raise ConfigError(name, "must be greater than %s, got %s" % (minimum, value))
        if not exclusive and conv < minimum:
            raise ConfigError(name, "must be %s or more, got %s" % (minimum, value))
    return conv


def validate(options):
    """Defaults filled in, types converted, every bad value refused with the option's name."""
    cfg = dict(DEFAULTS)
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise ConfigError(unknown[0], "unknown option (known: %s)" % ", ".join(sorted(DEFAULTS)))
    cfg.update({k: v for k, v in options.items() if v is not None})
    Endpoint(cfg["url"] or "")  # validates the URL
    if cfg["api"] not in APIS:
        raise ConfigError("api", "must be one of %s, got %r" % (", ".join(sorted(APIS)), cfg["api"]))
    cfg["concurrency"] = _number(cfg, "concurrency", int, 1)
    cfg["requests"] = _number(cfg, "requests", int, 1)
    cfg["max_requests"] = _number(cfg, "max_requests", int, 1, optional=True) or cfg["requests"]
    if cfg["max_requests"] < cfg["requests"]:
        raise ConfigError("max_requests", "must be at least requests (%d), got %d"
                          % (cfg["requests"], cfg["max_requests"]))
    cfg["confidence"] = _number(cfg, "confidence", float, 0.5, exclusive=True)
    if cfg["confidence"] >= 1:
        raise ConfigError("confidence", "must be below 1 (0.95 = 95%%), got %s" % cfg["confidence"])
    if cfg["inconclusive"] not in INCONCLUSIVE:
        raise ConfigError("inconclusive", "must be one of %s, got %r"
                          % (", ".join(INCONCLUSIVE), cfg["inconclusive"]))
    cfg["warmup"] = _number(cfg, "warmup", int, 0)
    cfg["max_tokens"] = _number(cfg, "max_tokens", int, 2)
    cfg["warmup_max_tokens"] = _number(cfg, "warmup_max_tokens", int, 1)
    cfg["temperature"] = _number(cfg, "temperature", float, 0.0)
    if not isinstance(cfg["thinking"], bool):
        raise ConfigError("thinking", "must be true or false, got %r" % (cfg["thinking"],))
    if cfg["thinking"] and cfg["api"] != "chat":
        raise ConfigError("thinking", "needs the chat API (the %s API sends the prompt without the "
                                      "chat template, which is what turns thinking on)" % cfg["api"])
    if cfg["prompts"] not in promptset.PROMPT_SOURCES:
        raise ConfigError("prompts", "must be one of %s, got %r"
                          % (", ".join(promptset.PROMPT_SOURCES), cfg["prompts"]))
    if cfg["prompts"] == "long_context":
        cfg["prompt_tokens"] = _number(cfg, "prompt_tokens", int, MIN_LONG_PROMPT_TOKENS)
        cpt = cfg["chars_per_token"] or promptset.DEFAULT_CHARS_PER_TOKEN
        try:
            promptset.long_context_prompt(cfg["prompt_tokens"], cpt, 0, "check")
        except ValueError as e:
            raise ConfigError("prompt_tokens", str(e))
    else:
        cfg["prompt_tokens"] = None
    cfg["chars_per_token"] = _number(cfg, "chars_per_token", float, 0.0, exclusive=True, optional=True)
    cfg["case"] = str(cfg["case"] or cfg["prompts"])
    for name in ("connect_timeout", "first_token_timeout", "stall_timeout", "run_timeout"):
        cfg[name] = _number(cfg, name, float, 0.0, exclusive=True)
    cfg["ends_at"] = _number(cfg, "ends_at", float, 0.0, optional=True)
    for name in ("min_tok_s", "min_accept_len", "min_aggregate_tok_s", "max_ttft_s"):
        cfg[name] = _number(cfg, name, float, 0.0, optional=True)
    if cfg["min_accept_len"] is not None and cfg["min_accept_len"] > 0 and cfg["min_accept_len"] < 1:
        raise ConfigError("min_accept_len", "an accept length counts the bonus token, so it is at "
                                            "least 1.0 when speculation runs; got %s"
                          % cfg["min_accept_len"])
    cfg["max_errors"] = _number(cfg, "max_errors", int, 0)
    cfg["min_facts"] = _number(cfg, "min_facts", int, 0, optional=True)
    if cfg["min_facts"] is not None and (cfg["prompts"] != "long_context"
                                         or cfg["min_facts"] > len(promptset.FACT_DEPTHS)):
        raise ConfigError("min_facts", "counts the %d facts planted in a long-context prompt (prompts: "
                                       "long_context), from 0 to %d; got %s for prompts %s"
                          % (len(promptset.FACT_DEPTHS), len(promptset.FACT_DEPTHS), cfg["min_facts"],
                             cfg["prompts"]))
    if cfg["metrics"] not in METRICS_MODES:
        raise ConfigError("metrics", "must be one of %s, got %r"
                          % (", ".join(METRICS_MODES), cfg["metrics"]))
    cfg["max_regression_pct"] = _number(cfg, "max_regression_pct", float, 0.0, optional=True)
    for name in ("model_size", "hardware", "baseline"):
        if cfg[name] is not None and not isinstance(cfg[name], dict):
            raise ConfigError(name, "must be a dict, got %r" % (cfg[name],))
    if cfg["model_size"] or cfg["hardware"]:
        try:  # refuse bad size figures before any request, naming the key
            capacity.roofline(cfg["model_size"] or {}, cfg["hardware"] or {})
        except capacity.CapacityError as e:
            raise ConfigError("model_size" if str(e).startswith("model") else "hardware", str(e))
    if cfg["baseline"]:
        for key in ("decode_tok_s", "accept_len"):
            value = cfg["baseline"].get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError("baseline", "%s must be a number, got %r" % (key, value))
    if cfg["model"] is not None and not str(cfg["model"]).strip():
        raise ConfigError("model", "must not be empty (omit it to use the served model)")
    fewest = stats.min_sample(cfg["confidence"])
    judged = [k for k in MEDIAN_THRESHOLDS if cfg[k] is not None]
    if cfg["max_regression_pct"] is not None and cfg["baseline"]:
        judged.append("max_regression_pct")
    if judged and cfg["max_requests"] < fewest:
        raise ConfigError("max_requests", "%d request(s) cannot bound a median at %g%% (%s needs an "
                                          "interval; it takes at least %d requests): raise max_requests "
                                          "or lower confidence" % (cfg["max_requests"],
                                                                   100 * cfg["confidence"],
                                                                   ", ".join(judged), fewest))
    return cfg


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
        path = APIS[self.cfg["api"]]
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
    cfg = validate(options)
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


def measure(cfg, ep, model, server, warm=(), chars_per_token=None, progress=None, raw=None):
    """The measured requests of one case, ``requests`` of them and then one at a time until the
    verdict is decided or ``max_requests`` ran; the result dict (see the module's RETURN).
    ``raw(records)``, when given, gets every request's record so far (warmup and measured, as
    per_request holds them) after each batch, before anything is computed from them: a failure
    in the figures still leaves the measurements."""
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
        try:
            look = _result(cfg, ep, model, server, list(warm), issued, wall, None, None, final=False)
        except MeasureError:  # nothing measurable yet: the errors decide
            if len(issued) > cfg["max_errors"]:
                break
            continue
        looks += 1
        if progress is not None and hasattr(progress, "look"):
            progress.look(cfg, look, wall)
        if look["verdict"] != UNDECIDED:
            break
    after = _scrape(ep, want_metrics and before is not None)
    result = _result(cfg, ep, model, server, list(warm), issued, wall, before, after)
    result["chars_per_token"] = cpt
    result["sequential"] = {"min_requests": cfg["requests"], "max_requests": cfg["max_requests"],
                            "looks": looks, "measured": len(issued),
                            "stopped": "decided" if result["verdict"] != INCONCLUSIVE_VERDICT
                            and len(issued) < cfg["max_requests"] else "max_requests"}
    if progress is not None and hasattr(progress, "look") and not looks:
        progress.look(cfg, result, wall)
    return result


def check_api(cfg, server):
    """Refuse an API the engine does not serve (before any request)."""
    eng = engines.find(server.get("kind"))
    if eng is not None and not eng.native_api and cfg["api"] == "native":
        raise MeasureError("api native is SGLang's /generate; %s %s serves no /generate: use api "
                           "chat or completions" % (eng.label, server.get("version") or ""))


def run(options, progress=None, raw=None):
    """Benchmark the server with one case; returns the full result dict (see the module's
    RETURN). Raises ConfigError for bad options and MeasureError when nothing could be measured.
    ``raw``: as for measure."""
    cfg = validate(options)
    ep = endpoint(cfg)
    model, server = discover(ep, cfg["model"])
    check_api(cfg, server)
    learn = cfg["prompts"] == "long_context" and not cfg["chars_per_token"]
    warm, cpt = warm_up(cfg, ep, model, progress, learn=learn, kind=server["kind"])
    return measure(cfg, ep, model, server, warm, cpt, progress, raw)


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
        # seconds per verify step (accept length / decode tok/s, per request): attribution.py
        "step_time_s": stats.median_interval(
            [attribution.step_time_s(r.decode_tok_s(), r.completion_tokens / r.verify_ct
                                     if r.verify_ct else 1.0) for r in full if r.decode_tok_s()], level),
    }


def _result(cfg, ep, model, server, warm, meas, wall, before, after, final=True):
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
    if cfg["baseline"]:
        compare(result, cfg)
    evaluate(result, cfg, final)
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


def compare(result, cfg):
    """``result``'s change from cfg["baseline"] (history.baseline): "regression" (the changes in
    percent) and "attribution" (split into its causes, each run's noise its own intervals, with
    what it is measured against: ``against``; None without both speeds)."""
    b = cfg["baseline"]
    result["regression"] = {
        "baseline": b,
        "decode_tok_s_pct": history.change_pct(result["decode_tok_s"]["median"], b.get("decode_tok_s")),
        "accept_len_pct": history.change_pct(result["accept_len"], b.get("accept_len")),
        "max_regression_pct": cfg["max_regression_pct"],
    }
    a = attribution.split(
        {"tok_s": result["decode_tok_s"]["median"], "accept_len": result["accept_len"],
         "intervals": result.get("intervals")},
        {"tok_s": b.get("decode_tok_s"), "accept_len": b.get("accept_len"), "intervals": b.get("intervals")})
    if a:
        a["against"] = attribution.against(b)
    result["attribution"] = a


def fmt_interval(iv, spec=".1f"):
    """ "54.6 [53.9, 55.2]" ('-' without a figure; no brackets without bounds)."""
    if not iv or iv.get("estimate") is None:
        return "-"
    text = format(iv["estimate"], spec)
    if iv.get("lower") is not None and iv.get("upper") is not None:
        text += " [%s, %s]" % (format(iv["lower"], spec), format(iv["upper"], spec))
    return text


def _bounded(entries, name, label, iv, required, unit, spec, at_least=True):
    """One threshold judged on its interval: passed when the bound on its side clears it, failed
    when the other bound is past it, undecided in between (or without bounds yet)."""
    if required is None:
        return
    entry = {"threshold": name, "required": required,
             "measured": None if not iv else iv.get("estimate"),
             "lower": None if not iv else iv.get("lower"), "upper": None if not iv else iv.get("upper")}
    if entry["measured"] is None:
        entry.update(state=FAIL, message="%s could not be measured (required %s %g%s)"
                     % (label, ">=" if at_least else "<=", required, unit))
        entries.append(entry)
        return
    lo, hi = entry["lower"], entry["upper"]
    shown = fmt_interval(iv, spec) + unit
    if lo is None or hi is None:
        state = UNDECIDED
    elif at_least:
        state = PASS if lo >= required else FAIL if hi < required else UNDECIDED
    else:
        state = PASS if hi <= required else FAIL if lo > required else UNDECIDED
    if state == FAIL:
        message = "%s %s %s required %s%s" % (label, shown, "<" if at_least else ">",
                                              format(required, spec), unit)
    else:
        message = "%s %s %s the %s %s%s bar" % (
            label, shown, "clears" if state == PASS else "straddles",
            "minimum" if at_least else "maximum", format(required, spec), unit)
    entry.update(state=state, message=message)
    entries.append(entry)


def verdict_entries(result, cfg):
    """Every threshold of ``cfg`` judged on ``result``'s intervals, and the checks that need no
    interval (prompt length, metrics, errors): [{"threshold", "state", "message", ...}]."""
    entries = []
    iv = result.get("intervals") or {}
    _bounded(entries, "min_tok_s", "decode tok/s (per-request median)", iv.get("decode_tok_s"),
             cfg["min_tok_s"], "", ".1f")
    _bounded(entries, "min_accept_len", "accept length", iv.get("accept_len"), cfg["min_accept_len"],
             "", ".2f")
    own = result.get("engine_accept_len")
    if own is not None and entries and entries[-1]["threshold"] == "min_accept_len" \
            and entries[-1]["state"] == FAIL:
        entries[-1]["message"] += " (%s; vLLM's own 1 + accepted / drafts is %.2f)" % (CONVENTION_SHORT, own)
    _bounded(entries, "min_aggregate_tok_s", "aggregate tok/s at C=%d" % cfg["concurrency"],
             iv.get("aggregate_tok_s"), cfg["min_aggregate_tok_s"], "", ".1f")
    _bounded(entries, "max_ttft_s", "time to first token (median)", iv.get("ttft_s"), cfg["max_ttft_s"],
             "s", ".2f", at_least=False)
    reg = result.get("regression")
    if reg and cfg["max_regression_pct"] is not None:
        keep = 1 - cfg["max_regression_pct"] / 100.0
        for key, label, spec in (("decode_tok_s", "decode tok/s", ".1f"),
                                 ("accept_len", "accept length", ".2f")):
            before = reg["baseline"].get(key)
            if not before or iv.get(key) is None:
                continue
            _bounded(entries, "max_regression_pct", label, iv[key], before * keep, "", spec)
            e = entries[-1]
            e["measured_pct"] = reg[key + "_pct"]
            was = "the last-known-good %s (%s)" % (format(before, ".2f"),
                                                   reg["baseline"].get("time") or "baseline")
            shown = fmt_interval(iv[key], spec)
            if e["state"] == FAIL:
                e["message"] = "%s %s dropped %.1f%% from %s (allowed %g%%: at least %s)" % (
                    label, shown, -(reg[key + "_pct"] or 0), was, cfg["max_regression_pct"],
                    format(before * keep, spec))
            else:
                e["message"] = "%s %s %s the allowed %g%% drop from %s (at least %s)" % (
                    label, shown, "is within" if e["state"] == PASS else "straddles",
                    cfg["max_regression_pct"], was, format(before * keep, spec))
    facts = result.get("facts")
    # judged on the chat API only: the others send the prompt, its request to state the notes
    # included, without the chat template (the count is reported all the same)
    if cfg["min_facts"] is not None and facts and cfg["api"] == "chat":
        ok = facts["median"] is not None and facts["median"] >= cfg["min_facts"]
        miss = facts.get("missed")
        entries.append({
            "threshold": "min_facts", "measured": facts["median"], "required": cfg["min_facts"],
            "state": PASS if ok else FAIL,
            "message": "facts planted in the long prompt and stated in the reply: median %s of %d (per "
                       "reply %s) %s required %d%s" % (
                           "-" if facts["median"] is None else "%g" % facts["median"], facts["planted"],
                           ", ".join(str(n) for n in facts["stated"]), ">=" if ok else "<", cfg["min_facts"],
                           "; first missed: the %s (%s, at %d%% of the prompt)" % (
                               miss["what"], miss["value"], 100 * miss["depth"]) if miss else "")})
    pt = result.get("prompt_tokens") or {"target": None}
    if pt["target"] and (pt["median"] is None or pt["median"] < PROMPT_TOKENS_TOLERANCE * pt["target"]):
        entries.append({
            "threshold": "prompt_tokens", "measured": pt["median"], "required": pt["target"], "state": FAIL,
            "message": "the server counted %s prompt tokens, the case asks for about %d: it did not "
                       "measure the context it promises" % (
                           "no" if pt["median"] is None else "%d" % pt["median"], pt["target"])})
    if cfg["metrics"] == "always" and result["metrics"] is None:
        entries.append({"threshold": "metrics", "measured": None, "required": "always", "state": FAIL,
                        "message": "metrics=always but the server exposes no /metrics "
                                   "(SGLang needs --enable-metrics)"})
    if result["errors"] > cfg["max_errors"]:
        entries.append({
            "threshold": "max_errors", "measured": result["errors"], "required": cfg["max_errors"],
            "state": FAIL,
            "message": "%d request(s) failed (allowed %d): %s" % (
                result["errors"], cfg["max_errors"],
                ", ".join("%d x %s" % (n, k) for k, n in sorted(result["error_kinds"].items())))})
    return entries


def next_step(cfg):
    """What to do about an inconclusive threshold, for its message."""
    return ("measure more (max_requests %d; the band narrows about as 1/sqrt(requests)) or set the "
            "threshold from this host's own figures (playbooks/calibrate.yml)" % cfg["max_requests"])


# The thresholds a change of decode speed explains: the first of a case's failures among them
# carries the cause against the baseline (attribution.py).
EXPLAINED = ("min_tok_s", "min_accept_len", "min_aggregate_tok_s", "max_regression_pct")


def evaluate(result, cfg, final=True):
    """The verdict from the intervals: "fail" as soon as a threshold fails, "pass" once every one
    is cleared, "undecided" in between while more can be measured and "inconclusive" at the last
    request (``final``). Sets result['verdict'], ['thresholds'], ['failures'], ['inconclusive'],
    ['judged'] and ['passed'] (an inconclusive verdict passes only with inconclusive: pass);
    the first failure of EXPLAINED names the cause against the baseline; returns the failures."""
    entries = verdict_entries(result, cfg)
    failures = [e for e in entries if e["state"] == FAIL]
    open_ = [e for e in entries if e["state"] == UNDECIDED]
    if failures:
        verdict = FAIL
    elif open_:
        verdict = INCONCLUSIVE_VERDICT if final else UNDECIDED
    else:
        verdict = PASS
    inconclusive = []
    if verdict == INCONCLUSIVE_VERDICT:
        for e in open_:
            e.update(state=INCONCLUSIVE_VERDICT,
                     message="inconclusive after %d requests: %s; %s"
                             % (result["requests"], e["message"], next_step(cfg)))
            inconclusive.append(e)
        if cfg["inconclusive"] == "fail":
            failures = inconclusive
    why = result.get("attribution")
    failed = next((e for e in failures if e["threshold"] in EXPLAINED), None)
    if why and failed:  # the case's cause, once, whether the regression check is on or not
        failed["message"] += "; %s: %s" % (why.get("against") or "against the baseline", why["text"])
    result["verdict"] = verdict
    result["judged"] = entries
    result["thresholds"] = {k: cfg[k] for k in THRESHOLDS}
    result["failures"] = failures
    result["inconclusive"] = inconclusive
    result["passed"] = not failures
    return failures


def context_line(result):
    """vLLM's own accept length beside ours (naming both conventions), the roofline share and the
    change from the baseline, for one-line summaries ('' without them)."""
    parts = []
    own = result.get("engine_accept_len")
    if own is not None:
        parts.append("accept length %s = %s; vLLM's own 1 + accepted / drafts %.2f" % (
            "-" if result.get("accept_len") is None else "%.2f" % result["accept_len"],
            CONVENTION_SHORT, own))
    r = result.get("roofline")
    if r:
        parts.append("roofline %.1f tok/s%s" % (r["ceiling_tok_s"], "" if r["share_pct"] is None
                                                 else " (measured %.0f%% of it)" % r["share_pct"]))
    g = result.get("regression")
    if g:
        parts.append("vs last-known-good%s: decode %s, accept length %s" % (
            " (%s)" % g["baseline"]["time"] if g["baseline"].get("time") else "",
            "n/a" if g["decode_tok_s_pct"] is None else "%+.1f%%" % g["decode_tok_s_pct"],
            "n/a" if g["accept_len_pct"] is None else "%+.1f%%" % g["accept_len_pct"]))
    return "; ".join(parts)


def failure_message(result):
    """One line naming every failed threshold, measured vs required."""
    ctx = context_line(result)
    return "gate failed: " + "; ".join(f["message"] for f in result["failures"]) + (
        " [%s]" % ctx if ctx else "")
