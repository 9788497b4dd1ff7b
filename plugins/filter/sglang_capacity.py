# -*- coding: utf-8 -*-
"""Filters over plugins/module_utils/sglang_perf/capacity.py (the one copy of the arithmetic):
the per-GPU memory budget of a launch profile and the decode bandwidth roofline."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_capacity
short_description: Memory budget and decode roofline of an SGLang launch profile
description:
  - C(sglang_memory_budget) estimates what a profile asks each GPU to hold (weights, MTP weights,
    mamba state, KV cache) against GPU memory x mem fraction; the result's C(fits), C(problems)
    and C(lines) show the arithmetic.
  - C(sglang_roofline) is the single-stream decode ceiling GPUs x bandwidth / bytes per verify
    cycle x accept length, and the measured share of it.
  - C(sglang_gate_reach_errors) refuses gate cases whose C(min_tok_s) is above that ceiling at the
    profile's best accept length.
"""

import importlib.util
import os

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # used without Ansible (tests)
    AnsibleFilterError = ValueError


def _capacity():
    # Filters run on the controller, where module_utils is not importable as a package: load the
    # file itself (the module ships the same file to hosts).
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils",
                        "sglang_perf", "capacity.py")
    spec = importlib.util.spec_from_file_location("sglang_perf_capacity", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


capacity = _capacity()


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


def sglang_roofline(model, hardware, spec_steps=0, accept_len=None, measured_tok_s=None):
    try:
        return capacity.roofline(model, hardware, spec_steps, accept_len, measured_tok_s)
    except capacity.CapacityError as e:
        raise AnsibleFilterError("sglang_roofline: %s" % e)


def sglang_gate_reach_errors(cases, profile, profile_name, model, hardware):
    """The gate plan's cases (sglang_gate_plan_cases) whose min_tok_s is above the profile's
    decode roofline at its best accept length (steps + 1; 1 without speculation): no run of
    them can pass. Each names its variable."""
    if not isinstance(profile, dict):
        raise AnsibleFilterError("sglang_gate_reach_errors: the profile must be a dict, got %r" % (profile,))
    steps = profile.get("speculative_num_steps") if profile.get("speculative_algorithm") else 0
    r = sglang_roofline(model, hardware, steps or 0)
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
        return {"sglang_memory_budget": sglang_memory_budget, "sglang_roofline": sglang_roofline,
                "sglang_gate_reach_errors": sglang_gate_reach_errors}
