# -*- coding: utf-8 -*-
"""The watch on a running server (roles/sglang_watch): a systemd timer runs it on the host every
``sglang_watch_interval``; it reads the engine's own ``/metrics`` twice, a short window apart,
and writes what it saw as a Prometheus textfile for node_exporter. Standard library only, Python
3.9+ (it runs under the host's system Python; the role ships it with the modules it imports as one
file, see plugins/filter/sglang_watch.py).

One run:

0. the host's **deploy lock** (``deploy_lock``: the JSON file a deploy, rollback, takeover,
   compare, calibrate or bench run holds, sglang_perf/host/lock.py) is read first, again before a probe
   and at the end: held, and not older than its max age, the run is ``deploying`` - no probe, no
   figures, no ``up`` (``deploying`` 1), so a server restarted under the lock is not written down;
   an unreadable file counts as held (a deploy is writing it), an older one is stale and ignored
   (the note says so).

1. ``scrape`` ``/metrics``, wait ``window_s``, scrape again; ``observe_window`` decides from the
   two what the server did (pure):

   - ``down``: the server did not answer (no connection, a timeout, HTTP 5xx) - ``up`` 0;
   - ``no_metrics``: it answered without its engine's counters (SGLang without --enable-metrics) -
     ``up`` 1, no figures, no probe (busy or idle cannot be told);
   - ``restarted``: a counter went backwards, the engine changed, or the server came up between
     the scrapes - ``up`` 1, no figures this run;
   - ``busy``: tokens were generated in the window - the generation counter moved, requests
     finished, or the inter-token latency histogram counted streamed tokens: the figures from the
     counters' deltas (source ``metrics``), and nothing is sent to the server. Accept length =
     generated tokens / verify steps (``metrics.window``'s convention, the gate's), generation
     tok/s = generated tokens / window (all streams; SGLang counts a request's tokens when it
     finishes), decode tok/s = one stream's speed as the engine counts it (``decode_tok_s``:
     SGLang's histogram observes each token, tokens / seconds; vLLM's each engine step of a
     request, steps / seconds times its spec-decode counters' tokens per step, 1 + accepted /
     drafts), running = the larger of the engine's two readings of its gauge;
   - ``idle``: no token generated in the window - then a short **probe**: ``probe.requests``
     requests of the gate plan's case ``probe.case`` at C=1 with the engine's own client
     (``engine.run``), its per-request median decode tok/s and accept length (source ``probe``).
     Its prompts are short ones (``PROBE_PROMPTS``; a long-context case is refused), so the watch
     never reads the long-context corpus, which its one file does not carry. The engine's gauges
     do not decide: SGLang sets them while it decodes and refreshes them only every 30 s once
     idle, so a reading can be stale. A server whose only traffic is
     non-streaming requests longer than the window (SGLang counts nothing until one finishes)
     looks idle: the probe's own /metrics window then shows tokens besides its own, and its
     figures are written without a running count (not a C=1 measurement: the decode alert skips
     them). A probe that measures nothing (every request failed) is ``up`` 0. With a
     ``thinking_probe`` (the gate plan's thinking case, ``sglang_watch_thinking_case``) the probe
     then sends as many requests with thinking on: their decode tok/s and accept length are
     written beside the watched case's (``sglang_watch_thinking_*``), informing, never judged;
     the watched case states its own thinking (off for coding). The probe holds the
     host's **measurement lock** (``measure_lock``, measurelock.py) without waiting for it: taken
     by the gate, the run is ``deploying`` and probes nothing; the gate waits out a probe.

   ``decode_bar`` then says which bar the run's decode figure is judged against, if any: a C=1
   probe against the watched case's ``min_tok_s``; a window at one running request whose mean
   prompt (``prompt_tokens``: prompt tokens per finished request) is no deeper than the gate
   plan's deepest judged C=1 case against the passive bar, the lowest ``min_tok_s`` of those cases
   (the slowest speed the gate accepts for work it judges); anything else is not judged.

2. ``render`` writes the series (``WATCH_METRICS``; every one carries ``profile``, ``release``,
   ``engine`` as exposition.py's do) and ``main`` replaces the textfile atomically
   (``exposition.write``).

It never restarts or stops anything, and a server that does not answer is a figure (``up`` 0),
not a failure: the run exits 0. It exits 2 for settings it cannot use and 1 when the textfile
cannot be written. The API key, when the server has one, is read from the engine's own
``--config`` file (``api_key_file``, SGLang's YAML ``api-key:``): never from the settings, the
command line or the environment, and never printed.
"""
from __future__ import annotations

