# -*- coding: utf-8 -*-
"""A launch profile -> validated argv for the installed engine (SGLang or vLLM) and version; the
profile's checks, drift, and a command line read back into a profile. The filters of
plugins/filter/sglang_profile.py and the deploy plan (deploy_plan.py) call these.

The unit template stays dumb: it joins what ``sglang_argv`` returns (with systemd_exec_args.py).
Flag names per engine and version live in tables (FLAGS for SGLang, VLLM_FLAGS for vLLM; ENGINES
ties them together) instead of version ``if`` branches in templates; ``sglang_profile_errors``
refuses inconsistent profiles before any host changes, naming the variable and the rule (SGLang
itself raises a bare AssertionError or TypeError for several of these, at start-up, minutes into
a model load). The profile schema is the engines' common one; a setting with no counterpart in
the chosen engine is refused by name (NO_COUNTERPART says why).

Everything that reads the flag tables lives here - rendering a profile, checking it, reading a
command line back into one (takeover), comparing one with a running server (drift).
Standard library only (Ansible's error class when Ansible is there).
"""
from __future__ import annotations

import difflib
import ipaddress
import json
import re

from . import metrics as prom
from .capacity import SGLANG_SPEC_MAX_RUNNING_REQUESTS

class ProfileError(ValueError):
    """A profile or a version the flag tables cannot read (Ansible shows it as the filter's error)."""

# Profile setting -> [(first SGLang version with this spelling, flag)], oldest first.
# Checked in the released wheels: 0.5.10-0.5.13 have only --mamba-scheduler-strategy; 0.5.14-0.5.19
# add --mamba-radix-cache-strategy and keep the old name as a deprecated alias; 0.5.23 rejects the
# old name ("unrecognized arguments").
FLAGS = {
    "speculative_algorithm": [("0.5.10", "--speculative-algorithm")],
    "speculative_num_steps": [("0.5.10", "--speculative-num-steps")],
    "speculative_eagle_topk": [("0.5.10", "--speculative-eagle-topk")],
    "speculative_num_draft_tokens": [("0.5.10", "--speculative-num-draft-tokens")],
    "tp_size": [("0.5.10", "--tp-size")],
    "mem_fraction_static": [("0.5.10", "--mem-fraction-static")],
    "context_length": [("0.5.10", "--context-length")],
    "max_running_requests": [("0.5.10", "--max-running-requests")],
    "mamba_full_memory_ratio": [("0.5.10", "--mamba-full-memory-ratio")],
    "mamba_cache_strategy": [("0.5.10", "--mamba-scheduler-strategy"),
                             ("0.5.14", "--mamba-radix-cache-strategy")],
    "reasoning_parser": [("0.5.10", "--reasoning-parser")],
    "tool_call_parser": [("0.5.10", "--tool-call-parser")],
}
OLDEST = "0.5.10"

# Server settings (not part of a profile), rendered after the profile.
SERVER_FLAGS = {
    "model_path": "--model-path",
    "served_model_name": "--served-model-name",
    "host": "--host",
    "port": "--port",
    "trust_remote_code": "--trust-remote-code",
    "enable_metrics": "--enable-metrics",
    "config": "--config",
    # multi-node deployments only (plugins/filter/sglang_fleet.py sglang_topology)
    "nnodes": "--nnodes",
    "node_rank": "--node-rank",
    "dist_init_addr": "--dist-init-addr",
}

