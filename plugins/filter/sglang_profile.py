# -*- coding: utf-8 -*-
"""Filters over sglang_perf.profile (plugins/module_utils/sglang_perf/profile.py, the one copy of
the flag tables): a launch profile to argv, its checks, drift, and takeover's reading of a command
line."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_profile
short_description: SGLang launch profile to argv, and profile validation
description:
  - C(sglang_argv) renders a profile (a dict of server settings, engine-neutral) plus server settings
    to the argv of the given engine (SGLang by default, or vLLM) and version.
  - C(profile_engine) is the engine a profile runs on (its own C(engine), else the host's).
  - C(sglang_profile_errors) returns the list of problems of a profile (empty when it is valid).
  - C(sglang_drift) compares a running server's C(/server_info) with the intended profile;
    C(vllm_drift) does it for vLLM from C(/v1/models) and C(/metrics) (what vLLM exposes).
  - C(sglang_command_profile) reads an engine command line back into a profile, and
    C(sglang_profile_diff) names where it differs from the intended one (takeover).
  - C(sglang_exposure_errors) refuses a bind address SGLang cannot bind, and a server bound beyond
    loopback with neither an API key, nor allowed networks, nor an explicit opt-in to an open
    network.
"""

from sglang_perf import profile


class FilterModule(object):
    def filters(self):
        return {
            "sglang_argv": profile.sglang_argv,
            "sglang_profile_errors": profile.sglang_profile_errors,
            "sglang_drift": profile.sglang_drift,
            "sglang_command_profile": profile.sglang_command_profile,
            "sglang_profile_diff": profile.sglang_profile_diff,
            "sglang_exposure_errors": profile.sglang_exposure_errors,
            "profile_engine": profile.profile_engine,
            "vllm_drift": profile.vllm_drift,
        }