import json
import re
import sys
import time

from ..judge import quality
from ..measure import answers, config, engine, prompts as promptset
from .. import engines
from ..record import exposition
from . import measurelock
from . import lock as deploylock
from ..measure import metrics as prom
from ..measure.client import ConfigError, Endpoint, MeasureError, RequestError

DOWN, NO_METRICS, RESTARTED, BUSY, IDLE = "down", "no_metrics", "restarted", "busy", "idle"
# A deploy holds the host's lock (or a measurement its measurement lock): nothing measured, no up.
DEPLOYING = "deploying"
# What the deploy lock file holds when it is not a JSON object (a deploy is writing it).
UNREADABLE = "unreadable"
# Where a run's figures came from: the counters' window, the probe, or nowhere.
SOURCES = ("metrics", "probe", "none")
# The probe's warmup request (discarded: its own first batch, never a measured one).
PROBE_WARMUP = 1
# Bounds of the role's inputs (problems() names the variable of a value outside them).
MIN_INTERVAL_S = 60
MAX_WINDOW_S = 600
MAX_PROBE_REQUESTS = 20
# What a run needs besides the window: the probe's requests (a timeout shorter than this is refused).
PROBE_ALLOWANCE_S = 30

WATCH_METRICS = {
    "sglang_watch_up": "Whether the server answered the watch's last run (1) or not (0): its /metrics, "
                       "and the probe's requests when it was idle.",
    "sglang_watch_accept_length": "Accept length the last run measured: generated tokens per verify step, "
                                  "the bonus token counted (absent without speculation).",
    "sglang_watch_decode_tokens_per_second": "Decode speed of one stream the last run measured (tokens per "
                                             "second after the first token): the probe's per-request "
                                             "median, or the engine's inter-token latency in the window "
                                             "(vLLM's per step, times its tokens per step).",
    "sglang_watch_generation_tokens_per_second": "Tokens generated per second while the last run measured, "
                                                 "all streams together.",
    "sglang_watch_running_requests": "Requests the server ran while the last run measured (the window: the "
                                     "larger of the engine's two readings; a probe: 1, absent when other "
                                     "traffic ran beside it).",
    "sglang_watch_requests": "Requests that finished while the last run measured (a probe: its measured "
                             "requests).",
    "sglang_watch_source": "Where the last run's figures came from: 1 for the current source (metrics: the "
                           "engine's counters over the window; probe: the watch's own requests; none).",
    "sglang_watch_decode_threshold_tokens_per_second": "The gate's decode threshold for the watched case "
                                                       "(min_tok_s, per-request median at C=1).",
    "sglang_watch_decode_bar_tokens_per_second": "The decode bar the last run's figure is judged against: "
                                                 "the watched case's min_tok_s for a probe at C=1, the "
                                                 "passive bar for a window at one running request no "
                                                 "deeper than the gate's deepest judged case (absent: "
                                                 "not judged).",
    "sglang_watch_deploying": "1 while a deploy holds the host's lock (or the gate the measurement lock): "
                              "the last run measured nothing and wrote no sglang_watch_up; 0 otherwise.",
    "sglang_watch_thinking_decode_tokens_per_second": "Per-request median decode speed of the probe's "
                                                      "requests with thinking on (the gate plan's thinking "
                                                      "case; absent when the last run sent none).",
    "sglang_watch_thinking_accept_length": "Accept length of the probe's requests with thinking on (absent "
                                           "when the last run sent none, or without speculation).",
    "sglang_watch_answer_right": "Whether the probe's one known answer (the gate's built-in set, a row "
                                 "per run) came back right (1) or wrong (0); absent when the last run "
                                 "sent none.",
    "sglang_watch_interval_seconds": "Seconds between two runs of the watch (its systemd timer).",
    "sglang_watch_last_run_timestamp_seconds": "When the watch last ran (unix time).",
}

