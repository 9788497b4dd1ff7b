"""`vllm serve`'s command line (vLLM 0.33.0), the subset the emulator serves, and its resolution.

Read from the 0.33.0 wheel (paths under vllm/): the parser is utils/argparse_utils.py
FlexibleArgumentParser (underscores and dashes both accepted, `--config` YAML through
load_config_file); the flags come from the config dataclasses through engine/arg_utils.py
_compute_kwargs (a bool becomes BooleanOptionalAction, a Literal sorted `choices`, an Optional
type is wrapped in optional_type, whose error is "Value X cannot be converted to T.").
entrypoints/cli/main.py builds the top-level parser (prog = basename of argv[0], "main.py" for
`python -m vllm.entrypoints.cli.main`) with a `serve` subparser whose usage is
"vllm serve [model_tag] [options]" (entrypoints/cli/serve.py). An unrecognized argument is
reported by the top-level parser (argparse's subparsers), an invalid value by `main.py serve`.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
from typing import Any, Dict, List

from .. import memory
from ..args import read_architecture

logger = logging.getLogger("vllm.config")

VLLM_VERSION = "0.33.0"
PROG = "main.py"  # os.path.basename(sys.argv[0]) of `python -m vllm.entrypoints.cli.main`

# config/cache.py: MambaCacheMode = Literal["align", "none"] (literal_to_kwargs sorts them).
# 0.33 has no "all"; the flag is deprecated and has no effect (engine/arg_utils.py
# _MAMBA_CACHE_MODE_DEPRECATION_MESSAGE): the mode follows --enable-prefix-caching
# (model_executor/models/config.py MambaModelConfig.verify_and_update_config).
MAMBA_CACHE_MODES = ["align", "none"]
MAMBA_CACHE_MODE_DEPRECATION = ("--mamba-cache-mode is deprecated and will be removed in v0.33.0. "
                                "It has no effect: Mamba prefix caching follows "
                                "--enable-prefix-caching.")
# config/observability.py per_request_spec_decode_metrics Literal, sorted.
SPEC_METRICS_LEVELS = ["detailed", "none", "summary"]
# tool_parsers/__init__.py _TOOL_PARSERS_TO_REGISTER (no parser registers itself eagerly), sorted
# as ToolParserManager.list_registered() returns them. Not argparse choices: --tool-call-parser
# is a free string (metavar lists them); entrypoints/common/cli_args.py validate_api_server_args
# raises KeyError for an unknown one, and only with --enable-auto-tool-choice.
TOOL_CALL_PARSERS = [
    "apertus", "beam", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31",
    "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma", "gemma4",
    "gigachat3", "glm45", "glm47", "granite", "granite-20b-fc", "granite4", "hermes", "hf",
    "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "internlm", "jamba", "k2_horizon", "kimi_k2",
    "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json", "llama4_pythonic", "longcat", "mimo",
    "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark1x",
    "olmo3", "openai", "phi4_mini_json", "plamo3", "poolside_v1", "pythonic", "qwen3_coder",
    "qwen3_json", "qwen3_xml", "seed_oss", "step3", "step3p5", "step5", "xlam",
]
# reasoning/__init__.py _REASONING_PARSERS_TO_REGISTER, sorted; validated the same way
# (validate_api_server_args, KeyError), `none` (any case) means unset (parse_reasoning_parser).
REASONING_PARSERS = [
    "beam", "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4",
    "deepseek_v41", "ernie45", "gemma4", "glm45", "glm47", "granite", "granite_thinking_parser",
    "hf", "holo2", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "k2_horizon", "kimi_k2",
    "kimi_k3", "ling3", "mimo", "minicpmv", "minimax_m2", "minimax_m2_append_think", "minimax_m3",
    "mistral", "muse", "muse_glimmer", "musespark1x", "nemotron_v3", "olmo3", "openai_gptoss",
    "plamo3", "poolside_v1", "qwen3", "seed_oss", "step3", "step3p5", "step5",
]
# config/speculative.py MTPModelTypes; every one but "mtp" is a deprecated alias rewritten to
# "mtp" in SpeculativeConfig.__post_init__ ("method `%s` is deprecated and replaced with mtp.").
MTP_METHODS = [
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp",
    "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp",
    "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp",
    "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp",
    "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp",
    "inkling_mtp", "glm5_next_mtp",
]
# config/speculative.py SpeculativeMethod (the Literal pydantic validates "method" against).
SPEC_METHODS = (["ngram", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
                 "extract_hidden_states"] + MTP_METHODS + ["dflash", "ngram_gpu", "dspark"])
DEFAULT_MAX_NUM_SEQS = 256  # engine/arg_utils.py: OPENAI_API_SERVER on a < 70 GiB GPU
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048  # same table
DEFAULT_MAX_MODEL_LEN = 262144  # Qwen3.6-27B max_position_embeddings (derived max_model_len)
# config/model.py: the hybrid (GDN) architectures; MambaModelConfig applies to them.
HYBRID_ARCHS = {"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM",
                "Qwen3_5MoeForConditionalGeneration", "Qwen3NextForCausalLM"}


def human_readable_int(value: str) -> int:
    """utils/argparse_utils.py human_readable_int: 1k = 1000, 1K = 1024, 25.6k; no decimals
    with a binary suffix."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        decimal = {"k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "t": 10 ** 12}
        binary = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}
        number, suffix = match.groups()
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        try:
            return int(number) * binary[suffix]
        except ValueError as e:
            raise argparse.ArgumentTypeError(
                "Decimals are not allowed "
                f"with binary suffixes like {suffix}. Did you mean to use "
                f"{number}{suffix.lower()} instead?") from e
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    """utils/argparse_utils.py human_readable_int_or_auto: -1 / auto = derive from the model."""
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