# SGLang upper-cases the name (speculative_hook.py handle_speculative_decoding,
# spec_info.py SpeculativeAlgorithm.from_string): any case is accepted and rendered upper-case.
SPEC_ALGORITHMS = ("NEXTN", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")

# Profile settings SGLang's argparse limits to a list: [(first release with this list, choices)],
# oldest first, as FLAGS; a release uses the newest row <= it. Read from each release's parser
# (server_args.py add_cli_args: "auto" + srt/parser/reasoning_parser_names.py and
# srt/function_call/parser_names.py in 0.5.23, the parser classes' registries in 0.5.19);
# tests/test_contract.py holds the rows of SGLANG_VERSION and of the older release against their
# own parsers. Releases before a setting's first row are only checked for a non-empty name.
CHOICES = {
    "reasoning_parser": [
        ("0.5.19", (
            "auto", "apertus2509", "deepseek-r1", "deepseek-v3", "deepseek-v4", "dots", "glm45", "ling3",
            "hunyuan", "gpt-oss", "kimi", "kimi_k2", "kimi_k3", "mimo", "muse", "poolside_v1", "qwen3",
            "qwen3-thinking", "minimax", "minimax-append-think", "minimax-m3", "step3", "step3p5",
            "mistral", "nemotron_3", "interns1", "gemma4", "inkling", "cohere_command4")),
        ("0.5.23", (
            "auto", "apertus2509", "beam", "deepseek-r1", "deepseek-v3", "deepseek-v4", "deepseek-v41",
            "dots", "glm45", "ling3", "hunyuan", "gpt-oss", "k2_horizon", "kimi", "kimi_k2", "kimi_k3",
            "mimo", "muse", "poolside_v1", "qwen3", "qwen3-thinking", "minimax", "minimax-append-think",
            "minimax-m3", "nanbeige", "step3", "step3p5", "mistral", "nemotron_3",
            "granite_thinking_parser", "interns1", "gemma4", "inkling", "iquest_q1", "cohere_command4",
            "gigachat35", "response_template")),
    ],
    "tool_call_parser": [
        ("0.5.19", (
            "auto", "apertus2509", "cohere_command4", "deepseekv3", "deepseekv31", "deepseekv32",
            "deepseekv4", "dots", "glm", "glm45", "glm47", "gpt-oss", "kimi_k2", "kimi_k3", "lfm2",
            "ling3", "llama3", "mimo", "minicpm5", "mistral", "muse", "poolside_v1", "pythonic", "qwen",
            "qwen25", "qwen3_coder", "spark25", "step3", "step3p5", "minimax-m2", "minimax-m3", "trinity",
            "interns1", "hermes", "hunyuan", "gigachat3", "gemma4", "inkling")),
        ("0.5.23", (
            "auto", "apertus2509", "beam", "cohere_command4", "deepseekv3", "deepseekv31", "deepseekv32",
            "deepseekv4", "deepseekv41", "dots", "glm", "glm45", "glm47", "gpt-oss", "k2_horizon",
            "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3", "mimo", "minicpm5", "mistral", "muse",
            "poolside_v1", "pythonic", "qwen", "qwen25", "qwen3_coder", "spark25", "step3", "step3p5",
            "minimax-m2", "minimax-m3", "nanbeige", "trinity", "interns1", "hermes", "hunyuan",
            "gigachat3", "gigachat35", "gemma4", "inkling", "iquest_q1", "response_template")),
    ],
    "mamba_cache_strategy": [("0.5.10", MAMBA_STRATEGIES)],
}
MAMBA_TRACK_INTERVAL = 256  # SGLang's default; extra_buffer needs it >= draft tokens

# --- vLLM (read in the vllm 0.33.0 wheel) -------------------------------------------------------
# engine/arg_utils.py add_cli_args and entrypoints/common/cli_args.py make_arg_parser. The
# speculative pair renders as one --speculative-config JSON (config/speculative.py: method "mtp",
# num_speculative_tokens); booleans are argparse BooleanOptionalAction (--flag / --no-flag).
# Not rendered: --mamba-cache-mode (0.33 keeps it as a deprecated no-op: "Mamba prefix caching
# follows --enable-prefix-caching") and --enable-metrics (vLLM always serves /metrics).
VLLM_FLAGS = {
    "tp_size": [("0.33.0", "--tensor-parallel-size")],
    "mem_fraction_static": [("0.33.0", "--gpu-memory-utilization")],
    "context_length": [("0.33.0", "--max-model-len")],
    "max_running_requests": [("0.33.0", "--max-num-seqs")],
    "speculative_algorithm": [("0.33.0", "--speculative-config")],
    "speculative_num_steps": [("0.33.0", "--speculative-config")],
    "enable_prefix_caching": [("0.33.0", "--enable-prefix-caching")],
    "reasoning_parser": [("0.33.0", "--reasoning-parser")],
    "tool_call_parser": [("0.33.0", "--tool-call-parser")],
    "language_model_only": [("0.33.0", "--language-model-only")],
}
VLLM_BOOL_SETTINGS = ("enable_prefix_caching", "language_model_only")
# The profile's algorithm name -> vLLM's method. NEXTN is SGLang's name for the model's own MTP
# head, which vLLM calls mtp (the older qwen3_next_mtp / qwen3_5_mtp are aliases it rewrites).
VLLM_SPEC_METHODS = {"MTP": "mtp", "NEXTN": "mtp"}
VLLM_SERVER_FLAGS = {
    "served_model_name": "--served-model-name",
    "host": "--host",
    "port": "--port",
    "trust_remote_code": "--trust-remote-code",
    "config": "--config",
}
# vLLM 0.33 validates parser names after parsing, against its registries (reasoning/__init__.py,
# tool_parsers/__init__.py; refused at start-up with a KeyError): read from the 0.33.0 wheel,
# tests/test_contract_vllm.py holds them against the registries of the contract venv.
VLLM_CHOICES = {
    "reasoning_parser": [
        ("0.33.0", (
            "beam", "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3",
            "deepseek_v4", "deepseek_v41", "ernie45", "gemma4", "glm45", "glm47", "granite",
            "granite_thinking_parser", "hf", "holo2", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling",
            "k2_horizon", "kimi_k2", "kimi_k3", "ling3", "mimo", "minicpmv", "minimax_m2",
            "minimax_m2_append_think", "minimax_m3", "mistral", "muse", "muse_glimmer",
            "musespark1x", "nemotron_v3", "olmo3", "openai_gptoss", "plamo3", "poolside_v1",
            "qwen3", "seed_oss", "step3", "step3p5", "step5")),
    ],
    "tool_call_parser": [
        ("0.33.0", (
            "apertus", "beam", "cohere_command3", "cohere_command4", "deepseek_v3",
            "deepseek_v31", "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots", "ernie45",
            "functiongemma", "gemma4", "gigachat3", "glm45", "glm47", "granite", "granite-20b-fc",
            "granite4", "hermes", "hf", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "internlm",
            "jamba", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3_json",
            "llama4_json", "llama4_pythonic", "longcat", "mimo", "minicpm5", "minimax_m2",
            "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark1x", "olmo3", "openai",
            "phi4_mini_json", "plamo3", "poolside_v1", "pythonic", "qwen3_coder", "qwen3_json",
            "qwen3_xml", "seed_oss", "step3", "step3p5", "step5", "xlam")),
    ],
}

# Why a setting of the common schema has no counterpart in an engine (refused by name there).
NO_COUNTERPART = {
    "vllm": {
        "speculative_eagle_topk": "vLLM's MTP drafts one chain (top-1); remove it",
        "speculative_num_draft_tokens": "vLLM drafts speculative_num_steps tokens per step "
                                        "(num_speculative_tokens); remove it",
        "mamba_full_memory_ratio": "vLLM sizes the mamba state pool per running sequence itself",
        "mamba_cache_strategy": "vLLM 0.33's --mamba-cache-mode is a deprecated no-op (mamba prefix "
                                "caching follows --enable-prefix-caching): set enable_prefix_caching",
    },
    "sglang": {
        "enable_prefix_caching": "SGLang's radix cache is on unless disabled; remove it",
        "language_model_only": "SGLang 0.5.23 has no --language-model-only; remove it",
    },
}

# Per engine: its flag tables, the oldest release they know, the variable naming its version.
ENGINES = {
    "sglang": {"label": "SGLang", "flags": FLAGS, "server": SERVER_FLAGS, "choices": CHOICES,
               "oldest": "0.5.10", "version_var": "sglang_version"},
    "vllm": {"label": "vLLM", "flags": VLLM_FLAGS, "server": VLLM_SERVER_FLAGS,
             "choices": VLLM_CHOICES, "oldest": "0.33.0", "version_var": "sglang_vllm_version"},
}
PROFILE_KEYS = ("engine",)  # profile keys that are no engine setting


def profile_engine(profile, default="sglang"):
    """The engine a profile runs on: its own ``engine`` key, else ``default`` (sglang_engine)."""
    if isinstance(profile, dict) and profile.get("engine"):
        return profile["engine"]
    return default or "sglang"


def _engine_table(engine):
    if engine not in ENGINES:
        raise ProfileError("engine %r is not one of %s" % (engine, ", ".join(ENGINES)))
    return ENGINES[engine]


def version_tuple(version, var="sglang_version"):
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)(?:\.?post(\d+))?$", str(version).strip())
    if not m:
        raise ProfileError("%s: %r is not an SGLang release version such as 0.5.23"
                                 % (var, version))
    return tuple(int(x or 0) for x in m.groups())