_SPAN = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)")
_UNITS = {"": 1, "s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60,
          "minutes": 60, "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400,
          "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}


def interval_seconds(text):
    """Seconds of a systemd time span ("15min", "1h 30min", "900"); ValueError says why not."""
    spans = str(text).strip() if text is not None else ""
    total, pos = 0.0, 0
    if not spans:
        raise ValueError("a systemd time span such as 15min or 1h is required")
    while pos < len(spans):
        m = _SPAN.match(spans, pos)
        if not m or m.end() == pos or m.group(2) not in _UNITS:
            raise ValueError("not a systemd time span (a number with s, min, h, d or w, e.g. 15min)")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _delta(before, after, name):
    """A counter's change; a counter absent from a scrape has not counted yet (0), and None when
    neither scrape has it."""
    if name not in before and name not in after:
        return None
    return after.get(name, 0.0) - before.get(name, 0.0)


def engine_of(scrape):
    """The engine whose series a scrape holds: its counters, or before its first request (a
    labelled counter has no sample yet) its gauges; None."""
    kind = prom.kind_of(scrape)
    if kind is None:
        kind = next((e.name for e in engines.every() if e.gauges["running"] in (scrape or {})), None)
    return kind


def _most(scrapes, name):
    values = [s[name] for s in scrapes if isinstance(s.get(name), (int, float))]
    return max(values) if values else None


def _histogram(before, after, name):
    """(observations, seconds) a histogram counted between two scrapes (None each when it has
    no such histogram)."""
    if name is None:
        return None, None
    return _delta(before, after, name + "_count"), _delta(before, after, name + "_sum")


def decode_tok_s(observes, itl, tpot, steps, accepted):
    """One stream's decode tok/s in a window as the engine counted it, or None. ``itl``: the
    inter-token latency histogram's (observations, seconds), each observation a token or an
    engine step of one request (``observes``, the engine's itl_observes); a step's tokens are 1 +
    ``accepted`` / ``steps`` (the spec-decode counters' window), 1 without them. A window where
    it counted nothing (no such histogram): ``tpot``, its finished requests' time per output
    token, the same way."""
    count, seconds = itl
    if count and seconds:
        per_step = 1.0 + accepted / steps if observes == "step" and steps and accepted is not None else 1.0
        return per_step * count / seconds
    count, seconds = tpot
    return count / seconds if count and seconds else None


def observe_window(before, after, elapsed_s):
    """What two scrapes ``elapsed_s`` seconds apart say: a dict with ``state`` (see the module
    docstring), ``up``, ``source`` (None while a probe is due) and the figures (None when not
    measured). ``before`` / ``after``: ``metrics.parse`` of each scrape, None when the server did
    not answer, {} when it answered without metrics."""
    obs = {"state": None, "up": 1, "source": "none", "engine": None, "accept_len": None,
           "decode_tok_s": None, "generation_tok_s": None, "running": None, "requests": None, "note": None}
    if after is None:
        return dict(obs, state=DOWN, up=0, note="the server did not answer GET /metrics")
    kind = engine_of(after)
    obs["engine"] = kind
    if kind is None:
        return dict(obs, state=NO_METRICS, note="GET /metrics has no sglang:* or vllm:* counters (start "
                                                "SGLang with --enable-metrics): no figures, and no probe")
    if before is None or engine_of(before) != kind:
        return dict(obs, state=RESTARTED, note="the server came up or changed engine during the window")
    eng = engines.get(kind)
    counters = eng.counters
    gen = _delta(before, after, counters["generation_tokens"])
    verify = _delta(before, after, counters["verify_calls"])
    requests = _delta(before, after, counters["requests"])
    accepted = _delta(before, after, counters["accepted_tokens"]) if "accepted_tokens" in counters else None
    itl = _histogram(before, after, eng.inter_token_latency)
    tpot = _histogram(before, after, eng.time_per_output_token)
    if any(d is not None and d < 0 for d in (gen, verify, requests, accepted) + itl + tpot):
        return dict(obs, state=RESTARTED,
                    note="counters went backwards: the server restarted during the window")
    if not any(d for d in (gen, requests, itl[0])):
        return dict(obs, state=IDLE, source=None)
    obs.update(state=BUSY, source="metrics", requests=requests,
               running=_most((before, after), eng.gauges["running"]))
    if gen and verify:
        obs["accept_len"] = gen / verify
    if gen and elapsed_s > 0:
        obs["generation_tok_s"] = gen / elapsed_s
    obs["decode_tok_s"] = decode_tok_s(eng.itl_observes, itl, tpot, verify, accepted)
    return obs


def observe_probe(result):
    """The figures of a probe (``engine.run``'s result); ``up`` 1. When the engine's own window
    over the probe counted tokens besides the probe's, other traffic ran beside it: no running
    count (the figures are not at C=1), and a note."""
    decode = result.get("decode_tok_s") or {}
    window = result.get("metrics") or {}
    other = window.get("matches_client") is False
    return {"state": IDLE, "up": 1, "source": "probe", "engine": (result.get("server") or {}).get("kind"),
            "accept_len": result.get("accept_len"), "decode_tok_s": decode.get("median"),
            "generation_tok_s": result.get("aggregate_tok_s"), "running": None if other else 1,
            "requests": result.get("requests"),
            "note": "not at C=1: %s" % window.get("note") if other else None}


def probe_failed(reason):
    """A probe that measured nothing: the server does not serve (``up`` 0)."""
    return {"state": IDLE, "up": 0, "source": "none", "engine": None, "accept_len": None,
            "decode_tok_s": None, "generation_tok_s": None, "running": None, "requests": None,
            "note": "the probe measured nothing: %s" % reason}


def observe_deploying(note):
    """A run under a held lock: nothing measured, and no ``up`` (a server a deploy restarts is
    not down)."""
    return {"state": DEPLOYING, "up": None, "source": "none", "engine": None, "accept_len": None,
            "decode_tok_s": None, "generation_tok_s": None, "running": None, "requests": None,
            "note": note}


def read_deploy_lock(path):
    """The deploy lock file's content: None when there is none, its JSON object, or UNREADABLE
    (not a JSON object, or a file this run cannot read)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return UNREADABLE
    try:
        held = json.loads(text)
    except ValueError:
        return UNREADABLE
    return held if isinstance(held, dict) else UNREADABLE


def deploy_lock_held(held, now, max_age_s):
    """(held, note) of the deploy lock's content ``held`` (read_deploy_lock) at unix time ``now``:
    a lock started less than ``max_age_s`` ago is held; one without a start it can read counts
    as held (a deploy is writing it); an older one is stale - not held, and the note says so."""
    if held is None:
        return False, None
    started = _number(held.get("started")) if isinstance(held, dict) else None
    if started is None:
        return True, "the deploy lock is unreadable: counted as held (a deploy is writing it)"
    text = deploylock.holder_text(held, now)
    if max_age_s is not None and now - started > max_age_s:
        return False, "a stale deploy lock, ignored: %s, older than its max age (%s)" % (
            text, deploylock.age_text(max_age_s))
    return True, "a deploy holds the host's lock: %s" % text


def window_prompt_tokens(before, after):
    """Prompt tokens per request that finished between two scrapes (their mean prompt), or None:
    no request finished, none counted its prompt, or an engine whose counters do not pair up. The
    engine says how: its per-request prompt histogram (vLLM, which counts a prompt at its first
    token and a request at its end), else its prompt and request counters when both count a
    request as it finishes (SGLang: prompt_depth_from_counters)."""
    kind = engine_of(after)
    eng = engines.find(kind)
    if engine_of(before) != kind or eng is None:
        return None
    if eng.request_prompt_tokens:
        requests, prompt = _histogram(before, after, eng.request_prompt_tokens)
    elif eng.prompt_depth_from_counters:
        counters = eng.counters
        prompt = _delta(before, after, counters["prompt_tokens"])
        requests = _delta(before, after, counters["requests"])
    else:
        return None
    if not prompt or not requests or prompt < 0 or requests < 0:
        return None
    return prompt / requests


def decode_bar(settings, obs):
    """The bar a run's decode figure is judged against, or None (not judged): a probe at C=1
    against the watched case's ``min_tok_s`` (``decode_threshold``); a window of the engine's
    counters at one running request, whose mean prompt (``obs["prompt_tokens"]``) is no deeper
    than the gate plan's deepest judged C=1 case, against the passive bar (``settings["passive"]``,
    passive_bar). Several streams, a probe with other traffic beside it, deeper or unknown
    prompts: not judged (the gate has no bar for them)."""
    if obs.get("decode_tok_s") is None or obs.get("running") is None or obs["running"] > 1:
        return None
    if obs["source"] == "probe":
        return _number(settings.get("decode_threshold"))
    passive = settings.get("passive") or {}
    depth, deepest = _number(obs.get("prompt_tokens")), _number(passive.get("max_prompt_tokens"))
    if obs["source"] != "metrics" or depth is None or deepest is None or depth > deepest:
        return None
    return _number(passive.get("min_tok_s"))


def render(settings, obs, now):
    """The textfile of one run: ``obs`` (observe_window / observe_probe / observe_deploying) with
    the settings' labels, threshold and the bar that applies, at unix time ``now``."""
    labels = exposition.run_labels(settings.get("labels"))
    out = exposition.Samples(WATCH_METRICS)
    out.add("sglang_watch_up", labels, obs["up"])
    out.add("sglang_watch_deploying", labels, 1 if obs["state"] == DEPLOYING else 0)
    out.add("sglang_watch_accept_length", labels, obs["accept_len"])
    out.add("sglang_watch_decode_tokens_per_second", labels, obs["decode_tok_s"])
    out.add("sglang_watch_generation_tokens_per_second", labels, obs["generation_tok_s"])
    out.add("sglang_watch_running_requests", labels, obs["running"])
    out.add("sglang_watch_requests", labels, obs["requests"])
    out.enum("sglang_watch_source", labels, obs["source"] or "none", SOURCES, "source")
    out.add("sglang_watch_decode_threshold_tokens_per_second", labels, settings.get("decode_threshold"))
    out.add("sglang_watch_decode_bar_tokens_per_second", labels, decode_bar(settings, obs))
    out.add("sglang_watch_thinking_decode_tokens_per_second", labels, obs.get("thinking_decode_tok_s"))
    out.add("sglang_watch_thinking_accept_length", labels, obs.get("thinking_accept_len"))
    right = obs.get("answer_right")
    out.add("sglang_watch_answer_right", labels, None if right is None else int(right))
    out.add("sglang_watch_interval_seconds", labels, settings.get("interval_s"))
    out.add("sglang_watch_last_run_timestamp_seconds", labels, now)
    return out.text()


