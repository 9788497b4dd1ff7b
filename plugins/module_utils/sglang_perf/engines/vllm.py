# -*- coding: utf-8 -*-
"""vLLM (read in the vllm 0.33.0 wheel): everything engine-specific in one place - its label,
release variable, launchers, readiness, flag spellings (settings.SETTINGS), choices and speculative
checks, argv, metrics, drift (what /v1/models and /metrics tell) and takeover. Standard library only."""
from __future__ import annotations

import json
import sys

from . import common
from .settings import BY_NAME, ProfileError, flags as _flags, is_int, same, text, typed

name = "vllm"
label = "vLLM"
docs = "https://docs.vllm.ai/"
version_var = "sglang_vllm_version"
oldest = "0.33.0"
release_prefix = "vllm-"  # release directories: vllm-<version>-<digest>
launch_modules = ("vllm.entrypoints.cli.main", "vllm.entrypoints.openai.api_server")
scripts = ("vllm",)
# `python -m vllm.entrypoints.cli.main serve MODEL`: the arguments follow `serve`
script_args_after = ("serve",)
ready_paths = ["/health", "/v1/models"]
# What the tuner (tune.py) sets: the model's MTP head with n speculative tokens (a chain: n
# steps, n + 1 tokens a verify), a drafter's block of k + 1 tokens; vLLM has no adaptive steps.
tune_algorithms = {"chain": "MTP", "block": "DFLASH"}
tune_adaptive = False


def tune_settings(kind, depth, adaptive=False):
    """The speculative settings of one tuner setting (depth: chain steps, or the block)."""
    if adaptive:
        raise ValueError("vLLM has no adaptive speculation")
    if kind == "chain":
        return {"speculative_algorithm": "MTP", "speculative_num_steps": depth}
    if kind == "block":
        return {"speculative_algorithm": "DFLASH", "speculative_num_steps": depth - 1}
    return {}


# No /server_info outside VLLM_SERVER_DEV_MODE: what it tells is /v1/models (max_model_len, the
# served name), /metrics (vllm:cache_config_info) and /version.
drift_paths = ["/v1/models", "/metrics", "/version"]
drift_answers_secret = False
multinode = False
native_api = False  # no /generate
drafts_one_per_step = True  # MTP drafts one token per step: num_speculative_tokens is the steps
accept_ceiling = "speculative_num_steps + 1"
# The CUDA runtime each release runs on, through the torch it pins (vllm 0.33.0 Requires-Dist
# torch==2.14.0, whose lock pins cuda-toolkit==13.0.3); sglang_cuda_runtime names any other.
cuda_runtime = {"0.33.0": "13.0"}

flags = _flags(name)
# The argv order of the profile's flags (the speculative pair is one --speculative-config).
RENDER_ORDER = ("tp_size", "pp_size", "mem_fraction_static", "context_length", "max_running_requests",
                "speculative_algorithm", "speculative_num_steps", "speculative_draft_model_path",
                "rejection_sample_method", "enable_prefix_caching",
                "reasoning_parser", "tool_call_parser", "language_model_only")
# The profile's algorithm name -> vLLM's method. NEXTN is SGLang's name for the model's own MTP
# head, which vLLM calls mtp (the older qwen3_next_mtp / qwen3_5_mtp are aliases it rewrites);
# dflash and eagle3 load a drafter ("model"). config/speculative.py SpeculativeMethod.
SPEC_METHODS = {"MTP": "mtp", "NEXTN": "mtp", "DFLASH": "dflash", "EAGLE3": "eagle3"}
DRAFTER_METHODS = ("dflash", "eagle3")
# --speculative-config keys a profile's settings fill: method, its draft tokens, the drafter.
SPEC_CONFIG = {"method": "speculative_algorithm", "num_speculative_tokens": "speculative_num_steps",
               "model": "speculative_draft_model_path",
               "rejection_sample_method": "rejection_sample_method"}