def flag_for(setting, version, engine="sglang"):
    """The spelling of ``setting`` in ``engine`` ``version`` (the table's newest entry <= version)."""
    table = _engine_table(engine)
    v = version_tuple(version, table["version_var"])
    if v < version_tuple(table["oldest"]):
        raise ProfileError("%s: %s is older than %s, the oldest %s release the flag table in "
                                 "plugins/filter/sglang_profile.py knows"
                                 % (table["version_var"], version, table["oldest"], table["label"]))
    chosen = None
    for since, flag in table["flags"][setting]:
        if version_tuple(since) <= v:
            chosen = flag
    return chosen


def choices_for(setting, version, engine="sglang"):
    """The values ``engine`` ``version`` accepts for ``setting`` (CHOICES), or None: not a choice
    setting, a release before its first row, or not a release version (reported elsewhere)."""
    try:
        v = version_tuple(version)
    except ProfileError:
        return None
    chosen = None
    for since, values in _engine_table(engine)["choices"].get(setting, ()):
        if version_tuple(since) <= v:
            chosen = values
    return chosen


def normalised(setting, value):
    """``value`` as SGLang sees it: the speculative algorithm upper-cased."""
    if setting == "speculative_algorithm" and isinstance(value, str):
        return value.upper()
    return value


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def sglang_profile_errors(profiles, name, gpu_count=None, min_accept_len=None,
                          profiles_var="sglang_profiles", name_var="sglang_profile",
                          gpu_var="sglang_hardware.gpu_count",
                          accept_var="sglang_gate_thresholds", nnodes=1, group=None,
                          version=None, engine=None):
    """Every problem of profile ``name`` in ``profiles``, each naming its variable. [] = valid.
    ``nnodes`` > 1: the profile serves one model over that many hosts (tensor parallel across
    them, ``group`` naming the deployment). ``version``: the engine release whose choices
    (CHOICES) the parser and strategy names are checked against (None: the newest row).
    ``engine``: the host's engine (sglang_engine) for a profile without its own ``engine`` key."""
    if not isinstance(profiles, dict) or not profiles:
        return ["%s must be a non-empty mapping of profile name -> settings" % profiles_var]
    if name not in profiles:
        return ["%s: %r is not defined in %s (defined: %s)"
                % (name_var, name, profiles_var, ", ".join(sorted(profiles)))]
    p = profiles[name]
    var = "%s.%s" % (profiles_var, name)
    if not isinstance(p, dict):
        return ["%s must be a mapping of SGLang settings, got %r" % (var, p)]
    engine = profile_engine(p, engine)
    if engine not in ENGINES:
        return ["%s.engine (or sglang_engine) must be one of %s, got %r"
                % (var, ", ".join(ENGINES), engine)]
    table = ENGINES[engine]
    errors = []
    for key in sorted(set(p) - set(table["flags"]) - set(PROFILE_KEYS)):
        why = NO_COUNTERPART[engine].get(key)
        if why:
            errors.append("%s.%s has no counterpart in %s: %s" % (var, key, table["label"], why))
        else:
            errors.append("%s.%s: unknown setting (known for %s: %s)"
                          % (var, key, table["label"], ", ".join(sorted(table["flags"]))))

    def int_at_least(key, minimum):
        value = p.get(key)
        if value is not None and (not _is_int(value) or value < minimum):
            errors.append("%s.%s must be an integer >= %d, got %r" % (var, key, minimum, value))
            return None
        return value

    algo = normalised("speculative_algorithm", p.get("speculative_algorithm"))
    steps = int_at_least("speculative_num_steps", 1)
    topk = int_at_least("speculative_eagle_topk", 1)
    draft = int_at_least("speculative_num_draft_tokens", 2)
    tp = int_at_least("tp_size", 1)
    int_at_least("max_running_requests", 1)
    ctx = p.get("context_length")
    if ctx is not None and (not _is_int(ctx) or ctx < 1):
        errors.append("%s.context_length must be a positive integer number of tokens, got %r"
                      % (var, ctx))
    for key in ("mem_fraction_static", "mamba_full_memory_ratio"):
        value = p.get(key)
        if value is not None and (not _is_num(value) or not 0 < value < 1):
            errors.append("%s.%s must be a fraction strictly between 0 and 1, got %r"
                          % (var, key, value))
    strategy = p.get("mamba_cache_strategy")
    release = version or max((rows[-1][0] for rows in table["choices"].values()),
                             key=version_tuple, default=table["oldest"])
    for key in ("reasoning_parser", "tool_call_parser", "mamba_cache_strategy"):
        value, allowed = p.get(key), choices_for(key, release, engine)
        if value is None or key not in table["flags"]:
            continue
        if not isinstance(value, str) or not value:
            errors.append("%s.%s must be a name such as %s, got %r"
                          % (var, key, (allowed or ("qwen3",))[-1], value))
        elif allowed is not None and value not in allowed:
            near = difflib.get_close_matches(value, allowed, 1)
            # SGLang's argparse: "argument --reasoning-parser: invalid choice: 'qwen_3' (choose from ...)"
            errors.append("%s.%s must be one of %s (%s %s), got %r%s"
                          % (var, key, ", ".join(allowed), table["label"], release, value,
                             "; did you mean %s?" % near[0] if near else ""))
    for key in VLLM_BOOL_SETTINGS:
        if key in table["flags"] and p.get(key) is not None and not isinstance(p[key], bool):
            errors.append("%s.%s must be true or false, got %r" % (var, key, p[key]))

    spec_keys = [k for k in ("speculative_num_steps", "speculative_eagle_topk",
                             "speculative_num_draft_tokens") if p.get(k) is not None]
    if engine == "vllm":
        draft = steps + 1 if algo and steps else None  # the ceiling of the accept length
        if algo is None and steps is not None:
            errors.append("%s sets speculative_num_steps without speculative_algorithm: set "
                          "speculative_algorithm: MTP or remove it" % var)
        elif algo is not None and algo not in VLLM_SPEC_METHODS:
            errors.append("%s.speculative_algorithm must be one of %s for vLLM (its mtp method), got "
                          "%r" % (var, ", ".join(VLLM_SPEC_METHODS), algo))
        elif algo is not None and p.get("speculative_num_steps") is None:
            errors.append("%s: speculative_algorithm %s needs %s.speculative_num_steps (vLLM's "
                          "num_speculative_tokens)" % (var, algo, var))
    elif algo is None:
        if spec_keys:
            errors.append("%s sets %s without speculative_algorithm: SGLang ignores them; set "
                          "speculative_algorithm: NEXTN or remove them" % (var, ", ".join(spec_keys)))
    elif algo not in SPEC_ALGORITHMS:
        errors.append("%s.speculative_algorithm must be one of %s, got %r (SGLang fails at start-up "
                      "with 'Unknown speculative algorithm name')"
                      % (var, ", ".join(SPEC_ALGORITHMS), algo))
    else:
        missing = [k for k in ("speculative_num_steps", "speculative_eagle_topk",
                               "speculative_num_draft_tokens") if p.get(k) is None]
        if missing:
            errors.append("%s: speculative_algorithm %s needs %s too (the original launch with draft "
                          "tokens but no steps died on SGLang's bare AssertionError; steps without "
                          "topk is a TypeError)" % (var, algo, ", ".join("%s.%s" % (var, k)
                                                                         for k in missing)))
        if steps and topk == 1 and draft and draft != steps + 1:
            errors.append("%s.speculative_num_draft_tokens must be speculative_num_steps + 1 = %d "
                          "when speculative_eagle_topk is 1, got %d (SGLang silently overrides it)"
                          % (var, steps + 1, draft))
        if draft and strategy in ("extra_buffer", "extra_buffer_lazy") and \
                draft > MAMBA_TRACK_INTERVAL:
            errors.append("%s.speculative_num_draft_tokens (%d) must not exceed the mamba track "
                          "interval (%d) with mamba_cache_strategy %s"
                          % (var, draft, MAMBA_TRACK_INTERVAL, strategy))
    nodes = nnodes if _is_int(nnodes) and nnodes > 1 else 1
    if nodes > 1 and engine != "sglang":
        errors.append("%s runs on %s: multi-node deployment %s (%d nodes) is rendered for SGLang "
                      "only (--nnodes/--node-rank/--dist-init-addr); unset sglang_multinode_group "
                      "or run SGLang" % (var, table["label"], group, nodes))
    elif nodes > 1 and "tp_size" in p and tp is not None and tp % nodes:
        errors.append("%s.tp_size (%d) must be divisible by the %d nodes of multi-node deployment %s "
                      "(SGLang asserts 'tp_size must be divisible by number of nodes')"
                      % (var, tp, nodes, group))
    elif nodes > 1 and p.get("tp_size") is None:
        errors.append("%s sets no tp_size: multi-node deployment %s spreads tensor parallelism over "
                      "its %d nodes, so tp_size must be a multiple of %d" % (var, group, nodes, nodes))
    elif tp is not None and gpu_count is not None and _is_int(gpu_count) and tp // nodes > gpu_count:
        errors.append("%s.tp_size (%d) exceeds the GPUs the host is expected to have (%s = %d)"
                      % (var, tp, gpu_var, gpu_count) if nodes == 1 else
                      "%s.tp_size (%d) over %d nodes puts %d GPUs on each node, more than %s = %d"
                      % (var, tp, nodes, tp // nodes, gpu_var, gpu_count))
    if min_accept_len is not None:
        ceiling = draft if (algo and draft) else 1
        if not _is_num(min_accept_len) or min_accept_len < 0:
            errors.append("%s must be a number >= 0, got %r" % (accept_var, min_accept_len))
        elif min_accept_len > ceiling:
            errors.append("%s (%s) cannot be met by profile %s: the accept length is at most %s "
                          "(%s)" % (accept_var, min_accept_len, name, ceiling,
                                    ("speculative_num_steps + 1" if engine == "vllm" else
                                     "speculative_num_draft_tokens") if algo else
                                    "no speculative decoding"))
    return errors


LOOPBACK_NAMES = ("localhost",)


def is_loopback(host):
    """127.0.0.0/8, ::1 (bare or in brackets) and localhost."""
    name = str(host).strip().lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


_HOST_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                        r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")


def sglang_host_problem(host):
    """Why ``host`` cannot be SGLang's --host (uvicorn binds it once the model has loaded), or ''
    when it can: an IP address (IPv6 bare or in brackets) or a DNS name, without a port."""
    name = str(host).strip()
    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") and name.endswith("]") else name)
        return ""
    except ValueError:
        pass
    if _HOST_NAME.match(name):
        return ""
    m = re.match(r"^(\[[0-9A-Fa-f:.]+\]|[^:\[\]]+):(\d+)$", name)
    if m:
        return "it carries a port (%s): give the address alone, the port in sglang_port" % m.group(2)
    if "://" in name:
        return "a URL, not an address: give the address alone, the port in sglang_port"
    return "neither an IP address nor a host name"


def sglang_exposure_errors(host, api_key_set, allowed_networks, allow_open_network):
    """The bind address: one SGLang can bind (sglang_host_problem), and beyond loopback a key, a
    firewall or an explicit opt-in. Takes whether a key is set, never the key. [] = acceptable."""
    bad = sglang_host_problem(host)
    if bad:
        return ["sglang_host = %s is not valid: an IP address or host name to bind, without a port "
                "(127.0.0.1 for loopback only); %s" % (host, bad)]
    if is_loopback(host) or api_key_set or allowed_networks or allow_open_network:
        return []
    return ["sglang_host = %s binds beyond loopback (127.0.0.0/8, ::1, localhost) with no API key and "
            "no firewall: set sglang_api_key (from the vault: vault_sglang_api_key), or "
            "sglang_allowed_networks (the CIDR networks the port admits), or "
            "sglang_allow_open_network: true to serve every network without a key on purpose" % host]


def sglang_argv(profile, version, server=None, engine=None):
    """Argv (without the interpreter and ``-m <module>``) for ``engine`` ``version``: profile flags
    in table order, then the server settings. SGLang: booleans render as bare flags when true and
    are omitted when false. vLLM: ``serve MODEL`` first, the speculative pair as one
    --speculative-config JSON (with the per-request acceptance metrics the gate reads), profile
    booleans as --flag / --no-flag. ``engine``: the host's engine for a profile without its own
    ``engine`` key (default sglang)."""
    if not isinstance(profile, dict):
        raise ProfileError("sglang_argv: the profile must be a mapping, got %r" % (profile,))
    engine = profile_engine(profile, engine)
    table = _engine_table(engine)
    unknown = sorted(set(profile) - set(table["flags"]) - set(PROFILE_KEYS))
    if unknown:
        raise ProfileError("sglang_argv: profile settings %s are unknown to %s"
                                 % (", ".join(unknown), table["label"]))
    server = dict(server or {})
    if engine == "vllm":
        return _vllm_argv(profile, version, server)
    argv = []
    for setting in FLAGS:
        value = profile.get(setting)
        if value is None:
            continue
        argv += [flag_for(setting, version), _text(normalised(setting, value))]
    return argv + _server_argv(server, SERVER_FLAGS, "SGLang")


def _server_argv(server, flags, label, ignored=()):
    argv = []
    for key, value in server.items():
        if key in ignored:
            continue
        if key not in flags:
            raise ProfileError("sglang_argv: server setting %r has no %s flag (known: %s)"
                                     % (key, label, ", ".join(sorted(flags))))
        if value is None or value is False or value == "":
            continue
        if value is True:
            argv.append(flags[key])
        else:
            argv += [flags[key], _text(value)]
    return argv


# Server settings vLLM has no flag for: enable_metrics (/metrics is always served). The
# multi-node ones are refused by sglang_profile_errors before anything renders.
VLLM_IGNORED_SERVER = ("enable_metrics",)


def _vllm_argv(profile, version, server):
    model = server.pop("model_path", None)
    if not model:
        raise ProfileError("sglang_argv: vLLM serves a model named on its command line "
                                 "(serve MODEL): the server settings lack model_path")
    for key in ("nnodes", "node_rank", "dist_init_addr"):
        if server.pop(key, None) not in (None, "", 1, 0):
            raise ProfileError("sglang_argv: %s: multi-node deployments are rendered for SGLang "
                                     "only" % key)
    argv = ["serve", _text(model)]
    algo = normalised("speculative_algorithm", profile.get("speculative_algorithm"))
    for setting in VLLM_FLAGS:
        value = profile.get(setting)
        if setting == "speculative_num_steps" or value is None:
            continue
        flag = flag_for(setting, version, "vllm")
        if setting == "speculative_algorithm":
            if algo not in VLLM_SPEC_METHODS or not _is_int(profile.get("speculative_num_steps")):
                raise ProfileError("sglang_argv: vLLM needs speculative_algorithm MTP and an "
                                         "integer speculative_num_steps, got %r / %r"
                                         % (value, profile.get("speculative_num_steps")))
            argv += [flag, json.dumps({"method": VLLM_SPEC_METHODS[algo],
                                       "num_speculative_tokens": profile["speculative_num_steps"]})]
        elif setting in VLLM_BOOL_SETTINGS:
            argv.append(flag if value else "--no-" + flag[2:])
        elif setting == "tool_call_parser":
            argv += ["--enable-auto-tool-choice", flag, _text(value)]
        else:
            argv += [flag, _text(value)]
    argv += _server_argv(server, VLLM_SERVER_FLAGS, "vLLM", VLLM_IGNORED_SERVER)
    if algo:
        # per-request acceptance on the final usage chunk (vLLM refuses it without speculation)
        argv += ["--per-request-spec-decode-metrics", "summary"]
    return argv


# How SGLang reports a setting after resolving it (ServerArgs post-init): NEXTN runs as EAGLE.
SPEC_REPORTED_AS = {"NEXTN": "EAGLE"}
# Server settings compared by the drift check (never api_key or config: secrets).
DRIFT_SERVER_SETTINGS = ("model_path", "served_model_name", "port")


def _same(a, b):
    if _is_num(a) and _is_num(b):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)))
    return a == b


