"""Parse `vllm serve` command lines with vLLM's own code (run by the vLLM contract venv's Python).

    python vllm_parse.py < {"argvs": [["serve", "/m", "--tensor-parallel-size", "2", ...], ...],
                            "engine_config": true, "choices": ["--mamba-cache-mode", ...]}
    -> {"version": "0.33.0", "results": [{"ok": true, "stage": "engine_config", "fields": {...}},
                                         {"ok": false, "stage": "argparse", "error": "..."}],
        "choices": {flag: [...]}, "registered": {"reasoning_parser": [...], ...}}

Each argv (what follows `python -m vllm.entrypoints.cli.main`) goes through what `vllm serve`
runs before it loads a model, in its order (entrypoints/cli/main.py main, cli/serve.py
ServeSubcommand, launchers/launcher.py setup_server, launchers/api_server/entry.py
build_async_engine_client):
  argparse      FlexibleArgumentParser with the serve subcommand (make_arg_parser): --config YAML
                merging, argparse's types and choices (its SystemExit is reported with the message
                it printed);
  validate      ServeSubcommand.validate = validate_parsed_serve_args;
  api_server    validate_api_server_args (tool call parser name with --enable-auto-tool-choice);
  engine_args   AsyncEngineArgs.from_cli_args;
  engine_config (with "engine_config": true) create_engine_config on vLLM's CPU platform
                (VLLM_TARGET_DEVICE=cpu), the model path replaced by a stand-in directory
                (STAND_IN below: the Qwen3.6-27B config.json keys that matter here and a tokenizer
                with Qwen's think / tool-call tokens): ModelConfig (architecture Qwen3_5MTP for
                the draft), SpeculativeConfig, CacheConfig, SchedulerConfig, and VllmConfig's
                post-init checks (the reasoning parser by name, --per-request-spec-decode-metrics
                without speculation, MambaModelConfig's mamba cache mode). A drafter
                (--speculative-config "model", dflash and eagle3) is loaded from the path the
                argv names: the caller's stand-in directory (its config.json), read by
                SpeculativeConfig into the draft's ModelConfig and EAGLEConfig.
"fields": the parsed namespace's values ("args") and, after engine_config, where each setting
landed in the VllmConfig ("config").

torchvision: vLLM's Qwen3.5 model module imports transformers' Qwen2-VL image processor, which
imports torchvision at module level; PyPI's torchvision needs CUDA torch. A stub module stands in
(never called: the config checks load no weights), in this process and, through a sitecustomize
on PYTHONPATH, in the subprocess vLLM's model registry inspects the model class in.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile

SITECUSTOMIZE = '''\
import importlib.abc, importlib.machinery, sys, types


class _Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return _Stub(spec.name)

    def exec_module(self, module):
        module.__path__ = []


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)
        return None


# transformers caches whether torchvision is installed: ask before the stub exists, so it keeps
# to its no-torchvision paths
from transformers.utils import import_utils  # noqa: E402

import_utils.is_torchvision_available()
import_utils.is_torchvision_v2_available()
sys.meta_path.insert(0, _Finder())
'''

# Qwen3.6-27B's text_config (as emulator/memory.py QWEN36_27B); the rest is transformers'
# Qwen3_5Config default (layer_types: full attention every 4th layer).
STAND_IN_TEXT = {"hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 64,
                 "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256,
                 "linear_num_key_heads": 16, "linear_num_value_heads": 48,
                 "max_position_embeddings": 262144, "mtp_num_hidden_layers": 1}
TOKENS = ["<unk>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
          "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


def stand_in(directory):
    """A model directory vLLM's ModelConfig reads without the weights: config.json and a tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3_5Config

    config = Qwen3_5Config(text_config=STAND_IN_TEXT, architectures=["Qwen3_5ForConditionalGeneration"])
    data = config.to_dict()
    data["dtype"] = "bfloat16"
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(data, f, indent=1)
    tok = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(TOKENS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>",
                            pad_token="<|endoftext|>",
                            additional_special_tokens=TOKENS[1:2] + TOKENS[4:]).save_pretrained(directory)


def prepare(workdir):
    """The environment vLLM reads at import: the CPU platform, offline, no usage report, its
    caches beside the contract venv (the model classes' inspections, each a subprocess of about
    10 s, kept from run to run: vLLM keys each by its module's source hash, and the venv's name
    by its pins); the torchvision stub here and in vLLM's subprocesses."""
    stub_dir = os.path.join(workdir, "stub")
    os.makedirs(stub_dir)
    with open(os.path.join(stub_dir, "sitecustomize.py"), "w") as f:
        f.write(SITECUSTOMIZE)
    cache = os.environ.get("VLLM_CACHE_ROOT") or os.path.join(sys.prefix, "vllm-cache")
    os.environ.update(VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                      VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", VLLM_CACHE_ROOT=cache,
                      PYTHONPATH=os.pathsep.join(filter(None, [stub_dir, os.environ.get("PYTHONPATH")])))
    # this process: site ran before PYTHONPATH named the stub
    exec(compile(SITECUSTOMIZE, os.path.join(stub_dir, "sitecustomize.py"), "exec"), {})
    model = os.path.join(workdir, "model")
    os.makedirs(model)
    stand_in(model)
    return model