def summary(obs):
    """One line for the journal (no secret is ever in an observation)."""
    figures = [("accept length %.2f", obs["accept_len"]), ("decode %.1f tok/s", obs["decode_tok_s"]),
               ("generation %.1f tok/s", obs["generation_tok_s"]), ("%d running", obs["running"]),
               ("%d requests", obs["requests"]),
               ("thinking: decode %.1f tok/s", obs.get("thinking_decode_tok_s")),
               ("thinking: accept length %.2f", obs.get("thinking_accept_len")),
               ("known answer %s", {True: "right", False: "WRONG"}.get(obs.get("answer_right")))]
    shown = ", ".join(fmt % value for fmt, value in figures if value is not None)
    head = "%s%s (source %s)" % ("" if obs["up"] is None else "up %d, " % obs["up"], obs["state"],
                                 obs["source"] or "none")
    return "; ".join(part for part in (head, shown, obs["note"]) if part)


# --- the role's inputs -> the settings file (on the controller: plugins/filter/sglang_watch.py) ---

def _refuse(problems, var, value, valid):
    problems.append("%s = %s is not valid: %s" % (var, value, valid))


# The role's inputs configure() reads (the deploy plan passes them by name: deploy_plan._watch).
INPUTS = ("sglang_watch_interval", "sglang_watch_window", "sglang_watch_probe_requests", "sglang_watch_case",
          "sglang_watch_thinking_case", "sglang_watch_textfile_path", "sglang_watch_timeout")