def optional_type(return_type):
    """engine/arg_utils.py optional_type + parse_type."""
    def _optional_type(val: str):
        if val == "" or val == "None":
            return None
        try:
            return return_type(val)
        except ValueError as e:
            raise argparse.ArgumentTypeError(
                f"Value {val} cannot be converted to {return_type}.") from e
    return _optional_type


def parse_reasoning_parser(val: str) -> str:
    """engine/arg_utils.py parse_reasoning_parser: `none` (any case) is unset."""
    return "" if val.lower() == "none" else val


class EnableDisableAction(argparse.BooleanOptionalAction):
    """utils/argparse_utils.py EnableDisableAction: --enable-x / --no-enable-x / --disable-x."""

    def __init__(self, option_strings, dest, *args, **kwargs):
        super().__init__(option_strings, dest, *args, **kwargs)
        inverses = ["--disable-" + o[len("--enable-"):] for o in option_strings
                    if o.startswith("--enable-")]
        self.negative = {o for o in self.option_strings if o not in option_strings} | set(inverses)
        self.option_strings = [*self.option_strings, *inverses]

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string not in self.negative)


class FlexibleArgumentParser(argparse.ArgumentParser):
    """The parts of utils/argparse_utils.py FlexibleArgumentParser the subset needs: `_` and `-`
    alike in flag names, `--config FILE.yaml` merged (load_config_file)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.register("action", argparse.BooleanOptionalAction, EnableDisableAction)

    def _pull_args_from_config(self, args: List[str]) -> List[str]:
        assert args.count("--config") <= 1, "More than one config file specified!"
        index = args.index("--config")
        if index == len(args) - 1:
            raise ValueError("No config file specified! Please check your command-line arguments.")
        config_args = self.load_config_file(args[index + 1])
        # args[0] is "serve", args[1] the model tag when given: cli > config > defaults
        model_in_cli = len(args) > 1 and not args[1].startswith("-")
        if not model_in_cli and "--model" not in config_args:
            raise ValueError("No model specified! Please specify model either as a positional "
                             "argument or in a config file.")
        if model_in_cli:
            return args[:2] + config_args + args[2:index] + args[index + 2:]
        return args[:1] + config_args + args[1:index] + args[index + 2:]

    def load_config_file(self, file_path: str) -> List[str]:
        extension = file_path.split(".")[-1]
        if extension not in ("yaml", "yml"):
            raise ValueError(f"Config file must be of a yaml/yml type. {extension} supplied")
        import yaml

        try:
            with open(file_path) as fh:
                config = yaml.safe_load(fh)
        except Exception:
            logging.getLogger("vllm.utils.argparse_utils").error(
                "Unable to read the config file at %s. Check path correctness", file_path)
            raise
        processed: List[str] = []
        for key, value in config.items():
            if isinstance(value, bool):
                if value:
                    processed.append("--" + key)
                elif (no_key := f"--no-{key}") in self._option_string_actions:
                    processed.append(no_key)
            elif isinstance(value, list):
                if value:
                    processed.append("--" + key)
                    processed.extend(str(item) for item in value)
            elif isinstance(value, dict):
                processed += ["--" + key, json.dumps(value)]
            else:
                processed += ["--" + key, str(value)]
        return processed


def build_parser():
    """(top-level parser, serve subparser)."""
    top = argparse.ArgumentParser(prog=PROG, description="vLLM CLI")
    top.add_argument("-v", "--version", action="version", version=VLLM_VERSION)
    sub = top.add_subparsers(required=False, dest="subparser",
                             parser_class=FlexibleArgumentParser)
    p = sub.add_parser("serve", usage="vllm serve [model_tag] [options]",
                       help="Launch a local OpenAI-compatible API server to serve LLM "
                            "completions via HTTP.")
    p.add_argument("model_tag", type=str, nargs="?")
    p.add_argument("--config")
    # ModelConfig
    p.add_argument("--model", type=str, default="Qwen/Qwen3-0.6B")
    p.add_argument("--served-model-name", type=optional_type(str), nargs="+", default=None)
    p.add_argument("--max-model-len", type=human_readable_int_or_auto, default=None)
    p.add_argument("--trust-remote-code", action=argparse.BooleanOptionalAction, default=False)
    # MultiModalConfig
    p.add_argument("--language-model-only", action=argparse.BooleanOptionalAction,
                   default=False)
    # ParallelConfig
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    # CacheConfig
    p.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction,
                   default=None)
    p.add_argument("--mamba-cache-mode", type=str, choices=MAMBA_CACHE_MODES, default=None)
    # SchedulerConfig
    p.add_argument("--max-num-seqs", type=int, default=None)
    # VllmConfig (speculative_config: optional_type(json.loads), engine/arg_utils.py)
    p.add_argument("--speculative-config", type=optional_type(json.loads), default=None)
    # StructuredOutputsConfig (choices validated after parsing)
    p.add_argument("--reasoning-parser", type=parse_reasoning_parser, default="")
    # ObservabilityConfig
    p.add_argument("--per-request-spec-decode-metrics", type=str, choices=SPEC_METRICS_LEVELS,
                   default="none")
    # FrontendArgs
    p.add_argument("--host", type=optional_type(str), default=None)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", type=optional_type(str), nargs="+", default=None)
    p.add_argument("--enable-auto-tool-choice", action=argparse.BooleanOptionalAction,
                   default=False)
    p.add_argument("--tool-call-parser", type=optional_type(str), default=None)
    return top, p


def parse(argv: List[str]) -> argparse.Namespace:
    """entrypoints/cli/main.py's parse: FlexibleArgumentParser.parse_args's preprocessing
    (`--config` merged, `_` -> `-` in flag names), then argparse (exit 2 on a bad argument)."""
    top, serve = build_parser()
    argv = list(argv)
    if argv[:1] == ["serve"]:
        if "--config" in argv:
            argv = serve._pull_args_from_config(argv)
        out = []
        for arg in argv:
            if arg.startswith("--"):
                key, eq, value = arg.partition("=")
                arg = "--" + key[2:].replace("_", "-") + eq + value
            out.append(arg)
        argv = out
    ns = top.parse_args(argv)
    if ns.subparser != "serve":
        top.print_help()
        raise SystemExit(0)
    return ns


class NotEmulated(NotImplementedError):
    pass


# ---- --speculative-config (config/speculative.py SpeculativeConfig, a pydantic dataclass) ------
# The methods the emulator serves: the model's own MTP layer (and its aliases), a DFlash drafter
# and an EAGLE-3 drafter. The others are valid vLLM 0.33 methods refused as not emulated.
EMULATED_METHODS = ("mtp", "dflash", "eagle3")
PYDANTIC_DOCS = "https://errors.pydantic.dev/2.14/v/"  # the contract venv's pydantic 2.14
# model_executor/models/registry.py _SPECULATIVE_DECODING_MODELS: the draft architectures the
# EAGLEConfig rewrite of a dflash / eagle3 draft can name (transformers_utils/configs/eagle.py:
# dflash -> DFlash{arch} unless it starts or ends with DFlash or is LiLiCorrDraftModel; eagle3 ->
# Eagle3{arch} unless it starts or ends with Eagle3). No other registered architecture has
# those names, so this is the whole set vLLM can accept for the two methods.
DRAFT_ARCHITECTURES = {
    "dflash": ("DFlash2BeamDraftModel", "DFlash2DraftModel", "DFlashDraftModel",
               "DFlashLagunaForCausalLM", "DFlashMuseGlimmerAssistantModel",
               "DFlashQwen3XPressModel", "LiLiCorrDraftModel"),
    "eagle3": ("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM",
               "Eagle3LlamaForCausalLM", "Eagle3MiniMaxM2ForCausalLM",
               "Eagle3Qwen2_5vlForCausalLM", "Eagle3Qwen3ForCausalLM", "Eagle3Qwen3vlForCausalLM",
               "LlamaForCausalLMEagle3"),
}
# config/speculative.py _CACHE_ONLY_ROPE_TYPES: RoPE types whose max_position_embeddings only
# sizes the cos/sin cache (a draft with them is raised to the target's max_model_len).
CACHE_ONLY_ROPE_TYPES = ("default", "linear", "llama3", "ntk", "proportional")


def _pydantic_text(model: str, errors: List[tuple]) -> str:
    """pydantic_core's ValidationError text for (field, message, type, input) errors: "N
    validation error(s) for Model" then, per error, the field, the message with [type=...,
    input_value=..., input_type=...] and the docs link."""
    lines = ["%d validation error%s for %s" % (len(errors), "" if len(errors) == 1 else "s", model)]
    for field, message, kind, value in errors:
        lines += [field, f"  {message} [type={kind}, input_value={value!r}, "
                         f"input_type={type(value).__name__}]",
                  f"    For further information visit {PYDANTIC_DOCS}{kind}"]
    return "\n".join(lines)


def _lax_int(field: str, value: Any, errors: List[tuple], minimum: int, strict_gt: bool):
    """pydantic's lax int (a JSON bool or integral float is taken, a numeric string parsed), then
    the field's gt / ge constraint; appends the error and returns None when it fails."""
    if isinstance(value, int):  # a bool too
        number = int(value)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            errors.append((field, "Input should be a finite number", "finite_number", value))
            return None
        if not value.is_integer():
            errors.append((
                field, "Input should be a valid integer, got a number with a fractional part",
                "int_from_float", value))
            return None
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            errors.append((
                field, "Input should be a valid integer, unable to parse string as an integer",
                "int_parsing", value))
            return None
    else:
        errors.append((field, "Input should be a valid integer", "int_type", value))
        return None
    if strict_gt and number <= minimum:
        errors.append((field, f"Input should be greater than {minimum}", "greater_than", value))
        return None
    if not strict_gt and number < minimum:
        errors.append((field, f"Input should be greater than or equal to {minimum}",
                       "greater_than_equal", value))
        return None
    return number