MTP_ALIASES = ("mtp", "qwen3_next_mtp", "qwen3_5_mtp")
server_flags = {
    "served_model_name": "--served-model-name",
    "host": "--host",
    "port": "--port",
    "trust_remote_code": "--trust-remote-code",
    "config": "--config",
}
model_flag = "--model"
# Server settings vLLM has no flag for: enable_metrics (/metrics is always served). The
# multi-node ones are refused by sglang_profile_errors before anything renders.
IGNORED_SERVER = ("enable_metrics",)
aliases = {"-tp": "--tensor-parallel-size", "-sc": "--speculative-config"}
# Flags its units carry that the renderer implies (no setting of their own) -> takes a value.
implied = {"--enable-auto-tool-choice": False, "--per-request-spec-decode-metrics": True}
# Not rendered: --mamba-cache-mode (0.33 keeps it as a deprecated no-op: "Mamba prefix caching
# follows --enable-prefix-caching") and --enable-metrics (vLLM always serves /metrics).

# vLLM 0.33 validates parser names after parsing, against its registries (reasoning/__init__.py,
# tool_parsers/__init__.py; refused at start-up with a KeyError): read from the 0.33.0 wheel,
# tests/test_contract_vllm.py holds them against the registries of the contract venv.
choices = {
    # config/speculative.py RejectionSampleMethod
    "rejection_sample_method": [("0.33.0", ("standard", "block", "fly", "synthetic"))],
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

# --- metrics (vllm/v1/metrics/loggers.py, vllm/v1/spec_decode/metrics.py) -------------------------
# One ``drafts`` count per verify step of a request that had drafts, i.e. vLLM's num_spec_steps.
counters = {
    "generation_tokens": "vllm:generation_tokens_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "verify_calls": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
    "requests": "vllm:request_success_total",
}
gauges = {"running": "vllm:num_requests_running", "queued": "vllm:num_requests_waiting"}
other_gauges = ()
# One inter-token latency observation covers one engine step of one request (v1/metrics/stats.py:
# engine_core_timestamp - last_token_ts, whatever the step emitted: 1 + its accepted drafts).
inter_token_latency = "vllm:inter_token_latency_seconds"
itl_observes = "step"
# Decode time / (generated tokens - 1), once per finished request (update_from_finished_request).
time_per_output_token = "vllm:request_time_per_output_token_seconds"
# num_prompt_tokens once per finished request (loggers.py histogram_num_prompt_tokens_request):
# its counters count a prompt at its first token, so the mean prompt comes from here.
request_prompt_tokens = "vllm:request_prompt_tokens"
prompt_depth_from_counters = False
# Acceptance per draft position (positions 0..k-1), a counter kept per value of its label.
per_position = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
per_position_label = "position"
# Info gauges (value 1): their labels are the figures (CacheConfig.metrics_info, as strings).
info_gauges = ("vllm:cache_config_info",)
window_accept_len_convention = "vLLM's 1 + accepted draft tokens / drafts (no prefill token)"
counts_verify_steps = True  # its drafts counter counts the measured requests' verify steps

# --- requests (sglang_perf.measure.engine) ----------------------------------------------------------------
# 0.33's metrics.speculative_decoding (SpeculativeDecodingMetrics, on the final usage chunk):
# acceptance_histogram[j] = verify steps that accepted exactly j drafts; num_spec_steps its sum.
spec_chunk = ("metrics", "speculative_decoding")
spec_fields = {"verify_ct": "num_spec_steps", "histogram": "acceptance_histogram",
               "accepted": "num_accepted_draft_tokens", "spec_tokens": "num_spec_tokens"}
capacity_labels = {"context_length": "max_model_len", "max_running_requests": "max_num_seqs",
                   "fewer": "its max_num_seqs"}
capacity_figures = ("kv_cache_tokens_from", "kv_cache_max_concurrency")


# --- discovery (sglang_perf.measure.engine.discover) ---------------------------------------------
# What vLLM 0.33 does not expose (outside VLLM_SERVER_DEV_MODE, whose /server_info dumps the whole
# VllmConfig): server[key] stays None and server["not_exposed"][key] says why.
not_exposed = {
    "max_running_requests": "vLLM exposes max_num_seqs nowhere but /server_info, which it serves only "
                            "under VLLM_SERVER_DEV_MODE (not in /v1/models, /version, /metrics)",
    "speculative_algorithm": "vLLM names its speculative method nowhere but the dev-mode /server_info: "
                             "/metrics shows only that speculation runs (vllm:spec_decode_* counters) "
                             "and with how many draft positions",
    "max_total_num_tokens": "no vllm:cache_config_info in /metrics (unreachable, or vLLM runs with "
                            "--disable-log-stats, which drops its vllm:* metrics): the KV capacity is "
                            "unknown",
}


def _figure(labels, key, kind):
    """A vllm:cache_config_info label as a number or bool (str(None) is 'None'), else None."""
    value = labels.get(key)
    if kind is bool:
        return {"True": True, "False": False}.get(value)
    try:
        return kind(value)
    except (TypeError, ValueError):
        return None


def _cache_config(server, info):
    """vllm:cache_config_info's labels: the KV capacity, its pool and the memory share."""
    blocks, size = _figure(info, "num_gpu_blocks", int), _figure(info, "block_size", int)
    tokens = _figure(info, "kv_cache_size_tokens", int)
    server.update(num_gpu_blocks=blocks, block_size=size,
                  kv_cache_max_concurrency=_figure(info, "kv_cache_max_concurrency", float),
                  gpu_memory_utilization=_figure(info, "gpu_memory_utilization", float),
                  enable_prefix_caching=_figure(info, "enable_prefix_caching", bool),
                  mamba_cache_mode=info.get("mamba_cache_mode"))
    # vLLM's own group-aware capacity (CacheConfig.kv_cache_size_tokens: "num_gpu_blocks *
    # block_size can be wrong for hybrid models"), else blocks x block size
    if tokens:
        server.update(max_total_num_tokens=tokens, kv_cache_tokens_from="kv_cache_size_tokens")
    elif blocks and size:
        server.update(max_total_num_tokens=blocks * size,
                      kv_cache_tokens_from="num_gpu_blocks x block_size")


def discover(card, get_json, scrape):
    """What a vLLM 0.33 server exposes, or None when GET /version does not answer as vLLM's: the
    model card's max_model_len (its context), /metrics (vllm:cache_config_info: the KV capacity;
    the spec-decode counters: speculation and its draft positions) and, under
    VLLM_SERVER_DEV_MODE only, /server_info's VllmConfig. ``get_json(path)`` is (status, JSON);
    ``scrape()`` the parsed /metrics or None."""
    status, version = get_json("/version")
    if not (status == 200 and isinstance(version, dict) and version.get("version")):
        return None
    server = {"kind": name, "version": version["version"], "speculative_algorithm": None,
              "speculative_method": None, "num_speculative_tokens": None,
              "speculative_num_steps": None, "tp_size": None,
              "context_length": card.get("max_model_len"), "max_total_num_tokens": None,
              "kv_cache_tokens_from": None, "num_gpu_blocks": None, "block_size": None,
              "kv_cache_max_concurrency": None, "gpu_memory_utilization": None,
              "enable_prefix_caching": None, "mamba_cache_mode": None,
              "max_running_requests": None, "metrics_exposed": False, "not_exposed": {}}
    metrics = scrape()
    if counters["generation_tokens"] not in (metrics or {}):
        metrics = None  # no vllm:* metrics (--disable-log-stats): nothing to learn, not "spec off"
    if metrics is not None:
        server["metrics_exposed"] = True
        if isinstance(metrics.get("vllm:cache_config_info"), dict):
            _cache_config(server, metrics["vllm:cache_config_info"])
        if counters["verify_calls"] in metrics:
            server["speculative_algorithm"] = common.UNREPORTED
            per_pos = common.positions(metrics.get(per_position))
            if per_pos:
                server["num_speculative_tokens"] = len(per_pos)
    status, info = get_json("/server_info")
    if status == 200 and isinstance(info, dict) and "vllm_config" in info:
        _, dev = get_json("/server_info?config_format=json")
        config = dev.get("vllm_config") if isinstance(dev, dict) else None
        if isinstance(config, dict):
            sched = config.get("scheduler_config") or {}
            spec = config.get("speculative_config") or {}
            par = config.get("parallel_config") or {}
            server["max_running_requests"] = sched.get("max_num_seqs")
            server["tp_size"] = par.get("tensor_parallel_size")
            if isinstance(spec, dict) and spec.get("method"):
                server.update(speculative_method=spec["method"], speculative_algorithm=spec["method"],
                              num_speculative_tokens=spec.get("num_speculative_tokens"))
    if server["num_speculative_tokens"]:
        common.fill_spec_steps(_this, server, server["num_speculative_tokens"])
    for key, why in not_exposed.items():
        # speculative_algorithm None with /metrics read: no spec-decode counters, speculation is off
        if server[key] == common.UNREPORTED or (server[key] is None and (
                key != "speculative_algorithm" or metrics is None)):
            server["not_exposed"][key] = why
    return server


# Where a chat reply carries the model's thinking under the reasoning parser, streamed and not
# (entrypoints/openai/chat_completion/protocol.py ChatMessage and DeltaMessage: reasoning; 0.33
# sends no reasoning_content): the quality gate's reasoning check reads this field and no other.
reasoning_field = "reasoning"
# The KV pool's share in use (v1/core/block_pool.py: 1 - free blocks / (blocks - 1)).
kv_usage_gauges = ("vllm:kv_cache_usage_perc",)


def request_fields(rid):
    """ChatCompletionRequest / CompletionRequest ``request_id`` (its logs' chatcmpl-<id>); its
    per-request spec figures need no field (--per-request-spec-decode-metrics)."""
    return {"request_id": rid}


def capacity_label(server):
    return dict(capacity_labels,
                max_total_num_tokens="KV cache %s" % (server.get("kv_cache_tokens_from") or ""))


def no_spec_metrics_note(server):
    return ("the server runs speculative decoding (vllm:spec_decode_* counters) but returned no "
            "per-request metrics.speculative_decoding: start vLLM with "
            "--per-request-spec-decode-metrics summary")


def metrics_note(before):
    return "/metrics %s: no window cross-check" % (
        "not reachable (vLLM always serves it)" if before is None
        else "has no vllm:* series (vLLM started with --disable-log-stats?)")


# --- profile ---------------------------------------------------------------------------------------
def normalised(setting, value):
    if setting == "speculative_algorithm" and isinstance(value, str):
        return value.upper()
    return value


def same_algorithm(want, have):
    """NEXTN and MTP name the same head on vLLM."""
    return len({want.upper(), have.upper()} - {"MTP", "NEXTN"}) == 0 or want.upper() == have.upper()


def spec_errors(p, var, algo, steps, topk, draft, strategy):
    """The speculative settings' problems and the accept length's ceiling (steps + 1)."""
    errors = []
    draft = steps + 1 if algo and steps else None
    if algo is None and steps is not None:
        errors.append("%s sets speculative_num_steps without speculative_algorithm: set "
                      "speculative_algorithm: MTP or remove it" % var)
    elif algo is not None and algo not in SPEC_METHODS:
        errors.append("%s.speculative_algorithm must be one of %s for vLLM (mtp, dflash, eagle3), got "
                      "%r" % (var, ", ".join(SPEC_METHODS), algo))
    elif algo is not None and p.get("speculative_num_steps") is None:
        errors.append("%s: speculative_algorithm %s needs %s.speculative_num_steps (vLLM's "
                      "num_speculative_tokens)" % (var, algo, var))
    if algo in SPEC_METHODS and SPEC_METHODS[algo] in DRAFTER_METHODS and \
            not p.get("speculative_draft_model_path"):
        errors.append("%s: speculative_algorithm %s needs %s.draft_model {repo, revision, params_b, "
                      "kv_bytes_per_token} (vLLM's --speculative-config \"model\": the drafter's "
                      "weights)" % (var, algo, var))
    elif algo is None and p.get("speculative_draft_model_path"):
        errors.append("%s names a drafter (draft_model) without speculative_algorithm: set "
                      "speculative_algorithm: DFLASH or EAGLE3, or remove it" % var)
    return errors, draft


# config/speculative.py: "fly" logs "FLy verification is a lossy speculative decoding method and
# may degrade model outputs"; "synthetic" accepts at set rates whatever the target says.
LOSSY_REJECTION = {"fly": "FLy verification, which vLLM itself calls lossy",
                   "synthetic": "acceptance at synthetic rates instead of the target's"}


def lossy(p):
    """The profile's settings that make verification inexact: [(setting, value, why)]."""
    method = p.get("rejection_sample_method")
    if method in LOSSY_REJECTION:
        return [("rejection_sample_method", method, "vLLM %s (standard and block are exact)"
                 % LOSSY_REJECTION[method])]
    return []


def release_errors(p, var, version):
    """What this release refuses at start-up of settings valid in themselves: none beyond the
    records' checks (vLLM has no adaptive speculation to start from a candidate)."""
    return []


def hardware_errors(p, var, hardware):
    """What the host's GPUs cannot run of the settings this role renders for vLLM: none (its
    draft attention backend is not rendered)."""
    return []


def render(profile, version, server):
    """``serve MODEL`` first, the speculative pair as one --speculative-config JSON (with the
    per-request acceptance metrics the gate reads), booleans as --flag / --no-flag."""
    model = server.pop("model_path", None)
    if not model:
        raise ProfileError("sglang_argv: vLLM serves a model named on its command line "
                           "(serve MODEL): the server settings lack model_path")
    for key in ("nnodes", "node_rank", "dist_init_addr"):
        if server.pop(key, None) not in (None, "", 1, 0):
            raise ProfileError("sglang_argv: %s: multi-node deployments are rendered for SGLang "
                               "only" % key)
    argv = ["serve", text(model)]
    algo = normalised("speculative_algorithm", profile.get("speculative_algorithm"))
    for setting in RENDER_ORDER:
        value = profile.get(setting)
        if setting in ("speculative_num_steps", "speculative_draft_model_path",
                       "rejection_sample_method") or value is None:
            continue
        flag = common.flag_for(_this, setting, version)
        if setting == "speculative_algorithm":
            if algo not in SPEC_METHODS or not is_int(profile.get("speculative_num_steps")):
                raise ProfileError("sglang_argv: vLLM needs speculative_algorithm %s and an "
                                   "integer speculative_num_steps, got %r / %r"
                                   % (" or ".join(SPEC_METHODS), value, profile.get("speculative_num_steps")))
            spec = {key: profile.get(setting) for key, setting in SPEC_CONFIG.items()
                    if profile.get(setting) is not None}
            argv += [flag, json.dumps(dict(spec, method=SPEC_METHODS[algo]))]
        elif BY_NAME[setting].type == "bool":
            argv.append(flag if value else "--no-" + flag[2:])
        elif setting == "tool_call_parser":
            argv += ["--enable-auto-tool-choice", flag, text(value)]
        else:
            argv += [flag, text(value)]
    argv += common.server_argv(_this, server, IGNORED_SERVER)
    if algo:
        # per-request acceptance on the final usage chunk (vLLM refuses it without speculation)
        argv += ["--per-request-spec-decode-metrics", "summary"]
    return argv


# --- takeover --------------------------------------------------------------------------------------
def read_positional(words, out):
    """`serve MODEL ...`: the positional model."""
    if words[:1] == ["serve"]:
        words = words[1:]
    if words and not words[0].startswith("-"):
        out["server"]["model_path"], words = words[0], words[1:]
    return words


def read_special(flag, value, unknown):
    """--speculative-config's JSON -> {speculative_algorithm, speculative_num_steps,
    speculative_draft_model_path}; what it holds beyond SPEC_CONFIG's keys goes to ``unknown``."""
    if flag != "--speculative-config":
        return None
    try:
        spec = json.loads(value)
    except (TypeError, ValueError):
        unknown.append("--speculative-config %s (not JSON)" % value)
        return {}
    if not isinstance(spec, dict):
        unknown.append("--speculative-config %s" % value)
        return {}
    method = str(spec.get("method") or "")
    out = {"speculative_algorithm": "MTP" if method in MTP_ALIASES else method.upper() or None,
           "speculative_num_steps": typed("speculative_num_steps", spec.get("num_speculative_tokens")),
           "speculative_draft_model_path": spec.get("model"),
           "rejection_sample_method": spec.get("rejection_sample_method")}
    rest = {k: v for k, v in spec.items() if k not in SPEC_CONFIG}
    if rest:
        unknown.append("--speculative-config %s" % json.dumps(rest, sort_keys=True))
    return {k: v for k, v in out.items() if v is not None}


# --- drift -----------------------------------------------------------------------------------------
# vllm:cache_config_info labels (CacheConfig.metrics_info: every field, str() of its value).
DRIFT_FROM_CACHE_INFO = {"mem_fraction_static": "gpu_memory_utilization",
                         "enable_prefix_caching": "enable_prefix_caching"}


def drift(models, metrics_text, profile, version, server=None):
    """The drift of a running vLLM: ``models`` (GET /v1/models), ``metrics_text``
    (GET /metrics) against the intended profile and server settings. What vLLM does not expose
    over HTTP (tensor parallel size, max_num_seqs, the speculative config) is listed as
    ``not_exposed``, not passed silently; the unit's own command line is what the deploy rendered."""
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        raise ProfileError("vllm_drift: /v1/models did not return a model list: %r" % (models,))
    served = [m for m in models["data"] if isinstance(m, dict)]
    first = served[0] if served else {}
    info = common.info_labels(metrics_text, "vllm:cache_config_info")
    differences, checked = [], 0

    def compare(setting, field, intended, running):
        nonlocal checked
        if intended is None:
            return
        checked += 1
        if running is None or not same(intended, running):
            differences.append({"setting": setting, "field": field, "intended": intended, "running": running,
                                "note": "" if running is not None else "not reported by the server"})

    compare("context_length", "max_model_len", profile.get("context_length"), first.get("max_model_len"))
    for setting, field in DRIFT_FROM_CACHE_INFO.items():
        raw = info.get(field)
        running = None if raw is None else (raw == "True" if setting == "enable_prefix_caching" else
                                            typed("mem_fraction_static", raw))
        compare(setting, "vllm:cache_config_info " + field, profile.get(setting), running)
    served_name, ids = (server or {}).get("served_model_name"), [m.get("id") for m in served]
    compare("served_model_name", "id", served_name, served_name if served_name in ids else first.get("id"))
    exposed = {"context_length"} | set(DRIFT_FROM_CACHE_INFO)
    lines = ["%s: intended %s, running %s%s" % (
        d["setting"], d["intended"], "none" if d["running"] is None else d["running"],
        " (%s)" % d["note"] if d["note"] else "") for d in differences]
    return {"differences": differences, "chosen_by_sglang": [], "checked": checked,
            "running_version": version, "lines": lines,
            "not_exposed": sorted(k for k in flags if k not in exposed and profile.get(k) is not None)}


def drift_from(answers, profile, version, server=None):
    """drift() of the drift_paths' answers: /v1/models, /metrics, /version (the running version)."""
    reported = (answers[2].get("json") or {}).get("version") if isinstance(answers[2].get("json"), dict) \
        else None
    return drift(answers[0].get("json"), answers[1].get("content"), profile, reported, server)


_this = sys.modules[__name__]  # the registry's engine object (engines.get) is this module
