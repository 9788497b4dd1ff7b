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
    if not isinstance(profile, dict):
        raise AnsibleFilterError("sglang_memory_budget: the profile must be a dict, got %r" % (profile,))
    try:
        return capacity.memory_budget(
            model, hardware,
            tp_size=profile.get("tp_size"),
            mem_fraction_static=profile.get("mem_fraction_static"),
            context_length=profile.get("context_length"),
            max_running_requests=profile.get("max_running_requests"),
            mamba_full_memory_ratio=profile.get("mamba_full_memory_ratio"),
            spec_draft_tokens=profile.get("speculative_num_draft_tokens")
            if profile.get("speculative_algorithm") else 0,
            kv_full_context_requests=full_context_requests,
            default_mem_fraction=default_fraction)
    except capacity.CapacityError as e:
        raise AnsibleFilterError("sglang_memory_budget: %s" % e)


def sglang_gate_reach_errors(cases, profile, profile_name, model, hardware):
    """The gate plan's cases (sglang_gate_plan_cases) whose min_tok_s is above the profile's
    decode roofline at its best accept length (steps + 1; 1 without speculation): no run of
    them can pass. Each names its variable."""
    if not isinstance(profile, dict):
        raise AnsibleFilterError("sglang_gate_reach_errors: the profile must be a dict, got %r" % (profile,))
    steps = profile.get("speculative_num_steps") if profile.get("speculative_algorithm") else 0
    try:
        r = capacity.roofline(model, hardware, steps or 0)
    except capacity.CapacityError as e:
        raise AnsibleFilterError("sglang_gate_reach_errors: %s" % e)
    errors = []
    for case in cases:
        need = case["thresholds"].get("min_tok_s")
        if need is not None and float(need) > r["ceiling_tok_s"]:
            var = "sglang_gate_calibrated" if case["source"].get("min_tok_s") == "calibrated" \
                else "sglang_gate_thresholds"
            errors.append("%s.%s.%s.min_tok_s (%s) cannot be reached by profile %s: its decode "
                          "roofline is %.1f tok/s (%s; sglang_hardware, sglang_model_size)"
                          % (var, profile_name, case["case"], need, profile_name, r["ceiling_tok_s"],
                             r["formula"]))
    return errors


class FilterModule(object):
    def filters(self):
        return {"sglang_memory_budget": sglang_memory_budget,
                "sglang_gate_reach_errors": sglang_gate_reach_errors}