def _validate_fields(spec: Dict[str, Any]) -> Dict[str, Any]:
    """The field validation pydantic runs before __post_init__, in the fields' declaration order
    (num_speculative_tokens: int, gt=0; model: str | None; method: SpeculativeMethod | None;
    draft_tensor_parallel_size: int | None, ge=1); every failing field in one ValidationError.
    An explicit null is a valid value only for the Optional fields."""
    errors: List[tuple] = []
    out: Dict[str, Any] = {"num_speculative_tokens": None, "model": None, "method": None,
                           "draft_tensor_parallel_size": None}
    if "num_speculative_tokens" in spec:
        out["num_speculative_tokens"] = _lax_int("num_speculative_tokens",
                                                 spec["num_speculative_tokens"], errors, 0, True)
    model = spec.get("model")
    if model is not None and not isinstance(model, str):
        errors.append(("model", "Input should be a valid string", "string_type", model))
    else:
        out["model"] = model
    method = spec.get("method")
    if method is not None and method not in SPEC_METHODS:
        errors.append((
            "method", "Input should be " + ", ".join(f"'{m}'" for m in SPEC_METHODS[:-1])
            + f" or '{SPEC_METHODS[-1]}'", "literal_error", method))
    else:
        out["method"] = method
    if spec.get("draft_tensor_parallel_size") is not None:
        out["draft_tensor_parallel_size"] = _lax_int(
            "draft_tensor_parallel_size", spec["draft_tensor_parallel_size"], errors, 1, False)
    if errors:
        raise ValueError(_pydantic_text("SpeculativeConfig", errors))
    return out