def configure(plan, inputs):
    """(settings, problems): the settings file of the watch from the host's deploy plan and the
    role's inputs ({variable name: value}); every problem names its variable."""
    problems = []
    plan = plan if isinstance(plan, dict) else {}
    interval, interval_s = inputs.get("sglang_watch_interval"), None
    try:
        interval_s = interval_seconds(interval)
        if interval_s < MIN_INTERVAL_S:
            _refuse(problems, "sglang_watch_interval", interval, "at least %ds (1min)" % MIN_INTERVAL_S)
    except ValueError as e:
        _refuse(problems, "sglang_watch_interval", interval, str(e))
    window, timeout = _number(inputs.get("sglang_watch_window")), _number(inputs.get("sglang_watch_timeout"))
    if window is None or not 0 < window <= MAX_WINDOW_S:
        _refuse(problems, "sglang_watch_window", inputs.get("sglang_watch_window"),
                "seconds between the two scrapes, more than 0 and at most %d" % MAX_WINDOW_S)
    elif timeout is None or timeout < window + PROBE_ALLOWANCE_S:
        _refuse(problems, "sglang_watch_timeout", inputs.get("sglang_watch_timeout"),
                "seconds for one run, at least sglang_watch_window + %d (the probe's requests)"
                % PROBE_ALLOWANCE_S)
    count = inputs.get("sglang_watch_probe_requests")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PROBE_REQUESTS:
        _refuse(problems, "sglang_watch_probe_requests", count, "requests from 1 to %d" % MAX_PROBE_REQUESTS)
    textfile = inputs.get("sglang_watch_textfile_path")
    path_problems = exposition.path_problems(textfile) if textfile else [
        "an absolute path ending in .prom is required"]
    for p in path_problems:
        _refuse(problems, "sglang_watch_textfile_path", textfile, p)
    name = inputs.get("sglang_watch_case")
    # the probe measures speed: the plan's speed cases (a quality check's own probe is its one
    # known answer, known_answer)
    cases = {c.get("case"): c for c in ((plan.get("gate") or {}).get("cases") or [])
             if isinstance(c, dict) and not (c.get("options") or {}).get("check")}
    case = cases.get(name)
    if not plan.get("gate"):
        problems.append("sglang_deploy_plan has no gate: plan the sglang_gate role's inputs too "
                        "(sglang_deploy_plan: roles: [sglang, sglang_gate])")
    elif case is None:
        _refuse(problems, "sglang_watch_case", name, "a case of the gate plan (sglang_gate_plan: %s)"
                % ", ".join(sorted(str(c) for c in cases)))
    elif (case.get("options") or {}).get("prompts") == "long_context":
        _refuse(problems, "sglang_watch_case", name, "the probe is a few short requests; %s is a "
                "long-context case: name a coding case" % name)
    thinking_name = inputs.get("sglang_watch_thinking_case") or ""
    if thinking_name == "auto":  # the plan's first short case with thinking on, else none
        thinking_name = next((n for n, c in cases.items() if (c.get("options") or {}).get("thinking") is True
                              and (c.get("options") or {}).get("prompts") != "long_context"), "")
    thinking = cases.get(thinking_name)
    if thinking_name and plan.get("gate"):
        if thinking is None or (thinking.get("options") or {}).get("thinking") is not True:
            _refuse(problems, "sglang_watch_thinking_case", thinking_name, "auto, '' or a case of the gate "
                    "plan with thinking: true (%s)" % (", ".join(sorted(
                        str(n) for n, c in cases.items() if (c.get("options") or {}).get("thinking") is True))
                        or "the plan has none"))
        elif (thinking.get("options") or {}).get("prompts") == "long_context":
            _refuse(problems, "sglang_watch_thinking_case", thinking_name, "the probe is a few short "
                    "requests; %s is a long-context case" % thinking_name)
    if problems:
        return None, problems
    options, lock = case["options"], plan.get("lock") or {}
    server, release = plan.get("server") or {}, plan.get("release") or {}
    settings = {
        "url": server.get("local_url"),
        "model": (plan.get("model") or {}).get("served_name"),
        "labels": exposition.run_labels({"profile": plan.get("profile"), "release": release.get("name"),
                                         "engine": release.get("engine")}),
        "api_key_file": server.get("secrets_path") if (server.get("exposure") or {}).get("api_key") else None,
        "textfile": textfile,
        "window_s": window,
        "timeout_s": timeout,
        "interval_s": interval_s,
        "probe": {"case": name, "prompts": options.get("prompts"), "requests": count,
                  "max_tokens": options.get("max_tokens"), "thinking": options.get("thinking") is True},
        "thinking_probe": {"case": thinking_name, "prompts": thinking["options"].get("prompts"),
                           "requests": count, "max_tokens": thinking["options"].get("max_tokens"),
                           "thinking": True} if thinking_name else None,
        "decode_threshold": (case.get("thresholds") or {}).get("min_tok_s"),
        "passive": passive_bar(plan["gate"]["cases"]),
        "deploy_lock": {"path": lock.get("path"), "max_age_s": lock.get("max_age")},
        "measure_lock": lock.get("measure_path"),
    }
    return settings, []


