# -*- coding: utf-8 -*-
"""A run's options: their defaults (one set for the module, the CLI and the engine), the values
each may take, the thresholds among them, and validate(): the options as the run's configuration
(``cfg``), every bad value refused with the option's name before any request.

Standard library only, Python 3.9+ (runs on the target host through AnsiballZ)."""
from __future__ import annotations

from ..plan import capacity
from .client import ConfigError, Endpoint
from . import prompts as promptset
from . import stats

APIS = {
    # api name: (path, builds the body)
    "chat": "/v1/chat/completions",
    "completions": "/v1/completions",
    "native": "/generate",
}

METRICS_MODES = ("auto", "always", "never")

THRESHOLDS = ("min_tok_s", "min_accept_len", "min_aggregate_tok_s", "max_ttft_s", "max_errors", "min_facts")
INCONCLUSIVE = ("fail", "pass")
# Thresholds judged on a median's interval (order statistics): min_sample(level) requests at least.
MEDIAN_THRESHOLDS = ("min_tok_s", "max_ttft_s")

# A long-context case shorter than this is not one: about where draft acceptance starts to fall
# with context (the comparison's shallowest depth, playbooks/compare.yml).
MIN_LONG_PROMPT_TOKENS = 1024

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
    # sample). The verdict logic: verdict.py's evaluate() and engine.measure().
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
