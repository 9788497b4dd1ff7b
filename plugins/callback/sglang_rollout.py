# -*- coding: utf-8 -*-
"""Callback: the rollout summary table at the end of playbooks/deploy.yml.

A rollout that stops at a failing host ends the whole run (max_fail_percentage 0 ends the
playbook), so no later play could print a summary: this callback collects what the plays record -
the preflight's plan (``__sglang_rollout_plan``) and every host's outcome (``__sglang_gate_outcome``,
set by roles/sglang_gate/tasks/outcome.yml) - and prints one table when the run ends, however it
ends. Hosts of the plan that ran no task of the rollout play are "untouched": only the read-only
preflight ran on them; their unit and service were not changed.
"""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_rollout
type: aggregate
short_description: Summary table of a rolling gated SGLang deploy
description:
  - Prints host, profile, decode tok/s, accept length, gate result, rolled back, untouched for
    every host of the rollout plan when playbooks/deploy.yml ends, then each gate case's figures
    per host (decode tok/s, accept length, per-position acceptance, verdict), and how to resume.
  - Prints nothing for playbooks that set no rollout plan.
requirements:
  - enabled in ansible.cfg (callbacks_enabled = sglang_rollout)
"""

from ansible.plugins.callback import CallbackBase  # noqa: E402 - after the plugin's documentation

COLUMNS = ("host", "node", "profile", "decode tok/s", "accept len", "gate", "rolled back", "untouched")


def _num(value, fmt):
    try:
        return fmt % float(value)
    except (TypeError, ValueError):
        return "-"


def _flag(value):
    return "yes" if str(value).lower() in ("true", "yes", "1") else "no"


def _rolled_back(result):
    if _flag(result.get("rolled_back")) == "no":
        return "no"
    restored = result.get("restored_profile")
    return "yes, to %s" % restored if restored else "yes"


def summary_rows(plan, results, touched, failed):
    """One row per host of the plan, in rollout order."""
    rows = []
    for batch_no, batch in enumerate(plan.get("batches") or [], 1):
        for host in batch:
            r = results.get(host)
            if r is not None:
                rows.append([host, r.get("node") or "", r.get("profile") or "-",
                             _num(r.get("decode_tok_s"), "%.1f"), _num(r.get("accept_len"), "%.2f"),
                             r.get("gate") or "-", _rolled_back(r), "no"])
            elif host in touched:
                rows.append([host, "", "-", "-", "-", "failed: %s" % failed.get(host, "see above"),
                             "no", "no"])
            else:
                rows.append([host, "", "-", "-", "-", "not run (batch %d)" % batch_no, "no", "yes"])
    return rows


def render_table(rows):
    """A Markdown table; the node column only when a multi-node deployment is in the run."""
    columns = list(COLUMNS)
    if not any(r[1] for r in rows):
        columns.pop(1)
        rows = [r[:1] + r[2:] for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(columns, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(columns), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                     + [line(r) for r in rows])


def resume_hint(rows):
    """What to run next: the hosts that did not pass, in rollout order."""
    todo = [r[0] for r in rows if r[5] != "passed"]
    if not todo:
        return "Rollout complete: every host passed its gate."
    if all(r[5] == "check mode" for r in rows):
        return "Check mode: nothing was changed and no gate judged; run it without --check to deploy."
    return ("Rollout stopped. Fix the cause, then run the same command again: hosts that passed keep their "
            "unit (no restart) and pass their gate again; or only the rest: --limit %s" % ",".join(todo))


def _positions(values):
    try:
        return "/".join("%.0f" % (100 * float(v)) for v in values) + "%" if values else "-"
    except (TypeError, ValueError):
        return "-"


def case_lines(plan, results):
    """Per host, each gate case's figures: decode tok/s, accept length and per-position
    acceptance (share of verify steps that accepted at least 1, 2, ... drafts), verdict."""
    lines = []
    for batch in plan.get("batches") or []:
        for host in batch:
            r = results.get(host) or {}
            cases = r.get("cases") or []
            if not isinstance(cases, list) or not cases:
                continue
            lines.append("%s (%s; verdict in %s s):" % (host, r.get("profile") or "-",
                                                         _num(r.get("time_to_verdict_s"), "%.0f")))
            for c in cases:
                if not isinstance(c, dict):
                    continue
                if c.get("quality"):  # a quality check (docs/quality.md): its own line
                    lines.append("  %-14s %s %s" % (c.get("case"), c["quality"],
                                                   "" if c.get("passed") is True else "(FAILED)"))
                    continue
                prompt = c.get("prompt_tokens")
                change = c.get("attribution") if isinstance(c.get("attribution"), dict) else None
                figures = (c.get("case"), c.get("concurrency"), _num(c.get("decode_tok_s"), "%.1f"),
                           _num(c.get("accept_len"), "%.2f"), _positions(c.get("accept_by_position")),
                           _num(c.get("aggregate_tok_s"), "%.1f"),
                           "  prompt %s tok" % _num(prompt, "%.0f") if prompt else "",
                           "passed" if c.get("passed") is True else "FAILED",
                           "  (vs last-known-good: %s)" % change.get("text") if change else "")
                lines.append("  %-14s C=%-2s %s tok/s  accept %s  by position %s  aggregate %s tok/s%s %s%s"
                             % figures)
    return lines


NOT_STARTED = "Rollout not started: the preflight refused it (errors above); no host was changed."
PREFLIGHT_ONLY = "Preflight passed on every host (playbooks/preflight.yml alone): nothing was deployed."


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "sglang_rollout"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.plan = None
        self.results = {}
        self.touched = set()
        self.failed = {}
        self.stage = None
        self.rollout_started = False
        self.preflight_seen = False
        self.preflight_failed = False

    def v2_playbook_on_play_start(self, play):
        try:
            self.stage = play.get_vars().get("_sglang_rollout_stage")
        except Exception:  # noqa: BLE001 - a play without vars
            self.stage = None
        self.rollout_started = self.rollout_started or self.stage == "rollout"
        self.preflight_seen = self.preflight_seen or self.stage == "preflight"

    def _seen(self, result):
        if self.stage == "rollout":
            self.touched.add(result._host.get_name())

    def v2_runner_on_ok(self, result):
        self._seen(result)
        facts = result._result.get("ansible_facts") or {}
        if "__sglang_rollout_plan" in facts:
            self.plan = facts["__sglang_rollout_plan"]
        if "__sglang_gate_outcome" in facts and self.stage == "rollout":
            self.results[result._host.get_name()] = facts["__sglang_gate_outcome"]

    def v2_runner_on_skipped(self, result):
        self._seen(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._seen(result)
        if not ignore_errors and self.stage == "preflight":
            self.preflight_failed = True
        if not ignore_errors and self.stage == "rollout":
            task = result._task.get_name() if result._task else "?"
            self.failed.setdefault(result._host.get_name(), "at '%s'" % task)

    def v2_runner_on_unreachable(self, result):
        self._seen(result)
        self.preflight_failed = self.preflight_failed or self.stage == "preflight"
        if self.stage == "rollout":
            self.failed.setdefault(result._host.get_name(), "unreachable")

    def v2_playbook_on_stats(self, stats):
        if not self.rollout_started:
            if self.preflight_seen:
                self._display.banner("SGLANG ROLLOUT SUMMARY")
                self._display.display(NOT_STARTED if self.preflight_failed else PREFLIGHT_ONLY)
            return
        if not self.plan:
            return
        rows = summary_rows(self.plan, self.results, self.touched, self.failed)
        self._display.banner("SGLANG ROLLOUT SUMMARY")
        self._display.display("batches: %s (serial %s)" % (
            " | ".join(", ".join(b) for b in self.plan.get("batches") or []), self.plan.get("serial")))
        self._display.display(render_table(rows))
        for line in case_lines(self.plan, self.results):
            self._display.display(line)
        self._display.display(resume_hint(rows))
