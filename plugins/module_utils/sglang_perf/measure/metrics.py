# -*- coding: utf-8 -*-
"""Reading an engine's Prometheus ``/metrics`` (SGLang's or vLLM's: one parser, one table of names
per engine) and turning two scrapes into window deltas."""
from __future__ import annotations

from .. import engines
from ..engines import common

# Every engine's names (engines/<engine>.py: counters, gauges, histograms), gathered for the parser.
# Counters kept per value of one label (vLLM's acceptance per draft position).
BY_LABEL = {e.per_position: e.per_position_label for e in engines.every() if e.per_position}
# Info gauges (value 1): their labels are the figures (vLLM's CacheConfig as strings).
INFO = tuple(name for e in engines.every() for name in e.info_gauges)
COUNTERS = tuple(name for e in engines.every() for name in e.counters.values())
GAUGES = tuple(name for e in engines.every() for name in e.other_gauges + tuple(e.gauges.values()))
HISTOGRAM_TOTALS = tuple(name + part for e in engines.every()
                         for name in (e.inter_token_latency, e.time_per_output_token, e.request_prompt_tokens)
                         if name for part in ("_sum", "_count"))

# Both engines' accept length in the window: generated tokens / verify steps (the prefill's token
# of each request included), as the per-request figure; vLLM's own is 1 + accepted / drafts.
WINDOW_ACCEPT_LEN_CONVENTION = "generation tokens / verify steps (as the per-request accept length)"

_sample = common.exposition_sample


def parse(text):
    """Sum every sample of each wanted metric name over its label sets (TP/DP ranks, engines,
    models, finish reasons; a histogram's _sum and _count too); a BY_LABEL counter as {label
    value: sum}; an INFO gauge as the labels of its first sample (engine 0)."""
    wanted = set(COUNTERS) | set(GAUGES) | set(HISTOGRAM_TOTALS)
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        s = _sample(line)
        if s is None:
            continue
        name, labels, value = s
        if name in wanted:
            out[name] = out.get(name, 0.0) + value
        elif name in BY_LABEL:
            key = labels.get(BY_LABEL[name])
            by = out.setdefault(name, {})
            by[key] = by.get(key, 0.0) + value
        elif name in INFO and name not in out:
            out[name] = labels
    return out


def kind_of(scrape):
    """The engine whose counters a scrape holds, or None."""
    eng = engines.of_scrape(scrape)
    return eng.name if eng else None


def window(before, after, client_tokens, client_verify_steps=None):
    """Counter deltas between two scrapes and the accept length they imply.

    ``client_tokens`` is what the engine itself counted in the same window; a difference means
    other traffic reached the server while we measured (or a counter was reset by a restart).
    ``client_verify_steps`` (the measured requests' verify steps) is compared with vLLM's drafts,
    which count the same steps.
    """
    eng = engines.of_scrape(after) or engines.get(engines.DEFAULT)
    kind, table = eng.name, eng.counters
    delta = {}
    for figure, name in table.items():
        if name in before and name in after:
            delta[figure] = after[name] - before[name]
    gen = delta.get("generation_tokens")
    verify = delta.get("verify_calls")
    accepted = delta.get("accepted_tokens")
    drafts = delta.get("draft_tokens")
    by_position = None
    pos_before = common.positions(before.get(eng.per_position)) if eng.per_position else None
    pos_after = common.positions(after.get(eng.per_position)) if eng.per_position else None
    if verify and pos_after and pos_before and len(pos_before) == len(pos_after):
        # per_pos[i] / drafts: the share of verify steps that accepted at least i + 1 drafts
        by_position = [(a - b) / verify for a, b in zip(pos_after, pos_before)]
    result = {
        "kind": kind,
        "generation_tokens": gen,
        "prompt_tokens": delta.get("prompt_tokens"),
        "verify_calls": verify,
        "requests": delta.get("requests"),
        "accept_len": (gen / verify) if gen is not None and verify else None,
        "accept_len_convention": WINDOW_ACCEPT_LEN_CONVENTION,
        "draft_tokens": drafts,
        "accepted_tokens": accepted,
        "engine_accept_len": (1.0 + accepted / verify) if accepted is not None and verify else None,
        "engine_accept_len_convention": eng.window_accept_len_convention,
        "acceptance_rate": (accepted / drafts) if accepted is not None and drafts else None,
        "by_position": by_position,
        "client_tokens": client_tokens,
        "matches_client": None,
        "client_verify_steps": client_verify_steps if eng.counts_verify_steps else None,
        "matches_client_verify": None,
        "note": None,
    }
    if eng.counts_verify_steps and verify is not None and client_verify_steps is not None:
        result["matches_client_verify"] = verify == client_verify_steps
    if gen is None:
        result["note"] = "server exposes no %s" % table["generation_tokens"]
    elif gen < 0:
        result["note"] = "counters went backwards: the server restarted during the run"
    else:
        result["matches_client"] = abs(gen - client_tokens) <= max(1.0, 0.001 * client_tokens)
        if not result["matches_client"]:
            result["note"] = ("server generated %d tokens in the window, the benchmark received %d: "
                              "other traffic, or a counter reset" % (gen, client_tokens))
    return result


def gauge_max(text, names):
    """The largest sample of the first of ``names`` a /metrics text holds (a gauge per rank or
    engine: the fullest one), or None when it holds none of them."""
    found = {}
    for line in str(text or "").splitlines():
        if not line or line[0] == "#":
            continue
        s = _sample(line)
        if s is not None and s[0] in names:
            found[s[0]] = max(found.get(s[0], s[2]), s[2])
    return next((found[n] for n in names if n in found), None)
