# -*- coding: utf-8 -*-
"""One gate run in Prometheus' text exposition format, for node_exporter's textfile collector
(Python 3.9+, standard library only: the sglang_gate_decide module runs it on the host).

``render(record)`` turns one history record (``history.record()``) into the text of a ``*.prom``
file; ``write(path, text)`` puts it in place atomically; ``path_problems(path)`` says why a path
cannot be that file (the role's preflight and the module share it).

Every series is a gauge: the file holds the last gate run's figures and each run replaces it, so
nothing in it counts up (no ``_total``). Every series carries the run's ``profile``, ``release``
and ``engine`` (a record without one has the label empty, which Prometheus reads as absent); the
per-case ones also ``case``, the plan case's name.

Per case:

- ``sglang_gate_decode_tokens_per_second`` - per-request median decode speed;
  ``..._lower`` / ``..._upper`` the bounds of its interval;
- ``sglang_gate_accept_length`` (``_lower``, ``_upper``) - completion tokens per verify step, the
  bonus token counted (a count per step: no unit suffix);
- ``sglang_gate_aggregate_tokens_per_second`` (``_lower``, ``_upper``) - the case's tokens over
  its wall time, all streams together;
- ``sglang_gate_ttft_seconds`` (``_lower``, ``_upper``) - the median time to first token;
- ``sglang_gate_verify_step_seconds`` (``_lower``, ``_upper``) - the median verify-step time
  (accept length / decode tok/s): with the accept length, what a change of decode speed splits into;
- ``sglang_gate_interval_level`` - the confidence level of the case's intervals (0.95);
- ``sglang_gate_accept_ratio{position="1"|"2"|...}`` - the share of verify steps that accepted at
  least ``position`` draft tokens;
- ``sglang_gate_case_verdict{verdict="pass"|"fail"|"inconclusive"}`` - 1 for the case's verdict,
  0 for the others (a record without ``verdict`` gives pass or fail from ``passed``);
- ``sglang_gate_requests`` and ``sglang_gate_request_errors`` - requests measured (warmup
  excluded) and failed.

Per quality check (a case with ``check``, quality.py; its verdict is the case verdict above):

- ``sglang_gate_answer_accuracy_ratio`` (``_lower``, ``_upper``) - the share of known answers
  right, with its Wilson interval (``answers``);
- ``sglang_gate_replies_right`` - replies that passed the check (every check);
- ``sglang_gate_agreement_ratio`` - the share of fixed prompts whose greedy tokens agree with the
  last-known-good's (``agreement``, when there was one to compare with).

Per run:

- ``sglang_gate_passed`` - 1 when the gate passed, 0 when it failed: the decision's verdict, the
  one that recorded or rolled back (absent for ``not judged``);
- ``sglang_gate_plan_verdict{verdict="pass"|"fail"|"inconclusive"}`` - the plan's own verdict, as
  the case verdict (absent from records without ``plan_verdict``);
- ``sglang_gate_time_to_verdict_seconds`` - from the plan's start to its verdict;
- ``sglang_gate_last_run_timestamp_seconds`` - the record's ``time`` as unix time (node_exporter
  refuses a file with sample timestamps, so the run's time is a value);
- ``sglang_gate_info{host, engine_version, venv, action}`` - 1; the run's context, to join on.

Why these names: Prometheus' base units and suffixes - ``_seconds``, ``_timestamp_seconds``,
``_ratio`` for a share from 0 to 1 (``rate`` would read as PromQL's per-second rate of a
counter), ``_info`` for a series whose labels are the data. Tokens per second is the figure the
gate and its thresholds use, a measured speed, not a counter to take a rate of. The bounds are
metrics of their own rather than a ``bound`` label: two series for a Grafana band to fill between,
and an alert on ``..._lower`` needs no label matcher. The level is a gauge of its own rather
than a label: as a label a change of level would start new series of every bound.

A figure's value is its interval's estimate when the case has an interval (the centre of the
band its bounds draw), else the record's own figure (``decode_tok_s.median``, ``accept_len``,
``aggregate_tok_s``, ``ttft_s.p50``). A figure the record lacks (absent, None, not a finite
number) is left out, never written as NaN or 0; a family without a series is left out whole.
"""
from __future__ import annotations

import datetime
import math
import os
import posixpath
import tempfile

from ..judge.decision import VERDICTS