def _running_field(setting, info, version):
    """The /server_info key of ``setting``: its spelling in the running version, else any known."""
    names = []
    try:
        names.append(flag_for(setting, version))
    except ProfileError:
        pass
    names += [flag for _, flag in reversed(FLAGS[setting])]
    for flag in names:
        field = flag.lstrip("-").replace("-", "_")
        if field in info:
            return field
    return names[0].lstrip("-").replace("-", "_")


def sglang_drift(server_info, profile, version, server=None):
    """What a running SGLang reports at /server_info against the intended profile and server
    settings, after SGLang's own normalisation (NEXTN reported as EAGLE; draft tokens = steps + 1
    and max_running_requests = 48 when speculation leaves them unset). Returns differences (each
    named, intended vs running), the settings the profile leaves to SGLang with the value it
    chose, and one readable line per difference."""
    if not isinstance(server_info, dict):
        raise ProfileError("sglang_drift: /server_info did not return a JSON object: %r"
                                 % (server_info,))
    if not isinstance(profile, dict):
        raise ProfileError("sglang_drift: the profile must be a mapping, got %r" % (profile,))
    running_version = server_info.get("version") or version
    try:
        version_tuple(running_version)
    except ProfileError:
        running_version = version
    algo = normalised("speculative_algorithm", profile.get("speculative_algorithm"))
    steps, topk = profile.get("speculative_num_steps"), profile.get("speculative_eagle_topk")
    differences, chosen, checked = [], [], 0
    for setting in FLAGS:
        field = _running_field(setting, server_info, running_version)
        intended, note = normalised(setting, profile.get(setting)), ""
        running = server_info.get(field)
        if setting.startswith("speculative_") and setting != "speculative_algorithm" and not algo:
            continue  # no speculation intended: speculative_algorithm itself says so
        if setting == "speculative_algorithm":
            if intended in SPEC_REPORTED_AS:
                note = "%s is reported as %s" % (intended, SPEC_REPORTED_AS[intended])
                intended = SPEC_REPORTED_AS[intended]
            if isinstance(running, str):
                running = SPEC_REPORTED_AS.get(running.upper(), running.upper())
        elif intended is None and setting == "speculative_num_draft_tokens" and steps and topk in (None, 1):
            intended, note = steps + 1, "unset: SGLang uses speculative_num_steps + 1"
        elif intended is None and setting == "max_running_requests" and algo:
            intended = SGLANG_SPEC_MAX_RUNNING_REQUESTS
            note = "unset: SGLang uses %d with speculation" % intended
        if intended is None and setting != "speculative_algorithm":
            if field in server_info:
                chosen.append({"setting": setting, "field": field, "running": running})
            continue
        checked += 1
        if field not in server_info:
            differences.append({"setting": setting, "field": field, "intended": intended,
                                "running": None, "note": "not reported by the server"})
        elif not _same(intended, running):
            differences.append({"setting": setting, "field": field, "intended": intended,
                                "running": running, "note": note})
    for key in DRIFT_SERVER_SETTINGS:
        intended = (server or {}).get(key)
        if intended is None:
            continue
        checked += 1
        running = server_info.get(key)
        if key == "port" and running is not None:
            intended, running = int(intended), int(running)
        if not _same(intended, running):
            differences.append({"setting": key, "field": key, "intended": intended,
                                "running": running, "note": ""})
    lines = ["%s: intended %s, running %s%s" % (
        d["setting"], "none" if d["intended"] is None else d["intended"],
        "none" if d["running"] is None else d["running"], " (%s)" % d["note"] if d["note"] else "")
        for d in differences]
    return {"differences": differences, "chosen_by_sglang": chosen, "checked": checked,
            "running_version": server_info.get("version"), "lines": lines}


