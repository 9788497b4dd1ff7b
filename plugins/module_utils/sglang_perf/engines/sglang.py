# -*- coding: utf-8 -*-
"""SGLang: everything engine-specific in one place - its label, release variable, launchers,
readiness, flag spellings (settings.SETTINGS), choices and speculative checks, argv, metrics,
drift (its /server_info) and takeover. Standard library only."""
from __future__ import annotations

import json
import sys

from ..plan.capacity import SGLANG_SPEC_MAX_RUNNING_REQUESTS
from . import common
from .settings import ProfileError, flags as _flags, is_int as settings_is_int, same, text, version_tuple

name = "sglang"
label = "SGLang"
docs = "https://docs.sglang.ai/"
version_var = "sglang_version"
oldest = "0.5.10"
release_prefix = ""  # release directories: <version>-<digest>
# `python -m <module>` and `<script> serve` command lines that launch it (launchers.py)
launch_modules = ("sglang.launch_server",)
scripts = ("sglang",)
script_args_after = ()  # words between the module and its first argument
# What answers 200 once the server can serve (roles/sglang/tasks/ready.yml).
ready_paths = ["/health_generate"]
# What the tuner (tune.py) sets for its kinds of speculation, over the profile's own: a chain of
# the model's MTP head at topk 1 (draft tokens = steps + 1), adaptive steps on top of it, and a
# drafter's block (the block is the draft tokens; DFLASH runs steps and topk 1).
tune_algorithms = {"chain": "NEXTN", "block": "DFLASH"}
tune_adaptive = True


def tune_settings(kind, depth, adaptive=False):
    """The speculative settings of one tuner setting: ``kind`` none/chain/block, ``depth`` its
    steps (chain) or block (block)."""
    if kind == "chain":
        return {"speculative_algorithm": "NEXTN", "speculative_num_steps": depth, "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": depth + 1, "speculative_adaptive": True if adaptive else None}
    if kind == "block":
        return {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": depth,
                "speculative_num_steps": None, "speculative_eagle_topk": None}
    return {}


# What the drift check reads (roles/sglang/tasks/drift.yml); its answer holds the API key.
drift_paths = ["/server_info"]
drift_answers_secret = True
multinode = True  # --nnodes/--node-rank/--dist-init-addr
native_api = True  # /generate
drafts_one_per_step = False  # draft tokens per step are speculative_num_draft_tokens - 1 chains
accept_ceiling = "speculative_num_draft_tokens"
# The CUDA runtime each release runs on, through the torch it pins (the wheels' metadata:
# sglang 0.5.23 Requires-Dist torch==2.14.1; torch 2.14.1 Requires-Dist cuda-toolkit==13.0.3).
# The preflight refuses a release missing here unless sglang_cuda_runtime names its runtime.
cuda_runtime = {"0.5.23": "13.0"}