# A case's figures with an interval: (key in the case and in its "intervals", metric, what the
# value is, the key of the record's own figure when that is a dict of statistics).
FIGURES = (
    ("decode_tok_s", "sglang_gate_decode_tokens_per_second",
     "Per-request median decode speed of the gate case (tokens per second).", "median"),
    ("accept_len", "sglang_gate_accept_length",
     "Accept length of the gate case: completion tokens per verify step, the bonus token counted.", None),
    ("aggregate_tok_s", "sglang_gate_aggregate_tokens_per_second",
     "Aggregate speed of the gate case: its completion tokens over its wall time, all streams "
     "(tokens per second).", None),
    ("ttft_s", "sglang_gate_ttft_seconds", "Median time to first token of the gate case.", "p50"),
    ("step_time_s", "sglang_gate_verify_step_seconds",
     "Median verify-step time of the gate case: accept length over decode speed, per request "
     "(decode tok/s = accept length / step time; attribution.py splits a change into the two).", None),
)


def _metrics():
    """Every family in the order written: name -> HELP text."""
    out = {}
    for _key, name, help_text, _stat in FIGURES:
        out[name] = help_text
        for bound in ("lower", "upper"):
            out["%s_%s" % (name, bound)] = ("%s bound of the interval of %s (its level: "
                                            "sglang_gate_interval_level)." % (bound.capitalize(), name))
    out.update({
        "sglang_gate_interval_level": "Confidence level of the gate case's intervals (0.95: 95%).",
        "sglang_gate_accept_ratio": "Share of the gate case's verify steps that accepted at least "
                                    "`position` draft tokens (0 to 1).",
        "sglang_gate_case_verdict": "Verdict of the gate case: 1 for the current verdict, 0 for the others.",
        "sglang_gate_requests": "Requests the gate case measured (warmup excluded).",
        "sglang_gate_request_errors": "Requests of the gate case that failed.",
        "sglang_gate_answer_accuracy_ratio": "Share of the known answers the server got right (0 to 1).",
        "sglang_gate_answer_accuracy_ratio_lower": "Lower bound of the Wilson interval of "
                                                   "sglang_gate_answer_accuracy_ratio.",
        "sglang_gate_answer_accuracy_ratio_upper": "Upper bound of the Wilson interval of "
                                                   "sglang_gate_answer_accuracy_ratio.",
        "sglang_gate_replies_right": "Replies of the quality check that passed it.",
        "sglang_gate_agreement_ratio": "Share of the fixed prompts whose greedy first tokens agree "
                                       "with the last-known-good's (0 to 1).",
        "sglang_gate_passed": "Whether the gate passed (1) or failed (0): the decision that recorded the "
                              "deploy as last-known-good or rolled it back.",
        "sglang_gate_plan_verdict": "Verdict of the gate plan: 1 for the current verdict, 0 for the others.",
        "sglang_gate_time_to_verdict_seconds": "Seconds from the gate plan's start to its verdict.",
        "sglang_gate_last_run_timestamp_seconds": "When the gate run was recorded (unix time).",
        "sglang_gate_info": "The gate run's context (host, engine version, venv, action); always 1.",
    })
    return out


METRICS = _metrics()

TEXTFILE_SUFFIX = ".prom"