# What a vLLM 0.33 server tells over HTTP about its settings (it has no /server_info outside
# VLLM_SERVER_DEV_MODE): /v1/models' max_model_len and id, and the labels of /metrics'
# vllm:cache_config_info (CacheConfig.metrics_info: every field, str() of its value; read by the
# engine's /metrics parser, sglang_perf.metrics).
VLLM_DRIFT_FROM_CACHE_INFO = {"mem_fraction_static": "gpu_memory_utilization",
                              "enable_prefix_caching": "enable_prefix_caching"}


def vllm_drift(models, metrics_text, profile, version, server=None):
    """sglang_drift's answer for a running vLLM: ``models`` (GET /v1/models), ``metrics_text``
    (GET /metrics) against the intended profile and server settings. What vLLM does not expose
    over HTTP (tensor parallel size, max_num_seqs, the speculative config) is listed as
    ``not_exposed``, not passed silently; the unit's own command line is what the deploy rendered."""
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        raise ProfileError("vllm_drift: /v1/models did not return a model list: %r" % (models,))
    served = [m for m in models["data"] if isinstance(m, dict)]
    first = served[0] if served else {}
    info = prom.parse(str(metrics_text or "")).get("vllm:cache_config_info") or {}
    differences, checked = [], 0

    def compare(setting, field, intended, running):
        nonlocal checked
        if intended is None:
            return
        checked += 1
        if running is None or not _same(intended, running):
            differences.append({"setting": setting, "field": field, "intended": intended, "running": running,
                                "note": "" if running is not None else "not reported by the server"})

    compare("context_length", "max_model_len", profile.get("context_length"), first.get("max_model_len"))
    for setting, label in VLLM_DRIFT_FROM_CACHE_INFO.items():
        raw = info.get(label)
        running = None if raw is None else (raw == "True" if setting == "enable_prefix_caching" else
                                            _typed("mem_fraction_static", raw))
        compare(setting, "vllm:cache_config_info " + label, profile.get(setting), running)
    name, ids = (server or {}).get("served_model_name"), [m.get("id") for m in served]
    compare("served_model_name", "id", name, name if name in ids else first.get("id"))
    exposed = {"context_length"} | set(VLLM_DRIFT_FROM_CACHE_INFO)
    lines = ["%s: intended %s, running %s%s" % (
        d["setting"], d["intended"], "none" if d["running"] is None else d["running"],
        " (%s)" % d["note"] if d["note"] else "") for d in differences]
    return {"differences": differences, "chosen_by_sglang": [], "checked": checked,
            "running_version": version, "lines": lines,
            "not_exposed": sorted(k for k in VLLM_FLAGS if k not in exposed and profile.get(k) is not None)}


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- Reading a command line back into a profile (brownfield takeover) ---------------------------
INT_SETTINGS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                "tp_size", "context_length", "max_running_requests")
FLOAT_SETTINGS = ("mem_fraction_static", "mamba_full_memory_ratio")
BOOL_SERVER_SETTINGS = ("trust_remote_code", "enable_metrics")
# SGLang's second spellings of flags the table renders (server_args.py add_argument aliases).
FLAG_ALIASES = {"--tensor-parallel-size": "--tp-size", "--model": "--model-path"}


