"""`sglang.launch_server`'s command line (SGLang 0.5.23), the subset the emulator serves.

Spelling, types, defaults, choices and aliases are copied from the 0.5.23 wheel
(srt/arg_groups/fields/*.py, srt/server_args.py `add_cli_args`); the resolution rules from
srt/arg_groups/speculative_hook.py and mamba_hook.py / overrides.py. Anything not listed here is
rejected the way argparse rejects it (exit 2, "unrecognized arguments: ...").
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
from decimal import Decimal
from typing import Any, Dict, List

from . import adaptive, memory

logger = logging.getLogger("sglang.srt.server_args")

SGLANG_VERSION = "0.5.23"

# srt/parser/reasoning_parser_names.py
REASONING_PARSER_NAMES = [
    "apertus2509", "beam", "deepseek-r1", "deepseek-v3", "deepseek-v4", "deepseek-v41", "dots",
    "glm45", "ling3", "hunyuan", "gpt-oss", "k2_horizon", "kimi", "kimi_k2", "kimi_k3", "mimo",
    "muse", "poolside_v1", "qwen3", "qwen3-thinking", "minimax", "minimax-append-think",
    "minimax-m3", "nanbeige", "step3", "step3p5", "mistral", "nemotron_3",
    "granite_thinking_parser", "interns1", "gemma4", "inkling", "iquest_q1", "cohere_command4",
    "gigachat35", "response_template",
]
# srt/function_call/parser_names.py
TOOL_CALL_PARSER_NAMES = [
    "apertus2509", "beam", "cohere_command4", "deepseekv3", "deepseekv31", "deepseekv32",
    "deepseekv4", "deepseekv41", "dots", "glm", "glm45", "glm47", "gpt-oss", "k2_horizon",
    "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3", "mimo", "minicpm5", "mistral", "muse",
    "poolside_v1", "pythonic", "qwen", "qwen25", "qwen3_coder", "spark25", "step3", "step3p5",
    "minimax-m2", "minimax-m3", "nanbeige", "trinity", "interns1", "hermes", "hunyuan",
    "gigachat3", "gigachat35", "gemma4", "inkling", "iquest_q1", "response_template",
]
MAMBA_RADIX_CACHE_STRATEGIES = ["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"]

# srt/speculative/spec_info.py SpeculativeAlgorithm members (+ NEXTN alias, DFLASH registered).
KNOWN_SPEC_ALGORITHMS = {"UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE",
                         "NGRAM", "NONE", "NEXTN", "DFLASH"}
# The target's own MTP head (NEXTN, aliased to EAGLE), an EAGLE-3 chain and DFLASH blocks, each
# with its own acceptance (knobs.py, README "Drafters"); the others are not emulated.
EMULATED_SPEC_ALGORITHMS = {"EAGLE", "EAGLE3", "DFLASH"}
DFLASH_DEFAULT_BLOCK = 16  # _handle_dflash: no block size given or in the draft's config

# srt/arg_groups/overrides.py _MAMBA_EXTRA_BUFFER_ARCHS (the hybrid ones we may meet).
MAMBA_EXTRA_BUFFER_ARCHS = {
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM",
    "Qwen3NextForCausalLM",
}
MAMBA_TRACK_INTERVAL = 256  # exec_.py mamba_track_interval default
MAMBA_FULL_MEMORY_RATIO_FALLBACK = 0.9  # schedule.py fallback
DEFAULT_CONTEXT_LENGTH = 262144  # Qwen3.6-27B max_position_embeddings


def human_readable_int(value: str) -> int:
    """srt/utils/common.py human_readable_int: 1k, 25.6k, 1Ki, ..."""
    value = value.strip()
    si = {"k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12}
    iec = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'.")
            return int(number) * iec[suffix]
        return int(Decimal(number) * si[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive.") from None


def build_parser() -> argparse.ArgumentParser:
    # srt/server_args.py prepare_server_args: argparse.ArgumentParser(prog="sglang serve")
    p = argparse.ArgumentParser(prog="sglang serve")
    p.add_argument("--model-path", "--model", type=str, required=True, dest="model_path",
                   help="The path of the model weights.")
    p.add_argument("--trust-remote-code", action="store_true", default=False)
    p.add_argument("--context-length", type=human_readable_int, default=None)
    p.add_argument("--host", type=str, default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--api-key", type=str, default=None)
    p.add_argument("--served-model-name", type=str, default=None)
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--mamba-full-memory-ratio", type=float, default=None)
    p.add_argument("--max-mamba-cache-size", type=int, default=None)
    p.add_argument("--dist-init-addr", "--nccl-init-addr", type=str, default=None,
                   dest="dist_init_addr")
    p.add_argument("--dist-timeout", type=int, default=None)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1, dest="tp_size")
    p.add_argument("--pp-size", "--pipeline-parallel-size", type=int, default=1, dest="pp_size")
    p.add_argument("--log-level", type=str, default="info")
    p.add_argument("--enable-metrics", action="store_true", default=False)
    p.add_argument("--decode-log-interval", type=int, default=40)
    p.add_argument("--mamba-radix-cache-strategy", type=str, default="auto",
                   choices=MAMBA_RADIX_CACHE_STRATEGIES)
    p.add_argument("--speculative-algorithm", type=str, default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    # arg_groups/fields/spec.py: 1.0 (exact) by default; below it, drafts the target would not
    # have produced are accepted (the emulator's answers do not model that)
    p.add_argument("--speculative-accept-threshold-single", type=float, default=1.0)
    p.add_argument("--speculative-accept-threshold-acc", type=float, default=1.0)
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model", type=str,
                   default=None, dest="speculative_draft_model_path")
    p.add_argument("--speculative-draft-model-revision", type=str, default=None)
    p.add_argument("--speculative-draft-window-size", type=int, default=None)
    p.add_argument("--speculative-draft-attention-backend", type=str, default=None)
    p.add_argument("--speculative-adaptive", action="store_true", default=False)
    p.add_argument("--speculative-adaptive-config", type=str, default=None)
    p.add_argument("--reasoning-parser", type=str, default=None,
                   choices=["auto"] + REASONING_PARSER_NAMES)
    p.add_argument("--tool-call-parser", type=str, default=None,
                   choices=["auto"] + TOOL_CALL_PARSER_NAMES)
    # srt/server_args.py: "Read CLI options from a config file. Must be a YAML file".
    p.add_argument("--config", type=str, default=None)
    return p


def merge_config(argv: List[str], parser: argparse.ArgumentParser) -> List[str]:
    """SGLang's ConfigArgumentMerger (srt/utils/server_args_config_parser.py): the YAML file's
    options go before the command line's (the command line wins); each key becomes ``--<key>``
    exactly as written (``api_key`` gives ``--api_key``, which argparse rejects: the key must be
    spelled ``api-key``); store_true flags are bare when true and left out when false, other
    booleans ``--key true|false``; lists ``--key a b``; everything else ``--key str(value)``."""
    if "--config" not in argv:
        return argv
    if argv.count("--config") > 1:
        raise ValueError("Multiple config files specified! Only one allowed.")
    i = argv.index("--config")
    if i == len(argv) - 1:
        raise ValueError("No config file specified after --config flag!")
    import yaml  # SGLang needs PyYAML for --config too

    with open(argv[i + 1]) as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ValueError("Config file must contain a dictionary at root level")
    store_true = {opt[2:].replace("-", "_") for a in parser._actions
                  if isinstance(a, argparse._StoreTrueAction) for opt in a.option_strings
                  if opt.startswith("--")}
    extra: List[str] = []
    for key, value in data.items():
        flag = "--%s" % key
        if isinstance(value, bool):
            if str(key).replace("-", "_") in store_true:
                extra += [flag] if value else []
            else:
                extra += [flag, str(value).lower()]
        elif isinstance(value, list):
            extra += [flag] + [str(v) for v in value] if value else []
        elif isinstance(value, dict):
            extra += [flag, json.dumps(value)]
        else:
            extra += [flag, str(value)]
    return extra + argv[:i] + argv[i + 2:]


def _config_json(model_path: str) -> Dict[str, Any]:
    """`<model-path>/config.json` as a mapping ({} when it is missing or not one)."""
    try:
        with open(os.path.join(model_path, "config.json"), encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def read_architecture(model_path: str, fallback: str) -> List[str]:
    """`<model-path>/config.json` "architectures" if it exists, else the fallback."""
    archs = _config_json(model_path).get("architectures")
    if isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs):
        return archs
    return [fallback]


def drafter_load_error(args: Dict[str, Any]) -> str | None:
    """What the draft worker's model load fails with, after the arguments resolved (SGLang's
    resolution leaves both to the load): EAGLE3 with no drafter (the target carries no EAGLE-3
    head), a drafter directory without config.json (get_config of the draft path)."""
    drafter = args.get("speculative_draft_model_path")
    if drafter is None and args.get("speculative_algorithm") == "EAGLE3":
        return ("ValueError: EAGLE3 loads a draft model and --speculative-draft-model-path is unset "
                "(emulator: the target carries no EAGLE-3 head)")
    if drafter is not None and not os.path.isfile(os.path.join(drafter, "config.json")):
        return (f"OSError: Can't load the configuration of '{drafter}': no config.json there (the "
                "drafter's directory)")
    return None


def _dflash_block_of(drafter: str) -> int | None:
    """dflash_utils.parse_dflash_draft_config: dflash_config.block_size, else a top-level
    block_size, of the draft's config.json."""
    raw = _config_json(drafter)
    inner = raw.get("dflash_config") if isinstance(raw.get("dflash_config"), dict) else {}
    value = inner.get("block_size", raw.get("block_size"))
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _handle_dflash(args: Dict[str, Any]) -> None:
    """speculative_hook.py _handle_dflash, for the emulated fields."""
    if args["pp_size"] != 1:
        raise ValueError("Currently DFLASH speculative decoding only supports pp_size == 1.")
    if args["speculative_draft_model_path"] is None:
        raise ValueError("DFLASH speculative decoding requires setting --speculative-draft-model-path.")
    for key in ("speculative_num_steps", "speculative_eagle_topk"):
        if args[key] is not None and int(args[key]) != 1:
            logger.warning(f"DFLASH only supports {key} == 1; overriding {key}={args[key]} to 1.")
        args[key] = 1
    if args["speculative_num_draft_tokens"] is None:
        block = _dflash_block_of(args["speculative_draft_model_path"])
        if block is None:
            block = DFLASH_DEFAULT_BLOCK
            logger.warning("speculative_num_draft_tokens is not set; defaulting to %d for DFLASH.", block)
        args["speculative_num_draft_tokens"] = block
    window = args["speculative_draft_window_size"]
    if window is not None and window < int(args["speculative_num_draft_tokens"]):
        raise ValueError("--speculative-draft-window-size must be >= --speculative-num-draft-tokens "
                         f"(block_size). window_size={window}, "
                         f"block_size={args['speculative_num_draft_tokens']}.")
    if args["max_running_requests"] is None:
        args["max_running_requests"] = 48
        logger.warning("Max running requests is reset to 48 for speculative decoding. You can "
                       "override this by explicitly setting --max-running-requests.")


