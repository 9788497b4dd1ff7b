# -*- coding: utf-8 -*-
"""Filters over plugins/module_utils/sglang_perf/plan.py (the one implementation of the gate
plan, which the sglang_bench module runs on the host): the preflight's check of the plan and the
profile's thresholds, and the resolved cases."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_gate
short_description: Check and resolve the gate plan of the sglang_gate role
description:
  - C(sglang_gate_plan_errors) lists every problem of C(sglang_gate_plan) and of the profile's
    thresholds (C(sglang_gate_thresholds), C(sglang_gate_calibrated)), each naming the variable;
    empty when the plan can run.
  - C(sglang_gate_plan_cases) is the resolved plan - each case with its engine options and the
    thresholds that apply to the profile.
  - C(sglang_gate_plan_text) is the resolved plan in one line, which the gate states before it measures.
  - C(sglang_gate_textfile_errors) lists the problems of C(sglang_gate_textfile_path), the
    Prometheus textfile (an absolute path ending in C(.prom)), each naming the variable; empty
    when it is empty (off) or valid.
  - C(sglang_gate_case_summary) is a case result's few figures for the rollout summary.
  - C(sglang_gate_calibration) is the host_vars file C(playbooks/calibrate.yml) writes - thresholds
    proposed at a margin below what several plan runs measured.
"""

from sglang_perf import exposition, plan
from sglang_perf.client import ConfigError

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # used without Ansible (tests)
    AnsibleFilterError = ValueError


def _level(confidence):
    try:
        return float(confidence)
    except (TypeError, ValueError):
        return confidence  # plan.problems names the variable


def sglang_gate_plan_errors(gate_plan, thresholds, profile, calibrated=None, confidence=0.95):
    return plan.problems(gate_plan, thresholds, profile, calibrated or None, confidence=_level(confidence))


def sglang_gate_plan_cases(gate_plan, thresholds, profile, calibrated=None, confidence=0.95):
    try:
        return plan.resolve(gate_plan, thresholds, profile, calibrated or None, confidence=_level(confidence))
    except ConfigError as e:
        raise AnsibleFilterError("sglang_gate_plan_cases: %s" % e.message)


def sglang_gate_plan_text(cases, confidence, inconclusive):
    """The resolved plan in one line (the gate states it before it measures)."""
    return plan.describe(cases, float(confidence), inconclusive)


def sglang_gate_textfile_errors(path, var="sglang_gate_textfile_path"):
    return ["%s = %s: %s" % (var, path, p) for p in exposition.path_problems(path)]


def sglang_gate_case_summary(case):
    """A case result's figures for the rollout summary (plugins/callback/sglang_rollout.py)."""
    if not isinstance(case, dict):
        raise AnsibleFilterError("sglang_gate_case_summary: a case result is a dict, got %r" % (case,))
    return plan.case_summary(case)


def sglang_gate_calibration(runs, profile, margin, existing=None, host="?", when=None):
    """The host_vars file text with thresholds proposed from ``runs`` (plan results)."""
    import datetime
    try:
        proposals = plan.propose([r for r in runs if isinstance(r, dict)], float(margin))
    except ConfigError as e:
        raise AnsibleFilterError("sglang_gate_calibration: %s" % e)
    if not proposals:
        raise AnsibleFilterError("sglang_gate_calibration: no run measured any case; nothing to propose")
    when = when or datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z"
    return plan.calibration_text(proposals, profile, float(margin), len(runs), host, when,
                                 existing if isinstance(existing, dict) else None)


class FilterModule(object):
    def filters(self):
        return {"sglang_gate_plan_errors": sglang_gate_plan_errors,
                "sglang_gate_plan_cases": sglang_gate_plan_cases,
                "sglang_gate_plan_text": sglang_gate_plan_text,
                "sglang_gate_textfile_errors": sglang_gate_textfile_errors,
                "sglang_gate_case_summary": sglang_gate_case_summary,
                "sglang_gate_calibration": sglang_gate_calibration}