def _is_custom_proposer_path(model: str | None) -> bool:
    """SpeculativeConfig._is_custom_proposer_path: a dotted import path (pkg.MyProposer)."""
    if model is None or model.startswith(("http://", "https://", "file://")) or "/" in model:
        return False
    parts = model.split(".")
    return len(parts) >= 2 and all(part.isidentifier() for part in parts)


def read_draft_config(model: str) -> Dict[str, Any]:
    """The draft ModelConfig's config.json (transformers_utils/config.py get_config, offline: the
    emulator takes a local directory only, as vLLM does with HF_HUB_OFFLINE): no config.json ->
    "Invalid repository ID or local directory specified"; no model_type -> transformers'
    AutoConfig "Unrecognized model"."""
    path = os.path.join(model, "config.json")
    try:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, ValueError):
        raw = None
    if not isinstance(raw, dict):
        raise ValueError(
            f"Invalid repository ID or local directory specified: '{model}'.\nPlease verify the "
            "following requirements:\n1. Provide a valid Hugging Face repository ID.\n2. Specify "
            "a local directory that contains a recognized configuration file.\n   - For Hugging "
            "Face models: ensure the presence of a 'config.json'.\n   - For Mistral models: "
            "ensure the presence of a 'params.json'.\n")
    if not isinstance(raw.get("model_type"), str):
        raise ValueError(f"Unrecognized model in {model}. Should have a `model_type` key in its "
                         "config.json.")
    return raw