def _typed(setting, value):
    try:
        if setting in INT_SETTINGS:
            return int(value)
        if setting in FLOAT_SETTINGS:
            return float(value)
    except (TypeError, ValueError):
        pass
    return value


def _flag_index(engine):
    """Every spelling ``engine``'s tables have known -> ("profile"|"server", setting)."""
    table = ENGINES[engine]
    by_flag = {}
    for setting, spellings in table["flags"].items():
        for _, flag in spellings:
            by_flag[flag] = ("profile", setting)
    for setting, flag in table["server"].items():
        by_flag[flag] = ("server", setting)
    if engine == "sglang":
        by_flag["--model-path"] = ("server", "model_path")
    else:
        by_flag["--model"] = ("server", "model_path")
        for setting in VLLM_BOOL_SETTINGS:
            by_flag["--no-" + table["flags"][setting][0][1][2:]] = ("profile", setting)
    return by_flag


# Flags vLLM units carry that our renderer implies (no profile setting of their own).
VLLM_IMPLIED = ("--enable-auto-tool-choice", "--per-request-spec-decode-metrics")


def sglang_command_profile(unit, version):
    """What an engine command line sets (``unit``: an entry of the sglang_units module's result,
    with ``argv``, ``engine`` and ``args_from``, the index of its first engine argument), read with
    that engine's flag table: {"engine", "profile": {setting: value}, "server": {setting: value},
    "unknown": [flags the table does not know, with their values]}. Every spelling the table has
    known is read (an old unit may use --mamba-scheduler-strategy); ``--flag=value`` too. vLLM:
    the positional model (after ``serve``), --speculative-config's JSON read back into the
    algorithm and steps, --no-<flag> as false."""
    engine = unit.get("engine")
    out = {"engine": engine, "profile": {}, "server": {}, "unknown": []}
    if engine not in ENGINES:
        return out
    by_flag = _flag_index(engine)
    words = [str(w) for w in unit["argv"][unit["args_from"]:]]
    if engine == "vllm":
        if words[:1] == ["serve"]:
            words = words[1:]
        if words and not words[0].startswith("-"):
            out["server"]["model_path"], words = words[0], words[1:]
    i = 0
    while i < len(words):
        word = words[i]
        flag, eq, inline = word.partition("=")
        flag = FLAG_ALIASES.get(flag, flag) if engine == "sglang" else VLLM_ALIASES.get(flag, flag)
        known = by_flag.get(flag)
        takes = not eq and i + 1 < len(words) and not words[i + 1].startswith("--")
        if known is None:
            if engine == "vllm" and flag in VLLM_IMPLIED:
                i += 2 if takes and flag != "--enable-auto-tool-choice" else 1
            elif word.startswith("-"):
                out["unknown"].append(word + (" " + words[i + 1] if takes else ""))
                i += 2 if takes else 1
            else:
                out["unknown"].append(word)  # a positional argument the engine would refuse
                i += 1
            continue
        where, setting = known
        if where == "server" and setting in BOOL_SERVER_SETTINGS and not eq:
            out[where][setting] = True
            i += 1
            continue
        if engine == "vllm" and setting in VLLM_BOOL_SETTINGS:
            out["profile"][setting] = not flag.startswith("--no-")
            i += 1
            continue
        if eq:
            value, i = inline, i + 1
        elif i + 1 < len(words):
            value, i = words[i + 1], i + 2
        else:
            value, i = None, i + 1
        if engine == "vllm" and flag == "--speculative-config":
            out["profile"].update(_vllm_spec_read(value, out["unknown"]))
        else:
            out[where][setting] = _typed(setting, value) if where == "profile" else value
    return out


