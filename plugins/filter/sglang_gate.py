# -*- coding: utf-8 -*-
"""Filters over the gate's code in plugins/module_utils/sglang_perf (plan.py, the one implementation
of the gate plan: the deploy plan resolves it, the sglang_bench module runs it on the host): a case
result's figures for the rollout summary (verdict.py), and the calibration file (calibration.py)."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_gate
short_description: The gate plan's rollout summary and calibration file
description:
  - C(sglang_gate_case_summary) is a case result's few figures for the rollout summary.
  - C(sglang_gate_failure), C(sglang_gate_rescue_failure) and C(sglang_gate_outcome_failure) are the
    messages of a failed gate, a failed deploy and a failed host of the rollout, and
    C(sglang_gate_restored_text) what they say was restored (sglang_perf/judge/decision.py writes them).
  - C(sglang_gate_lkg_problem) is why a last-known-good cannot be restored (empty when it can).
  - C(sglang_gate_outcome) is a host's word in the rollout summary (passed, FAILED, check mode,
    not reached).
  - C(sglang_gate_calibration) is the host_vars file C(playbooks/calibrate.yml) writes - thresholds
    proposed at a margin below what several plan runs measured.
"""

from sglang_perf.judge import calibration, decision, verdict
from sglang_perf.measure.client import ConfigError

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean


def sglang_gate_case_summary(case):
    """A case result's figures for the rollout summary (plugins/callback/sglang_rollout.py)."""
    if not isinstance(case, dict):
        raise AnsibleFilterError("sglang_gate_case_summary: a case result is a dict, got %r" % (case,))
    return verdict.case_summary(case)


def sglang_gate_calibration(runs, profile, margin, existing=None, host="?", when=None):
    """The host_vars file text with thresholds proposed from ``runs`` (plan results)."""
    import datetime
    try:
        proposals = calibration.propose([r for r in runs if isinstance(r, dict)], float(margin))
    except ConfigError as e:
        raise AnsibleFilterError("sglang_gate_calibration: %s" % e)
    if not proposals:
        raise AnsibleFilterError("sglang_gate_calibration: no run measured any case; nothing to propose")
    when = when or datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z"
    return calibration.text(proposals, profile, float(margin), len(runs), host, when,
                            existing if isinstance(existing, dict) else None)


def sglang_gate_failure(gate_decision, restored_text=None):
    return decision.failure(gate_decision, restored_text)


def sglang_gate_restored_text(record):
    if not isinstance(record, dict):
        raise AnsibleFilterError("sglang_gate_restored_text: a last-known-good record is a dict, got %r"
                                 % (record,))
    return decision.restored_text(record)


def sglang_gate_rescue_failure(failure, failed_task, gate_decided, multinode, restored=None, reason=None):
    return decision.rescue_failure(failure, failed_task, gate_decided, multinode, restored, reason)


def sglang_gate_outcome_failure(deploy_failure, topology, restored=None):
    return decision.outcome_failure(deploy_failure, topology, restored)


def sglang_gate_lkg_problem(host, lkg_dir, service, missing, record, unit_size):
    return decision.lkg_problem(host, lkg_dir, service, list(missing or []), record, unit_size)


def sglang_gate_outcome(verdict, deployment_failed=False, check_mode=False, deploy_failed=False):
    flags = [boolean(f, strict=False) for f in (deployment_failed, check_mode, deploy_failed)]
    return decision.outcome(verdict, *flags)


class FilterModule(object):
    def filters(self):
        return {"sglang_gate_case_summary": sglang_gate_case_summary,
                "sglang_gate_calibration": sglang_gate_calibration,
                "sglang_gate_failure": sglang_gate_failure,
                "sglang_gate_restored_text": sglang_gate_restored_text,
                "sglang_gate_rescue_failure": sglang_gate_rescue_failure,
                "sglang_gate_outcome_failure": sglang_gate_outcome_failure,
                "sglang_gate_lkg_problem": sglang_gate_lkg_problem,
                "sglang_gate_outcome": sglang_gate_outcome}