def _handle_eagle_family(args: Dict[str, Any], arch: str) -> None:
    """speculative_hook.py _handle_eagle_family (EAGLE, NEXTN's alias, EAGLE3), the emulated fields."""
    if args["max_running_requests"] is None:
        args["max_running_requests"] = 48
        logger.warning(
            "Max running requests is reset to 48 for speculative decoding. You can override "
            "this by explicitly setting --max-running-requests.")
    if args["speculative_num_steps"] is None:
        assert (args["speculative_eagle_topk"] is None
                and args["speculative_num_draft_tokens"] is None)
        # _auto_choose_speculative_params: (3, 1, 4) for everything we may meet
        steps, topk, draft = (5, 4, 8) if arch == "LlamaForCausalLM" else (3, 1, 4)
        args["speculative_num_steps"] = steps
        args["speculative_eagle_topk"] = topk
        args["speculative_num_draft_tokens"] = draft
    if (args["speculative_eagle_topk"] == 1
            and args["speculative_num_draft_tokens"] != args["speculative_num_steps"] + 1):
        logger.warning("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 "
                       "when speculative_eagle_topk == 1")
        args["speculative_num_draft_tokens"] = args["speculative_num_steps"] + 1


def _init_adaptive_speculative_params(args: Dict[str, Any]) -> None:
    """speculative_hook.py _init_adaptive_speculative_params: runs when adaptive speculation
    survived _maybe_disable_adaptive, before the algorithm's own handler (so that handler finds
    the steps set and its auto-choice and draft-token warning have nothing to do). The steps
    must be one of the candidates of the config's slots (their union: [0, 1, 3, 5, 7] by
    default), None takes the middle one; draft tokens are steps + 1, whatever was given."""
    candidates = adaptive.candidate_steps(args["speculative_adaptive_config"])
    if args["speculative_eagle_topk"] is None:
        args["speculative_eagle_topk"] = 1
    if args["speculative_num_steps"] is None:
        args["speculative_num_steps"] = candidates[len(candidates) // 2]
    if args["speculative_num_steps"] not in candidates:
        raise ValueError(f"--speculative-num-steps={args['speculative_num_steps']} is not in the "
                         f"adaptive config candidate_steps {candidates}. Pass one of those values.")
    args["speculative_num_draft_tokens"] = args["speculative_num_steps"] + 1


def resolve(ns: argparse.Namespace, architecture_fallback: str,
            gpu_memory_mib: float = memory.A6000_MEMORY_MIB) -> Dict[str, Any]:
    """SGLang's resolve_once(), for the emulated fields. Raises what SGLang raises."""
    args = dict(vars(ns))
    archs = read_architecture(args["model_path"], architecture_fallback)
    arch = archs[0]
    args["architectures"] = archs
    if args["served_model_name"] is None:
        args["served_model_name"] = args["model_path"]

    # ---- validation_hook.check_server_args (pp_size is 1 here; no runai:// model names)
    assert args["tp_size"] % args["nnodes"] == 0, "tp_size must be divisible by number of nodes"
    assert ":" not in args["served_model_name"], (
        "served_model_name cannot contain a colon (':') character. "
        "The colon is reserved for the 'model:adapter' syntax used in LoRA adapter specification. "
        f"Invalid value: '{args['served_model_name']}'")

    # ---- memory_hook.handle_gpu_memory_settings: runs before the speculative hook, so it sees
    # --max-running-requests as given (None when unset); memory.py mirrors it.
    settings = memory.memory_settings(gpu_memory_mib, args["tp_size"],
                                      args["max_running_requests"], args["mem_fraction_static"],
                                      arch, memory.read_model_config(args["model_path"]))
    args["mem_fraction_static"] = settings["mem_fraction_static"]
    args["chunked_prefill_size"] = settings["chunked_prefill_size"]
    args["max_prefill_tokens"] = memory.MAX_PREFILL_TOKENS

    # ---- speculative_hook.handle_speculative_decoding
    algo = args["speculative_algorithm"]
    if algo is not None:
        algo = algo.upper()
        if algo in ("NEXTN", "EAGLE"):
            algo = "EAGLE"
        args["speculative_algorithm"] = algo
        if algo not in KNOWN_SPEC_ALGORITHMS:
            # SpeculativeAlgorithm.from_string
            raise ValueError(f"Unknown speculative algorithm name: {algo}")
    # ---- _maybe_disable_adaptive (adaptive_spec_params.py adaptive_unsupported_reason), then
    # _init_adaptive_speculative_params: after the alias above, before the algorithm's handler
    if args["speculative_adaptive"]:
        reason = None
        if algo not in ("EAGLE", "EAGLE3"):
            reason = f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)"
        elif args["speculative_eagle_topk"] is not None and args["speculative_eagle_topk"] != 1:
            reason = f"speculative_eagle_topk={args['speculative_eagle_topk']} (only topk=1 is supported)"
        if reason is not None:
            logger.warning(f"speculative_adaptive disabled: {reason}. "
                           "Falling back to static speculative params.")
            args["speculative_adaptive"] = False
    if args["speculative_adaptive"]:
        _init_adaptive_speculative_params(args)
    if algo is not None:
        if algo not in EMULATED_SPEC_ALGORITHMS:
            raise NotImplementedError(
                f"sglang emulator: --speculative-algorithm {algo} is a valid SGLang 0.5.23 "
                "algorithm but is not emulated (only NEXTN / EAGLE, EAGLE3 and DFLASH)")
        if algo == "DFLASH":
            _handle_dflash(args)
        else:
            _handle_eagle_family(args, arch)
        # `cfg.speculative_eagle_topk > 1 and view.page_size > 1 ...`: with topk None this is
        # "TypeError: '>' not supported between instances of 'NoneType' and 'int'".
        if args["speculative_eagle_topk"] > 1:
            raise NotImplementedError(
                "sglang emulator: --speculative-eagle-topk > 1 (tree drafts) is not emulated")
        if args["speculative_num_draft_tokens"] is None:
            raise NotImplementedError("sglang emulator: speculative_num_draft_tokens unresolved")
    # Without speculation an unset --max-running-requests stays None in the resolved args: the
    # scheduler derives it from the pools (memory.py resolve_max_num_reqs).

    # ---- overrides._mamba_radix_cache_resolution + model_hook.handle_mamba_radix_cache
    hybrid = arch in MAMBA_EXTRA_BUFFER_ARCHS
    strategy = args["mamba_radix_cache_strategy"]
    args["uses_mamba_radix_cache"] = hybrid
    if hybrid:
        if strategy == "auto":
            strategy = "extra_buffer"  # overlap schedule on + extra_buffer supported
        if strategy in ("extra_buffer", "extra_buffer_lazy"):
            if args["speculative_num_draft_tokens"] is not None:
                assert MAMBA_TRACK_INTERVAL >= args["speculative_num_draft_tokens"]
        else:
            # validate_mamba_no_buffer: `assert view.disable_overlap_schedule, ...`
            raise AssertionError("no_buffer do not support overlap schedule. Try to set "
                                 "disable_overlap_schedule=True.")
        args["mamba_radix_cache_strategy"] = strategy
        if args["mamba_full_memory_ratio"] is None:
            args["mamba_full_memory_ratio"] = MAMBA_FULL_MEMORY_RATIO_FALLBACK
    elif strategy in ("extra_buffer", "extra_buffer_lazy"):
        raise ValueError(f"--mamba-radix-cache-strategy {strategy} needs mamba state, "
                         f"got {arch}.")

    # ---- model config
    if args["context_length"] is None:
        # SGLang 0.5.23 leaves the field None and uses the model's max_position_embeddings as
        # context_len; the emulator reports the value it uses (README "Known differences").
        args["context_length"] = int(memory.read_model_config(args["model_path"])
                                     .get("max_position_embeddings") or DEFAULT_CONTEXT_LENGTH)
    args["mamba_track_interval"] = MAMBA_TRACK_INTERVAL
    args["is_embedding"] = False
    args["skip_server_warmup"] = False
    args["disable_overlap_schedule"] = False
    args["page_size"] = 1
    return args
