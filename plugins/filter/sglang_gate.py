# -*- coding: utf-8 -*-
"""Filters over plugins/module_utils/sglang_perf/plan.py (the one implementation of the gate
plan; the deploy plan resolves it, the sglang_bench module runs it on the host): a case result's
figures for the rollout summary, and the calibration file."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_gate
short_description: The gate plan's rollout summary and calibration file
description:
  - C(sglang_gate_case_summary) is a case result's few figures for the rollout summary.
  - C(sglang_gate_calibration) is the host_vars file C(playbooks/calibrate.yml) writes - thresholds
    proposed at a margin below what several plan runs measured.
"""

from sglang_perf import plan
from sglang_perf.client import ConfigError

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # used without Ansible (tests)
    AnsibleFilterError = ValueError


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
        return {"sglang_gate_case_summary": sglang_gate_case_summary,
                "sglang_gate_calibration": sglang_gate_calibration}