def passive_bar(cases):
    """What a window of the engine's counters is judged against (decode_bar), from the gate plan's
    resolved cases: the lowest ``min_tok_s`` of its judged (not report-only) C=1 cases - the
    slowest one stream the gate accepts for work it judges - and the deepest of their prompts
    (``prompt_tokens``; a case of short prompts counts as config.MIN_LONG_PROMPT_TOKENS, the
    shortest long context the gate measures). None without such a case."""
    judged = [c for c in cases if isinstance(c, dict) and not c.get("report_only")
              and (c.get("options") or {}).get("concurrency") == 1
              and _number((c.get("thresholds") or {}).get("min_tok_s")) is not None]
    if not judged:
        return None
    return {"min_tok_s": min(c["thresholds"]["min_tok_s"] for c in judged),
            "max_prompt_tokens": max(c["options"].get("prompt_tokens") or config.MIN_LONG_PROMPT_TOKENS
                                     for c in judged)}


# --- on the host ---------------------------------------------------------------------------

REQUIRED = ("url", "labels", "textfile", "window_s", "timeout_s", "probe")
# What a probe may send: the short prompt sets, never long_context (its corpus, corpus.json, is
# not in the one-file program; configure() refuses such a case, load_settings() a file that has one).
PROBE_PROMPTS = tuple(sorted(promptset.PROMPT_SETS))