def serve_parser():
    """`vllm serve`'s parser, built as entrypoints/cli/main.py main builds it (serve only)."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand()
    serve.subparser_init(subparsers).set_defaults(dispatch_function=serve.cmd)
    return parser, serve


def plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return str(value)


ARG_FIELDS = ("model_tag", "tensor_parallel_size", "max_model_len", "gpu_memory_utilization",
              "max_num_seqs", "speculative_config", "enable_prefix_caching", "mamba_cache_mode",
              "reasoning_parser", "tool_call_parser", "enable_auto_tool_choice", "language_model_only",
              "served_model_name", "host", "port", "trust_remote_code", "per_request_spec_decode_metrics",
              "api_key", "enable_metrics")


def draft_model_class(spec):
    """The class vLLM's model registry names for the draft's resolved architecture
    (ModelConfig.architecture, the registry key it matched), without importing it."""
    if not (spec and spec.draft_model_config):
        return None
    from vllm.model_executor.models.registry import ModelRegistry

    model = ModelRegistry.models.get(spec.draft_model_config.architecture)
    return getattr(model, "class_name", None) or getattr(getattr(model, "model_cls", None), "__name__", None)


def config_fields(cfg):
    spec = cfg.speculative_config
    mm = cfg.model_config.multimodal_config
    return {
        "tensor_parallel_size": cfg.parallel_config.tensor_parallel_size,
        "max_model_len": cfg.model_config.max_model_len,
        "gpu_memory_utilization": cfg.cache_config.gpu_memory_utilization,
        "max_num_seqs": cfg.scheduler_config.max_num_seqs,
        "speculative_method": spec.method if spec else None,
        "num_speculative_tokens": spec.num_speculative_tokens if spec else None,
        "draft_architecture": (spec.draft_model_config.architectures[0]
                               if spec and spec.draft_model_config else None),
        # the model class vLLM builds for the draft (its registry's answer, after EAGLEConfig's
        # renaming for eagle3 and dflash), the directory it loads it from, and whether it
        # drafts the whole block in one pass (dflash)
        "draft_model_class": draft_model_class(spec),
        "draft_model": spec.draft_model_config.model if spec and spec.draft_model_config else None,
        "parallel_drafting": spec.parallel_drafting if spec else None,
        "enable_prefix_caching": cfg.cache_config.enable_prefix_caching,
        "mamba_cache_mode": cfg.cache_config.mamba_cache_mode,
        "reasoning_parser": cfg.structured_outputs_config.reasoning_parser,
        "language_model_only": mm.language_model_only if mm else None,
        "served_model_name": plain(cfg.model_config.served_model_name),
        "trust_remote_code": cfg.model_config.trust_remote_code,
        "per_request_spec_decode_metrics": cfg.observability_config.per_request_spec_decode_metrics,
    }


def error_text(e):
    text = str(e)
    # pydantic wraps a config's own ValueError: keep vLLM's message
    if type(e).__name__ == "ValidationError" and "Value error, " in text:
        text = text.split("Value error, ", 1)[1].split(" [type=", 1)[0]
    return "%s: %s" % (type(e).__name__, text)


def parse(argv, model, engine_config):
    import vllm
    from vllm.entrypoints.common.cli_args import validate_api_server_args
    from vllm.usage.usage_lib import UsageContext

    parser, serve = serve_parser()
    out, err = io.StringIO(), io.StringIO()
    stage = "argparse"
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            args = parser.parse_args(list(argv))
            stage = "validate"
            serve.validate(args)
            # ServeSubcommand.cmd: the positional model wins
            if getattr(args, "model_tag", None) is not None:
                args.model = args.model_tag
            stage = "api_server"
            validate_api_server_args(args)
            fields = {"args": {k: plain(getattr(args, k, None)) for k in ARG_FIELDS}}
            if not engine_config:
                return {"ok": True, "stage": stage, "fields": fields}
            stage = "engine_args"
            args.model = model  # the stand-in: no weights on this machine
            engine_args = vllm.AsyncEngineArgs.from_cli_args(args)
            stage = "engine_config"
            cfg = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
            fields["config"] = config_fields(cfg)
    except SystemExit as e:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip() and "WARNING" not in ln]
        return {"ok": False, "stage": stage, "error": lines[-1] if lines else "argparse exit %s" % e.code}
    except Exception as e:  # vLLM's own checks
        return {"ok": False, "stage": stage, "error": error_text(e)}
    return {"ok": True, "stage": stage, "fields": fields}


def choices(flags):
    parser, _ = serve_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]
    return {flag: list(a.choices) for a in serve._actions for flag in flags
            if flag in a.option_strings and a.choices is not None}


def registered():
    from typing import get_args

    from vllm.config.speculative import MTPModelTypes, RejectionSampleMethod, SpeculativeMethod
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    def flat(t):
        out = []
        for a in get_args(t):
            out += flat(a) if get_args(a) else [a]
        return out

    return {"reasoning_parser": sorted(ReasoningParserManager.list_registered()),
            "tool_call_parser": sorted(ToolParserManager.list_registered()),
            "speculative_method": flat(SpeculativeMethod), "mtp_aliases": flat(MTPModelTypes),
            "rejection_sample_method": sorted(flat(RejectionSampleMethod))}


def main():
    request = json.load(sys.stdin)
    if isinstance(request, list):
        request = {"argvs": request}
    with tempfile.TemporaryDirectory(prefix="vllm-parse-") as workdir:
        model = prepare(workdir)
        import vllm

        out = {"version": vllm.__version__,
               "results": [parse(a, model, request.get("engine_config", False)) for a in request["argvs"]],
               "choices": choices(request.get("choices", [])),
               "registered": registered() if request.get("registered") else {}}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
