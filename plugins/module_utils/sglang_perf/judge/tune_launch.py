# -*- coding: utf-8 -*-
"""A tuner's launch as the search reads it (docs/tune.md, Failures): what a failed start was, from
its log (too little memory for the fraction or too much, a port in use, the engine refusing its
arguments, not ready in time: FAILURES, and those another fraction does not mend), how long a
candidate's stop may take, and the outage a tuning run costs the service. No I/O: bench/tune.py
launches and stops; tune.py searches. Standard library only."""
from __future__ import annotations

import re


# What an engine raises at start-up when the fraction was wrong, lower case, checked in this
# order. Too small - SGLang 0.5.23: pool_configurator.py "Not enough memory. Please try to increase
# --mem-fraction-static.", kv_cache_configurator.py "Raise --mem-fraction-static above ..." (the
# weights leave nothing), "... state cache is too small to serve any requests ... (2) increase
# --mem-fraction-static" and "Not enough GPU memory for hybrid (mamba/linear-attention) state
# cache"; vLLM 0.33: v1/core/kv_cache_planning.py "No available memory for the cache blocks. Try
# increasing `gpu_memory_utilization` ...". Too large - torch's OutOfMemoryError ("CUDA out of
# memory"), vLLM's v1/worker/utils.py "... is less than desired GPU memory utilization ... Decrease
# GPU memory utilization". (SGLang's tp_worker.py warning "raise --mem-fraction-static" is a
# warning on a server that starts: not matched.)
MEMORY_UNDER = ("increase --mem-fraction-static", "raise --mem-fraction-static above", "too small to serve",
                "not enough gpu memory for hybrid", "increasing `gpu_memory_utilization`")
MEMORY_OVER = ("out of memory", "outofmemoryerror", "decrease gpu memory utilization")


def memory_signal(text):
    """"under", "over" or None for a failed start's log text (lower case)."""
    if any(sign in text for sign in MEMORY_UNDER):
        return "under"
    if any(sign in text for sign in MEMORY_OVER):
        return "over"
    return None


# A port another process holds, lower case: SGLang 0.5.23 utils/network.py ("The port N is in use",
# "port N is in use. Waiting"), server_args.py ("Port is already in use"); uvicorn under both
# engines ("[Errno 98] error while attempting to bind on address ...: address already in use").
PORT_IN_USE = re.compile(r"address already in use|errno 98|port is already in use|port \d+ is in use")
# The engine refusing its arguments at start-up, lower case: argparse ("error: argument",
# "unrecognized arguments"), SGLang's and vLLM's argument checks (ValueError, AssertionError,
# NotImplementedError, pydantic's ValidationError for vLLM's configs).
REFUSED = ("error: argument", "error: unrecognized arguments", "valueerror", "assertionerror",
           "notimplementederror", "validationerror", "typeerror")
# What each failure is, and what the search does about it (docs/tune.md, Failures).
FAILURES = {
    "over": "out of memory: a lower fraction is tried",
    "under": "the pools too small for the fraction: a higher one is tried",
    "port": "the port is in use on the host: the search stops (every launch would meet it)",
    "refused": "refused by the engine: not retried (another fraction is refused the same)",
    "timeout": "not ready within the ready timeout: not retried",
    "mismatch": "the server ready on the port is not this setting (its own report): not measured",
    None: "exited, its log naming no cause: taken for the commoner, out of memory, once",
}
# Failures another fraction does not mend.
NOT_RETRIED = ("port", "refused", "timeout", "mismatch")


def failure_kind(text, exited=True):
    """The kind of a launch's failure (a key of FAILURES) from its log's end (lower case) and
    whether the process exited: memory first (its errors are ValueErrors too), then a busy port,
    an engine refusal; a process still running that was not ready: a timeout."""
    memory = memory_signal(text)
    if memory:
        return memory
    if PORT_IN_USE.search(text):
        return "port"
    if not exited:
        return "timeout"
    if any(sign in text for sign in REFUSED):
        return "refused"
    return None


# Stopping a candidate (bench/tune.py Launch.stop, then --stop's command): SIGTERM to its group,
# SIGKILL after STOP_GRACE, KILL_WAIT for the group to go; the --stop command within
# STOP_COMMAND_SECONDS. STOP_SECONDS: the most one stop takes.
STOP_GRACE = 30.0
KILL_WAIT = 10.0
STOP_COMMAND_SECONDS = STOP_GRACE + 60
STOP_SECONDS = int(STOP_GRACE + KILL_WAIT + STOP_COMMAND_SECONDS)


def outage(budget_minutes, launches=(), ready_timeout=None):
    """(seconds at most, the sentence an operator reads before the service stops) of a tuning run
    with ``budget_minutes``: the budget, one candidate's stop, and the host's own server's start
    again - the longest start this host recorded (``launches``: an earlier tune.json's, each with
    ``ready_s`` and its outcome), else its ``ready_timeout`` (sglang_ready_timeout)."""
    readies = []
    for x in launches or ():
        o = (x.get("outcome") or {}) if isinstance(x, dict) else {}
        if isinstance(x, dict) and isinstance(x.get("ready_s"), (int, float)) and o.get("started", True) \
                and not o.get("cut"):
            readies.append(float(x["ready_s"]))
    start = max(readies) if readies else float(ready_timeout or 0)
    total = float(budget_minutes) * 60 + STOP_SECONDS + start
    where = ("the longest of the %d starts this host recorded in its last tuning (%.0f s)"
             % (len(readies), start)) if readies else \
        "no start recorded on this host: up to its ready timeout (%.0f s)" % start
    return total, ("the service is down for at most %.0f min: the budget (%g min), one candidate's "
                   "stop (up to %d s) and the server's own start again (%s); a launch of this host "
                   "takes %s" % (total / 60.0, float(budget_minutes), STOP_SECONDS, where,
                                 "%.0f s to be ready" % start if readies else "an unknown time"))
