# -*- coding: utf-8 -*-
"""Filters over sglang_perf.profile (plugins/module_utils/sglang_perf/profile.py, the one copy of
the flag tables): a launch profile to argv, its checks, drift, and takeover's reading of a command
line."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_profile
short_description: SGLang launch profile to argv, and profile validation
description:
  - C(sglang_drift) compares a running server's C(/server_info) with the intended profile;
    C(vllm_drift) does it for vLLM from C(/v1/models) and C(/metrics) (what vLLM exposes).
  - C(sglang_command_profile) reads an engine command line back into a profile, and
    C(sglang_profile_diff) names where it differs from the intended one (takeover).
"""

from sglang_perf import profile


class FilterModule(object):
    def filters(self):
        return {
            "sglang_drift": profile.sglang_drift,
            "sglang_command_profile": profile.sglang_command_profile,
            "sglang_profile_diff": profile.sglang_profile_diff,
            "vllm_drift": profile.vllm_drift,
        }