def draft_architectures(method: str, archs: List[str]) -> List[str]:
    """transformers_utils/configs/eagle.py EAGLEConfig: the draft's architectures as the method
    renames them."""
    if method == "dflash":
        return [a if a.startswith("DFlash") or a.endswith("DFlash") or a == "LiLiCorrDraftModel"
                else f"DFlash{a}" for a in archs]
    return [a if a.startswith("Eagle3") or a.endswith("Eagle3") else f"Eagle3{a}" for a in archs]


def _rope_types(cfg: Dict[str, Any]) -> List[str]:
    """transformers_utils/config.py iter_rope_parameters, for a plain config.json."""
    types = []
    for key in ("rope_parameters", "rope_scaling"):
        params = cfg.get(key)
        if isinstance(params, dict):
            types.append(str(params.get("rope_type", params.get("type", "default"))))
    return types or ["default"]


def resolve_speculative(spec: Dict[str, Any], mc: Dict[str, Any], tp: int,
                        max_model_len: int) -> tuple:
    """SpeculativeConfig(**speculative_config) as EngineArgs.create_speculative_config builds it
    (dashes in keys become underscores; the target's configs passed in), for the emulated methods:
    field validation, __post_init__ (method inference, MTP aliases, the drafter's ModelConfig,
    method detection from its path, EAGLEConfig, n_predict, draft TP and max_model_len) and
    _verify_args. Returns (the resolved speculative_config, the drafter directory or None)."""
    log = logging.getLogger("vllm.config.speculative")
    spec = {str(key).replace("-", "_"): value for key, value in spec.items()}
    fields = _validate_fields(spec)
    k, model, method = fields["num_speculative_tokens"], fields["model"], fields["method"]
    # __post_init__: infer the method from the arguments
    if method is None:
        method = ("custom_class" if _is_custom_proposer_path(model)
                  else "ngram" if model in ("ngram", "[ngram]") else "draft_model")
    if method in MTP_METHODS and method != "mtp":
        log.warning("method `%s` is deprecated and replaced with mtp.", method)
        method = "mtp"
    if method not in EMULATED_METHODS and method != "draft_model":
        raise NotEmulated(f"vllm emulator: speculative method {method!r} is a valid vLLM 0.33 "
                          "method but is not emulated (only mtp and its aliases, dflash, eagle3)")
    if model is None and k is not None and method != "mtp":
        raise ValueError("num_speculative_tokens was provided but without speculative model.")
    drafter = None
    if method == "mtp":
        # the draft is the target's own MTP layer (model = the target): n_predict is its
        # mtp_num_hidden_layers (hf_config_override, qwen3_5 -> qwen3_5_mtp)
        if k is not None:
            n_predict = int(mc.get("mtp_num_hidden_layers") or 1)
            if k > n_predict and k % n_predict != 0:
                raise ValueError(f"num_speculative_tokens:{k} must be divisible by "
                                 f"n_predict={n_predict}")
            if k > 1:
                log.warning("Enabling num_speculative_tokens > 1 will run multiple times of "
                            "forward on same MTP layer,which may result in lower acceptance rate")
    elif model is not None:
        draft = read_draft_config(model)
        archs = [a for a in draft.get("architectures") or [] if isinstance(a, str)]
        if method == "draft_model":
            # the method detected from the draft's name (and a few architectures)
            lowered = model.lower()
            if "eagle-" in lowered:
                method = "eagle"
            elif "eagle3" in lowered:
                method = "eagle3"
            elif "dflash" in lowered or "MuseGlimmerAssistantModel" in archs:
                method = "dflash"
            if method not in ("dflash", "eagle3"):
                raise NotEmulated(f"vllm emulator: the draft {model!r} is detected as neither "
                                  "dflash nor eagle3 (eagle, dspark, an MTP draft or a draft "
                                  "model), which are not emulated")
        # _maybe_override_draft_max_position_embeddings: the draft shares the target's positions
        draft_max_pos = draft.get("max_position_embeddings")
        if isinstance(draft_max_pos, int) and draft_max_pos < max_model_len \
                and all(t in CACHE_ONLY_ROPE_TYPES for t in _rope_types(draft)):
            log.info("Overriding draft model max_position_embeddings from %d to the target "
                     "model's max_model_len (%d); the draft shares the target's positional "
                     "space.", draft_max_pos, max_model_len)
            draft_max_pos = max_model_len
        # EAGLEConfig renames the architectures; ModelConfig asks the registry for one of them
        renamed = draft_architectures(method, archs)
        if not any(a in DRAFT_ARCHITECTURES[method] for a in renamed):
            raise ValueError(
                f"Model architectures {renamed} are not supported for now. Supported "
                f"architectures: (the emulator lists vLLM 0.33's {method} draft architectures "
                f"only) {list(DRAFT_ARCHITECTURES[method])}")
        n_predict = draft.get("n_predict")  # EAGLEConfig copies every key of the draft's config
        if isinstance(n_predict, int) and not isinstance(n_predict, bool):
            if k is None:
                k = n_predict  # "Default to max value defined in draft model config."
            elif k > n_predict and k % n_predict != 0:
                raise ValueError(f"num_speculative_tokens:{k} must be divisible by "
                                 f"n_predict={n_predict}")
        if k is None:
            raise ValueError("A speculative model was provided, but `num_speculative_tokens` was "
                             "not provided")
        draft_tp = fields["draft_tensor_parallel_size"]
        if draft_tp is not None and draft_tp not in (1, tp):
            raise ValueError(f"speculative_draft_tensor_parallel_size={draft_tp} cannot be other "
                             "value than 1 or target model tensor_parallel_size")
        # _maybe_override_draft_max_model_len: min(draft's, target's)
        if isinstance(draft_max_pos, int) and draft_max_pos > max_model_len:
            logging.getLogger("vllm.config.speculative").info(
                "Overriding draft model max model len from %d to %d", draft_max_pos,
                max_model_len)
        drafter = model
    # _verify_args (model_validator, after __post_init__)
    if spec.get("tensor_parallel_size") is not None:
        raise ValueError("'tensor_parallel_size' is not a valid argument in the "
                         "speculative_config. Please pass 'draft_tensor_parallel_size' instead.")
    if k is None:
        raise ValueError("num_speculative_tokens must be provided with speculative model unless "
                         "the draft model config contains an n_predict parameter.")
    return dict(spec, method=method, num_speculative_tokens=k), drafter