flags = _flags(name)
server_flags = {
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
model_flag = "--model-path"
# SGLang's second spellings of flags the records render (server_args.py add_argument aliases).
aliases = {"--tensor-parallel-size": "--tp-size", "--model": "--model-path"}
implied = {}  # flags the renderer adds beside a setting: none

# SGLang upper-cases the name (speculative_hook.py handle_speculative_decoding,
# spec_info.py SpeculativeAlgorithm.from_string): any case is accepted and rendered upper-case.
SPEC_ALGORITHMS = ("NEXTN", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")
MAMBA_TRACK_INTERVAL = 256  # SGLang's default; extra_buffer needs it >= draft tokens

# Settings SGLang's argparse limits to a list: [(first release with this list, choices)], oldest
# first; a release uses the newest row <= it. Read from each release's parser (server_args.py
# add_cli_args: "auto" + srt/parser/reasoning_parser_names.py and srt/function_call/parser_names.py
# in 0.5.23, the parser classes' registries in 0.5.19); tests/test_contract.py holds the rows of
# SGLANG_VERSION and of the older release against their own parsers. Releases before a setting's
# first row are only checked for a non-empty name.
choices = {
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
    # DRAFT_ATTENTION_BACKEND_CHOICES (server_args.py in 0.5.19, arg_groups/choices.py in 0.5.23):
    # the flag takes any name, but _handle_dflash falls back to flashinfer, with a warning only,
    # for a name outside this list.
    "speculative_draft_attention_backend": [
        ("0.5.19", ("flashinfer", "fa3", "fa4", "triton", "ascend", "trtllm_mha")),
        ("0.5.23", ("flashinfer", "fa3", "fa4", "triton", "ascend", "trtllm_mha", "intel_xpu")),
    ],
}
# Choice settings whose list is not SGLang's argparse's (the flag takes any name; a hook decides).
choices_outside_argparse = ("speculative_draft_attention_backend",)
# The CUDA compute capabilities (major, minor) each draft attention backend's kernels run on, as
# SGLang 0.5.23 asserts them: fa3 on SM 8.x or 9.0 (attention_registry.py "FlashAttention v3
# Backend requires SM>=80 and SM<=90"), trtllm_mha on Hopper (SM90), Blackwell (SM100) or SM120
# (attention_hook.py), fa4 on flash_attn.cute's Hopper and Blackwell kernels (SM 9.0 and later);
# ascend and intel_xpu are no CUDA backends. The drafters' published recipes name fa3, fa4 and
# trtllm_mha; an RTX A6000 is SM 8.6.
DRAFT_BACKEND_CAPABILITY = {
    "flashinfer": ((7, 5), None), "triton": ((7, 0), None), "fa3": ((8, 0), (9, 0)),
    "fa4": ((9, 0), None), "trtllm_mha": ((9, 0), None), "ascend": None, "intel_xpu": None,
}

# --- metrics (/metrics; sglang_perf.measure.metrics reads them) ------------------------------------------
counters = {
    "generation_tokens": "sglang:generation_tokens_total",
    "prompt_tokens": "sglang:prompt_tokens_total",
    "verify_calls": "sglang:spec_verify_calls_total",
    "requests": "sglang:num_requests_total",
}
gauges = {"running": "sglang:num_running_reqs", "queued": "sglang:num_queue_reqs"}
other_gauges = ("sglang:spec_accept_length",)
# One inter-token latency observation covers one token (observe_inter_token_latency spreads an
# output chunk's interval over the chunk's tokens).
inter_token_latency = "sglang:inter_token_latency_seconds"
itl_observes = "token"
time_per_output_token = None
# Its prompt and request counters both count a request when it finishes: their ratio is the
# window's mean prompt (no per-request histogram needed).
request_prompt_tokens = None
prompt_depth_from_counters = True
per_position = None
info_gauges = ()
window_accept_len_convention = None  # its own accept length is the window's
counts_verify_steps = False  # no counter of the measured requests' verify steps to compare

# --- requests (sglang_perf.measure.engine) ----------------------------------------------------------------
# Where a request's spec figures are: the sglext chunk's spec_tokens_details / meta_info.
spec_chunk = ("sglext", "spec_tokens_details")
spec_fields = {"verify_ct": "spec_verify_ct", "histogram": "spec_correct_drafts_histogram"}
# The capacity check's names of its figures (/server_info keys).
capacity_labels = {"context_length": "context_length",
                   "max_total_num_tokens": "KV pool max_total_num_tokens",
                   "max_running_requests": "effective max_running_requests",
                   "fewer": "its memory pools hold no more"}
capacity_figures = ()


# What SGLang's /server_info says of the server, read into discovery's record.
SERVER_INFO_KEYS = ("version", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                    "speculative_num_draft_tokens", "tp_size", "max_running_requests", "context_length",
                    "mem_fraction_static", "max_total_num_tokens", "max_req_input_len",
                    "max_mamba_cache_size", "mamba_full_memory_ratio",
                    # named in the quality checks' messages (a parser that cannot read the model)
                    "tool_call_parser", "reasoning_parser")
not_exposed = {}  # /server_info says all discovery reads


def discover(card, get_json, scrape):
    """What the server says of itself when it is SGLang (its /server_info answers with a version),
    else None. ``get_json(path)`` is (status, JSON); ``scrape()`` the parsed /metrics (unused)."""
    status, info = get_json("/server_info")
    if not (status == 200 and isinstance(info, dict) and "version" in info):
        return None
    server = {"kind": name}
    for key in SERVER_INFO_KEYS:
        server[key] = info.get(key)
    states = info.get("internal_states") or [{}]
    state = states[0] if isinstance(states, list) and isinstance(states[0], dict) else {}
    server["cumulative_accept_len"] = state.get("avg_spec_accept_length")
    # what the scheduler runs at once, after its memory pools capped the configured figure
    server["effective_max_running_requests"] = state.get("effective_max_running_requests_per_dp")
    # the mamba state pool of a hybrid model: the scheduler's own override, seen only here
    if state.get("max_mamba_cache_size") is not None:
        server["max_mamba_cache_size"] = state["max_mamba_cache_size"]
    return server


# Where a chat reply carries the model's thinking under the reasoning parser, streamed and not
# (srt/entrypoints/openai/protocol.py ChatMessage and DeltaMessage reasoning_content; null when
# thinking is off): the quality gate's reasoning check reads this field and no other.
reasoning_field = "reasoning_content"
# The KV pool's share in use, as /metrics reports it (--enable-metrics), first found wins:
# full_token_usage is the KV pool alone; token_usage is max(full, mamba) (scheduler metrics:
# "FIXME: misleadingly named"). The quality gate's pressure check reads it.
kv_usage_gauges = ("sglang:full_token_usage", "sglang:token_usage")


def request_fields(rid):
    """What a request carries besides the OpenAI fields: its id and the spec details."""
    return {"rid": rid, "return_spec_tokens_details": True}


def capacity_label(server):
    return dict(capacity_labels)


def no_spec_metrics_note(server):
    """Why a server running speculation returned no per-request figures (None: the generic note)."""
    return None


def metrics_note(before):
    """The result's note when the first /metrics scrape gave nothing (metrics: auto)."""
    return "/metrics not exposed (start SGLang with --enable-metrics for a cross-check)" \
        if before is None else None


# --- profile ---------------------------------------------------------------------------------------
def normalised(setting, value):
    """``value`` as SGLang sees it: the speculative algorithm upper-cased."""
    if setting == "speculative_algorithm" and isinstance(value, str):
        return value.upper()
    return value


def same_algorithm(want, have):
    return want.upper() == have.upper()


# Algorithms that load a drafter of their own (--speculative-draft-model-path): SGLang refuses
# DFLASH without one (_handle_dflash); EAGLE3 has no head in the target to fall back on.
DRAFTER_ALGORITHMS = ("DFLASH", "EAGLE3")
# Where adaptive speculation runs (adaptive_spec_params.py adaptive_unsupported_reason: EAGLE and
# EAGLE3 after NEXTN's alias to EAGLE, topk 1); elsewhere SGLang switches it off with a warning.
ADAPTIVE_ALGORITHMS = ("NEXTN", "EAGLE", "EAGLE3")


def spec_errors(p, var, algo, steps, topk, draft, strategy):
    """The speculative settings' problems and the accept length's ceiling (draft tokens; with
    adaptive steps the largest candidate's): what SGLang would refuse at start-up, and what it
    would silently override (named here instead)."""
    errors, ceiling = [], draft
    spec_keys = [k for k in ("speculative_num_steps", "speculative_eagle_topk",
                             "speculative_num_draft_tokens", "speculative_draft_model_path",
                             "speculative_adaptive") if p.get(k) is not None]
    if algo is None:
        if spec_keys:
            shown = ["draft_model" if k == "speculative_draft_model_path" else k for k in spec_keys]
            errors.append("%s sets %s without speculative_algorithm: SGLang ignores them; set "
                          "speculative_algorithm: NEXTN or remove them" % (var, ", ".join(shown)))
        return errors, draft
    if p.get("speculative_adaptive_config") is not None and p.get("speculative_adaptive") is not True:
        errors.append("%s.speculative_adaptive_config is read only with speculative_adaptive: true "
                      "(SGLang ignores it otherwise): set both or remove it" % var)
    if algo not in SPEC_ALGORITHMS:
        errors.append("%s.speculative_algorithm must be one of %s, got %r (SGLang fails at start-up "
                      "with 'Unknown speculative algorithm name')"
                      % (var, ", ".join(SPEC_ALGORITHMS), algo))
        return errors, draft
    if algo in DRAFTER_ALGORITHMS and not p.get("speculative_draft_model_path"):
        errors.append("%s: speculative_algorithm %s needs %s.draft_model {repo, revision, params_b, "
                      "kv_bytes_per_token} (the drafter's weights; SGLang refuses %s without "
                      "--speculative-draft-model-path)" % (var, algo, var, algo))
    if algo == "DFLASH":
        errors += _dflash_errors(p, var, steps, topk, draft)
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
    if p.get("speculative_adaptive") is True:
        if algo not in ADAPTIVE_ALGORITHMS:
            errors.append("%s.speculative_adaptive needs speculative_algorithm %s, got %s (SGLang "
                          "switches adaptive speculation off with a warning)"
                          % (var, " or ".join(ADAPTIVE_ALGORITHMS), algo))
        elif topk is not None and topk != 1:
            errors.append("%s.speculative_adaptive needs speculative_eagle_topk 1, got %d (SGLang "
                          "switches adaptive speculation off with a warning)" % (var, topk))
        else:  # the steps climb at run time: a verify may yield the largest candidate + 1 tokens
            ceiling = max(adaptive_candidates(p)) + 1
    if draft and strategy in ("extra_buffer", "extra_buffer_lazy") and draft > MAMBA_TRACK_INTERVAL:
        errors.append("%s.speculative_num_draft_tokens (%d) must not exceed the mamba track "
                      "interval (%d) with mamba_cache_strategy %s"
                      % (var, draft, MAMBA_TRACK_INTERVAL, strategy))
    return errors, ceiling


def _dflash_errors(p, var, steps, topk, draft):
    """DFLASH (speculative_hook.py _handle_dflash): one step of one block, the block size being
    the draft tokens. Steps or topk other than 1 are overridden with a warning; a block size left
    to the drafter's config is stated here so that the gate's ceiling and the unit agree."""
    errors = []
    for key, value in (("speculative_num_steps", steps), ("speculative_eagle_topk", topk)):
        if value is not None and value != 1:
            errors.append("%s.%s must be 1 (or unset) with DFLASH, got %d (SGLang overrides it to 1 "
                          "with a warning)" % (var, key, value))
    if p.get("speculative_num_draft_tokens") is None:
        errors.append("%s: speculative_algorithm DFLASH needs %s.speculative_num_draft_tokens, the "
                      "block size (the drafter's config.json block_size; unset, SGLang reads it "
                      "from there or falls back to 16)" % (var, var))
    pp = p.get("pp_size")
    if settings_is_int(pp) and pp != 1:
        errors.append("%s.pp_size must be 1 with DFLASH, got %d (SGLang: 'Currently DFLASH "
                      "speculative decoding only supports pp_size == 1')" % (var, pp))
    window = p.get("speculative_draft_window_size")
    if settings_is_int(window) and settings_is_int(draft) and window < draft:
        errors.append("%s.speculative_draft_window_size (%d) must hold a whole block: at least "
                      "speculative_num_draft_tokens (%d) (SGLang refuses a smaller window at start-up)"
                      % (var, window, draft))
    return errors


# The draft steps adaptive speculation starts from must be one of its candidates: the union of the
# default config's per-batch-size candidate_steps (adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG;
# speculative_hook.py _init_adaptive_speculative_params refuses any other at start-up). [(first
# release with these candidates, candidates)], oldest first; read in 0.5.19's and 0.5.23's source.
ADAPTIVE_CANDIDATE_STEPS = [("0.5.19", (0, 1, 3, 7)), ("0.5.23", (0, 1, 3, 5, 7))]


def adaptive_candidates(p, version=None):
    """The draft steps an adaptive profile may run at: the union of its config's candidate_steps
    per batch size (``speculative_adaptive_config``, read where this machine has the host's file
    at its path), else the release's default config's (newest known without ``version``).
    SGLang sizes its buffers for the largest (spec_info.py: max(candidate_steps) + 1 draft
    tokens) and the steps climb to it while drafts are accepted."""
    path = p.get("speculative_adaptive_config")
    if isinstance(path, str) and path:
        try:
            with open(path, encoding="utf-8") as fh:
                cfg = json.load(fh)
            steps = {int(s) for key, entry in cfg.items() if str(key).isdigit()
                     for s in entry.get("candidate_steps") or ()}
            if steps:
                return tuple(sorted(steps))
        except (OSError, ValueError, TypeError, AttributeError):
            pass
    release = version or common.newest_release(sys.modules[__name__])
    return common.row_for(ADAPTIVE_CANDIDATE_STEPS, release) or ADAPTIVE_CANDIDATE_STEPS[-1][1]


def lossy(p):
    """The profile's settings that make verification accept drafts the target would not have
    produced: [(setting, value, why)]. SGLang 0.5.23 accepts a draft token above
    speculative_accept_threshold_single and raises its acceptance probability to
    min(1, p / speculative_accept_threshold_acc) (arg_groups/fields/spec.py, eagle_utils.py);
    1.0, the default, is exact."""
    out = []
    for key, rule in (("speculative_accept_threshold_single", "accepts a draft token whose target "
                                                              "probability is above it"),
                      ("speculative_accept_threshold_acc", "raises every acceptance probability p "
                                                           "to min(1, p / it)")):
        value = p.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 1.0:
            out.append((key, value, "SGLang %s, not only what the target would have produced "
                                    "(1.0 is exact)" % rule))
    return out


def release_errors(p, var, version):
    """What this release refuses at start-up of settings valid in themselves: adaptive speculation
    starting at a step count its default config has no candidate for (with
    speculative_adaptive_config the host's file names the candidates: not checked here)."""
    steps = p.get("speculative_num_steps")
    if p.get("speculative_adaptive") is not True or p.get("speculative_adaptive_config") is not None \
            or not settings_is_int(steps):
        return []
    release = version or common.newest_release(sys.modules[__name__])
    candidates = common.row_for(ADAPTIVE_CANDIDATE_STEPS, release)
    if candidates is None or steps in candidates:
        return []
    return ["%s.speculative_num_steps must be one of %s with speculative_adaptive on SGLang %s, got "
            "%d (SGLang refuses it at start-up: 'not in the adaptive config candidate_steps'; or name "
            "the candidates in speculative_adaptive_config)" % (var, ", ".join(map(str, candidates)),
                                                                version or "(newest)", steps)]


def hardware_errors(p, var, hardware):
    """What the host's GPUs (sglang_hardware.compute_capability) cannot run: the draft attention
    backend's kernels (DRAFT_BACKEND_CAPABILITY)."""
    backend = p.get("speculative_draft_attention_backend")
    cc = (hardware or {}).get("compute_capability") if isinstance(hardware, dict) else None
    if backend not in DRAFT_BACKEND_CAPABILITY or cc is None:
        return []
    try:
        have = tuple(int(x) for x in ("%.1f" % float(cc)).split("."))
    except (TypeError, ValueError):
        return []  # the hardware check names a compute capability that is not a number
    span = DRAFT_BACKEND_CAPABILITY[backend]
    if span is None:
        return ["%s.speculative_draft_attention_backend %s is no CUDA backend: the host's GPUs are "
                "CUDA SM %s (sglang_hardware.compute_capability); use flashinfer or triton"
                % (var, backend, cc)]
    low, high = span
    if have < low or (high is not None and have > high):
        runs = "SM %d.%d %s" % (low[0], low[1], "to %d.%d" % high if high else "and later")
        return ["%s.speculative_draft_attention_backend %s runs on %s; the host's GPUs are SM %s "
                "(sglang_hardware.compute_capability): use flashinfer or triton"
                % (var, backend, runs, cc)]
    return []


def render(profile, version, server):
    """Profile flags in SETTINGS order, then the server settings; booleans render as bare flags
    when true and are omitted when false."""
    argv = []
    for setting in flags:
        value = profile.get(setting)
        if value is None or value is False:
            continue
        flag = common.flag_for(_this, setting, version)
        argv += [flag] if value is True else [flag, text(normalised(setting, value))]
    return argv + common.server_argv(_this, server)


# --- takeover --------------------------------------------------------------------------------------
def read_positional(words, out):
    return words


def read_special(flag, value, unknown):
    return None


# --- drift -----------------------------------------------------------------------------------------
# How SGLang reports a setting after resolving it (ServerArgs post-init): NEXTN runs as EAGLE.
SPEC_REPORTED_AS = {"NEXTN": "EAGLE"}
# Server settings compared by the drift check (never api_key or config: secrets).
DRIFT_SERVER_SETTINGS = ("model_path", "served_model_name", "port")


def _running_field(setting, info, version):
    """The /server_info key of ``setting``: its spelling in the running version, else any known."""
    names = []
    try:
        names.append(common.flag_for(_this, setting, version))
    except ProfileError:
        pass
    names += [flag for _, flag in reversed(flags[setting])]
    for flag in names:
        field = flag.lstrip("-").replace("-", "_")
        if field in info:
            return field
    return names[0].lstrip("-").replace("-", "_")


def drift(server_info, profile, version, server=None):
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
    for setting in flags:
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
        elif not same(intended, running):
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
        if not same(intended, running):
            differences.append({"setting": key, "field": key, "intended": intended,
                                "running": running, "note": ""})
    lines = ["%s: intended %s, running %s%s" % (
        d["setting"], "none" if d["intended"] is None else d["intended"],
        "none" if d["running"] is None else d["running"], " (%s)" % d["note"] if d["note"] else "")
        for d in differences]
    return {"differences": differences, "chosen_by_sglang": chosen, "checked": checked,
            "running_version": server_info.get("version"), "lines": lines}


def drift_from(answers, profile, version, server=None):
    """drift() of the drift_paths' answers (the uri results of roles/sglang/tasks/drift.yml)."""
    return drift(answers[0].get("json"), profile, version, server)


_this = sys.modules[__name__]  # the registry's engine object (engines.get) is this module
