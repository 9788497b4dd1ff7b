# -*- coding: utf-8 -*-
"""Filters over sglang_perf.plan.profile (plugins/module_utils/sglang_perf/plan/profile.py, over the engine
modules of sglang_perf/engines): drift, and takeover's reading of a command line."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_profile
short_description: SGLang launch profile to argv, and profile validation
description:
  - C(sglang_engine_drift) compares what a running server tells of its settings with the intended
    profile - its answers to the engine's drift paths (the deploy plan's C(drift_paths) - SGLang's
    C(/server_info); vLLM's C(/v1/models), C(/metrics), C(/version)), read by that engine's module.
  - C(sglang_command_profile) reads an engine command line back into a profile, and
    C(sglang_profile_diff) names where it differs from the intended one (takeover).
"""

from sglang_perf.plan import profile


class FilterModule(object):
    def filters(self):
        return {
            "sglang_command_profile": profile.sglang_command_profile,
            "sglang_profile_diff": profile.sglang_profile_diff,
            "sglang_engine_drift": profile.engine_drift,
        }
