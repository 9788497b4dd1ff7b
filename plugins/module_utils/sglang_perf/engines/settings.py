# -*- coding: utf-8 -*-
"""One record per profile setting: its type, its check, how drift compares it, and each engine's
flag per release (or why the engine has no counterpart). Rendering, the preflight, drift and
takeover (sglang_perf.plan.profile, the engine modules) read these; the emulators' parsers are held
against them by tests/test_engine_registry.py. Standard library only."""
from __future__ import annotations

import re


class ProfileError(ValueError):
    """A profile or a version the flag tables cannot read (Ansible shows it as the filter's error)."""


class Setting(object):
    """``type``: int, float, bool or str (what takeover reads a flag's value as). ``check``: the
    preflight's rule - "int" (an integer >= ``minimum``), "tokens" (a positive integer), "fraction"
    (strictly between 0 and 1), "name" and "choice" (one of the engine's choices for the release),
    "bool", "path" (an absolute path on the host), or None (the engine's own speculative
    checks). ``flags``: engine -> [(first release with this spelling, flag)], oldest first.
    ``absent``: engine -> why it has no counterpart. ``drift``: "number" (within 1e-9) or
    "upper" (case-insensitive name)."""

    def __init__(self, name, type, check, flags, absent=None, minimum=None, drift="number"):
        self.name, self.type, self.check, self.minimum = name, type, check, minimum
        self.flags, self.absent, self.drift = flags, absent or {}, drift

    def __repr__(self):
        return "Setting(%r)" % self.name