def load_settings(path):
    """The settings file the role writes (JSON); ValueError names what is wrong."""
    with open(path, encoding="utf-8") as f:
        try:
            settings = json.load(f)
        except ValueError as e:
            raise ValueError("%s: not JSON (%s)" % (path, e))
    missing = [k for k in REQUIRED if not isinstance(settings, dict) or settings.get(k) is None]
    if missing:
        raise ValueError("%s: missing %s" % (path, ", ".join(missing)))
    for key in ("probe", "thinking_probe"):
        spec = settings.get(key)
        prompts = (spec.get("prompts") or "coding") if isinstance(spec, dict) else spec
        if spec is not None and prompts not in PROBE_PROMPTS:
            raise ValueError("%s: %s.prompts must be one of %s (a probe sends a few short requests), got %r"
                             % (path, key, ", ".join(PROBE_PROMPTS), prompts))
    return settings


_KEY_LINE = re.compile(r"^api-key:[ \t]*(.*?)[ \t]*$", re.M)


def api_key(config_text):
    """The value of the engine's --config file's ``api-key:`` (plain, or quoted as to_nice_yaml
    quotes one), or None when the file has none. Raises ValueError without the value in it."""
    m = _KEY_LINE.search(config_text)
    if not m:
        return None
    value = m.group(1)
    quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
    if quoted and value[0] == "'":
        return value[1:-1].replace("''", "'")
    if quoted and "\\" not in value:
        return value[1:-1]
    if quoted or not value or value[0] in "'\"|>&*!{[#":
        raise ValueError("the api-key value is not a YAML scalar on its line the watch reads (plain, "
                         "single-quoted, or double-quoted without escapes)")
    return value


def read_api_key(path):
    with open(path, encoding="utf-8") as f:
        key = api_key(f.read())
    if key is None:
        raise ValueError("%s has no api-key" % path)
    return key


def scrape(endpoint, timeout):
    """``metrics.parse`` of GET /metrics; None when the server did not answer (or answered 5xx),
    {} when it answered something else."""
    try:
        status, raw = endpoint.get("/metrics", timeout)
    except RequestError:
        return None
    if status >= 500:
        return None
    return prom.parse(raw.decode("utf-8", "replace")) if status == 200 else {}


def _probe_options(settings, key, spec, run_timeout):
    return {"url": settings["url"], "api_key": key, "model": settings.get("model"),
            "prompts": spec.get("prompts") or "coding", "case": spec.get("case") or "probe",
            "thinking": spec.get("thinking") is True, "concurrency": 1,
            "requests": int(spec.get("requests") or 3), "max_tokens": spec.get("max_tokens"),
            "warmup": PROBE_WARMUP, "metrics": "auto", "run_timeout": run_timeout}


def probe(settings, key):
    """A few requests of the watched case at C=1 (the gate's engine), then as many with thinking
    on when the settings have a ``thinking_probe``: an observation. The time left after the window
    is shared between the two."""
    thinking = settings.get("thinking_probe")
    left = float(settings["timeout_s"]) - float(settings["window_s"]) - 10.0
    run_timeout = max(10.0, left / 2.0 if thinking else left)
    try:
        speed = engine.run(_probe_options(settings, key, settings["probe"], run_timeout))
        obs = observe_probe(speed)
    except MeasureError as e:
        return probe_failed(str(e))
    if thinking:
        try:
            result = engine.run(_probe_options(settings, key, thinking, run_timeout))
            obs.update(thinking_decode_tok_s=(result.get("decode_tok_s") or {}).get("median"),
                       thinking_accept_len=result.get("accept_len"))
        except MeasureError as e:
            said = "the thinking probe measured nothing: %s" % e
            obs["note"] = "%s; %s" % (obs["note"], said) if obs["note"] else said
    # last, so no speed window of the probe counts its tokens
    said = known_answer(settings, key, speed, run_timeout)
    note = said.pop("note")
    obs.update(said, note="; ".join(n for n in (obs["note"], note) if n) or None)
    return obs


# The rows the probe's known answer is drawn from (answers.builtin), one per run in turn.
PROBE_ANSWER_ROWS = 96
PROBE_ANSWER_TOKENS = 384