def lookahead_limits(method: str, k: int, max_num_seqs: int) -> int | None:
    """config/vllm.py VllmConfig: the KV slots a step reserves past the scheduled tokens
    (num_lookahead_tokens: dflash's bonus query plus one per draft token, k + 1; MTP / EAGLE-3
    k) against max_num_batched_tokens (_set_max_num_scheduled_tokens), and dflash's draft pass,
    which caps the running requests at max_num_batched_tokens // (k + 1). Returns that cap
    (max_num_active_seqs) or None."""
    lookahead = k + 1 if method == "dflash" else k
    batched = DEFAULT_MAX_NUM_BATCHED_TOKENS
    log = logging.getLogger("vllm.config.vllm")
    if batched < 8192:
        log.warning("max_num_scheduled_tokens is set to %d based on the speculative decoding "
                    "settings. This may lead to suboptimal performance. Consider increasing "
                    "max_num_batched_tokens to accommodate the additional draft token slots, or "
                    "decrease num_speculative_tokens.", batched)
    if batched <= lookahead:
        raise ValueError("VllmConfig does not have enough slots to schedule a token and support "
                         f"the speculative decoding settings. Got max_num_batched_tokens={batched}"
                         f" and num_lookahead_tokens={lookahead}.")
    if method == "dflash" and batched // lookahead < max_num_seqs:
        log.warning("The %s draft pass needs %d query tokens per request within "
                    "max_num_batched_tokens=%d. Overriding max_num_active_seqs from %d to %d.",
                    method, lookahead, batched, max_num_seqs, batched // lookahead)
        return batched // lookahead
    return None


def shared_speculative_keys(method: str | None, k: int, drafter: str | None) -> Dict[str, Any]:
    """The speculative keys the shared scheduler (and memory model) read, in SGLang's names and as
    SGLang's resolution sets them for the same drafting (emulator/args.py), so that both
    engines run one acceptance and step-time model: MTP -> NEXTN-like chain of k steps; EAGLE-3
    -> a chain of k steps (_handle_eagle_family: k + 1 draft tokens, topk 1); DFlash -> one block
    of k + 1 tokens, the anchor and k drafts (v1/spec_decode/dflash.py num_query_per_req = 1 +
    num_speculative_tokens; _handle_dflash: steps and topk 1, the block in draft tokens)."""
    if method is None:
        return {"speculative_algorithm": None, "speculative_num_steps": None,
                "speculative_num_draft_tokens": None, "speculative_eagle_topk": None,
                "speculative_draft_model_path": None}
    return {"speculative_algorithm": {"mtp": "MTP", "dflash": "DFLASH", "eagle3": "EAGLE3"}[method],
            "speculative_num_steps": 1 if method == "dflash" else k,
            "speculative_num_draft_tokens": k + 1, "speculative_eagle_topk": 1,
            "speculative_draft_model_path": drafter}


def resolve(ns: argparse.Namespace, architecture_fallback: str) -> Dict[str, Any]:
    """What the engine config creation resolves (EngineArgs.create_engine_config), for the
    emulated fields; raises vLLM's errors (ValueError / TypeError / KeyError) before any port is
    bound. The returned dict also carries the keys the shared scheduler reads."""
    a = dict(vars(ns))
    model = a["model_tag"] if a.get("model_tag") is not None else a["model"]
    a["model"] = model
    names = a["served_model_name"] or [model]
    a["served_model_names"] = names
    a["served_model_name"] = names[0]  # ModelConfig.served_model_name: the first one

    # entrypoints/common/cli_args.py validate_parsed_serve_args
    if a["enable_auto_tool_choice"] and not a["tool_call_parser"]:
        raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")

    archs = read_architecture(model, architecture_fallback)
    a["architectures"] = archs
    mc = memory.read_model_config(model)
    derived = int(mc.get("max_position_embeddings") or DEFAULT_MAX_MODEL_LEN)
    mml = a["max_model_len"]
    if mml is None or mml == -1:
        mml = derived
    elif mml > derived:
        # config/model.py _get_and_verify_max_len
        raise ValueError(
            f"User-specified max_model_len ({mml}) is greater than the derived max_model_len "
            f"(max_position_embeddings={derived} or model_max_length=None in model's config.json)."
            " To allow overriding this maximum, set the env var "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with "
            "extreme caution. If the model uses relative position encoding (RoPE), positions "
            "exceeding derived_max_model_len lead to nan. If the model uses absolute position "
            "encoding, positions exceeding derived_max_model_len will cause a CUDA array "
            "out-of-bounds error.")
    a["max_model_len"] = mml
    if not 0 < a["gpu_memory_utilization"] <= 1:
        raise ValueError("1 validation error for CacheConfig\ngpu_memory_utilization\n  Input "
                         "should be greater than 0 and less than or equal to 1 "
                         f"[input_value={a['gpu_memory_utilization']}]")

    # ---- speculative config (config/speculative.py SpeculativeConfig)
    spec = a["speculative_config"]
    method, k, drafter = None, 0, None
    if spec is not None:
        if not isinstance(spec, dict):
            raise ValueError(f"speculative_config must be a JSON object, got {spec!r}")
        spec, drafter = resolve_speculative(spec, mc, int(a["tensor_parallel_size"]), mml)
        method, k = spec["method"], spec["num_speculative_tokens"]
        a["speculative_config"] = spec
    # config/vllm.py VllmConfig.__post_init__
    if a["per_request_spec_decode_metrics"] != "none" and spec is None:
        raise ValueError("--per-request-spec-decode-metrics requires speculative decoding to be "
                         "enabled (via --speculative-config).")

    # ---- prefix caching / mamba cache mode
    hybrid = archs[0] in HYBRID_ARCHS
    if a["mamba_cache_mode"] is not None:
        logging.getLogger("vllm.engine.arg_utils").warning("%s", MAMBA_CACHE_MODE_DEPRECATION)
    if a["enable_prefix_caching"] is None:
        a["enable_prefix_caching"] = True  # default_prefix_caching for a generate model
    mode = "none"
    if hybrid and a["enable_prefix_caching"]:
        mode = "align"
    a["resolved_mamba_cache_mode"] = mode
    a["hybrid"] = hybrid
    if a["max_num_seqs"] is None:
        a["max_num_seqs"] = DEFAULT_MAX_NUM_SEQS
    a["max_num_active_seqs"] = None
    if spec is not None:
        a["max_num_active_seqs"] = lookahead_limits(method, k, a["max_num_seqs"])

    # entrypoints/common/cli_args.py validate_api_server_args (setup_server, before the bind)
    if a["enable_auto_tool_choice"] and a["tool_call_parser"] not in TOOL_CALL_PARSERS:
        raise KeyError(f"invalid tool call parser: {a['tool_call_parser']} "
                       f"(chose from {{ {','.join(TOOL_CALL_PARSERS)} }})")
    if a["reasoning_parser"] and a["reasoning_parser"] not in REASONING_PARSERS:
        raise KeyError(f"invalid reasoning parser: {a['reasoning_parser']} "
                       f"(chose from {{ {','.join(REASONING_PARSERS)} }})")

    # envs.py VLLM_API_KEY; entrypoints/serve/middleware/register.py: --api-key wins
    keys = [key for key in (a["api_key"] or [os.environ.get("VLLM_API_KEY")]) if key]
    a["api_keys"] = keys

    # vLLM's own count of draft tokens per verify step (metrics, capacity, per-request metrics)
    a["num_speculative_tokens"] = k
    # keys the shared scheduler / server read (SGLang's names)
    a.update(shared_speculative_keys(method, k, drafter))
    a.update({
        "model_path": model, "tp_size": int(a["tensor_parallel_size"]),
        "uses_mamba_radix_cache": hybrid, "context_length": mml,
        "decode_log_interval": 1 << 30, "enable_metrics": True,
        "reasoning_parser": a["reasoning_parser"] or None, "api_key": None,
    })
    return a