# Checked in the released wheels: SGLang 0.5.10-0.5.13 have only --mamba-scheduler-strategy;
# 0.5.14-0.5.19 add --mamba-radix-cache-strategy and keep the old name as a deprecated alias;
# 0.5.23 rejects the old name ("unrecognized arguments"). vLLM 0.33.0: engine/arg_utils.py
# add_cli_args and entrypoints/common/cli_args.py make_arg_parser; its speculative pair renders as
# one --speculative-config JSON (config/speculative.py: method "mtp", num_speculative_tokens).
# The order is SGLang's argv order, then the settings only vLLM has.
SETTINGS = (
    Setting("speculative_algorithm", "str", None, drift="upper",
            flags={"sglang": [("0.5.10", "--speculative-algorithm")],
                   "vllm": [("0.33.0", "--speculative-config")]}),
    Setting("speculative_num_steps", "int", "int", minimum=1,
            flags={"sglang": [("0.5.10", "--speculative-num-steps")],
                   "vllm": [("0.33.0", "--speculative-config")]}),
    Setting("speculative_eagle_topk", "int", "int", minimum=1,
            flags={"sglang": [("0.5.10", "--speculative-eagle-topk")]},
            absent={"vllm": "vLLM's MTP drafts one chain (top-1); remove it"}),
    Setting("speculative_num_draft_tokens", "int", "int", minimum=2,
            flags={"sglang": [("0.5.10", "--speculative-num-draft-tokens")]},
            absent={"vllm": "vLLM drafts speculative_num_steps tokens per step "
                            "(num_speculative_tokens); remove it"}),
    # The drafter a DFLASH or EAGLE3 profile loads (an absolute directory on the host), derived
    # from the profile's draft_model (sglang_perf.plan.drafter); vLLM takes it as --speculative-config's
    # "model". SGLang 0.5.13's server_args.py has the flags below.
    Setting("speculative_draft_model_path", "str", "path",
            flags={"sglang": [("0.5.13", "--speculative-draft-model-path")],
                   "vllm": [("0.33.0", "--speculative-config")]}),
    # The drafter's sliding window (SGLang: DFLASH keeps this many recent target tokens in its
    # cache; it must hold a whole block) and its attention backend (_handle_dflash falls back to
    # flashinfer with a warning for one it does not support).
    Setting("speculative_draft_window_size", "int", "int", minimum=1,
            flags={"sglang": [("0.5.13", "--speculative-draft-window-size")]},
            absent={"vllm": "vLLM 0.33's --speculative-config has no draft window; remove it"}),
    Setting("speculative_draft_attention_backend", "str", "choice",
            flags={"sglang": [("0.5.13", "--speculative-draft-attention-backend")]},
            absent={"vllm": "vLLM names its backends otherwise (--speculative-config "
                            "attention_backend, AttentionBackendEnum), which this role does not "
                            "render; remove it"}),
    # SGLang's adaptive speculation: draft steps follow a smoothed acceptance at run time; the
    # config (a JSON file on the host) sets its candidate steps per batch size.
    Setting("speculative_adaptive", "bool", "bool",
            flags={"sglang": [("0.5.13", "--speculative-adaptive")]},
            absent={"vllm": "vLLM 0.33 adapts no draft length to acceptance (its "
                            "num_speculative_tokens_per_batch_size follows the batch size); remove it"}),
    Setting("speculative_adaptive_config", "str", "path",
            flags={"sglang": [("0.5.13", "--speculative-adaptive-config")]},
            absent={"vllm": "vLLM 0.33 has no adaptive speculation; remove it"}),
    # Verification: SGLang accepts a draft token whose target probability is above
    # speculative_accept_threshold_single, and raises each acceptance probability p to
    # min(1, p / speculative_accept_threshold_acc) (arg_groups/fields/spec.py, eagle_utils.py; both
    # 1.0 by default: exact). vLLM's rejection_sample_method (config/speculative.py: standard,
    # block, fly, synthetic; "fly" logs "a lossy speculative decoding method"). Values that are not
    # exact are refused unless sglang_allow_lossy_speculation (the engine modules' lossy()).
    Setting("speculative_accept_threshold_single", "float", "share",
            flags={"sglang": [("0.5.10", "--speculative-accept-threshold-single")]},
            absent={"vllm": "vLLM 0.33 has no acceptance threshold (its verification is "
                            "rejection_sample_method); remove it"}),
    Setting("speculative_accept_threshold_acc", "float", "share",
            flags={"sglang": [("0.5.10", "--speculative-accept-threshold-acc")]},
            absent={"vllm": "vLLM 0.33 has no acceptance threshold (its verification is "
                            "rejection_sample_method); remove it"}),
    Setting("rejection_sample_method", "str", "choice",
            flags={"vllm": [("0.33.0", "--speculative-config")]},
            absent={"sglang": "SGLang verifies exactly unless speculative_accept_threshold_single / "
                              "_acc are below 1.0; remove it"}),
    Setting("tp_size", "int", "int", minimum=1,
            flags={"sglang": [("0.5.10", "--tp-size")],
                   "vllm": [("0.33.0", "--tensor-parallel-size")]}),
    Setting("pp_size", "int", "int", minimum=1,
            flags={"sglang": [("0.5.10", "--pp-size")],
                   "vllm": [("0.33.0", "--pipeline-parallel-size")]}),
    Setting("mem_fraction_static", "float", "fraction",
            flags={"sglang": [("0.5.10", "--mem-fraction-static")],
                   "vllm": [("0.33.0", "--gpu-memory-utilization")]}),
    Setting("context_length", "int", "tokens",
            flags={"sglang": [("0.5.10", "--context-length")],
                   "vllm": [("0.33.0", "--max-model-len")]}),
    Setting("max_running_requests", "int", "int", minimum=1,
            flags={"sglang": [("0.5.10", "--max-running-requests")],
                   "vllm": [("0.33.0", "--max-num-seqs")]}),
    Setting("mamba_full_memory_ratio", "float", "fraction",
            flags={"sglang": [("0.5.10", "--mamba-full-memory-ratio")]},
            absent={"vllm": "vLLM sizes the mamba state pool per running sequence itself"}),
    Setting("mamba_cache_strategy", "str", "choice",
            flags={"sglang": [("0.5.10", "--mamba-scheduler-strategy"),
                              ("0.5.14", "--mamba-radix-cache-strategy")]},
            absent={"vllm": "vLLM 0.33's --mamba-cache-mode is a deprecated no-op (mamba prefix "
                            "caching follows --enable-prefix-caching): set enable_prefix_caching"}),
    Setting("reasoning_parser", "str", "name",
            flags={"sglang": [("0.5.10", "--reasoning-parser")],
                   "vllm": [("0.33.0", "--reasoning-parser")]}),
    Setting("tool_call_parser", "str", "name",
            flags={"sglang": [("0.5.10", "--tool-call-parser")],
                   "vllm": [("0.33.0", "--tool-call-parser")]}),
    Setting("enable_prefix_caching", "bool", "bool",
            flags={"vllm": [("0.33.0", "--enable-prefix-caching")]},
            absent={"sglang": "SGLang's radix cache is on unless disabled; remove it"}),
    Setting("language_model_only", "bool", "bool",
            flags={"vllm": [("0.33.0", "--language-model-only")]},
            absent={"sglang": "SGLang 0.5.23 has no --language-model-only; remove it"}),
)
BY_NAME = {s.name: s for s in SETTINGS}
# Profile keys that are no engine setting: the engine, and the drafter as an artifact
# (sglang_perf.plan.drafter: its repository, revision, where it is loaded from, and the size figures the
# memory preflight counts), from which speculative_draft_model_path is derived.
PROFILE_KEYS = ("engine", "draft_model")


def of(engine):
    """The records ``engine`` has a flag for, in SETTINGS order."""
    return [s for s in SETTINGS if engine in s.flags]


def flags(engine):
    """{setting: [(since, flag)]} of ``engine``, in SETTINGS order."""
    return {s.name: s.flags[engine] for s in of(engine)}


def version_tuple(version, var="sglang_version"):
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)(?:\.?post(\d+))?$", str(version).strip())
    if not m:
        raise ProfileError("%s: %r is not an SGLang release version such as 0.5.23"
                           % (var, version))
    return tuple(int(x or 0) for x in m.groups())


def text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_host_path(value):
    """An absolute path on the host without white space (what a unit can pass as one argument)."""
    return isinstance(value, str) and value.startswith("/") and not any(c.isspace() for c in value)


# A Hugging Face revision: a commit sha, a branch or a tag (sglang_model_revision, a drafter's).
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")


def is_revision(value):
    return isinstance(value, str) and _REVISION.match(value) is not None and ".." not in value \
        and len(value) <= 200


def typed(setting, value):
    """A command line's text as the setting's type (as given when it does not convert)."""
    kind = BY_NAME[setting].type if setting in BY_NAME else "str"
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
    except (TypeError, ValueError):
        pass
    return value


def same(a, b):
    if is_num(a) and is_num(b):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)))
    return a == b