VLLM_ALIASES = {"-tp": "--tensor-parallel-size", "-sc": "--speculative-config"}


def _vllm_spec_read(text, unknown):
    """--speculative-config's JSON -> {speculative_algorithm, speculative_num_steps}; what it
    holds beyond method and num_speculative_tokens goes to ``unknown``."""
    try:
        spec = json.loads(text)
    except (TypeError, ValueError):
        unknown.append("--speculative-config %s (not JSON)" % text)
        return {}
    if not isinstance(spec, dict):
        unknown.append("--speculative-config %s" % text)
        return {}
    method = str(spec.get("method") or "")
    out = {"speculative_algorithm": "MTP" if method in ("mtp", "qwen3_next_mtp", "qwen3_5_mtp")
           else method or None,
           "speculative_num_steps": _typed("speculative_num_steps", spec.get("num_speculative_tokens"))}
    rest = {k: v for k, v in spec.items() if k not in ("method", "num_speculative_tokens")}
    if rest:
        unknown.append("--speculative-config %s" % json.dumps(rest, sort_keys=True))
    return {k: v for k, v in out.items() if v is not None}


def _shown(value):
    return "unset" if value is None else _text(value)


def sglang_profile_diff(found, profile):
    """The settings where a command line (``found``: sglang_command_profile's "profile") and the
    intended ``profile`` differ, as "setting intended vs found" ("speculative_num_steps 3 vs 1",
    "mem_fraction_static 0.88 vs unset"), in the flag tables' order (SGLang's, then vLLM's own
    settings). SGLang upper-cases the speculative algorithm, so its case does not count; NEXTN
    and MTP name the same head on vLLM."""
    lines = []
    for setting in list(FLAGS) + [k for k in VLLM_FLAGS if k not in FLAGS]:
        want, have = profile.get(setting), found.get(setting)
        if setting == "speculative_algorithm" and isinstance(want, str) and isinstance(have, str):
            same = {want.upper(), have.upper()}
            if len(same) == 1 or (same == {"MTP", "NEXTN"} and profile.get("engine") == "vllm"):
                continue
        if want is None and have is None or (want is not None and have is not None and _same(want, have)):
            continue
        lines.append("%s %s vs %s" % (setting, _shown(want), _shown(have)))
    return lines