def escape_label(value):
    """A label value as the exposition format quotes it: backslash, double quote, newline."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value):
    """``value`` as a sample value, or None when it is no finite number (bool is no number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _format(value):
    return "%d" % value if isinstance(value, int) else repr(float(value))


def timestamp(text):
    """Unix time of a record's ISO 8601 ``time`` ("2026-12-01T10:00:00Z"; no zone: UTC), or None."""
    if not isinstance(text, str) or not text.strip():
        return None
    s = text.strip()
    if s[-1] in "Zz":
        s = s[:-1] + "+00:00"
    try:
        t = datetime.datetime.fromisoformat(s)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return t.timestamp()


def case_verdict(case):
    """A case's verdict: its ``verdict``, else pass or fail from ``passed``, else None."""
    verdict = case.get("verdict")
    if isinstance(verdict, str) and verdict:
        return verdict
    passed = case.get("passed")
    return None if passed is None else "pass" if passed is True else "fail"


def _figure(case, key, stat):
    """(value, lower, upper) of one figure of a case."""
    own = case.get(key)
    value = own.get(stat) if isinstance(own, dict) and stat else own
    intervals = case.get("intervals")
    interval = intervals.get(key) if isinstance(intervals, dict) else None
    if not isinstance(interval, dict):
        return value, None, None
    estimate = interval.get("estimate")
    return (estimate if _number(estimate) is not None else value,
            interval.get("lower"), interval.get("upper"))


class Samples(object):
    """The series of one textfile, family by family: ``metrics`` is {name: HELP text} in the order
    written (METRICS here; the watch's, sglang_perf/host/watch.py, has its own); a value that is no
    finite number is left out, and so is a family without a series."""

    def __init__(self, metrics):
        self.metrics = metrics
        self.by_name = {name: [] for name in metrics}

    def add(self, name, labels, value):
        value = _number(value)
        if value is not None:
            self.by_name[name].append((labels, value))

    def enum(self, name, labels, current, states=VERDICTS, label="verdict"):
        """One series per state (its name the ``label``'s value), 1 for ``current`` (a state
        outside ``states`` is added)."""
        if current is None:
            return
        for state in tuple(states) + (() if current in states else (current,)):
            self.add(name, dict(labels, **{label: state}), 1 if state == current else 0)

    def text(self):
        lines = []
        for name, help_text in self.metrics.items():
            samples = self.by_name[name]
            if not samples:
                continue
            lines.append("# HELP %s %s" % (name, _escape_help(help_text)))
            lines.append("# TYPE %s gauge" % name)
            for labels, value in samples:
                lines.append("%s{%s} %s" % (name, ",".join('%s="%s"' % (k, escape_label(v))
                                                           for k, v in labels.items()), _format(value)))
        return "\n".join(lines) + "\n" if lines else ""


def _label(value):
    return "" if value is None else str(value)


# The labels of every series, the run's (the watch's series carry the same).
RUN_LABELS = ("profile", "release", "engine")


def run_labels(record):
    """{profile, release, engine} of a record as label values (a missing one empty)."""
    return {k: _label((record or {}).get(k)) for k in RUN_LABELS}


def render(record):
    """The exposition text of one history record (see the module docstring)."""
    rec = record or {}
    common = run_labels(rec)
    out = Samples(METRICS)
    seen = set()
    for case in rec.get("cases") or []:
        if not isinstance(case, dict) or case.get("case") is None or str(case["case"]) in seen:
            continue  # one series per case name: a repeated one would make node_exporter refuse the file
        seen.add(str(case["case"]))
        labels = dict(case=str(case["case"]), **common)
        for key, name, _help, stat in FIGURES:
            value, lower, upper = _figure(case, key, stat)
            out.add(name, labels, value)
            out.add(name + "_lower", labels, lower)
            out.add(name + "_upper", labels, upper)
        intervals = case.get("intervals")
        if isinstance(intervals, dict):
            out.add("sglang_gate_interval_level", labels, intervals.get("level"))
        by_position = case.get("accept_by_position")
        for i, share in enumerate(by_position if isinstance(by_position, (list, tuple)) else (), 1):
            out.add("sglang_gate_accept_ratio", dict(labels, position=str(i)), share)
        out.enum("sglang_gate_case_verdict", labels, case_verdict(case))
        out.add("sglang_gate_requests", labels, case.get("requests"))
        out.add("sglang_gate_request_errors", labels, case.get("errors"))
        accuracy = case.get("accuracy")
        if isinstance(accuracy, dict):
            for key, suffix in (("estimate", ""), ("lower", "_lower"), ("upper", "_upper")):
                out.add("sglang_gate_answer_accuracy_ratio" + suffix, labels, accuracy.get(key))
        if case.get("check"):
            out.add("sglang_gate_replies_right", labels, case.get("right"))
        out.add("sglang_gate_agreement_ratio", labels, case.get("agreement"))
    verdict = rec.get("verdict")
    if verdict in ("pass", "fail"):
        out.add("sglang_gate_passed", common, 1 if verdict == "pass" else 0)
    elif verdict is None and isinstance(rec.get("passed"), bool):
        out.add("sglang_gate_passed", common, 1 if rec["passed"] else 0)
    plan_verdict = rec.get("plan_verdict")
    out.enum("sglang_gate_plan_verdict", common, plan_verdict if isinstance(plan_verdict, str) else None)
    out.add("sglang_gate_time_to_verdict_seconds", common, rec.get("time_to_verdict_s"))
    out.add("sglang_gate_last_run_timestamp_seconds", common, timestamp(rec.get("time")))
    out.add("sglang_gate_info", dict(common, host=_label(rec.get("host")),
                                     engine_version=_label(rec.get("sglang_version")),
                                     venv=_label(rec.get("venv")), action=_label(rec.get("action"))), 1)
    return out.text()


def path_problems(path):
    """Why ``path`` cannot be the gate's textfile (empty when it can; an empty path is off)."""
    if not path:
        return []
    if not isinstance(path, str):
        return ["not a path string"]
    problems = []
    if not posixpath.isabs(path):
        problems.append("not an absolute path")
    name = posixpath.basename(path)
    if not name.endswith(TEXTFILE_SUFFIX) or name == TEXTFILE_SUFFIX:
        problems.append("node_exporter's textfile collector reads only files named *%s" % TEXTFILE_SUFFIX)
    return problems


def write(path, text, mode=0o644):
    """Replace ``path`` with ``text`` atomically: a temporary file in the same directory, named
    ``.<name>.<random>.tmp`` (the collector reads only *.prom, so never a half-written file),
    flushed to disk, given ``mode`` (node_exporter runs as its own user and must read it), renamed
    over ``path``, and the directory synced so the rename survives a crash. Raises OSError."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