def known_answer(settings, key, result, timeout_s, wall=time.time):
    """One known answer of the gate's built-in set (a row per run, in turn by the run's time),
    asked greedy with thinking off as the gate's answers check asks it: {answer_right, answer_id}
    and, when wrong, a note naming what came back. A request error is a note, not a wrong answer."""
    rows = answers.builtin(PROBE_ANSWER_ROWS)
    row = rows[int(wall() // max(1.0, float(settings.get("interval_s") or 1))) % len(rows)]
    cfg = {"first_token_timeout": min(60.0, timeout_s), "stall_timeout": 30.0,
           "max_tokens": PROBE_ANSWER_TOKENS, "seconds_per_token": 0.5}
    body = quality.request_body(result.get("model") or settings.get("model") or "default", row,
                                PROBE_ANSWER_TOKENS, False, False)
    reply = quality.ask(Endpoint(settings["url"], key), body, result.get("server") or {}, cfg)
    if reply.error:
        return {"answer_right": None, "answer_id": row["id"],
                "note": "the known answer got no reply: %s" % reply.error}
    right = answers.correct(row["answer"], reply.content)
    return {"answer_right": right, "answer_id": row["id"],
            "note": None if right else "known answer %s WRONG: expected %s, got %r"
                                       % (row["id"], row["answer"], " ".join(reply.content.split())[:80])}


def deploy_lock(settings, now):
    """(held, note) of the host's deploy lock now (the settings' ``deploy_lock``; none: not held)."""
    spec = settings.get("deploy_lock") or {}
    if not spec.get("path"):
        return False, None
    return deploy_lock_held(read_deploy_lock(spec["path"]), now, _number(spec.get("max_age_s")))


def probe_locked(settings, key, window_obs, wall=time.time):
    """The probe under the host's measurement lock, taken without waiting: held by the gate, no
    probe (``deploying``); taken, the deploy lock is read again (a deploy may have begun in the
    window) before any request is sent."""
    path = settings.get("measure_lock")
    if not path:
        return probe(settings, key)
    try:
        fd = measurelock.acquire(path, create=False)
    except measurelock.Busy:
        return observe_deploying("the measurement lock %s is held (the gate measures): no probe this run"
                                 % path)
    except OSError as e:
        return dict(window_obs, source="none", note="no probe: cannot open the measurement lock %s (%s)"
                    % (path, e.strerror or e))
    try:
        held, note = deploy_lock(settings, wall())
        return observe_deploying(note) if held else probe(settings, key)
    finally:
        measurelock.release(fd)


def run(settings, key=None, clock=time.monotonic, sleep=time.sleep, wall=time.time):
    """One run: the deploy lock; unheld, the window (and the probe when idle, under the
    measurement lock); the deploy lock again, held now, wins over what was measured. The
    observation."""
    held, lock_note = deploy_lock(settings, wall())
    if held:
        return observe_deploying(lock_note)
    obs = measure(settings, key, clock, sleep, wall)
    held, note = deploy_lock(settings, wall())
    if held:
        return observe_deploying(note)
    return dict(obs, note="; ".join(n for n in (obs["note"], lock_note) if n) or None)


def measure(settings, key, clock, sleep, wall):
    """The window (and the probe when idle): the observation, with the window's mean prompt."""
    endpoint = Endpoint(settings["url"], key)
    timeout = min(10.0, float(settings["timeout_s"]) / 4)
    before = scrape(endpoint, timeout)
    if engine_of(before) is None:  # down, or no metrics: nothing a window would change
        return observe_window(before, before, 0.0)
    t0 = clock()
    sleep(float(settings["window_s"]))
    after = scrape(endpoint, timeout)
    obs = observe_window(before, after, clock() - t0)
    if obs["state"] == IDLE:
        return probe_locked(settings, key, obs, wall)
    return dict(obs, prompt_tokens=window_prompt_tokens(before, after))


def main(argv=None, out=None, err=None):
    """``sglang-watch SETTINGS.json``: one run, the textfile written; the exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    out, err = out or sys.stdout, err or sys.stderr
    if len(args) != 1:
        print("usage: sglang-watch SETTINGS.json (the file roles/sglang_watch writes)", file=err)
        return 2
    try:
        settings = load_settings(args[0])
        key = read_api_key(settings["api_key_file"]) if settings.get("api_key_file") else None
        obs = run(settings, key)
    except (OSError, ValueError, ConfigError) as e:
        print("sglang-watch: %s" % e, file=err)
        return 2
    try:
        exposition.write(settings["textfile"], render(settings, obs, time.time()))
    except OSError as e:
        print("sglang-watch: cannot write %s: %s" % (settings["textfile"], e), file=err)
        return 1
    print("sglang-watch: %s" % summary(obs), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
