# -*- coding: utf-8 -*-
"""Filters over sglang_perf.capacity (plugins/module_utils/sglang_perf/capacity.py, the one copy of
the arithmetic): the per-GPU memory budget of a launch profile, and the gate cases its decode
bandwidth roofline rules out."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_capacity
short_description: Memory budget and decode roofline of an SGLang launch profile
description:
  - C(sglang_memory_budget) estimates what a profile asks each GPU to hold (weights, MTP weights,
    mamba state, KV cache) against GPU memory x mem fraction; the result's C(fits), C(problems)
    and C(lines) show the arithmetic.
  - C(sglang_gate_reach_errors) refuses gate cases whose C(min_tok_s) is above the profile's
    single-stream decode roofline (GPUs x bandwidth / bytes per verify cycle x accept length) at
    its best accept length.
"""

from sglang_perf import capacity

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # used without Ansible (tests)
    AnsibleFilterError = ValueError


def sglang_memory_budget(profile, model, hardware, full_context_requests=1, default_fraction=0.88):
    """``profile`` is one entry of sglang_profiles."""
    try:
        return capacity.profile_memory_budget(profile, model, hardware, full_context_requests,
                                              default_fraction)
    except capacity.CapacityError as e:
        raise AnsibleFilterError("sglang_memory_budget: %s" % e)


def sglang_gate_reach_errors(cases, profile, profile_name, model, hardware):
    """The resolved gate cases (sglang_gate_plan_cases) the profile's decode roofline rules out."""
    try:
        return capacity.reach_errors(cases, profile, profile_name, model, hardware)
    except capacity.CapacityError as e:
        raise AnsibleFilterError("sglang_gate_reach_errors: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"sglang_memory_budget": sglang_memory_budget,
                "sglang_gate_reach_errors": sglang_gate_reach_errors}
